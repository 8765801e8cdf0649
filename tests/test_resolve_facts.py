"""What users hit every day, against the BUNDLED matrix; then the resolver's preference order
and envgen.compat on tests/fixtures/mini.yaml (logic, independent of the product's facts)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from envgen.cli import main
from envgen.core.errors import Unsatisfiable
from envgen.core.model import V, Variant
from envgen.matrix import load_matrix
from envgen.resolve.compat import FORWARD, MINOR, NATIVE, driver_runs, kernels_for
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

BUNDLED = load_matrix()
MINI = load_matrix(Path(__file__).parent / "fixtures" / "mini.yaml")


def res(spec: str, m=BUNDLED, **host):
    return resolve(m, parse_spec(spec, m), host_from_flags(m, **host))


def cli(capsys, *argv) -> tuple[int, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out + err


# ---- the bundled matrix: facts users rely on ------------------------------------------------

def test_driver_520_cannot_run_cu121_and_gets_cu118_from_the_index():
    st = res("torch==2.3.1", driver="520.61.05")
    assert st.version == "2.3.1" and st.variant == "cu118" and st.cuda == "11.8"
    assert st.wheel_source != "pypi"
    assert st.index_url == "https://download.pytorch.org/whl/cu118"
    assert any("download.pytorch.org/whl/cu118" in r for r in st.reasons)
    assert dict(st.packages)["torch"] == "2.3.1+cu118"


def test_torch_2_3_1_without_a_driver_is_pypis_cu121_wheel():
    st = res("torch==2.3.1")
    assert st.variant == "cu121" and st.index_url is None


def test_pytorch_cu121_is_torch_2_4_1_from_pypi_with_its_pinned_libraries():
    st = res("pytorch-cu121")
    assert st.version == "2.4.1" and st.wheel_source == "pypi" and st.index_url is None
    assert st.cudnn == "9.1.0.70" and st.nccl == "2.20.5"
    assert st.driver_minimum == "525.60.13" and st.driver_toolkit == "530.30.02"
    assert st.require_cuda.startswith("cuda>=12.0")
    pins = dict(st.packages)
    assert pins["nvidia-cudnn-cu12"] == "9.1.0.70" and pins["nvidia-nccl-cu12"] == "2.20.5"


def test_rtx_5090_cannot_use_torch_2_6(capsys):
    rc, out = cli(capsys, "resolve", "torch==2.6.0", "--gpu", "RTX 5090")
    assert rc == 2 and "12.0" in out and "Traceback" not in out


def test_rtx_5090_gets_torch_2_7_or_newer_built_with_cuda_12_8_or_newer():
    st = res("torch", gpu="RTX 5090")
    assert V(st.version) >= V("2.7")
    assert V(st.cuda) >= V("12.8")
    assert "12.0" in st.compute_capabilities or (st.ptx and V(st.ptx) <= V("12.0"))


def test_cuda_13_on_r535_h100_runs_through_forward_compat_on_a_cuda_compat_base():
    st = res("pytorch-cu130", driver="535.274.02", gpu="H100")
    assert st.forward_compat is True
    assert st.base.cuda_compat and V(st.base.cuda) >= V("13.0")
    assert "brand=tesla,driver>=535,driver<536" in st.require_cuda
    assert any("forward compatibility" in r for r in st.reasons)


def test_cuda_13_on_r535_geforce_is_refused_with_hints(capsys):
    rc, out = cli(capsys, "resolve", "pytorch-cu130", "--driver", "535.274.02",
                  "--gpu", "RTX 4090")
    assert rc == 2 and "geforce" in out.lower() and "try:" in out


def test_cuda_13_on_r535_without_naming_the_gpu_is_refused():
    with pytest.raises(Unsatisfiable):
        res("pytorch-cu130", driver="535.274.02")


def test_torch_2_11_pypi_wheel_needs_a_580_driver():
    st = res("torch==2.11.0", sources="pypi")
    assert V(st.driver_minimum) >= V("580")
    assert st.cuda.startswith("13.")


def test_torch_2_11_pypi_on_a_570_driver_is_refused(capsys):
    rc, out = cli(capsys, "resolve", "torch==2.11.0", "--driver", "570.195.03",
                  "--sources", "pypi")
    assert rc == 2 and "Traceback" not in out


def test_torch_2_11_on_a_570_driver_falls_back_to_a_cuda_12_build_from_the_index():
    st = res("torch==2.11.0", driver="570.195.03")
    assert st.cuda.startswith("12.") and st.index_url


STACKS = BUNDLED.stack_names()


@pytest.mark.parametrize("name", STACKS)
def test_every_listed_stack_resolves_and_pins_its_cudnn_and_nccl(name):
    st = res(name)
    assert st.stack == name
    if st.builds_on:   # its CUDA libraries are those of the stack it is built over
        st = st.base_stack()
    rel = next(r for r in BUNDLED.releases if r.version == st.version
               and r.framework == st.framework)
    v = rel.variant(st.variant)
    wheel_pins = dict(v.packages)
    if not wheel_pins:
        return
    for lib, version in (("cudnn", st.cudnn), ("nccl", st.nccl)):
        pins = {n: p for n, p in wheel_pins.items() if n.startswith(f"nvidia-{lib}")}
        if version and pins:
            assert version in set(pins.values()), f"{name}: {lib} {version} vs {pins}"


RELEASES = [(r.framework, r.version) for r in BUNDLED.releases if r.pypi_variant]


@pytest.mark.parametrize("framework,version", RELEASES,
                         ids=[f"{f}-{v}" for f, v in RELEASES])
def test_pypi_variant_cuda_major_agrees_with_its_nvidia_package_names(framework, version):
    rel = next(r for r in BUNDLED.releases if (r.framework, r.version) == (framework, version))
    v = rel.variant(rel.pypi_variant)
    if v.cuda is None:
        return
    major = v.cuda.split(".")[0]
    for name, _ in v.packages:
        m = re.match(r"^nvidia-.*-cu(\d+)$", name)
        if m:
            assert m.group(1) == major, f"{version} {v.name} (CUDA {v.cuda}) pins {name}"


# ---- resolver preference order (mini matrix) ----------------------------------------------

def test_pypi_is_preferred_over_an_index_with_a_newer_cuda():
    st = res("torch==2.7.1", m=MINI)
    assert (st.variant, st.wheel_source) == ("cu126", "pypi")


def test_pypi_wins_over_a_newer_release_only_on_an_index():
    """On R570 the newest release's PyPI wheel (cu130) cannot run; an older PyPI wheel is
    preferred to the newest release's index-only cu128 build."""
    st = res("torch", m=MINI, driver="570.124.06")
    assert (st.version, st.variant, st.wheel_source) == ("2.7.1", "cu126", "pypi")
    st = res("torch", m=MINI, driver="570.124.06", sources="index")
    assert (st.version, st.variant) == ("2.11.0", "cu128")


def test_newest_release_first():
    assert res("torch", m=MINI).version == "2.11.0"
    assert res("torch<2.11", m=MINI).version == "2.7.1"


def test_native_is_preferred_over_minor_version_compatibility():
    st = res("torch==2.7.1", m=MINI, driver="560.35.05", sources="index")
    assert st.variant == "cu121"  # native, although cu128 (minor-version) is a newer CUDA
    assert any("at least 530.30.02" in r for r in st.reasons)


def test_sources_pypi_refuses_index_only_builds():
    with pytest.raises(Unsatisfiable):
        res("pytorch-cu128", m=MINI, sources="pypi")


def test_a_pypi_mirror_serves_pypi_builds_with_its_url():
    st = res("torch==2.7.1", m=MINI, sources="https://mirror.example.test/simple")
    assert st.index_url == "https://mirror.example.test/simple" and st.variant == "cu126"


# ---- envgen.compat (mini matrix) ----------------------------------------------------------

def _cuda(version):
    return MINI.cuda_release(version)


def test_driver_525_60_13_runs_cuda_12_8_only_through_minor_version_compatibility():
    v = driver_runs(MINI, _cuda("12.8.1"), "525.60.13")
    assert v.ok and v.how == MINOR
    assert driver_runs(MINI, _cuda("12.8.1"), "570.124.06").how == NATIVE
    assert not driver_runs(MINI, _cuda("12.8.1"), "520.61.05").ok


def test_ptx_only_build_is_refused_under_minor_version_compatibility():
    ptx_only = Variant(name="cu128", cuda="12.8.1", cudnn=None, nccl=None,
                       compute_capabilities=("8.0", "9.0"), ptx="9.0", sources=("pypi",))
    refused = kernels_for(ptx_only, "12.0", MINOR)
    assert not refused.ok and "PTX" in refused.why
    jit = kernels_for(ptx_only, "12.0", NATIVE)
    assert jit.ok and jit.how == "ptx"


def test_same_major_sass_runs_and_other_majors_do_not():
    v = Variant(name="cu121", cuda="12.1.1", cudnn=None, nccl=None,
                compute_capabilities=("8.0",), ptx=None, sources=("pypi",))
    assert kernels_for(v, "8.6").ok
    assert not kernels_for(v, "9.0").ok


def test_forward_compat_needs_a_datacenter_gpu_on_a_listed_branch():
    cuda13 = _cuda("13.0.2")
    h100, rtx = MINI.gpu("H100"), MINI.gpu("RTX 4090")
    assert driver_runs(MINI, cuda13, "535.274.02", h100).how == FORWARD
    assert not driver_runs(MINI, cuda13, "535.274.02", rtx).ok
    assert not driver_runs(MINI, cuda13, "535.274.02").ok  # GPU unknown
    assert not driver_runs(MINI, cuda13, "525.147.05", h100).ok  # branch not listed


def test_minor_version_compat_build_on_rtx_5090_uses_sass_not_ptx():
    st = res("torch==2.7.1", m=MINI, driver="525.60.13", gpu="RTX 5090")
    assert st.variant == "cu128"


def _framework_base_matrix(tmp_path, provides: str):
    folder = tmp_path / "matrix"
    folder.mkdir(parents=True)
    for f in (Path(__file__).parent.parent / "matrices").glob("*.yaml"):
        (folder / f.name).write_text(f.read_text())
    (folder / "bases-vendor.yaml").write_text(
        "bases:\n  - name: vendor\n    kind: framework\n    image: vendor/jax:1\n"
        "    python: \"3.12\"\n    os: ubuntu24.04\n"
        f"    provides: {{{provides}}}\n    source: https://example.com/vendor-image\n")
    return load_matrix(folder)


def test_a_base_that_provides_the_framework_claims_its_own_cuda_libraries(tmp_path):
    """The vendor chose the image's CUDA libraries: a stack on it expects the versions the
    base lists (cudart 13.0.96 is CUDA 13.0.2), not the variant's pins (jax[cuda13] at the
    newest: cuDNN 9.28.1.4, CUDA 13.4), and nothing where the base lists nothing."""
    jax = ('jax: "0.11.2", jaxlib: "0.11.2", jax-cuda13-plugin: "0.11.2", '
           'jax-cuda13-pjrt: "0.11.2"')
    m = _framework_base_matrix(tmp_path, jax + ', nvidia-cuda-runtime: "13.0.96", '
                               'nvidia-cudnn-cu13: "9.19.0.56", nvidia-nccl-cu13: "2.28.9"')
    st = res("jax==0.11.2,variant=cuda13,base=vendor", m)
    assert (st.cuda_release, st.cuda, st.cudnn, st.nccl) == ("13.0.2", "13.0", "9.19.0.56",
                                                              "2.28.9")
    plain = res("jax==0.11.2,variant=cuda13", BUNDLED)
    assert plain.cudnn == "9.28.1.4" and plain.cuda == "13.4"   # the pins, off the vendor base
    bare = res("jax==0.11.2,variant=cuda13,base=vendor", _framework_base_matrix(
        tmp_path / "bare", jax))
    assert bare.cudnn is None and bare.nccl is None and bare.cuda == "13.4"
