"""The test suite touches only what it made: a user who runs `make demo` then `make test`
keeps the demo's image (a reproducible build gives the tests' image the very same ID) and
the daemon's build cache. Checked on the helpers, with a fake `docker`, and on the sources."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import services

TESTS = Path(__file__).resolve().parent
ID = "sha256:" + "a" * 64
USERS = "envgen/pytorch-cu121:2.5.1-py3.11-debian-bookworm"


class FakeDocker:
    """`docker image inspect` and `docker rmi NAME|ID` over one image's names."""

    def __init__(self, names: list[str]):
        self.names, self.gone, self.calls = list(names), False, []

    def __call__(self, *args, host=None):
        self.calls.append(args)
        if args[:2] == ("image", "inspect"):
            if self.gone:
                return _done(1, "")
            return _done(0, json.dumps([{
                "Id": ID, "RepoTags": [n for n in self.names if "@" not in n],
                "RepoDigests": [n for n in self.names if "@" in n]}]))
        if args[0] == "rmi":
            assert "-f" not in args and "--force" not in args
            if args[1] == ID:
                assert not self.names, "an image is removed by ID only once it has no name"
                self.gone = True
            else:
                self.names.remove(args[1])
            return _done(0, "")
        raise AssertionError(args)


def _done(code, out):
    return type("R", (), {"returncode": code, "stdout": out, "stderr": ""})()


def test_the_users_image_with_the_same_id_keeps_its_tag_and_only_the_tests_names_go(
        monkeypatch):
    registry = "127.0.0.1:5000/team/pytorch-cu121"
    fake = FakeDocker([USERS, services.TAG, f"{registry}:2.5.1", f"{registry}@sha256:"
                       + "d" * 64])
    monkeypatch.setattr(services, "docker", fake)
    services.remove_own_image(ID, frozenset({USERS, ID}))
    assert fake.names == [USERS] and not fake.gone
    assert ("rmi", ID) not in fake.calls


def test_an_image_only_the_tests_named_goes_with_its_last_name(monkeypatch):
    fake = FakeDocker([services.TAG])
    monkeypatch.setattr(services, "docker", fake)
    services.remove_own_image(services.TAG, frozenset({USERS}))
    assert fake.names == [] and fake.gone


def test_a_test_tag_left_by_an_earlier_run_goes_too(monkeypatch):
    fake = FakeDocker([USERS, services.TAG])
    monkeypatch.setattr(services, "docker", fake)
    services.remove_own_image(ID, frozenset({USERS, services.TAG, ID}))
    assert fake.names == [USERS]


def test_only_a_daemon_the_tests_started_has_its_build_cache_pruned(monkeypatch):
    calls = []
    monkeypatch.setattr(services, "docker", lambda *a, host=None: calls.append((a, host)))
    with pytest.raises(ValueError):
        services.free_build_cache(None)
    services.free_build_cache("unix:///tmp/envgen-d2-x/docker.sock")
    assert calls == [(("builder", "prune", "--all", "--force"),
                      "unix:///tmp/envgen-d2-x/docker.sock")]


def test_no_test_forces_an_image_out_by_id_or_prunes_the_users_daemon():
    bad = []
    for path in sorted(set(TESTS.glob("*.py")) - {Path(__file__)}):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.name}:{n}: {line.strip()}"
            if re.search(r'"rmi",\s*"-f"', line) and "host=" not in line:
                bad.append(where)                    # -f removes every tag of an ID
            if "builder" in line and "prune" in line and path.name != "services.py":
                bad.append(where)
            if re.search(r"free_build_cache\(\s*\)", line):
                bad.append(where)                    # the first daemon's cache is the user's
    assert bad == []
