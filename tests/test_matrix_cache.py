"""The validated-matrix cache is never stale and never someone else's: a changed byte
validates again, and a cache others can write is not read."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envgen.errors import MatrixError
from envgen.matrix import cache, load_matrix

MATRICES = Path(__file__).resolve().parents[1] / "matrices"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENVGEN_NO_CACHE", raising=False)
    d = tmp_path / "m"
    d.mkdir()
    for f in MATRICES.glob("*.yaml"):
        shutil.copy(f, d / f.name)
    return d


def test_a_valid_matrix_is_cached_and_a_changed_byte_validates_again(folder, tmp_path):
    first = load_matrix(folder)
    assert list((tmp_path / "home" / "cache").glob("matrix-*.pickle"))
    assert load_matrix(folder).sha256 == first.sha256
    drivers = folder / "drivers.yaml"
    drivers.write_text(drivers.read_text().replace('branch: "535"', 'branch: "5x5"', 1))
    with pytest.raises(MatrixError):
        load_matrix(folder)


def test_a_cache_others_can_write_is_not_read(folder, tmp_path, monkeypatch):
    load_matrix(folder)
    c = tmp_path / "home" / "cache"
    os.chmod(c, 0o777)
    calls = []
    monkeypatch.setattr(cache.pickle, "load", lambda f: calls.append(1))
    load_matrix(folder)
    assert calls == [], "a world-writable cache folder is ignored"
