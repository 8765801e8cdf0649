"""A GPU needs a driver that knows it, whatever CUDA the image carries: resolve, diff,
doctor and the certification preflight refuse an older driver, saying why. Logic on
tests/fixtures/mini.yaml plus an architecture table; the product's own facts are checked in
test_matrix_facts.py."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envgen.core.errors import Unsatisfiable
from envgen.matrix import load_matrix
from envgen.resolve.compat import gpu_knows
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

MINI = Path(__file__).parent / "fixtures" / "mini.yaml"
ARCHS = """
gpu_architectures:
  - {arch: hopper, min_driver: "525.60.13", source: https://example.test/hopper}
  - {arch: ada, min_driver: "525.60.13", source: https://example.test/ada,
     confidence: inferred, why: "the first branch whose notes list an Ada part"}
"""


@pytest.fixture
def matrix(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(MINI, folder / "mini.yaml")
    (folder / "archs.yaml").write_text(ARCHS)
    return load_matrix(folder)


def _resolve(m, spec, driver, gpu):
    return resolve(m, parse_spec(spec, m), host_from_flags(m, driver=driver, gpu=gpu))


def test_a_driver_older_than_the_gpu_cannot_run_it_even_through_forward_compat(matrix):
    # Without the architecture floor, R520 would run CUDA 12.1 on the H100 (mini's rows).
    with pytest.raises(Unsatisfiable, match="older than 525.60.13, the first driver that "
                                            "supports the H100"):
        _resolve(matrix, "torch==2.3.1", "520.61.05", "H100")


def test_a_driver_that_knows_the_gpu_resolves(matrix):
    st = _resolve(matrix, "torch==2.3.1", "535.104.05", "H100")
    assert st.version == "2.3.1"


def test_an_inferred_floor_says_so(matrix):
    v = gpu_knows(matrix, matrix.gpu("RTX 4090"), "520.61.05")
    assert not v.ok and "(inferred: no source states it)" in v.why


def test_a_gpu_without_a_known_floor_is_not_refused(matrix):
    assert gpu_knows(matrix, matrix.gpu("RTX 5090"), "450.80.02").ok


def test_a_product_row_overrides_its_architecture(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    text = MINI.read_text().replace(
        "arch: hopper, class: datacenter", 'arch: hopper, min_driver: "535.43.02", '
        "min_driver_source: https://example.test/h100, class: datacenter", 1)
    assert "535.43.02" in text
    (folder / "mini.yaml").write_text(text)
    (folder / "archs.yaml").write_text(ARCHS)
    m = load_matrix(folder)
    assert m.gpu_min_driver(m.gpu("H100")) == ("535.43.02", "https://example.test/h100", False)
    assert not gpu_knows(m, m.gpu("H100"), "525.147.05").ok


def test_driver_diff_names_the_gpu_floor(matrix):
    from envgen.diff import verdict
    st = _resolve(matrix, "torch==2.3.1", "535.104.05", "H100")
    v = verdict(matrix, st, "520.61.05", matrix.gpu("H100"))
    assert not v["runs"] and "first driver that supports the H100" in v["why"]
