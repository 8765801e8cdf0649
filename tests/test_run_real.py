"""`envgen run` for real: the user's own command in the certified image on the real daemon,
in the current folder, as the image's user, its exit code passed back, no container left."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services import ROOT, TAG, docker

pytestmark = pytest.mark.docker


def run(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin:/usr/local/bin"})


@pytest.mark.usefixtures("built")
def test_the_users_command_runs_in_the_image_in_this_folder(tmp_path):
    (tmp_path / "train.py").write_text(
        "import os, sys, torch\n"
        "x = torch.randn(64, 8); w = torch.zeros(8, requires_grad=True)\n"
        "for _ in range(20):\n"
        "    loss = ((x @ w - 1) ** 2).mean(); loss.backward()\n"
        "    with torch.no_grad(): w -= 0.1 * w.grad; w.grad = None\n"
        "shm = os.statvfs('/dev/shm'); print('shm', shm.f_blocks * shm.f_frsize)\n"
        "print('cwd', os.getcwd(), 'uid', os.getuid(), 'torch', torch.__version__,\n"
        "      'loss', round(loss.item(), 3))\n"
        "sys.exit(7)\n")
    (tmp_path / "train.py").chmod(0o644)
    tmp_path.chmod(0o755)
    r = run("run", "--gpus", "none", "--no-network", TAG, "--", "python", "train.py",
            cwd=tmp_path)
    assert r.returncode == 7, r.stdout + r.stderr   # the command's own exit code
    words = r.stdout.split()
    assert words[words.index("cwd") + 1] == "/workspace"
    assert words[words.index("uid") + 1] == "10001"   # the image's user, as certification
    assert words[words.index("torch") + 1].startswith("2.4.1")
    assert float(words[words.index("loss") + 1]) < 1.0
    assert int(words[words.index("shm") + 1]) >= 8 * 1024 ** 3 - 1
    left = docker("ps", "-aq", "--filter", "label=io.envgen.run=1").stdout.split()
    assert left == [], "the container is removed when the command ends"


@pytest.mark.usefixtures("built")
def test_without_network_the_container_has_none(tmp_path):
    r = run("run", "--gpus", "none", "--no-network", "--no-mount", TAG, "--", "python", "-c",
            "import socket; print(sorted(i[1] for i in socket.if_nameindex()))", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['lo']"


def test_dockers_default_shared_memory_fails_the_dataloader_check_certification_passes_it(
        built):
    # Docker's own default: 64 MB of /dev/shm. The payload's loader workers need more.
    r = docker("run", "--rm", "--network", "none", "--user", "envgen", TAG, "python",
               "/opt/envgen/torch_smoke.py", "--require", "cpu", "--timeout", "120")
    assert r.returncode == 1, r.stdout[-1000:] + r.stderr[-1000:]
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["dataloader"]["passed"] is False
    assert "/dev/shm 64 MiB" in checks["dataloader"]["detail"]
    assert "--shm-size 8g" in checks["dataloader"]["detail"]
    # certification's run profile (8 GB) passes the same check
    cert = json.loads(Path(built["certificate"]["path"]).read_text())
    dl = next(c for c in cert["report"]["checks"] if c["name"] == "dataloader")
    assert dl["passed"] and "/dev/shm 8192 MiB" in dl["detail"]
