"""The HPC review's defects, each held by a test: an Apptainer certification names its GPU
as nvidia-smi does (by UUID, else by PCI bus order), the Apptainer definition reads the
Dockerfile's dated apt snapshot and compiles bytecode as its steps do, a payload folder
apptainer's --bind would split is refused before anything starts, and the in-job fleet
runner answers bad arguments and a bad tasks.json in one sentence, exit 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from closures import use_fake_resolver
from test_certify_unit import _stack
from test_fleet import GOOD, fleet_of

from envgen.certify.apptainer import exec_options
from envgen.cli import main
from envgen.fleet import slurm, task
from envgen.matrix import load_matrix
from envgen.runtime import gpu_access, host

HEADER = b"#!/usr/bin/env run-singularity\n\x00SIF_MAGIC".ljust(128, b"\x00")
# nvidia-smi on a node of two models: CUDA's default order (fastest first) puts the H100,
# nvidia-smi's GPU 1, first
MIXED = ("0, NVIDIA A100-SXM4-80GB, GPU-aaaaaaaa-0000, 8.0, 81920, 0, 0, 550.54.15\n"
         "1, NVIDIA H100 80GB HBM3, GPU-bbbbbbbb-1111, 9.0, 81559, 0, 0, 550.54.15\n")


def _program(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def fake_hpc(tmp_path, monkeypatch):
    """A SIF, a fake apptainer that logs its arguments (one call a line) and answers inspect
    with the SIF's labels, and a fake nvidia-smi listing MIXED."""
    labels = {"io.envgen.stack": json.dumps(_stack(load_matrix(), "jax-cpu").to_json())}
    (tmp_path / "inspect.json").write_text(json.dumps(
        {"data": {"attributes": {"labels": labels}}}))
    log = tmp_path / "calls"
    apptainer = _program(tmp_path / "fake-apptainer", f"""
echo "$*" >> {log}
case "$1" in
  inspect) cat {tmp_path / 'inspect.json'} ;;
  --version) echo "apptainer version 1.3.4" ;;
esac
exit 0""")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "MIXED").write_text(MIXED)
    _program(bin_dir / "nvidia-smi", f"cat {bin_dir / 'MIXED'}")
    monkeypatch.setenv("ENVGEN_APPTAINER", apptainer)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    for name in gpu_access.VISIBLE_VARS:
        monkeypatch.delenv(name, raising=False)
    sif = tmp_path / "x.sif"
    sif.write_bytes(HEADER)
    return sif, log


def _exec_line(log: Path) -> str | None:
    return next((ln for ln in log.read_text().splitlines() if ln.startswith("exec ")), None)


# ---- 1. the GPU certified is the GPU used ---------------------------------------------------

def test_certify_sif_gpus_1_runs_on_nvidia_smis_gpu_1_by_its_uuid(fake_hpc, capsys):
    sif, log = fake_hpc
    assert main(["certify", str(sif), "--gpus", "1"]) == 1   # the fake runs no payload
    line = _exec_line(log)
    assert "--env CUDA_VISIBLE_DEVICES=GPU-bbbbbbbb-1111 " in line, line
    assert "--env CUDA_DEVICE_ORDER=PCI_BUS_ID " in line


def test_gpus_known_by_index_only_are_read_in_nvidia_smis_order():
    opts, _ = exec_options(True, False, [1])
    assert "CUDA_VISIBLE_DEVICES=1" in opts and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in opts
    both = gpu_access.parse_gpus("all", host.parse_query(MIXED), {})
    opts, _ = exec_options(True, False, both)
    assert "CUDA_VISIBLE_DEVICES=GPU-aaaaaaaa-0000,GPU-bbbbbbbb-1111" in opts


# ---- 2. and 3. the definition's python3 and bytecode ---------------------------------------

@pytest.fixture(scope="module")
def defs(tmp_path_factory):
    root = tmp_path_factory.mktemp("defs")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        use_fake_resolver(mp, root)
        for i, spec in enumerate(("pytorch-cu121,python=3.10", "pytorch-cu121")):
            assert main(["render", spec, "-o", str(root / str(i))]) == 0
            out[spec] = ((root / str(i) / "apptainer.def").read_text(),
                         (root / str(i) / "Dockerfile").read_text())
    return out


def test_the_definition_installs_python3_from_the_dockerfiles_dated_snapshot(defs):
    definition, dockerfile = defs["pytorch-cu121,python=3.10"]
    source = next(ln.split("&& ", 1)[1].removesuffix(" \\") for ln in dockerfile.splitlines()
                  if "snapshot.ubuntu.com" in ln)
    post = definition.split("%post", 1)[1].split("%environment", 1)[0]
    assert "    rm -f /etc/apt/sources.list.d/*\n    " + source + "\n" in post
    assert post.index(source) < post.index("apt-get -o Acquire::Check-Valid-Until=false update")


@pytest.mark.parametrize("spec", ["pytorch-cu121,python=3.10", "pytorch-cu121"])
def test_the_definition_compiles_checked_hash_bytecode_after_its_installs(defs, spec):
    definition, _ = defs[spec]
    post = definition.split("%post", 1)[1].split("%environment", 1)[0]
    compile_at = post.index("python -m compileall -f -qq --invalidation-mode checked-hash")
    assert "PYTHONHASHSEED=0 python -m compileall" in post
    assert post.index("marker=$(mktemp)") < post.index(" install --no-cache-dir") < compile_at
    assert post.rindex(" install --no-cache-dir") < compile_at < post.index("pip check")


# ---- 4. a folder --bind would split -------------------------------------------------------

@pytest.mark.parametrize("home_name", ["h,x", "h:x"])
def test_an_envgen_home_bind_would_split_is_exit_2_before_apptainer_execs(fake_hpc, capsys,
                                                                       monkeypatch, home_name):
    sif, log = fake_hpc
    home = sif.parent / home_name
    monkeypatch.setenv("ENVGEN_HOME", str(home))
    assert main(["certify", str(sif), "--gpus", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(home) in err and "set ENVGEN_HOME" in err, err
    assert _exec_line(log) is None and not (home / "tmp").exists()


def test_the_engine_refuses_any_bind_apptainer_would_split(fake_hpc):
    from envgen.core.errors import InputError
    from envgen.runtime.engine import ApptainerEngine
    sif, log = fake_hpc
    with pytest.raises(InputError, match="'/a,b'.*','"):
        ApptainerEngine().run(str(sif), ["true"], 10, binds=(("/a,b", "/in", "ro"),))
    assert not log.exists()


# ---- 5. the in-job runner ------------------------------------------------------------------

def _runner(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen.fleet.task", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin",
                               "PYTHONPATH": str(Path(__file__).parents[1])})


def _one_sentence(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_the_runner_with_no_arguments_says_its_usage(tmp_path):
    _one_sentence(_runner(cwd=tmp_path), "usage: python -m envgen.fleet.task DIR")
    _one_sentence(_runner("d", "1", "2", cwd=tmp_path), "usage:")


def test_the_runner_without_tasks_json_says_what_writes_it(tmp_path):
    _one_sentence(_runner(str(tmp_path), "0", cwd=tmp_path), "holds no tasks.json")
    _one_sentence(_runner(str(tmp_path / "none"), "0", cwd=tmp_path), "is not a folder")


@pytest.mark.parametrize("change, words", [
    (lambda t: t.pop("certify_timeout"), "task 0: it has no certify_timeout"),
    (lambda t: t.update(certify_timeout="90"), "no certify_timeout"),
    (lambda t: t.update(level="gpu"), "level 'gpu' is not one of cuda, cpu"),
    (lambda t: t.update(engine="podman"), "engine 'podman' is not one of"),
    (lambda t: t.update(steps=True), "steps True is not a whole number"),
    (lambda t: t.update(engine="apptainer", sif=None), "has no sif to certify"),
    (lambda t: t.pop("spec"), "not envgen's fleet state: at tasks/0")],
    ids=["no-timeout", "timeout-text", "level", "engine", "steps", "no-sif", "no-spec"])
def test_a_tasks_json_lacking_what_the_runner_reads_is_one_sentence(tmp_path, change, words):
    run = Path(slurm.write(fleet_of(tmp_path, GOOD), tmp_path / "run")["folder"])
    doc = json.loads((run / "tasks.json").read_text())
    assert task.problems(doc["tasks"][0]) == []   # as envgen wrote it
    change(doc["tasks"][0])
    (run / "tasks.json").write_text(json.dumps(doc))
    _one_sentence(_runner(str(run), "0", cwd=tmp_path), "tasks.json: ", words)
