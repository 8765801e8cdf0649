"""What PyPI does not serve as a wheel (issue 28): `init --from --no-source-builds` refuses a
package the closure would build from its sdist, at the team's line; a package whose sdist
compiles CUDA kernels against torch (flash-attn and kin) is one sentence at its line saying
why and what to give instead, not uv's build hint. Offline: the closure and uv's message are
given; the real runs are recorded in docs/project.md."""
import types

import pytest

from envgen.commands import init
from envgen.core.errors import EnvironmentMissing, InputError
from envgen.core.model import Closure, Pin
from envgen.intake.model import Intake, Wanted

UV_FLASH = ("uv could not resolve from https://pypi.org/simple: hint: This error likely "
            "indicates that `flash-attn@2.6.3` depends on `torch`, but doesn't declare it as a "
            "build dependency. If `flash-attn` is a first-party package, consider adding "
            "`torch` to its `build-system.requires`.")


def intake(*lines):
    reqs = tuple(Wanted(text=t, name=t.split("==")[0], file="requirements.txt", line=i + 1)
                 for i, t in enumerate(lines))
    return Intake(path="requirements.txt", kind="requirements", requirements=reqs)


def closure(*pins):
    return Closure(key="k", inputs={}, pins=tuple(pins))


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """No index is asked: crcmod 1.7's Pythons (none: an sdist alone) are in the memo a
    first read leaves in ENVGEN_HOME."""
    import json

    import envgen.resolve.closure as cl

    def never(url):
        raise AssertionError(f"an index was asked: {url}")
    monkeypatch.setattr(cl, "fetch_json", never)
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    memo = tmp_path / "cache" / "wheel-pythons" / f"{'a' * 64}.json"
    memo.parent.mkdir(parents=True)
    memo.write_text(json.dumps([]))


STACK = types.SimpleNamespace(python="3.11", index_url=None)
SDIST = Pin("crcmod", "1.7", file="crcmod-1.7.tar.gz", sha256="a" * 64)
WHEEL = Pin("torch", "2.4.1", file="torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl",
            sha256="b" * 64)


def test_no_source_builds_refuses_the_teams_sdist_at_its_line():
    with pytest.raises(InputError) as e:
        init._check_builds(intake("torch==2.4.1", "crcmod==1.7"), closure(WHEEL, SDIST), STACK,
                           source_builds=False)
    assert (e.value.file, e.value.line) == ("requirements.txt", 2)
    assert "crcmod 1.7 would be built from its sdist" in e.value.message
    assert "--no-source-builds" in e.value.message


def test_no_source_builds_names_a_dependency_no_line_asked_for():
    with pytest.raises(InputError) as e:
        init._check_builds(intake("torch==2.4.1"), closure(WHEEL, SDIST), STACK,
                           source_builds=False)
    assert "crcmod (a dependency of the requirements)" in e.value.message


def test_wheels_alone_pass_without_source_builds():
    init._check_builds(intake("torch==2.4.1"), closure(WHEEL), STACK, source_builds=False)


def test_a_cuda_kernel_sdist_is_one_sentence_at_its_line():
    err = init._kernel_sentence(EnvironmentMissing(UV_FLASH),
                                intake("torch==2.4.1", "flash-attn==2.6.3"), verbose=False)
    assert isinstance(err, InputError) and (err.file, err.line) == ("requirements.txt", 2)
    assert "compiles CUDA kernels against torch" in err.message
    assert "flash-attn @ https://" in err.message and "uv:" not in err.message
    verbose = init._kernel_sentence(EnvironmentMissing(UV_FLASH),
                                    intake("torch==2.4.1", "flash-attn==2.6.3"), verbose=True)
    assert "(uv: " in verbose.message


def test_torch_itself_is_never_taken_for_the_kernel_package():
    # uv's text names `torch` too: only the package that depends on it is meant
    err = init._kernel_sentence(EnvironmentMissing(UV_FLASH), intake("torch==2.4.1"),
                                verbose=False)
    assert err is None


def test_another_uv_failure_is_left_as_it_is():
    err = init._kernel_sentence(EnvironmentMissing("uv could not resolve from X: timed out"),
                                intake("torch==2.4.1", "numpy==2.0.0"), verbose=False)
    assert err is None


@pytest.mark.parametrize("cuda, stack, words", [
    ("12.1", "pytorch-cu121", "CUDA 12 wheels on PyPI (nvidia-cuda-nvcc-cu12, 12.0 to 12.9) "
                              "carry ptxas but no nvcc, so pytorch-cu121 (CUDA 12.1) cannot"),
    ("11.7", "pytorch-cu117", "nvidia-cuda-nvcc-cu11) carry ptxas but no nvcc"),
    ("13.0", "pytorch-cu130", "pytorch-cu130 (CUDA 13.0) compiles such sdists with NVIDIA's "
                              "nvcc wheels, but uv cannot read what this one requires without "
                              "building it over torch"),
])
def test_the_kernel_sentence_says_where_nvcc_would_come_from_for_the_stacks_cuda(
        cuda, stack, words):
    from types import SimpleNamespace
    err = init._kernel_sentence(EnvironmentMissing(UV_FLASH),
                                intake("torch==2.4.1", "flash-attn==2.6.3"), verbose=False,
                                stack=SimpleNamespace(cuda=cuda, stack=stack))
    assert words in err.message and err.message.endswith("or drop it")


def test_a_python_mismatch_is_said_before_the_source_build_refusal(tmp_path, monkeypatch):
    # torch 1.12.1 has wheels for cp37 to cp310 and none for 3.11: a newer Python, not a
    # compiler, is what the team lacks (the Pythons it was built for, as read from the index
    # before, lie in ENVGEN_HOME's memo: no index is asked)
    import json
    old = Pin("torch", "1.12.1", file="torch-1.12.1.tar.gz", sha256="c" * 64)
    memo = tmp_path / "cache" / "wheel-pythons" / f"{'c' * 64}.json"
    memo.write_text(json.dumps([7, 8, 9, 10]))
    with pytest.raises(InputError) as e:
        init._check_builds(intake("torch==1.12.1"), closure(old), STACK, source_builds=False)
    assert "torch 1.12.1 has no build for Python 3.11 (cp37 to cp310): python=3.10" \
        in e.value.message and "--no-source-builds" not in e.value.message


def _refused(*names):
    from envgen.resolve.closure import HostBuildRefused
    return HostBuildRefused(list(names), "x has no wheel ... ENVGEN_NO_HOST_BUILDS=1 ...")


def test_an_sdist_uv_was_not_let_build_is_refused_at_the_teams_line(monkeypatch):
    # --no-source-builds: uv resolves with --no-build, so nothing of the sdist ran here;
    # the index lists crcmod 1.7 as an sdist alone (no Python mismatch to tell first)
    import envgen.resolve.closure as cl
    monkeypatch.setattr(cl, "fetch_json", lambda url: {"files": [
        {"filename": "crcmod-1.7.tar.gz"}]})
    err = init._refused_build_sentence(_refused("crcmod"),
                                       intake("torch==2.4.1", "crcmod==1.7"), STACK)
    assert (err.file, err.line, err.exit_code) == ("requirements.txt", 2, 2)
    assert err.message.startswith("crcmod==1.7: crcmod has no wheel for Python 3.11")
    assert "--no-source-builds refuses building its sdist" in err.message
    assert "on this machine" in err.message
    dep = init._refused_build_sentence(_refused("crcmod"), intake("torch==2.4.1"), STACK)
    assert dep.message.startswith("crcmod (a dependency of the requirements)")
    assert (dep.file, dep.line) == ("requirements.txt", None)


def test_a_pin_with_wheels_for_other_pythons_says_so_first_when_uv_refused(monkeypatch):
    import envgen.resolve.closure as cl
    monkeypatch.setattr(cl, "fetch_json", lambda url: {"files": [
        {"filename": f"torch-1.12.1-cp3{m}-cp3{m}-manylinux1_x86_64.whl"} for m in (7, 8, 9, 10)
    ] + [{"filename": "torch-2.0.0-cp311-cp311-manylinux1_x86_64.whl"}]})
    err = init._refused_build_sentence(_refused("torch"), intake("torch==1.12.1"), STACK)
    assert "torch 1.12.1 has no build for Python 3.11 (cp37 to cp310): python=3.10" \
        in err.message and (err.file, err.line) == ("requirements.txt", 1)


def test_no_source_builds_sets_the_refusal_only_while_it_resolves(monkeypatch):
    monkeypatch.delenv("ENVGEN_NO_HOST_BUILDS", raising=False)
    import os
    with init._host_builds(refused=True):
        assert os.environ["ENVGEN_NO_HOST_BUILDS"] == "1"
    assert "ENVGEN_NO_HOST_BUILDS" not in os.environ
    with init._host_builds(refused=False):
        assert "ENVGEN_NO_HOST_BUILDS" not in os.environ
    monkeypatch.setenv("ENVGEN_NO_HOST_BUILDS", "0")
    with init._host_builds(refused=True):
        assert os.environ["ENVGEN_NO_HOST_BUILDS"] == "1"
    assert os.environ["ENVGEN_NO_HOST_BUILDS"] == "0"
