"""Session fixtures that start real services (tests/services.py); each skips where its
binary is missing or no Docker daemon answers, so the unit run needs neither."""
from __future__ import annotations

import pytest

import services


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
