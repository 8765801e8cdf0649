"""An old release, for real (issue 27): `pytorch-lightning==2.0.9,torch==2.4.1` (September
2023, the trainer under its older distribution and import name) is built with the session's
pytorch-cu121 torch pins, and Lightning's Trainer trains in it at level cpu, in the default
Docker run. Its closure is resolved once with uv from PyPI into the run's ENVGEN_HOME. It
needs setuptools<82 (its import reaches pkg_resources), and setuptools lies in the
packaging-tools layer, the lowest install layer: so the image shares the base and the user
step with pytorch-cu121 and builds its torch layers again from the same pins (about a
minute here), which the test states rather than hides."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from services import docker, envgen, remove_own_image

pytestmark = pytest.mark.docker
SPEC = "pytorch-lightning==2.0.9,torch==2.4.1"
TAG = "envgen-test/pytorch-lightning-2.0.9:ci"


@pytest.fixture(scope="module")
def old(built, home, images_before):
    r = envgen("build", SPEC, "--certify", "--gpus", "none", "--tag", TAG, "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    remove_own_image(out["image_id"], images_before)


def layers(ref: str) -> list[str]:
    return json.loads(docker("image", "inspect", ref).stdout)[0]["RootFS"]["Layers"]


def test_the_old_release_certifies_at_level_cpu_with_lightnings_trainer(old):
    cert = old["certificate"]
    assert cert["level"] == "cpu" and cert["passed"], cert
    report = json.loads(Path(cert["path"]).read_text())["report"]
    assert report["payload"] == "lightning_smoke"
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["train"]["passed"] and checks["versions"]["passed"]
    assert checks["packages"]["passed"], checks["packages"]
    assert report["versions"]["torch"].startswith("2.4.1")


def test_it_installs_pytorch_lightning_over_the_sessions_torch_pins(built, old):
    base, over = layers(built["image_id"]), layers(old["image_id"])
    # the base and the user step are shared; the tools layer differs (setuptools<82)
    assert over[:2] == base[:2] and over[2] != base[2] and len(over) > len(base)
    pins = old["stack"]["packages"]
    assert pins["torch"] == built["stack"]["packages"]["torch"] and pins["setuptools"] == "<82"
    cfg = json.loads(docker("image", "inspect", TAG).stdout)[0]["Config"]
    stack = json.loads(cfg["Labels"]["io.envgen.stack"])
    # what goes over torch: the add-on and the setuptools its code needs
    assert stack["framework"]["addons"] == ["pytorch-lightning", "setuptools"]
    assert stack["framework"]["builds_on"] == {"name": "pytorch", "package": "torch"}
    assert cfg["User"] == "envgen"
