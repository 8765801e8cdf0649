"""Writing envgen.lock leaves nothing beside it: writers take turns on a file under
ENVGEN_HOME/locks (named by the lock's real path), not on an `envgen.lock.lock` the user
would find next to the lock they commit. (Concurrent writers taking turns through it:
test_lock.py's test_concurrent_lock_writers_never_lose_or_corrupt_stacks.)"""
from __future__ import annotations

from test_lock import MINI, entry

from envgen.lock import write as lk
from envgen.matrix.load import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import resolve


def _stack():
    m = load_matrix(MINI)
    return resolve(m, parse_spec("pytorch-cu121", m))


def test_writing_a_lock_leaves_no_sidecar_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    repo = tmp_path / "repo"
    repo.mkdir()
    lk.write_lock(repo / "envgen.lock", {"a": entry(_stack())}, "sha")
    assert sorted(p.name for p in repo.iterdir()) == ["envgen.lock"]
    assert list((tmp_path / "home/locks").iterdir())   # the turn lives in ENVGEN_HOME


def test_one_lock_reached_by_two_paths_has_one_turn(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    (tmp_path / "repo").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "repo")
    assert lk.turn_for(tmp_path / "link/envgen.lock") == lk.turn_for(
        tmp_path / "repo/envgen.lock")
    assert lk.turn_for(tmp_path / "repo/envgen.lock") != lk.turn_for(tmp_path / "x.lock")
