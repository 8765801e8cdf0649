"""A TensorFlow stack for real: `envgen build tensorflow-cpu --certify --gpus none` installs the
hash-pinned closure of tensorflow-cpu with Keras on the Debian bookworm base and trains a Keras
Conv2D model in the container, on the CPU (docs/matrix-builds.md has its size and time)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from services import docker, envgen, first_daemon_answers, remove_own_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]   # 294 s here: docs/matrix-builds.md
TAG = "envgen-test/tensorflow-cpu:ci"


@pytest.fixture(scope="module")
def tf_built(home, images_before):
    if not first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    r = envgen("build", "tensorflow-cpu", "--certify", "--gpus", "none", "--tag", TAG, "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    remove_own_image(out["image_id"], images_before)


def test_it_certifies_at_level_cpu_with_the_keras_checks(tf_built):
    cert = tf_built["certificate"]
    assert cert["level"] == "cpu" and cert["passed"], cert
    full = json.loads(Path(cert["path"]).read_text())
    report = full["report"]
    assert report["payload"] == "tensorflow_smoke"
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("train", "amp", "checkpoint", "versions"):
        assert checks[name]["passed"] and not checks[name].get("skipped"), name
    assert report["versions"]["tensorflow"] == full["stack"]["framework"]["version"]
    assert report["versions"]["keras"] == full["stack"]["packages"]["keras"]


def test_the_cpu_variant_installs_tensorflow_cpu_and_no_tensorflow(tf_built):
    r = docker("run", "--rm", "--network", "none", TAG, "python", "-c",
               "import importlib.metadata as m, json, sys\n"
               "def v(d):\n"
               "    try:\n"
               "        return m.version(d)\n"
               "    except m.PackageNotFoundError:\n"
               "        return None\n"
               "json.dump({d: v(d) for d in sys.argv[1:]}, sys.stdout)",
               "tensorflow-cpu", "tensorflow", "keras")
    installed = json.loads(r.stdout)
    stack = json.loads(envgen("resolve", "tensorflow-cpu", "--json").stdout)
    assert installed["tensorflow-cpu"] == stack["packages"]["tensorflow-cpu"]
    assert installed["tensorflow"] is None and installed["keras"] == stack["packages"]["keras"]
