"""The torch variants PyTorch's release branches built, where download.pytorch.org cannot be
read: 2.14's CUDA 12.6 and 13.2 builds (pytorch#194367) and the CUDA 12.9 builds of 2.11,
2.12.1 and 2.13.0 (pytorch#185269, #188443), each inferred and citing the pull requests."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from envgen.matrix import load_matrix
from envgen.refresh.pytorch import build_release, load_index_variants
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

PR_2_14 = "https://github.com/pytorch/pytorch/pull/194367"


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def variants(m, version):
    rel = next(r for r in m.releases_of("pytorch") if r.version == version)
    return {v.name: v for v in rel.variants}


@pytest.mark.parametrize("version", ["2.14.0", "2.14.1"])
def test_torch_2_14_has_the_cuda_12_6_and_13_2_builds_release_2_14_ships(m, version):
    vs = variants(m, version)
    assert set(vs) == {"cu126", "cu130", "cu132", "cpu"}
    assert (vs["cu126"].cuda, vs["cu126"].cudnn, vs["cu126"].nccl) == (
        "12.6.3", "9.10.2.21", "2.29.3")
    assert (vs["cu132"].cuda, vs["cu132"].cudnn, vs["cu132"].nccl) == (
        "13.2.1", "9.24.0.43", "2.30.7")
    for name in ("cu126", "cu132"):
        assert PR_2_14 in vs[name].inferred_why
        assert vs[name].sources == (f"pytorch-{name}",)


@pytest.mark.parametrize("version", ["2.11.0", "2.12.1", "2.13.0"])
def test_the_cu129_builds_cite_pytorchs_issue_and_pull_request_not_a_recalled_file(
        m, version):
    cu129 = variants(m, version)["cu129"]
    assert "https://github.com/pytorch/pytorch/issues/185269" in cu129.inferred_why
    assert "https://github.com/pytorch/pytorch/pull/188443" in cu129.inferred_why
    assert "recalled" not in cu129.inferred_why


def test_an_older_driver_gets_torch_2_14_from_its_cuda_12_6_build(m):
    st = resolve(m, parse_spec("torch==2.14.0", m), host_from_flags(m, driver="560.35.03"))
    assert (st.variant, st.cuda_release) == ("cu126", "12.6.3")
    assert any(PR_2_14 in r for r in st.reasons)


def test_a_variants_own_why_replaces_the_recalled_text_of_its_release():
    table = load_index_variants()
    warnings = []
    run = SimpleNamespace(warn=warnings.append, corrections=set())
    rel = {"version": "2.14.0", "cuda": "13.0.3", "cudnn": "9.24.0.43", "nccl": "2.30.7",
           "packages": {"cuda-toolkit": "13.0.3"}, "released": "2026-09",
           "pythons": ["3.11"], "requires_python": ">=3.10", "license": None,
           "wheel": "torch-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"}
    comp = {"torchvision": {}, "torchaudio": {}}
    row = build_release(run, rel, comp, table, {})
    by_name = {v["name"]: v for v in row["variants"]}
    assert by_name["cu126"]["why"].startswith("release/2.14 CUDA 12.6 build")
    assert "recalled from " + PR_2_14 not in by_name["cu132"]["why"]
    # a release without a variant why still says where its facts were recalled from
    rel["version"] = "2.12.0"
    by_name = {v["name"]: v for v in build_release(run, rel, comp, table, {})["variants"]}
    assert by_name["cu126"]["why"].startswith("index variant facts recalled from")
