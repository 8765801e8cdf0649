"""The products people own are GPUs in the matrix: every GeForce, RTX/Quadro workstation and
data-center product of NVIDIA's compute-capability tables (developer.nvidia.com/cuda-gpus and
cuda-legacy-gpus) for the architectures the matrix covers, found by the name nvidia-smi
prints (the driver's product list). Facts the stored tables do not show say they are
inferred."""
from __future__ import annotations

import pytest

from envgen.core.errors import Unsatisfiable
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

CUR, LEG = "https://developer.nvidia.com/cuda-gpus", "https://developer.nvidia.com/cuda-legacy-gpus"


@pytest.fixture(scope="module")
def m():
    return load_matrix()


@pytest.mark.parametrize("name,cc,arch,cls,source", [
    ("RTX 4080", "8.9", "ada", "geforce", CUR), ("RTX 4070", "8.9", "ada", "geforce", CUR),
    ("RTX 4070 Ti", "8.9", "ada", "geforce", CUR), ("RTX 4060", "8.9", "ada", "geforce", CUR),
    ("RTX 5070 Ti", "12.0", "blackwell", "geforce", CUR),
    ("RTX 5060", "12.0", "blackwell", "geforce", CUR),
    ("RTX A3000", "8.6", "ampere", "workstation", CUR),
    ("TITAN V", "7.0", "volta", "geforce", LEG),
    ("Quadro GV100", "7.0", "volta", "workstation", LEG),
    ("TITAN Xp", "6.1", "pascal", "geforce", LEG), ("GTX 1070", "6.1", "pascal", "geforce", LEG),
    ("Quadro P6000", "6.1", "pascal", "workstation", LEG),
    ("GTX 980 Ti", "5.2", "maxwell", "geforce", LEG), ("M60", "5.2", "maxwell", "datacenter", LEG),
    ("GTX 750 Ti", "5.0", "maxwell", "geforce", LEG),
    ("Jetson T5000", "11.0", "blackwell", "jetson", CUR),
    ("Jetson T4000", "11.0", "blackwell", "jetson", CUR)])
def test_products_on_nvidias_table_are_gpus_in_the_matrix(m, name, cc, arch, cls, source):
    g = m.gpu(name)
    assert g is not None, f"{name} is on {source}"
    assert (g.name, g.cc, g.arch, g.gpu_class, g.source) == (name, cc, arch, cls, source)


@pytest.mark.parametrize("smi,name", [
    ("NVIDIA GeForce RTX 4080", "RTX 4080"), ("NVIDIA GeForce RTX 5070 Ti", "RTX 5070 Ti"),
    ("NVIDIA RTX A3000 12GB Laptop GPU", "RTX A3000"),
    ("NVIDIA GeForce RTX 4050 Laptop GPU", "RTX 4050"), ("NVIDIA TITAN RTX", "TITAN RTX"),
    ("NVIDIA T1000 8GB", "T1000"), ("NVIDIA GeForce RTX 4080 SUPER", "RTX 4080 SUPER"),
    ("NVIDIA TITAN V", "TITAN V"), ("NVIDIA TITAN X (Pascal)", "TITAN X (Pascal)"),
    ("GeForce GTX TITAN X", "GTX TITAN X"), ("Tesla M40", "M40"),
    ("NVIDIA Thor", "Jetson T5000"), ("Jetson Thor", "Jetson T5000")])
def test_nvidia_smi_names_find_their_product(m, smi, name):
    assert m.gpu(smi).name == name


def test_every_name_and_alias_finds_one_product(m):
    for g in m.gpus:
        for n in (g.name, *g.aliases):
            found = m.gpu(n)
            assert found is g, f"{n!r} of {g.name} finds {found and found.name}"


@pytest.mark.parametrize("name,first", [("RTX 5070 Ti", "570.123.01"), ("RTX 5070", "570.123.07"),
                                        ("RTX 5060 Ti", "570.123.10"), ("RTX 5060", "570.158.01"),
                                        ("RTX 5050", "575.64.03")])
def test_blackwell_geforce_products_need_the_first_driver_that_lists_them(m, name, first):
    g = m.gpu(name)
    assert m.gpu_min_driver(g)[:2] == (first, "https://github.com/NVIDIA/open-gpu-kernel-modules"
                                              f"/blob/{first}/README.md")


def test_facts_the_stored_table_does_not_show_are_marked_inferred(m):
    for name in ("RTX 3080", "RTX 2080", "GTX 1660 Ti", "Quadro RTX 6000", "RTX 4080 SUPER"):
        g = m.gpu(name)
        assert g.inferred and g.why, name
    for name in ("RTX 4080", "RTX 4070", "RTX 5070 Ti"):
        assert not m.gpu(name).inferred, name


def test_an_rtx_4080_resolves_cu130(m):
    st = resolve(m, parse_spec("pytorch-cu130", m),
                 host_from_flags(m, driver="580.95.05", gpu="RTX 4080"))
    assert st.cuda == "13.0"


def test_a_titan_v_is_volta_and_stops_after_r580(m):
    with pytest.raises(Unsatisfiable, match="past R580, the last driver branch that supports "
                                            r"the TITAN V \(Volta\)"):
        resolve(m, parse_spec("torch", m),
                host_from_flags(m, driver="590.48.01", gpu="NVIDIA TITAN V"))
