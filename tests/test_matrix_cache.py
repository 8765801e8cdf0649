"""The validated-matrix cache is never stale and never someone else's: a changed byte
validates again, and a cache others can write is not read."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envgen.core.errors import MatrixError
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


def test_the_key_covers_the_validating_rules_and_the_classes_pickled():
    names = {p.name for p in cache.code_files()}
    assert {"load.py", "schema.py", "cache.py", "model.py"} <= names
    assert all(p.is_file() for p in cache.code_files())


def test_a_few_matrices_used_in_turn_stay_cached(folder, tmp_path, monkeypatch):
    """Two checkouts (or a --matrix and the bundled one) used in turn do not evict each
    other; past KEEP the least recently used goes."""
    c = tmp_path / "home" / "cache"
    m = load_matrix(folder)
    for old in c.glob("matrix-*.pickle"):
        old.unlink()
    keys = [f"{i:064x}" for i in range(5)]
    for i, key in enumerate(keys):
        cache.put(key, m)
        os.utime(c / f"matrix-{key}.pickle", (1000 + i, 1000 + i))
    assert len(list(c.glob("matrix-*.pickle"))) == 5
    monkeypatch.setattr(cache, "KEEP", 3)
    assert cache.get(keys[2]) is not None   # used now: the newest
    cache.put("f" * 64, m)
    left = sorted(p.name[7:-7] for p in c.glob("matrix-*.pickle"))
    assert left == sorted([keys[2], keys[4], "f" * 64])
