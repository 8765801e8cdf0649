"""A GPU has a last driver branch as it has a first driver: NVIDIA's deprecation schedule says
"The release 580 series will be the last to support GPUs based on the Maxwell, Pascal, and
Volta architectures". resolve, diff, doctor and the certification preflight refuse a newer
branch on such a GPU, naming the GPU, its last branch and the driver."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from envgen import doctor as dr
from envgen.certify.run import preflight
from envgen.core.errors import CheckFailed, MatrixError, Unsatisfiable
from envgen.diff import driver_diff
from envgen.matrix import load_matrix
from envgen.resolve.compat import gpu_knows
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve
from envgen.runtime import host

DEPRECATION = "https://forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588"
MINI = Path(__file__).parent / "fixtures" / "mini.yaml"
DOCKER_OK = {"reachable": True, "error": None, "version": "27.3.1", "runtimes": ["nvidia"],
             "default_runtime": "runc", "nvidia_runtime": True, "cdi_spec_dirs": [],
             "cdi_specs": []}


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def _resolve(m, spec, driver, gpu):
    return resolve(m, parse_spec(spec, m), host_from_flags(m, driver=driver, gpu=gpu))


@pytest.mark.parametrize("arch", ["maxwell", "pascal", "volta"])
def test_r580_is_the_last_branch_of_maxwell_pascal_and_volta(m, arch):
    a = next(a for a in m.architectures if a.arch == arch)
    assert (a.last_branch, a.last_branch_source, a.last_branch_why) == ("580", DEPRECATION, "")


@pytest.mark.parametrize("arch", ["turing", "ampere", "ada", "hopper", "blackwell"])
def test_newer_architectures_have_no_last_branch(m, arch):
    assert next(a for a in m.architectures if a.arch == arch).last_branch == ""


@pytest.mark.parametrize("spec,gpu,driver", [
    ("torch", "V100", "590.48.01"), ("torch", "GTX 1080 Ti", "595.45.04"),
    ("torch", "P100", "610.43.02"), ("tensorflow", "V100", "590.48.01"),
    ("jax", "V100", "620.70.06")])
def test_a_driver_past_r580_cannot_run_anything_on_a_volta_or_pascal_gpu(m, spec, gpu, driver):
    with pytest.raises(Unsatisfiable) as e:
        _resolve(m, spec, driver, gpu)
    g = m.gpu(gpu)
    assert (f"driver {driver} is past R580, the last driver branch that supports the "
            f"{g.name} ({g.arch.capitalize()})") in e.value.message
    # nearest: the same framework on R580's newest release (not for JAX: its CUDA 12
    # builds pin cuDNN 9.28, which supports no GPU before Turing), and the CPU build
    assert any(h.endswith(" --driver 580.178.04") for h in e.value.hints) == (spec != "jax"), \
        e.value.hints
    assert any("variant=cpu" in h for h in e.value.hints)


def test_jax_on_a_gpu_before_turing_is_refused_for_its_cudnn_even_on_r580(m):
    """JAX's CUDA 12 rows pin cuDNN 9.28.0.42, which NVIDIA supports from compute
    capability 7.5 (libraries.yaml min_cc): a V100 or P100 has no GPU build to take."""
    for gpu in ("V100", "P100"):
        with pytest.raises(Unsatisfiable) as e:
            _resolve(m, "jax", "580.178.04", gpu)
        assert "no kernels for compute capability" in e.value.message
    assert "7.5" in _resolve(m, "jax", "580.178.04", "T4").compute_capabilities


def test_the_suggested_r580_driver_resolves_on_the_v100(m):
    st = _resolve(m, "torch", "580.178.04", "V100")
    assert "7.0" in st.compute_capabilities


def test_the_cpu_build_still_resolves_on_a_v100_with_r590(m):
    assert _resolve(m, "pytorch-cpu", "590.48.01", "V100").variant == "cpu"


def test_turing_is_not_refused_on_r620(m):
    assert gpu_knows(m, m.gpu("T4"), "620.70.06").ok
    assert not gpu_knows(m, m.gpu("V100"), "620.70.06").ok
    assert gpu_knows(m, m.gpu("V100"), "580.95.05").ok


def test_driver_diff_r580_to_r590_stops_every_cuda_stack_on_a_v100(m):
    d = driver_diff(m, "580.95.05", "590.48.01", m.gpu("V100"))
    assert "pytorch-cu126" in d["stop_working"] and "tensorflow-cu125" in d["stop_working"]
    assert d["start_working"] == []
    assert "past R580" in d["stacks"]["pytorch-cu126"]["new"]["why"]
    assert "pytorch-cu126" not in driver_diff(m, "580.95.05", "590.48.01",
                                              m.gpu("T4"))["stop_working"]


def test_doctor_names_the_last_branch_as_a_problem(m):
    q = "0, Tesla V100-SXM2-32GB, GPU-1, 7.0, 32768, 0, 0, 590.48.01\n"
    r = dr.examine(m, host.parse_query(q), DOCKER_OK, today="2026-12-01")
    assert not r["ok"]
    assert any("past R580, the last driver branch that supports the V100" in p
               for p in r["problems"])
    assert r["runs"] == [n for n in r["runs"] if n.endswith("-cpu")]


def test_certification_preflight_refuses_a_v100_on_r590(m):
    q = "0, Tesla V100-SXM2-32GB, GPU-1, 7.0, 32768, 0, 0, 590.48.01\n"
    target = SimpleNamespace(stack=SimpleNamespace(stack="pytorch-cu126", cuda="12.6"),
                             env={})
    with pytest.raises(CheckFailed, match="past R580, the last driver branch that supports "
                                          "the V100"):
        preflight(target, host.parse_query(q), [0], m)


def _mini(tmp_path, extra):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(MINI, folder / "mini.yaml")
    (folder / "archs.yaml").write_text(extra)
    return folder


def test_a_product_row_overrides_its_architecture_and_an_inferred_one_says_so(tmp_path):
    text = MINI.read_text().replace(
        "arch: hopper, class: datacenter", 'arch: hopper, last_branch: "535", '
        "last_branch_source: https://example.test/h100, last_branch_why: from its sibling, "
        "class: datacenter", 1)
    assert "last_branch" in text
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "mini.yaml").write_text(text)
    (folder / "archs.yaml").write_text(
        "gpu_architectures:\n  - {arch: hopper, min_driver: \"520.61.05\", last_branch: \"550\","
        " last_branch_source: https://example.test/hopper, source: https://example.test/h}\n")
    mm = load_matrix(folder)
    assert mm.gpu_last_branch(mm.gpu("H100")) == ("535", "https://example.test/h100",
                                                  "from its sibling")
    v = gpu_knows(mm, mm.gpu("H100"), "545.23.06")
    assert not v.ok and v.why.endswith("(inferred: from its sibling)")


def test_a_last_branch_without_its_source_is_refused_with_its_line(tmp_path):
    folder = _mini(tmp_path, "gpu_architectures:\n  - arch: hopper\n    min_driver: \"520.61.05\"\n"
                             "    last_branch: \"580\"\n    source: https://example.test/h\n")
    with pytest.raises(MatrixError) as e:
        load_matrix(folder)
    assert "last_branch_source" in str(e.value) and "archs.yaml" in str(e.value)


def test_a_first_driver_past_the_last_branch_is_refused(tmp_path):
    folder = _mini(tmp_path, "gpu_architectures:\n  - arch: hopper\n    min_driver: \"590.44.01\"\n"
                             "    last_branch: \"580\"\n    last_branch_source: https://e.test/x\n"
                             "    source: https://example.test/h\n")
    with pytest.raises(MatrixError, match="past its last branch R580"):
        load_matrix(folder)
