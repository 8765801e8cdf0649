"""The fleet file and what envgen writes from it, without a cluster: every bad value at
fleet.yaml:LINE (exit 2), no value reaching a shell or an option, Slurm's state parsed
(sacct and scontrol), and each Kubernetes Job validated against the Job schema of the
Kubernetes API (tests/data/kubernetes/job-batch-v1.json, strict)."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml
from services import envgen

from envgen.core.errors import InputError, MatrixError
from envgen.fleet import kubernetes, slurm
from envgen.fleet.spec import gfd_product, load
from envgen.fleet.task import LINE_PREFIX, argv, certificate_line

SCHEMA = json.loads((Path(__file__).parent / "data/kubernetes/job-batch-v1.json").read_text())
GOOD = """\
stacks: [pytorch-cu121, jax-cuda12]
targets:
  - name: h100
    partition: gpu-h100
    gpu_product: NVIDIA-H100-80GB-HBM3
    gpus: 2
    time: 30m
  - name: cpu
    partition: debug
    level: cpu
    time: 1h30m
"""


def fleet_of(tmp_path, text, name="fleet.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load(str(p))


def problems(tmp_path, text) -> list[str]:
    with pytest.raises(MatrixError) as e:
        fleet_of(tmp_path, text)
    return [f"{p.line}: {p.message}" for p in e.value.problems]


def test_a_fleet_gives_one_task_per_stack_and_target(tmp_path):
    f = fleet_of(tmp_path, GOOD)
    tasks = f.tasks()
    assert [(t.resolved.stack, t.target.name) for t in tasks] == [
        ("pytorch-cu121", "h100"), ("jax-cuda12", "h100"), ("pytorch-cu121", "cpu"),
        ("jax-cuda12", "cpu")]
    assert tasks[0].target.gpu == "H100" and tasks[0].target.seconds == 1800
    assert tasks[2].target.slurm_time == "1:30:00" and tasks[2].target.gpus == 0
    assert len({t.name for t in tasks}) == 4 and all(len(t.name) <= 63 for t in tasks)


def test_gpu_feature_discovery_names_products_from_nvml_names():
    assert gfd_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert gfd_product("NVIDIA A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"
    assert gfd_product("Tesla V100-SXM2-16GB") == "Tesla-V100-SXM2-16GB"
    assert gfd_product("NVIDIA GeForce RTX 4090") == "NVIDIA-GeForce-RTX-4090"


def test_a_time_sliced_products_label_maps_to_its_gpu(tmp_path):
    f = fleet_of(tmp_path, GOOD.replace("HBM3\n", "HBM3-SHARED\n"))
    assert f.targets[0].gpu == "H100" and f.targets[0].gpu_product.endswith("-SHARED")


@pytest.mark.parametrize("bad, line, words", [
    ("stacks: [nosuch-framework]\ntargets: [{name: a, partition: p}]\n", 1, "nosuch"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    gpu_product: H100\n"
     "    gpus: 1\n", 4, None),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    gpu_product: NVIDIA-H999\n", 4,
     "nearest"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    time: 30x\n", 4, "duration"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    time: 8d\n", 4, "duration"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    level: gpu\n", 4, "cuda or cpu"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    gpus: 0\n", 4, "at least one"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    gpus: true\n", 4, "whole number"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n  - name: a\n", 4, "twice"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: A_b\n", 3, "a-z"),
    ("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    colour: red\n", 4, "unknown key"),
    ("stacks: [jax-cpu]\ntargets:\n  - name: a\n", 1, "CPU build"),
    ("stacks: []\ntargets: [{name: a}]\n", 1, "non-empty"),
    ("stack: [pytorch-cu121]\ntargets: [{name: a}]\n", 1, "unknown key"),
])
def test_each_bad_value_is_one_sentence_at_its_line(tmp_path, bad, line, words):
    found = problems(tmp_path, bad)
    if words is None:   # a known short name is not a label GFD writes
        assert any(f"{line}: " in p and "gpu.product" in p for p in found), found
        return
    assert any(p.startswith(f"{line}: ") and words in p for p in found), found


@pytest.mark.parametrize("value", ["-rf", "--partition=x", "a b", "x;rm -rf /", "$(id)",
                                   "`id`", "x'y", 'x"y', "x\ny", "x|y", "-"])
def test_no_value_reaches_a_shell_or_an_option(tmp_path, value):
    q = json.dumps(value)
    for text in (f"stacks: [{q}]\ntargets: [{{name: a, partition: p, level: cpu}}]\n",
                 f"stacks: [jax-cpu]\ntargets: [{{name: a, partition: {q}, level: cpu}}]\n",
                 f"stacks: [jax-cpu]\ntargets: [{{name: {q}, level: cpu}}]\n",
                 f"stacks: [{{spec: jax-cpu, image: {q}}}]\ntargets: [{{name: a, level: cpu}}]\n",
                 f"stacks: [jax-cpu]\ntargets: [{{name: a, gpu_product: {q}}}]\n"):
        assert problems(tmp_path, text), text


def test_the_cli_refuses_a_bad_file_with_exit_2_and_its_line(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text("stacks: [pytorch-cu121]\ntargets:\n  - name: a\n    partition: '-x'\n")
    r = envgen("fleet", str(p), "--slurm", "-o", str(tmp_path / "out"), "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    err = json.loads(r.stdout)
    assert err["line"] == 4 and "partition" in err["message"] and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_slurm_scripts_group_tasks_by_target_and_quote_nothing_from_the_file(tmp_path):
    f = fleet_of(tmp_path, GOOD)
    slurm.write(f, tmp_path / "run")
    h100 = (tmp_path / "run/slurm/h100.sbatch").read_text()
    cpu = (tmp_path / "run/slurm/cpu.sbatch").read_text()
    assert "#SBATCH --partition=gpu-h100" in h100 and "#SBATCH --gres=gpu:2" in h100
    assert "#SBATCH --array=0-1" in h100 and "#SBATCH --time=0:30:00" in h100
    assert "--gres" not in cpu and "#SBATCH --array=0-1" in cpu   # each array from 0
    assert "pytorch" not in h100.split("\n", 2)[2]   # specs stay in tasks.json, not the script
    last = h100.strip().splitlines()[-1]
    assert shlex.split(last) == ["exec", "$envgen_py", "-m", "envgen.fleet.task",
                                 "$SLURM_SUBMIT_DIR", "--target", "h100"]
    assert "#SBATCH --output=logs/%A_%a.out" in h100
    tasks = json.loads((tmp_path / "run/tasks.json").read_text())["tasks"]
    cmd = argv(tasks[0], python="py")
    assert cmd[-2:] == ["--", "pytorch-cu121"] and cmd[cmd.index("--gpus") + 1] == "all"
    assert argv(tasks[2], python="py")[argv(tasks[2], "py").index("--gpus") + 1] == "none"


SIF_FLEET = GOOD.replace("stacks: [pytorch-cu121, jax-cuda12]",
                         "stacks:\n  - {spec: jax-cuda12, sif: /shared/sif/jax-cuda12.sif}"
                         ).replace("gpus: 2", "gpus: 1")   # no multi-GPU run on a SIF


def test_the_apptainer_engine_certifies_each_stacks_sif(tmp_path):
    f = fleet_of(tmp_path, SIF_FLEET)
    slurm.write(f, tmp_path / "run", engine="apptainer")
    tasks = json.loads((tmp_path / "run/tasks.json").read_text())["tasks"]
    assert {t["engine"] for t in tasks} == {"apptainer"}
    assert argv(tasks[0], python="py")[-2:] == ["--", "/shared/sif/jax-cuda12.sif"]
    assert argv({**tasks[0], "engine": "docker"}, python="py")[-2:] == ["--", "jax-cuda12"]


def test_the_apptainer_engine_refuses_a_stack_without_a_sif_at_its_line(tmp_path):
    from envgen.core.errors import InputError
    with pytest.raises(InputError) as e:
        slurm.write(fleet_of(tmp_path, GOOD), tmp_path / "run", engine="apptainer")
    assert e.value.line == 1 and "envgen sif" in e.value.message


@pytest.mark.parametrize("sif", ["relative.sif", "/a/../etc/x.sif", "/x/-$(id).sif",
                                 "/x/a b.sif", "/x/notsif", "-x.sif"])
def test_a_sif_that_is_not_a_plain_absolute_path_is_refused(tmp_path, sif):
    text = SIF_FLEET.replace("/shared/sif/jax-cuda12.sif", json.dumps(sif))
    assert any("sif" in p and p.startswith("2:") for p in problems(tmp_path, text))


def test_a_fleet_files_name_never_becomes_a_line_of_the_script(tmp_path):
    f = fleet_of(tmp_path, GOOD, name="fleet.yaml\ntouch pwned #")
    slurm.write(f, tmp_path / "run")
    script = (tmp_path / "run/slurm/cpu.sbatch").read_text()
    body = [ln for ln in script.strip().splitlines() if not ln.startswith("#")]
    assert "pwned" not in script and body == [
        "set -eu", *slurm.FIND_PYTHON,
        'exec "$envgen_py" -m envgen.fleet.task "$SLURM_SUBMIT_DIR" --target cpu']


def test_a_batch_script_names_no_path_of_the_machine_that_wrote_it(tmp_path):
    """The run folder is $SLURM_SUBMIT_DIR and the interpreter is found on the node, so the
    folder can be moved (or seen at another mount point) and run from there."""
    import subprocess
    import sys
    f = fleet_of(tmp_path, GOOD)
    slurm.write(f, tmp_path / "a b$(id)")    # any folder: it is never written into a script
    script = (tmp_path / "a b$(id)/slurm/cpu.sbatch").read_text()
    assert str(tmp_path) not in script and sys.executable not in script
    moved = tmp_path / "elsewhere"
    (tmp_path / "a b$(id)").rename(moved)
    venv = tmp_path / "venv/bin"     # envgen on the node's PATH, its Python beside it
    venv.mkdir(parents=True)
    (venv / "envgen").write_text("#!/bin/sh\n")
    (venv / "python").write_text(f'#!/bin/sh\n[ "$1" = -c ] && exit 0\n'
                                 f'echo "$0 $*" > {shlex.quote(str(tmp_path / "ran"))}\n')
    for x in ("envgen", "python"):
        (venv / x).chmod(0o755)
    env = {"PATH": f"{venv}:/usr/bin:/bin", "SLURM_SUBMIT_DIR": str(moved)}
    r = subprocess.run(["bash", str(moved / "slurm/cpu.sbatch")], env=env, cwd="/",
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ran").read_text().split() == [
        str(venv / "python"), "-m", "envgen.fleet.task", str(moved), "--target", "cpu"]
    # submitted from a folder without tasks.json: one sentence, exit 2
    r = subprocess.run(["bash", str(moved / "slurm/cpu.sbatch")],
                       env={**env, "SLURM_SUBMIT_DIR": str(tmp_path)}, cwd="/",
                       capture_output=True, text=True)
    assert r.returncode == 2 and "holds no tasks.json" in r.stderr
    # no envgen on PATH and a python3 without it: exit 3 saying what to do
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "python3").write_text("#!/bin/sh\nexit 1\n")
    (bare / "python3").chmod(0o755)
    r = subprocess.run(["bash", str(moved / "slurm/cpu.sbatch")],
                       env={**env, "PATH": f"{bare}:/usr/bin:/bin"}, cwd="/",
                       capture_output=True, text=True)
    assert r.returncode == 3 and "--python PATH" in r.stderr


def test_python_names_the_nodes_interpreter_and_must_be_plain(tmp_path):
    from envgen.core.errors import InputError
    f = fleet_of(tmp_path, GOOD)
    slurm.write(f, tmp_path / "run", python="/shared/envgen/bin/python")
    assert "envgen_py=/shared/envgen/bin/python\n" in (
        tmp_path / "run/slurm/cpu.sbatch").read_text()
    for bad in ("/x/a b", "$(id)", "-c"):
        with pytest.raises(InputError, match="plain path"):
            slurm.write(f, tmp_path / "run2", python=bad)


def test_the_certificate_line_is_one_compact_json_line():
    line = certificate_line({"image_id": "sha256:" + "a" * 64, "passed": True, "x": "a\nb"})
    assert line.startswith(LINE_PREFIX) and "\n" not in line
    assert json.loads(line[len(LINE_PREFIX):])["x"] == "a\nb"


SACCT = """\
101_0|COMPLETED|0:0
101_1|FAILED|1:0
101_2|TIMEOUT|0:15
101_3|CANCELLED by 0|0:15
102_[4-5,7]|PENDING|0:0
"""
SCONTROL = ("JobId=11 ArrayJobId=10 ArrayTaskId=0 ArrayTaskThrottle=0 JobState=COMPLETED "
            "Reason=None ExitCode=0:0\n"
            "JobId=10 ArrayJobId=10 ArrayTaskId=1-3 JobState=PENDING Reason=Resources\n")


def test_sacct_and_scontrol_output_is_read_per_array_task():
    s = slurm.parse_sacct(SACCT)
    assert s[("101", 0)] == "COMPLETED" and s[("101", 1)] == "FAILED"
    assert s[("101", 2)] == "TIMEOUT" and s[("101", 3)] == "CANCELLED"
    assert {k[1] for k in s if k[0] == "102"} == {4, 5, 7}
    c = slurm.parse_scontrol(SCONTROL)
    assert c == {("10", 0): "COMPLETED", ("10", 1): "PENDING", ("10", 2): "PENDING",
                 ("10", 3): "PENDING"}


REAL_CERT = Path(__file__).resolve().parents[1] / "docs/certificates/h200-1gpu.json"


def passing_result(run: Path, index: int, **changes) -> dict:
    """A real certificate (the H200 run on record) as task `index` of `run` would write it."""
    cert = json.loads(REAL_CERT.read_text())
    task = next(t for t in json.loads((run / "tasks.json").read_text())["tasks"]
                if t["index"] == index)
    cert["stack"]["stack"] = task["stack"]
    # run as the task runs it: at its level, on its target's GPU (a run elsewhere is not
    # the task's, test_collect_refuses_a_run_at_another_level_or_on_another_gpu)
    cert["level"] = cert["report"]["level"] = task["level"]
    if task["level"] == "cpu":
        cert["host"]["gpus"] = []
    elif task.get("gpu"):
        cert["host"]["gpus"] = [{"index": i, "name": {"H100": "NVIDIA H100 80GB HBM3"}.get(
            task["gpu"], task["gpu"])} for i in range(task["gpus"])]
    if task.get("multi_gpu"):   # its GPUs trained together: the payload's multi-GPU checks
        cert["report"]["checks"].append({"name": "multi_gpu_ddp", "passed": True,
                                         "detail": f"DDP over {task['gpus']} GPUs"})
    return cert | changes


def test_a_failed_or_timed_out_task_is_never_a_pass(tmp_path, monkeypatch):
    f = fleet_of(tmp_path, GOOD)
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    slurm.record(run, [{"script": "slurm/h100.sbatch", "job_id": "101", "indices": [0, 1]},
                       {"script": "slurm/cpu.sbatch", "job_id": "103", "indices": [2, 3]}])
    for i in range(4):   # every task wrote a passing certificate...
        job = "101" if i < 2 else "103"
        (run / "results" / f"{i}-{job}.json").write_text(json.dumps(passing_result(run, i)))
    # ...but the scheduler says otherwise (tasks 2 and 3 are array tasks 0 and 1 of job 103)
    sacct = SACCT.replace("101_2|", "103_0|").replace("101_3|", "103_1|")
    monkeypatch.setattr(slurm, "scheduler_states",
                        lambda jobs: (slurm.parse_sacct(sacct), "sacct"))
    rows, _ = slurm.verdicts(run, f)
    assert [r["verdict"] for r in rows] == ["passed", "failed", "timed out", "cancelled"]
    (run / "results/0-101.json").rename(run / "results/0-99.json")
    rows, _ = slurm.verdicts(run, f)   # an earlier submission's result is not this one's
    assert rows[0]["verdict"] == "failed"
    sent = []
    monkeypatch.setattr(slurm, "sbatch", lambda script, indices=None:
                        sent.append((Path(script).name, indices)) or "200")
    slurm.resubmit_failed(run, f)
    assert sent == [("cpu.sbatch", [0]), ("h100.sbatch", [0, 1])]   # IDs in each array


def test_a_missing_slurm_client_is_exit_3(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text(GOOD)
    out = tmp_path / "run"
    assert envgen("fleet", str(p), "--slurm", "-o", str(out)).returncode == 0
    r = envgen("fleet", str(p), "--slurm", "-o", str(out), "--submit",
               env={"PATH": "/nonexistent"})
    assert r.returncode == 3 and "not installed" in r.stderr, r.stderr
    r = envgen("fleet", str(p), "--slurm", "--collect", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "tasks.json" in r.stderr


# ---- Kubernetes ---------------------------------------------------------------------------

def manifests(tmp_path, text=GOOD) -> list[dict]:
    f = fleet_of(tmp_path, text)
    from envgen.core.image import default_tag
    images = {default_tag(t.resolved): ("sha256:" + "c" * 64,
                                        [f"registry.example/{t.resolved.stack}@sha256:"
                                         + "d" * 64], [default_tag(t.resolved)])
              for t in f.tasks()}
    out = kubernetes.write(f, tmp_path / "k8s", images=images)
    return [yaml.safe_load(Path(m["path"]).read_text()) for m in out["manifests"]]


def schema_errors(doc: dict) -> list[str]:
    v = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


def test_every_job_manifest_is_valid_against_the_kubernetes_job_schema(tmp_path):
    docs = manifests(tmp_path)
    assert len(docs) == 4
    for doc in docs:
        assert schema_errors(doc) == [], doc["metadata"]["name"]


def test_a_broken_manifest_fails_the_schema(tmp_path):
    doc = manifests(tmp_path)[0]
    for breakage in (lambda d, c: d["spec"].__setitem__("backoffLimit", "zero"),
                     lambda d, c: c.__setitem__("imagePullPolice", "Always"),
                     lambda d, c: c["securityContext"].__setitem__("capabilities", ["ALL"]),
                     lambda d, c: d["spec"]["template"]["spec"].pop("containers")):
        broken = json.loads(json.dumps(doc))
        breakage(broken, broken["spec"]["template"]["spec"]["containers"][0])
        assert schema_errors(broken), breakage


def test_a_job_asks_for_its_gpus_on_its_product_with_the_run_profile(tmp_path):
    doc = manifests(tmp_path)[0]
    spec = doc["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    assert spec["activeDeadlineSeconds"] == 1800 and spec["backoffLimit"] == 0
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 2}
    assert c["image"].startswith("registry.example/pytorch-cu121@sha256:")
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["privileged"] is False
    shm = next(v for v in pod["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert {"name": "shm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    base = json.loads(env["CERTIFY_TEMPLATE"])
    assert base["image_id"] == "sha256:" + "c" * 64 and base["command"][:2] == [
        "python", "/opt/envgen/torch_smoke.py"]
    assert "--require" in base["command"] and base["command"][
        base["command"].index("--require") + 1] == "cuda"
    cpu = manifests(tmp_path)[2]["spec"]["template"]["spec"]
    assert "nodeSelector" not in cpu and "resources" not in cpu["containers"][0]


def test_manifests_have_no_yaml_anchors_and_an_unpushed_image_is_named(tmp_path):
    f = fleet_of(tmp_path, GOOD)
    from envgen.core.image import default_tag
    images = {default_tag(t.resolved): ("sha256:" + "c" * 64, [], [default_tag(t.resolved)])
              for t in f.tasks()}
    out = kubernetes.write(f, tmp_path / "k8s", images=images)
    texts = [Path(m["path"]).read_text() for m in out["manifests"]]
    assert not any(re.search(r"[&*]id\d{3}", t) for t in texts)
    assert sorted(out["unpushed"]) == sorted({default_tag(t.resolved) for t in f.tasks()})
    pushed = kubernetes.write(f, tmp_path / "k8s2", images={
        k: (i, [f"registry.example/x@sha256:{'d' * 64}"], t) for k, (i, _, t) in images.items()})
    assert pushed["unpushed"] == []


@pytest.mark.parametrize("index, change, words", [
    (0, lambda c: c.update(level="cpu") or c["report"].update(level="cpu"),
     "at level cpu, not the task's cuda"),
    (0, lambda c: c["host"].update(gpus=[{"index": 0, "name": "NVIDIA H200"}]),
     "ran on H200, not on the target's H100"),
    (2, lambda c: c.update(level="cuda") or c["report"].update(level="cuda") or
     c["host"].update(gpus=[{"index": 0, "name": "NVIDIA H200"}]),
     "at level cuda, not the task's cpu")])
def test_collect_refuses_a_run_at_another_level_or_on_another_gpu(tmp_path, monkeypatch,
                                                                  index, change, words):
    """A task's pass is a run of its stack at its level on its target's GPU: a passing
    certificate from another GPU or level (copied from elsewhere) is not the task's."""
    f = fleet_of(tmp_path, GOOD)
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    slurm.record(run, [{"script": "slurm/h100.sbatch", "job_id": "101", "indices": [0, 1]},
                       {"script": "slurm/cpu.sbatch", "job_id": "101", "indices": [2, 3]}])
    cert = passing_result(run, index)
    change(cert)
    (run / "results" / f"{index}-101.json").write_text(json.dumps(cert))
    monkeypatch.setattr(slurm, "scheduler_states", lambda jobs: (
        {("101", i): "COMPLETED" for i in range(4)}, "sacct"))
    row = next(r for r in slurm.verdicts(run, f)[0] if r["index"] == index)
    assert row["verdict"] == "failed" and words in row["why"], row


def test_a_folder_with_another_fleets_submissions_is_not_written_over(tmp_path):
    f = fleet_of(tmp_path, GOOD)
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    slurm.record(run, [{"script": "slurm/h100.sbatch", "job_id": "101", "indices": [0, 1]}])
    slurm.write(f, run)   # the same tasks: written again, the submissions still theirs
    other = fleet_of(tmp_path, GOOD.replace("name: h100", "name: a100"))
    with pytest.raises(InputError, match="jobs.json records submissions of other tasks"):
        slurm.write(other, run)
    assert (run / "slurm" / "h100.sbatch").exists()


@pytest.mark.parametrize("key, value", [("gpus", "1.0"), ("steps", "100.0")])
def test_a_count_written_with_a_point_is_refused_at_its_line(tmp_path, key, value):
    text = GOOD.replace("    gpus: 2\n", f"    gpus: 2\n    {key}: {value}\n") if key == "steps" \
        else GOOD.replace("gpus: 2", f"gpus: {value}")
    with pytest.raises(MatrixError) as e:
        fleet_of(tmp_path, text)
    assert f"{key} {value!r} must be a whole number" in str(e.value) or \
        f"{key} {value} must be a whole number" in str(e.value), str(e.value)
    assert e.value.line == next(i for i, x in enumerate(text.splitlines(), 1)
                                if x.strip().startswith(f"{key}:") and value in x)


def test_manifests_of_a_target_no_longer_in_the_fleet_are_removed(tmp_path):
    """`kubectl apply -f DIR` applies every file there: a Job an earlier fleet wrote is
    removed when the folder is written again; a file envgen did not write stays."""
    from envgen.core.image import default_tag
    f = fleet_of(tmp_path, GOOD)
    images = {default_tag(t.resolved): ("sha256:" + "c" * 64, [], [default_tag(t.resolved)])
              for t in f.tasks()}
    out = tmp_path / "k8s"
    kubernetes.write(f, out, images=images)
    (out / "envgen-notes.yaml").write_text("kept: true\n")
    renamed = fleet_of(tmp_path, GOOD.replace("name: cpu", "name: cpu2"), name="f2.yaml")
    kubernetes.write(renamed, out, images=images)
    names = sorted(p.name for p in out.glob("*.yaml"))
    assert "envgen-notes.yaml" in names
    assert not any(n.endswith("-cpu.yaml") for n in names), names
    assert sum(n.endswith("-cpu2.yaml") for n in names) == 2, names


def test_the_pods_log_holds_only_its_own_certificate_line(tmp_path):
    """The payload's stderr reaches the pod's log as it comes, but a line of it shaped like
    the certificate line is marked as the payload's: an image under test cannot print a
    pass that `certs import` of the log would take over its real failure."""
    import subprocess
    import sys

    from envgen.certs.inputs import _LINE
    from envgen.fleet import pod
    payload = tmp_path / "torch_smoke.py"
    payload.write_text(
        "import json, sys\n"
        "print('envgen-certificate: {\"passed\": true, \"forged\": 1}', file=sys.stderr)\n"
        "print('2030-01-01T00:00:00Z envgen-certificate: {\"forged\": 2}', file=sys.stderr)\n"
        "print('warning: x\\x1cenvgen-certificate: {\"forged\": 3}', file=sys.stderr)\n"
        "print('warning: y\\u2028envgen-certificate: {\"forged\": 4}', file=sys.stderr)\n"
        "print('training', file=sys.stderr)\n"
        "print(json.dumps({'passed': False, 'level': 'cpu', 'checks': "
        "[{'name': 'train', 'passed': False}]}))\nsys.exit(1)\n")
    template = {"schema": 1, "command": [sys.executable, str(payload)],
                "payload": {"path": str(payload)}}
    r = subprocess.run([sys.executable, pod.__file__], capture_output=True, text=True,
                       timeout=60, env={"CERTIFY_TEMPLATE": json.dumps(template),
                                        "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1
    log = (r.stdout + r.stderr).splitlines()   # every break any reader may make
    certs = [m.group(1) for line in log if (m := _LINE.match(line))]
    assert len(certs) == 1 and json.loads(certs[0])["passed"] is False
    assert "training" in r.stderr and "payload stderr: envgen-certificate:" in r.stderr
    from envgen.certs.inputs import from_text  # the importer's own reading of the log
    read = [doc for _n, _line, doc, _why in from_text(r.stdout + r.stderr, "log") if doc]
    assert len(read) == 1 and read[0]["passed"] is False, read


@pytest.mark.parametrize("value, ok", [("30s", False), ("1m", True), ("90s", True),
                                       ("24h", True), ("25h", False), ("48h", False)])
def test_a_task_time_is_a_minute_to_a_day_and_two_for_kubernetes(tmp_path, value, ok):
    """Over a day certify's own limit ended a task before the scheduler's; under 2 minutes
    a Kubernetes Job's deadline ended the pod before it printed its certificate."""
    text = GOOD.replace("time: 30m", f"time: {value}")
    if not ok:
        with pytest.raises(MatrixError, match="at least 1m, at most 24h"):
            fleet_of(tmp_path, text)
        return
    f = fleet_of(tmp_path, text)
    from envgen.core.image import default_tag
    images = {default_tag(t.resolved): ("sha256:" + "c" * 64, [], [default_tag(t.resolved)])
              for t in f.tasks()}
    if f.targets[0].seconds < 120:
        with pytest.raises(InputError, match="too short for a Kubernetes Job"):
            kubernetes.write(f, tmp_path / "k8s", images=images)
    else:
        assert kubernetes.write(f, tmp_path / "k8s", images=images)["manifests"]


def _collected(tmp_path, monkeypatch, text, cert_change, submitted=None, index=0):
    tmp_path.mkdir(exist_ok=True)
    f = fleet_of(tmp_path, text)
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    sub = {"script": "slurm/h100.sbatch", "job_id": "101", "indices": [0, 1]}
    slurm.record(run, [sub | ({"submitted": submitted} if submitted else {})])
    cert = passing_result(run, index)
    cert_change(cert)
    (run / "results" / f"{index}-101.json").write_text(json.dumps(cert))
    monkeypatch.setattr(slurm, "scheduler_states", lambda jobs: (
        {("101", i): "COMPLETED" for i in range(4)}, "sacct"))
    return next(r for r in slurm.verdicts(run, f)[0] if r["index"] == index)


def test_collect_refuses_a_certificate_made_before_its_job_was_submitted(tmp_path,
                                                                        monkeypatch):
    """A result file is named by its job, but a file copied there from an earlier run is no
    proof of this one: a certificate older than the submission (beyond the clock skew a
    cluster may have) does not count."""
    sent = "2026-12-06T12:00:00Z"
    row = _collected(tmp_path, monkeypatch, GOOD,
                     lambda c: c.update(created="2026-12-05T12:00:00Z"), sent)
    assert row["verdict"] == "failed" and "before the job was submitted at " + sent in \
        row["why"], row
    row = _collected(tmp_path / "b", monkeypatch, GOOD,
                     lambda c: c.update(created="2026-12-06T11:58:00Z"), sent)
    assert row["verdict"] == "passed", row   # within the skew
    row = _collected(tmp_path / "c", monkeypatch, GOOD,
                     lambda c: c.update(created="2026-12-06T12:30:00Z"), sent)
    assert row["verdict"] == "passed", row


IMAGE = "registry.example/team/pytorch-cu121@sha256:" + "d" * 64
BY_IMAGE = GOOD.replace("stacks: [pytorch-cu121, jax-cuda12]",
                        f"stacks:\n  - {{spec: pytorch-cu121, image: '{IMAGE}'}}\n"
                        f"  - jax-cuda12")


def test_collect_refuses_a_certificate_of_another_image_than_the_tasks(tmp_path, monkeypatch):
    """A task that names its image by digest passes only on a run of that image: a passing
    certificate of the same stack from another image (another build, another tag) is not
    the task's."""
    row = _collected(tmp_path, monkeypatch, BY_IMAGE, lambda c: c.pop("image_digests", None))
    assert row["verdict"] == "failed" and f"not of task 0's {IMAGE}" in row["why"], row
    row = _collected(tmp_path / "b", monkeypatch, BY_IMAGE, lambda c: c.update(
        image_digests=["registry.example/team/pytorch-cu121@sha256:" + "e" * 64]))
    assert row["verdict"] == "failed", row
    row = _collected(tmp_path / "c", monkeypatch, BY_IMAGE, lambda c: c.update(
        image_digests=[IMAGE]))
    assert row["verdict"] == "passed", row


@pytest.mark.parametrize("ref, cert, named", [
    ("sha256:" + "a" * 12, {"image_id": "sha256:" + "a" * 64}, True),
    ("sha256:" + "b" * 12, {"image_id": "sha256:" + "a" * 64}, False),
    ("docker.io/library/x:1", {"image_tags": ["x:1"]}, True),
    ("docker.io/org/x", {"image_tags": ["org/x:latest"]}, True),
    ("org/x", {"image_tags": ["org/x:2"]}, False),
    ("localhost:5000/x:1", {"image_tags": ["localhost:5000/x:1"]}, True),
    ("localhost:5000/x", {"image_tags": ["localhost:5000/x:1"]}, False),
    ("x:1@sha256:" + "d" * 64, {"image_digests": ["x@sha256:" + "d" * 64]}, True),
    ("x@sha256:" + "d" * 64, {"image_digests": ["y@sha256:" + "d" * 64]}, False),
    ("x@sha256:" + "d" * 64, {"image_tags": ["x:latest"]}, False),
    ("/scratch/a.sif", {"image_tags": ["/scratch/a.sif"]}, True),
    ("/scratch/a.sif", {"image_tags": ["/scratch/b.sif"]}, False)])
def test_a_certificate_names_the_image_a_reference_names(ref, cert, named):
    from envgen.certs.certificate import names_image
    assert names_image({"image_id": "sha256:" + "f" * 64} | cert, ref) is named


def test_a_cpu_tasks_pod_sees_no_gpu_and_a_gpu_tasks_pod_keeps_its_own(tmp_path):
    """The image says NVIDIA_VISIBLE_DEVICES=all: where NVIDIA's runtime is the node's
    default, a pod asking for no GPU saw every GPU of its node (and its certificate said
    so). A CPU task's pod sets it to void; a GPU task's is left to the device plugin."""
    docs = manifests(tmp_path)
    for doc in docs:
        c = doc["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        cpu = "nvidia.com/gpu" not in (c.get("resources") or {}).get("limits", {})
        assert (env.get("NVIDIA_VISIBLE_DEVICES") == "void") is cpu, doc["metadata"]["name"]
