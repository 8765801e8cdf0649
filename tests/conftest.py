"""Session fixtures that start real services (tests/services.py); each skips where its
binary is missing or no Docker daemon answers, so the unit run needs neither."""
from __future__ import annotations

import json

import pytest
import services
from services import SMALL_TAG, TAG, envgen

PROVENANCE = ("ENVGEN_SOURCE_URL", "ENVGEN_REVISION", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
              "GITHUB_SHA")


def pytest_report_header(config):
    """The free disk, first: the real builds need about 20 GB at their peak (a CUDA image, its
    build cache, a registry's copy and a teammate daemon's rebuild), and a full disk shows up
    late, as a failed pull."""
    import shutil
    lines = []
    for where in ("/var/lib/docker", "/tmp"):
        try:
            free = shutil.disk_usage(where).free / 1e9
        except OSError:
            continue
        lines.append(f"free disk under {where}: {free:.0f} GB"
                     + ("  (the real builds need about 20 GB)" if free < 25 else ""))
    return lines


@pytest.fixture(autouse=True)
def _no_ambient_provenance(monkeypatch):
    """Rendered labels name the team's repository when the environment says it (GitHub
    Actions does): tests that compare renders must not depend on where they run."""
    for name in PROVENANCE:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def home(tmp_path_factory):
    """ENVGEN_HOME of the Docker tests: certificates, logs, contexts, cached closures."""
    return str(tmp_path_factory.mktemp("envgen-home"))


@pytest.fixture(scope="session")
def images_before():
    """The names and IDs of images on the daemon before any test built one: the clean-up of
    each test that builds leaves these alone (services.remove_own_image)."""
    if not services.first_daemon_answers():
        return frozenset()
    return services.image_names()


@pytest.fixture(scope="session")
def built(home, images_before):
    """`envgen build pytorch-cu121 --certify` for real, once per run; at the end every name
    the tests gave it goes (registry tags from pushes included), and the image with them
    unless a name from before holds it (the user's `make demo` builds the same ID)."""
    if not services.first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    r = envgen("build", "pytorch-cu121", "--certify", "--tag", TAG, "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    services.remove_own_image(out["image_id"], images_before)


@pytest.fixture(scope="session")
def built_small(home, images_before):
    """`envgen build jax-cpu --certify` for real, once per run: the smallest stack (Debian
    trixie, a CPU jaxlib: 0.9 GB against pytorch-cu121's 5.5 GB). The Apptainer, Slurm and
    Kubernetes tests run it, and the lock, push, teammate-pull and cold-rebuild chain travels
    with it: the same code paths as a CUDA stack at a fraction of the bytes moved (make bench
    runs the chain on pytorch-cu121, bench/reproducible.py)."""
    with services.certified_build("jax-cpu", SMALL_TAG, home, images_before) as out:
        yield out


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
