"""A JAX stack for real: `envgen build jax-cuda12 --certify --gpus none` builds a Debian
trixie base (Python 3.13: current JAX needs 3.12 or newer) from its snapshot, installs the
hash-pinned closure of jax[cuda12] with Flax and optax, and trains a Flax model with optax
under jax.jit in the container, on the CPU."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from services import docker, envgen, first_daemon_answers, remove_own_image

pytestmark = pytest.mark.docker
TAG = "envgen-test/jax-cuda12:ci"


@pytest.fixture(scope="module")
def jax_built(home, images_before):
    if not first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    r = envgen("build", "jax-cuda12", "--certify", "--gpus", "none", "--tag", TAG, "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    remove_own_image(out["image_id"], images_before)


def test_it_builds_on_trixie_and_certifies_at_level_cpu(jax_built):
    cert = jax_built["certificate"]
    assert cert["level"] == "cpu" and cert["passed"], cert
    full = json.loads(Path(cert["path"]).read_text())
    assert full["stack"]["base"]["name"] == "debian-trixie"
    assert full["stack"]["python"] == "3.13"
    report = full["report"]
    assert report["payload"] == "jax_smoke"
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["train"]["passed"] and checks["versions"]["passed"]
    assert report["versions"]["jax"] == full["stack"]["framework"]["version"]


def test_the_cuda_libraries_are_the_pinned_ones(jax_built):
    stack = json.loads(envgen("resolve", "jax-cuda12", "--json").stdout)
    r = docker("run", "--rm", "--network", "none", TAG, "python", "-c",
               "import importlib.metadata as m, json, sys; "
               "json.dump({d: m.version(d) for d in sys.argv[1:]}, sys.stdout)",
               *[n for n in stack["packages"] if n.startswith(("nvidia-", "jax"))])
    installed = json.loads(r.stdout)
    for name, version in stack["packages"].items():
        if name in installed:
            assert installed[name] == version, name
    assert installed["nvidia-cudnn-cu12"] == stack["cudnn"]
