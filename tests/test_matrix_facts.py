"""The bundled matrix's facts, each checked against the source that states it. A wrong fact
fails here with the sentence a reviewer needs: what the source says, and where."""
from __future__ import annotations

import pytest

from envgen.core.errors import Unsatisfiable
from envgen.matrix import load_matrix
from envgen.resolve.compat import gpu_knows
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

M = load_matrix()
FC = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
LIFECYCLE_620 = ("https://docs.nvidia.com/datacenter/tesla/drivers/620/"
                 "supported-drivers-and-cuda-toolkit-versions.html")


def _fc(cuda: str):
    return next((f for f in M.forward_compat if f.cuda == cuda), None)


# "Use the Right CUDA Forward Compatibility Package" (CUDA 13.4 edition): the C cells. A row
# may add the branches NVIDIA's nvidia/cuda image for that CUDA admits (R470 on 12.8: the
# table has no column for an end-of-life branch); it then says so, inferred.
@pytest.mark.parametrize("cuda,branches", [
    ("12.3", ("535",)), ("12.8", ("535",)), ("12.9", ("535", "570")),
    ("13.0", ("535", "570")), ("13.1", ("535", "570", "580")),
    ("13.2", ("535", "570", "580", "590")), ("13.3", ("535", "570", "580", "590", "595")),
    ("13.4", ("535", "570", "580", "590", "595", "610"))])
def test_forward_compat_rows_are_nvidias_table(cuda, branches):
    row = _fc(cuda)
    assert row is not None and set(branches) <= set(row.branches), (
        f"{FC} lists cuda-compat-{cuda.replace('.', '-')} as compatible with R"
        f"{', R'.join(branches)}; the matrix says {row.branches if row else 'nothing'}")
    if row.branches == branches:
        assert row.source == FC and not row.inferred
    else:
        assert row.inferred and "image" in row.why


def test_no_forward_compat_row_the_table_does_not_give():
    assert _fc("12.2") is None, "the table gives cuda-compat-12-2 no compatible branch"
    assert _fc("13.5") is None, "no edition of the table found lists cuda-compat-13-5"
    assert all("550" not in f.branches for f in M.forward_compat if not f.inferred), (
        "the table has no 550 column: R550 is end of life")


def test_rows_before_the_table_say_they_are_inferred():
    for cuda in ("11.2", "11.8", "12.0", "12.1"):
        assert _fc(cuda).inferred and "image" in _fc(cuda).why


def test_r620_is_a_long_term_branch_until_2029_09():
    r620 = next(d for d in M.drivers if d.branch == "620")
    assert r620.lts and r620.eol == "2029-09" and r620.source == LIFECYCLE_620, (
        f"{LIFECYCLE_620}: R620 is a Long Term Support Branch, end of life September 2029")
    assert r620.first == "620.70.06"   # redistrib_620.70.06.json, released 2026-11-04


@pytest.mark.parametrize("name,cc,cls,brand", [
    ("B300", "10.3", "datacenter", "nvidia"),     # developer.nvidia.com/cuda-gpus
    ("GB10", "12.1", "datacenter", "nvidia"),
    ("Jetson Thor", "11.0", "jetson", "unknown"),  # sm_101 renamed sm_110 from CUDA 13.0
    ("RTX PRO 6000 Blackwell Server Edition", "12.0", "datacenter", "nvidia"),
    ("RTX PRO 6000 Blackwell Workstation Edition", "12.0", "workstation", "nvidiartx")])
def test_current_products_are_in_the_matrix(name, cc, cls, brand):
    g = M.gpu(name)
    assert g is not None and (g.cc, g.gpu_class, g.brand) == (cc, cls, brand)


def test_nvidia_smi_names_map_to_their_rows():
    assert M.gpu("NVIDIA B300 SXM6 AC").name == "B300"
    assert M.gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition").gpu_class == "datacenter"
    assert M.gpu("RTX PRO 6000 Blackwell").name == "RTX PRO 6000 Blackwell Workstation Edition"


# The driver's own product list (README "Compatible GPUs", NVIDIA/open-gpu-kernel-modules):
# Blackwell GPUs are supported by the open kernel modules only, so the first release that
# lists one is the first that knows it. For the Server Edition, NVIDIA's GPU Operator
# platform-support page states it: "Driver versions 575.57.08 or later is required".
@pytest.mark.parametrize("name,first", [("B300", "580.82.07"),
                                        ("RTX PRO 6000 Blackwell Server Edition", "575.57.08"),
                                        ("RTX PRO 6000 Blackwell Workstation Edition",
                                         "570.133.07")])
def test_blackwell_products_need_the_driver_that_first_lists_them(name, first):
    g = M.gpu(name)
    assert M.gpu_min_driver(g)[0] == first
    assert any(s in M.gpu_min_driver(g)[1] for s in ("open-gpu-kernel-modules", "gpu-operator"))


def test_r450_cannot_run_anything_on_an_h100():
    # The example: a 2020 branch on a 2022 GPU. The first driver listing an H100
    # (NVIDIA H100 PCIe) is 520.56.06.
    m = M
    with pytest.raises(Unsatisfiable, match="older than 520.56.06, the first driver that "
                                            "supports the H100"):
        resolve(m, parse_spec("torch==2.3.1", m),
                host_from_flags(m, driver="450.80.02", gpu="H100"))
    assert gpu_knows(m, m.gpu("H100"), "535.104.05").ok
