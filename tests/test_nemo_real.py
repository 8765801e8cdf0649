"""A NeMo speech stack for real: `envgen build nemo-cu124 --certify --gpus none`
installs the hash-pinned closure of nemo-toolkit[asr] 3.0.0 over torch 2.6.0 (cu124) on the
Debian trixie base, pip builds antlr4-python3-runtime from its sdist in a layer of its own,
and NeMo's EncDecCTCModel trains in the container on the CPU and round-trips a .nemo.
Python 3.13, not bookworm's 3.11.2: NeMo's restore_from extracts with tarfile's `filter=`,
which Python gained in 3.11.4, so the resolver puts the stack on trixie by itself
(docs/matrix-builds.md has the figures of both)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from services import certified_build, docker

pytestmark = [pytest.mark.docker, pytest.mark.slow]   # no PyTorch layer of its own in CI's cache
TAG = "envgen-test/nemo-cu124:ci"


@pytest.fixture(scope="module")
def nemo_built(home, images_before):
    with certified_build("nemo-cu124", TAG, home, images_before) as out:
        yield out


def test_it_certifies_at_level_cpu_with_nemos_own_model(nemo_built):
    cert = nemo_built["certificate"]
    full = json.loads(Path(cert["path"]).read_text())
    report, checks = full["report"], {c["name"]: c for c in full["report"]["checks"]}
    assert cert["level"] == "cpu" and cert["passed"] and report["payload"] == "nemo_smoke"
    for name in ("train", "amp", "checkpoint", "versions", "packages"):
        assert checks[name]["passed"] and not checks[name].get("skipped"), name
    assert "EncDecCTCModel" in checks["train"]["detail"]
    assert ".nemo" in checks["checkpoint"]["detail"]
    assert report["versions"]["nemo"] == full["stack"]["framework"]["version"]
    assert full["stack"]["base"]["name"] == "debian-trixie", "the floor moved it there"


def test_the_image_holds_the_asr_extra_and_the_label_says_so(nemo_built):
    cfg = json.loads(docker("image", "inspect", TAG).stdout)[0]["Config"]
    stack = json.loads(cfg["Labels"]["io.envgen.stack"])
    assert stack["extras"] == {"nemo-toolkit": "asr"} and stack["unpinned"] == ["fsspec"]
    r = docker("run", "--rm", "--network", "none", TAG, "python", "-c",
               "import importlib.metadata as m, lightning, antlr4; "
               "print(m.version('lightning'), m.version('antlr4-python3-runtime'))")
    assert r.returncode == 0, r.stderr[-2000:]
    lightning, antlr = r.stdout.split()
    assert lightning == "2.4.0" and antlr == "4.9.3"   # the extra's cap; built from its sdist
