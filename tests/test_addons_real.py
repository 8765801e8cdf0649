"""A stack built over PyTorch, for real: `envgen build accelerate-cu121 --certify` after
the session's pytorch-cu121 build reuses every PyTorch layer (same pins, same stamp) and
adds one layer of its own; Accelerate then trains in the container on the CPU."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from services import docker, envgen

pytestmark = pytest.mark.docker
ADDON_TAG = "envgen-test/accelerate-cu121:ci"


@pytest.fixture(scope="module")
def addon(built, home):
    r = envgen("build", "accelerate-cu121", "--certify", "--gpus", "none", "--tag", ADDON_TAG,
               "--json", env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    docker("rmi", "-f", out["image_id"])


def layers(ref: str) -> list[str]:
    return json.loads(docker("image", "inspect", ref).stdout)[0]["RootFS"]["Layers"]


def test_it_shares_every_pytorch_layer_and_adds_one(built, addon):
    base, over = layers(built["image_id"]), layers(addon["image_id"])
    # PyTorch: the Debian base, the user step, 4 install layers, the payload, WORKDIR's
    # empty layer. Accelerate: the same first six, its own install layer, its payload, the
    # empty one.
    shared = len(base) - 2
    assert over[:shared] == base[:shared]
    assert len(over) == len(base) + 1 and over[shared] not in base


def test_it_certifies_at_level_cpu_with_accelerate_training(addon):
    cert = addon["certificate"]
    assert cert["level"] == "cpu" and cert["passed"], cert
    report = json.loads(Path(cert["path"]).read_text())["report"]
    assert report["payload"] == "accelerate_smoke"
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["train"]["passed"] and checks["versions"]["passed"]
    assert checks["packages"]["passed"], checks["packages"]
    assert report["versions"]["torch"].startswith("2.4.1")


def test_its_label_names_the_stack_it_is_built_over(addon):
    cfg = json.loads(docker("image", "inspect", ADDON_TAG).stdout)[0]["Config"]
    stack = json.loads(cfg["Labels"]["io.envgen.stack"])
    assert stack["framework"]["builds_on"] == {"name": "pytorch", "package": "torch"}
    assert stack["framework"]["addons"] == ["accelerate"]
    assert cfg["User"] == "envgen"
