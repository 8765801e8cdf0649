"""A cuDNN release's oldest supported compute capability (libraries.yaml min_cc, from
NVIDIA's support matrix): a framework row pinning it claims no GPU below it, the loader
refuses a row that does, and the JAX reader leaves those out with the reason."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from envgen.core.errors import MatrixError
from envgen.matrix import load_matrix
from envgen.matrix.load import bundled_path
from envgen.refresh.jax import _cudnn_floor


def test_cudnn_from_9_11_supports_turing_and_newer_and_jax_claims_no_older_gpu():
    m = load_matrix()
    assert m.library("cudnn", "9.10.2.21").min_cc is None   # still lists Maxwell to Volta
    assert m.library("cudnn", "9.11.0.98").min_cc == "7.5"
    assert m.library("cudnn", "9.28.0.42").min_cc == "7.5"
    rows = [v for r in m.releases if r.framework == "jax" for v in r.variants
            if v.cudnn == "9.28.0.42"]
    assert len(rows) >= 30 and all(min(map(float, v.compute_capabilities)) >= 7.5
                                   for v in rows)


def test_a_row_claiming_a_gpu_its_cudnn_does_not_support_is_refused(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(bundled_path(), folder, ignore=shutil.ignore_patterns("closures"))
    jax = folder / "jax.yaml"
    jax.write_text(jax.read_text().replace('compute_capabilities: ["7.5", "8.0"',
                                           'compute_capabilities: ["7.0", "7.5", "8.0"', 1))
    with pytest.raises(MatrixError) as e:
        load_matrix(folder)
    assert "cudnn 9.28.0.42 supports compute capability 7.5 and newer, not 7.0" in str(e.value)
    assert e.value.file.endswith("jax.yaml") and e.value.line


def test_the_jax_reader_reads_the_floor_from_libraries_yaml(tmp_path):
    (tmp_path / "libraries.yaml").write_text(
        "libraries:\n  - name: cudnn\n    version: \"9.28.0.42\"\n    min_cc: \"7.5\"\n"
        "  - name: cudnn\n    version: \"9.10.2.21\"\n")
    run = SimpleNamespace(folder=Path(tmp_path))
    assert _cudnn_floor(run, "9.28.0.42") == "7.5"
    assert _cudnn_floor(run, "9.10.2.21") is None and _cudnn_floor(run, None) is None
