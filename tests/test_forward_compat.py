"""One forward-compatibility rule for every CUDA release: branch B runs CUDA X through
cuda-compat when NVIDIA's nvidia/cuda image for X lists brand=tesla,driver>=B,driver<B+1, or
NVIDIA's current table marks B for X; on data-center GPUs only (NVIDIA's page adds select
NGC-Server-Ready RTX SKUs and names none, so no workstation card gets it). A branch
past its end of life (R470) is named in the reasons, not refused: the table dropped R470
when it ended, while the 12.4.1, 12.6.3 and 12.8.1 images still admit it."""
from __future__ import annotations

import pytest

from envgen.core.errors import Unsatisfiable
from envgen.matrix import load_matrix
from envgen.resolve import require_cuda
from envgen.resolve.compat import FORWARD, driver_runs
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

R470 = "470.256.02"


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def _resolve(m, spec, driver, gpu=None):
    return resolve(m, parse_spec(spec, m), host_from_flags(m, driver=driver, gpu=gpu))


@pytest.mark.parametrize("cuda", ["12.1", "12.4", "12.5", "12.6", "12.8"])
def test_r470_is_forward_compatible_with_every_cuda_12_release_nvidias_images_admit_it(m, cuda):
    fc = next(f for f in m.forward_compat if f.cuda == cuda)
    assert "470" in fc.branches and "geforce" not in fc.gpu_classes


@pytest.mark.parametrize("spec,cuda", [
    ("torch==2.4.1", "12.1"), ("torch==2.4.1,variant=cu124", "12.4"),
    ("pytorch-cu126", "12.6"), ("pytorch-cu128", "12.8")])
def test_r470_runs_cuda_12_on_an_a100_through_forward_compatibility(m, spec, cuda):
    st = _resolve(m, spec, R470, "A100")
    assert st.cuda == cuda and st.forward_compat and st.base.cuda_compat
    assert "brand=tesla,driver>=470,driver<471" in st.require_cuda
    fwd = next(r for r in st.reasons if "through forward compatibility" in r)
    assert "R470 is past its end of life (2024-07)" in fwd


def test_the_stacks_nvidia_require_cuda_admits_r470_on_a_tesla_and_not_on_a_geforce(m):
    req = _resolve(m, "torch==2.4.1,variant=cu124", R470, "A100").require_cuda
    env = {"NVIDIA_REQUIRE_CUDA": req}
    assert require_cuda.evaluate(env, require_cuda.Host(R470, "11.4", brand="tesla")).ok
    assert not require_cuda.evaluate(env, require_cuda.Host(R470, "11.4", brand="geforce")).ok


def test_r470_forward_compatibility_is_refused_on_a_geforce_gpu(m):
    with pytest.raises(Unsatisfiable, match="not available on geforce GPUs like the RTX 3090"):
        _resolve(m, "torch==2.4.1,variant=cu124", R470, "RTX 3090")


def test_every_branch_past_its_end_of_life_is_named_and_still_allowed(m):
    cuda = m.cuda_release("13.0.2")
    v = driver_runs(m, cuda, "535.274.02", m.gpu("H100"))
    assert v.ok and v.how == FORWARD
    assert v.why.endswith("R535 is past its end of life (2026-06): it gets no more fixes")


def test_r470_runs_no_cuda_13_release(m):
    with pytest.raises(Unsatisfiable, match="R470 is not a forward-compatible branch for "
                                            "CUDA 13.0"):
        _resolve(m, "torch==2.10.0,variant=cu130", R470, "A100")


@pytest.mark.parametrize("gpu", ["T400", "Quadro K620", "RTX A6000"])
def test_forward_compatibility_is_refused_on_a_workstation_card(m, gpu):
    """NVIDIA: forward compatibility only on data-center GPUs or select NGC Server Ready
    SKUs of RTX cards, which it does not list; elsewhere the driver answers error 804. A
    T400 on R535 does not run CUDA 13.0, whatever the images' brand lists admit."""
    assert m.gpu(gpu).gpu_class == "workstation"
    v = driver_runs(m, m.cuda_release("13.0.2"), "535.274.02", m.gpu(gpu))
    assert not v.ok and "not available on workstation GPUs" in v.why, v
    assert driver_runs(m, m.cuda_release("13.0.2"), "535.274.02", m.gpu("A100")).ok
