"""A linux/arm64 image for real on this x86_64 machine: `envgen build pytorch-cpu-arm64
--certify --gpus none` makes the arm64 Debian base (mmdebstrap under QEMU), installs the
bundled aarch64 closure (torch 2.10.0's CPU wheel) with BuildKit --platform linux/arm64, and
trains the payload in the container through QEMU's binfmt_misc handler; the certificate says
the run was emulated. About 7 minutes on a quiet 2-CPU machine, over an hour under load
(docs/matrix-builds.md), so it runs with ENVGEN_SLOW=1 (make test-all) and in make bench-all
(bench/arm64_emulated.py), not in the default Docker run."""
from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
from services import docker, envgen, first_daemon_answers, remove_own_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TAG = "envgen-test/pytorch-cpu-arm64:ci"


@pytest.fixture(scope="module")
def arm_built(home, images_before):
    if not first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    if platform.machine() != "aarch64" and \
            not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        pytest.skip("no qemu-aarch64 binfmt_misc handler (tools/bootstrap.sh registers it)")
    r = envgen("build", "pytorch-cpu-arm64", "--certify", "--gpus", "none", "--tag", TAG,
               "--json", env={"ENVGEN_HOME": home}, timeout=5400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    yield out
    remove_own_image(out["image_id"], images_before)


def test_the_image_is_arm64_and_certifies_at_level_cpu_saying_it_was_emulated(arm_built):
    cert = arm_built["certificate"]
    assert cert["level"] == "cpu" and cert["passed"], cert
    full = json.loads(Path(cert["path"]).read_text())
    assert full["stack"]["platform"] == "linux/arm64"
    assert full["platform"] == "linux/arm64"
    assert full["emulated"] is (platform.machine() != "aarch64")
    arch = docker("image", "inspect", TAG, "--format", "{{.Architecture}}").stdout.strip()
    assert arch == "arm64"


def test_python_in_the_image_runs_as_aarch64(arm_built):
    r = docker("run", "--rm", "--network", "none", TAG, "python", "-c",
               "import platform, torch; print(platform.machine(), torch.__version__)")
    assert r.stdout.split() == ["aarch64", "2.10.0"]
