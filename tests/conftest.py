"""Session fixtures that start real services (tests/services.py); each skips where its
binary is missing or no Docker daemon answers, so the unit run needs neither."""
from __future__ import annotations

import json

import pytest

import services
from services import TAG, docker, envgen


@pytest.fixture(scope="session")
def home(tmp_path_factory):
    """ENVGEN_HOME of the Docker tests: certificates, logs, contexts, cached closures."""
    return str(tmp_path_factory.mktemp("envgen-home"))


@pytest.fixture(scope="session")
def built(home):
    """`envgen build pytorch-cu121 --certify` for real, once per run; removed at the end."""
    if not services.first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    r = envgen("build", "pytorch-cu121", "--certify", "--tag", TAG, "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    # every name the tests gave it (registry tags from pushes included), and so the image
    docker("rmi", "-f", out["image_id"])


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """A real registry on 127.0.0.1: `.host` is `127.0.0.1:PORT`."""
    with services.registry(tmp_path_factory.mktemp("registry")) as r:
        yield r


@pytest.fixture(scope="session")
def readonly_registry(tmp_path_factory):
    """A real registry in read-only maintenance mode: every push is refused."""
    with services.registry(tmp_path_factory.mktemp("registry-ro"), readonly=True) as r:
        yield r


@pytest.fixture(scope="session")
def second_daemon():
    """A teammate's Docker daemon: `.host` is `unix:///…`, `.client()` an SDK client."""
    with services.second_daemon() as d:
        yield d
