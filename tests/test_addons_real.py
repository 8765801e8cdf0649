"""Stacks built over PyTorch, for real: `envgen build accelerate-cu121 --certify` after
the session's pytorch-cu121 build reuses every PyTorch layer (same pins, same stamp) and
adds one layer of its own; Accelerate then trains in the container on the CPU. DeepSpeed,
which PyPI serves for Linux only as an sdist, adds a second: pip builds it there without
build isolation over the stack's torch, and ZeRO-2 trains with it. Keras 3 over the same
torch (KERAS_BACKEND=torch, set after the install steps so they stay shared) trains with
its own Model.fit (keras_torch_smoke)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from services import docker, envgen, remove_own_image

pytestmark = pytest.mark.docker
# add-on -> the install layers it adds over PyTorch's
OWN_LAYERS = {"accelerate": 1, "deepspeed": 2, "keras": 1}
# add-on -> the spec built, where its name and cu121 is not it (that keras stack is Keras
# over TensorFlow), and its payload
SPECS = {"keras": "keras==3.15.1,torch==2.4.1"}
PAYLOADS = {"keras": "keras_torch_smoke"}


@pytest.fixture(scope="module", params=sorted(OWN_LAYERS))
def addon(built, home, images_before, request):
    name = request.param
    tag = f"envgen-test/{name}-cu121:ci"
    r = envgen("build", SPECS.get(name, f"{name}-cu121"), "--certify", "--gpus", "none",
               "--tag", tag, "--json", env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield {**out, "name": name, "tag": tag}
    remove_own_image(out["image_id"], images_before)


def layers(ref: str) -> list[str]:
    return json.loads(docker("image", "inspect", ref).stdout)[0]["RootFS"]["Layers"]


def test_it_shares_every_pytorch_layer_and_adds_one(built, addon):
    base, over = layers(built["image_id"]), layers(addon["image_id"])
    # PyTorch: the Debian base, the user step, 4 install layers, the payload, WORKDIR's
    # empty layer. Accelerate: the same first six, its own install layer, its payload, the
    # empty one; DeepSpeed: its dependencies' layer, then its own built from the sdist.
    shared, own = len(base) - 2, OWN_LAYERS[addon["name"]]
    assert over[:shared] == base[:shared]
    assert len(over) == len(base) + own and not set(over[shared:shared + own]) & set(base)


def test_it_certifies_at_level_cpu_with_its_own_training(addon):
    cert = addon["certificate"]
    assert cert["level"] == "cpu" and cert["passed"], cert
    report = json.loads(Path(cert["path"]).read_text())["report"]
    assert report["payload"] == PAYLOADS.get(addon["name"], f"{addon['name']}_smoke")
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["train"]["passed"] and checks["versions"]["passed"]
    assert checks["packages"]["passed"], checks["packages"]
    assert report["versions"]["torch"].startswith("2.4.1")


def test_its_label_names_the_stack_it_is_built_over(addon):
    cfg = json.loads(docker("image", "inspect", addon["tag"]).stdout)[0]["Config"]
    stack = json.loads(cfg["Labels"]["io.envgen.stack"])
    assert stack["framework"]["builds_on"] == {"name": "pytorch", "package": "torch"}
    assert stack["framework"]["addons"] == [addon["name"]]
    assert cfg["User"] == "envgen"


def test_deepspeed_is_built_over_the_stacks_torch_with_zero_2(addon):
    """Built without isolation, DeepSpeed recorded the image's torch (an isolated build
    records torch "0.0" and drags in PyPI's newest torch), compiled no op, and trained with
    ZeRO stage 2 over a plain torch optimizer."""
    if addon["name"] != "deepspeed":
        pytest.skip("DeepSpeed only")
    r = docker("run", "--rm", "--network", "none", addon["tag"], "python", "-c",
               "import torch, deepspeed.git_version_info as i; "
               "print(i.torch_info['version'], torch.__version__, any(i.installed_ops.values()))")
    assert r.returncode == 0, r.stderr[-2000:]
    # DeepSpeed's import logs to stdout too: the last line is the script's
    built_for, runs, any_op = r.stdout.strip().splitlines()[-1].split()
    assert built_for == ".".join(runs.split(".")[:2]) and any_op == "False", r.stdout
    report = json.loads(Path(addon["certificate"]["path"]).read_text())["report"]
    assert report["metrics"]["zero_stage"] == 2, report["metrics"]
    stack = json.loads(json.loads(docker("image", "inspect", addon["tag"]).stdout)[0]
                       ["Config"]["Labels"]["io.envgen.stack"])
    assert stack["from_source"] == {"packages": ["deepspeed"], "env": {"DS_BUILD_OPS": "0"}}


def test_keras_trains_over_the_stacks_torch_with_its_backend_set_in_the_image(addon):
    if addon["name"] != "keras":
        pytest.skip("Keras only")
    cfg = json.loads(docker("image", "inspect", addon["tag"]).stdout)[0]["Config"]
    assert "KERAS_BACKEND=torch" in cfg["Env"]
    report = json.loads(Path(addon["certificate"]["path"]).read_text())["report"]
    train = {c["name"]: c for c in report["checks"]}["train"]
    assert "Model.fit on backend torch" in train["detail"], train
    assert report["versions"]["keras"] == "3.15.1"
