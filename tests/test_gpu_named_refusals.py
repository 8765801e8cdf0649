"""A review of resolve, render --all and the platform rows: a GPU named (--gpu, --cc) never
ends in a CPU-only image unless the cpu build was asked for; the refusals say the true cause
and offer specs that work on the request's platform; render --all --platform writes each
stack under its own (-arm64) name and leaves out, without failing, what that platform does
not offer; the loader refuses a platforms.yaml row of no release or variant in the matrix;
the build line printed for `-o -` is one the shell and docker read as a folder."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envgen.cli import main
from envgen.core.errors import Unsatisfiable
from envgen.matrix import bundled_path, load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def res(m, spec, **host):
    return resolve(m, parse_spec(spec, m), host_from_flags(m, **host))


def refused(m, spec, **host) -> Unsatisfiable:
    with pytest.raises(Unsatisfiable) as e:
        res(m, spec, **host)
    return e.value


# 1. a named GPU refuses a CPU-only answer

@pytest.mark.parametrize("spec,host", [
    ("flax", {"gpu": "V100", "driver": "525.60.13"}),      # flax over an old, CPU-only jax
    ("keras", {"gpu": "H100", "driver": "450.80.02"}),     # keras over a CPU-only tensorflow
    ("jax==0.4.29", {"gpu": "GH200", "driver": "580.95.05"}),
    ("jax==0.4.29", {"gpu": "H100"}),
    ("jax==0.4.29", {"cc": "9.0"}),
    ("keras==2.13.1", {"gpu": "H100"})])
def test_a_named_gpu_is_never_given_a_cpu_only_stack(m, spec, host):
    e = refused(m, spec, **host)
    assert any("variant=cpu" in h for h in e.hints), e.hints   # for someone who wants it


def test_the_refusal_says_the_gpu_would_go_unused_and_offers_a_cuda_build(m):
    e = refused(m, "jax==0.4.29", gpu="GH200", driver="580.95.05")
    assert "no GPU build of jax 0.4.29" in e.message and "leave the GH200 unused" in e.message
    assert any(",variant=cuda" in h and "platform=linux/arm64" in h for h in e.hints)
    assert "jax==0.4.29,variant=cpu,platform=linux/arm64" in e.hints


def test_the_cli_exits_2_with_the_hints(capsys):
    assert main(["resolve", "keras==2.13.1", "--gpu", "H100", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "unused" in doc["message"]
    assert any(h.endswith(",variant=cpu") for h in doc["hints"])


@pytest.mark.parametrize("spec,host", [
    ("jax==0.4.29,variant=cpu", {"gpu": "H100"}), ("flax-cpu", {"gpu": "V100"}),
    ("keras-cpu", {"gpu": "H100", "driver": "450.80.02"}),
    ("jax==0.4.29", {}), ("keras==2.13.1", {"driver": "450.80.02"})])
def test_the_cpu_build_asked_for_or_with_no_gpu_named_still_resolves(m, spec, host):
    assert res(m, spec, **host).variant == "cpu"


# 3. hints: the cpu build with no driver, the true cause, the request's platform

def test_a_grace_gpu_without_a_driver_is_offered_the_cpu_build(m):
    e = refused(m, "tensorflow", gpu="GH200")
    assert any(h.startswith("tensorflow==") and h.endswith(",variant=cpu,platform=linux/arm64")
               for h in e.hints), e.hints


def test_no_arm64_base_with_the_python_is_the_cause_named(m):
    e = refused(m, "pytorch-cpu-arm64", python="3.12")
    assert "no base is made for linux/arm64 with Python 3.12" in e.message, e.message
    assert "cu132" not in e.message
    assert e.hints and all(",python=3.12" not in h and ",python=" in h for h in e.hints)
    assert res(m, e.hints[0]).platform == "linux/arm64"


def test_a_variant_with_no_build_is_offered_the_platforms_names(m):
    e = refused(m, "jax-cuda14-arm64")
    assert e.hints and all(h.startswith("jax-") and h.endswith("-arm64") for h in e.hints)
    assert "jax-cuda13-arm64" in e.hints
    assert all(not h.endswith("-arm64") for h in refused(m, "jax-cuda14").hints)


# 2. render --all --platform

def test_render_all_for_arm64_writes_each_stack_under_its_own_name(tmp_path, monkeypatch,
                                                                   capsys):
    from closures import use_fake_resolver
    use_fake_resolver(monkeypatch, tmp_path)
    out = tmp_path / "all"
    assert main(["render", "--all", "--platform", "linux/arm64", "-o", str(out),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = [r["stack"] for r in doc["rendered"]]
    assert doc["failed"] == [] and "pytorch-cpu-arm64" in names
    assert all(n.endswith("-arm64") for n in names)
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    for r in doc["rendered"]:
        assert Path(r["path"]) == out / r["stack"]
        assert json.loads((out / r["stack"] / "stack.json").read_text())["stack"] == r["stack"]
    left = {x["stack"]: x["why"] for x in doc["left_out"]}
    assert "pytorch-cu121-arm64" in left and left["pytorch-cu121-arm64"]
    assert not set(left) & set(names)
    # the same folder takes the amd64 stacks beside them: nothing is overwritten
    assert main(["render", "pytorch-cpu", "-o", str(out / "pytorch-cpu")]) == 0
    assert json.loads((out / "pytorch-cpu-arm64" / "stack.json").read_text())["stack"] == \
        "pytorch-cpu-arm64"
    capsys.readouterr()
    assert main(["render", "--all", "--platform", "linux/arm64", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"rendered {len(names)} of {len(names)} stacks linux/arm64 offers" in text
    assert f"left out {len(left)} that linux/arm64 does not offer" in text


# 4. platforms.yaml rows cross-checked against the releases

def _matrix_with(tmp_path, old: str, new: str) -> tuple[Path, int]:
    folder = tmp_path / "matrix"
    shutil.copytree(bundled_path(), folder, ignore=shutil.ignore_patterns("closures"))
    path = folder / "platforms.yaml"
    text = path.read_text()
    assert old in text
    line = text[:text.index(old)].count("\n") + 1
    path.write_text(text.replace(old, new, 1))
    return folder, line


@pytest.mark.parametrize("old,new,said", [
    ('version: "2.10.0"\n  platform: linux/arm64\n  variant: cpu',
     'version: "2.10.0"\n  platform: linux/arm64\n  variant: cu999',
     "variant cu999 is not one of torch 2.10.0's variants"),
    ('package: torch\n  version: "2.10.0"', 'package: torchx\n  version: "2.10.0"',
     "torchx is not the package of a framework")])
def test_validate_refuses_a_platform_row_the_matrix_cannot_use(tmp_path, capsys, old, new,
                                                               said):
    folder, line = _matrix_with(tmp_path, old, new)
    assert main(["--matrix", str(folder), "matrix", "validate"]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert f"platforms.yaml:{line - 1}:" in err or f"platforms.yaml:{line}:" in err, err


# 5. the build line for `-o -`

def test_the_build_line_reads_a_dash_folder_as_a_folder(m):
    from envgen.render.build_hint import build_command
    arm = res(m, "pytorch-cpu-arm64")
    line = build_command(arm, Path("-"))
    assert line.endswith("docker build --platform linux/arm64 ./-")
    assert line.startswith("sh ./-/base/build-base.sh && ")
    assert build_command(arm, Path("out dir")).endswith("linux/arm64 'out dir'")
    assert build_command(res(m, "pytorch-cpu"), "ctx") == \
        "sh ctx/base/build-base.sh && DOCKER_BUILDKIT=1 docker build ctx"


def test_render_dash_prints_no_build_from_stdin(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["render", "pytorch-cpu-arm64", "-o", "-"]) == 0
    text = capsys.readouterr().out
    assert " -\n" not in text and "docker build --platform linux/arm64 ./-" in text
