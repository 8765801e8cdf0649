"""`envgen run` for real: the user's own command in the certified image on the real daemon,
in the current folder, as the user who ran envgen (so it writes that folder), its exit code
passed back, no container left."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from services import ROOT, TAG, docker

pytestmark = pytest.mark.docker


def run(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin:/usr/local/bin",
                               # a home of its own: a warning said once per daemon is said
                               "ENVGEN_HOME": f"{cwd}-home"})


@pytest.mark.usefixtures("built")
def test_the_users_command_runs_in_the_image_in_this_folder(tmp_path):
    (tmp_path / "train.py").write_text(
        "import os, sys, torch\n"
        "x = torch.randn(64, 8); w = torch.zeros(8, requires_grad=True)\n"
        "for _ in range(20):\n"
        "    loss = ((x @ w - 1) ** 2).mean(); loss.backward()\n"
        "    with torch.no_grad(): w -= 0.1 * w.grad; w.grad = None\n"
        "shm = os.statvfs('/dev/shm'); print('shm', shm.f_blocks * shm.f_frsize)\n"
        "limits = {l[:26].strip(): l[26:].split()[0] for l in open('/proc/self/limits')}\n"
        "print('memlock', limits['Max locked memory'], 'stack', limits['Max stack size'])\n"
        "torch.save(w, 'model.pt')\n"
        "print('cwd', os.getcwd(), 'uid', os.getuid(), 'torch', torch.__version__,\n"
        "      'loss', round(loss.item(), 3))\n"
        "sys.exit(7)\n")
    (tmp_path / "train.py").chmod(0o644)
    tmp_path.chmod(0o755)   # the user's own folder, not open to other users
    r = run("run", "--gpus", "none", "--no-network", TAG, "--", "python", "train.py",
            cwd=tmp_path)
    assert r.returncode == 7, r.stdout + r.stderr   # the command's own exit code
    words = r.stdout.split()
    assert words[words.index("cwd") + 1] == "/workspace"
    assert words[words.index("uid") + 1] == str(os.getuid())   # the invoking user
    saved = tmp_path / "model.pt"
    assert saved.stat().st_size > 0 and saved.stat().st_uid == os.getuid()
    assert words[words.index("torch") + 1].startswith("2.4.1")
    assert float(words[words.index("loss") + 1]) < 1.0
    assert int(words[words.index("shm") + 1]) >= 8 * 1024 ** 3 - 1
    # the run profile's ulimits; a daemon that may not raise its own memlock limit (this
    # machine's has no CAP_SYS_RESOURCE) starts it without, and envgen says so
    refused = "could not set --ulimit memlock=-1" in r.stderr
    assert refused or words[words.index("memlock") + 1] == "unlimited", r.stderr
    assert words[words.index("stack") + 1] == "67108864"
    left = docker("ps", "-aq", "--filter", "label=io.envgen.run=1").stdout.split()
    assert left == [], "the container is removed when the command ends"


@pytest.mark.usefixtures("built")
def test_as_image_user_runs_as_the_images_user_as_certification_does(tmp_path):
    r = run("run", "--gpus", "none", "--no-network", "--no-mount", "--as-image-user", TAG,
            "--", "python", "-c", "import os; print(os.getuid())", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "10001"


@pytest.mark.usefixtures("built")
def test_without_network_the_container_has_none(tmp_path):
    r = run("run", "--gpus", "none", "--no-network", "--no-mount", TAG, "--", "python", "-c",
            "import socket; print(sorted(i[1] for i in socket.if_nameindex()))", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['lo']"


def test_dockers_default_shared_memory_fails_the_dataloader_check_the_profile_passes_it(
        built):
    # Docker's own default: 64 MB of /dev/shm. The payload's loader workers need more.
    payload = ["python", "/opt/envgen/torch_smoke.py", "--require", "cpu", "--timeout", "120",
               "--quick", "--steps", "6", "--gemm-size", "64"]
    r = docker("run", "--rm", "--network", "none", "--user", "envgen", TAG, *payload)
    assert r.returncode == 1, r.stdout[-1000:] + r.stderr[-1000:]
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["dataloader"]["passed"] is False
    assert checks["dataloader"]["detail"].startswith(
        "shared memory 64 MB: add --ipc=host or --shm-size=8g (2 workers failed")
    # the same payload started as `envgen profile` says passes it
    line = run("profile", TAG, "--gpus", "none", cwd=ROOT)
    assert line.returncode == 0, line.stderr
    argv = shlex.split(line.stdout)
    assert argv[:2] == ["docker", "run"] and argv[-1] == TAG
    r = docker(*argv[1:], *payload)
    if "error setting rlimit" in r.stderr:   # a daemon that may not raise its memlock limit
        cut = argv.index("memlock=-1") - 1   # (this machine's): the rest of the profile
        r = docker(*argv[1:cut], *argv[cut + 2:], *payload)
    report = json.loads(r.stdout)
    dl = {c["name"]: c for c in report["checks"]}["dataloader"]
    assert dl["passed"] and "/dev/shm 8192 MiB" in dl["detail"], dl
    # certification ran with that profile, and recorded it
    cert = json.loads(Path(built["certificate"]["path"]).read_text())
    dl = next(c for c in cert["report"]["checks"] if c["name"] == "dataloader")
    assert dl["passed"] and "/dev/shm 8192 MiB" in dl["detail"]
    assert cert["run_profile"]["shm_size"] == "8g"
    prof = cert["run_profile"]
    assert prof["ulimits"]["stack"]["hard"] == 67108864
    if prof["ulimits_refused"]:    # recorded, and said in the certificate's notes
        assert prof["ulimits_refused"] == ["memlock"] and "memlock" not in prof["ulimits"]
        assert any("could not set --ulimit memlock=-1" in n for n in cert["preflight"])
    else:
        assert prof["ulimits"]["memlock"] == {"soft": -1, "hard": -1}


def test_the_image_starts_from_bytecode_compiled_at_build(built):
    """The pip steps compile their files (checked-hash .pyc): `import torch` in the certified
    image reads every module it loads from bytecode, and says so in the certificate."""
    cert = json.loads(Path(built["certificate"]["path"]).read_text())
    startup = next(c for c in cert["report"]["checks"] if c["name"] == "startup")
    assert startup["passed"] and "fix" not in startup, startup
    assert startup["startup_modules"] > 500
    assert startup["startup_modules_bytecode"] == startup["startup_modules"]
    r = docker("run", "--rm", "--network", "none", TAG, "python", "-c",
               "import torch, importlib.util as u, sys; f = open(u.cache_from_source("
               "torch.__file__), 'rb').read(16); print(int.from_bytes(f[4:8], 'little'))")
    assert r.stdout.strip() == "3", r.stderr   # flags 0b11: hash-based, checked


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("sig", ["TERM", "KILL"])
def test_a_stopped_envgen_run_leaves_no_container(tmp_path, sig):
    """The command runs under a PID 1 that passes signals on: SIGTERM to envgen run (the
    docker CLI it became) ends the command and its container at once. A SIGKILLed one
    leaves its container running; the next envgen command removes it as an orphan."""
    import signal
    import time
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", "run", "--no-mount", TAG, "--", "python", "-c",
         "import time; time.sleep(1000)"], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin:/usr/local/bin",
             "ENVGEN_HOME": f"{tmp_path}-home"})

    def mine():
        out = docker("ps", "-aq", "--filter", "label=io.envgen.run=1", "--filter",
                     f"label=io.envgen.owner={os.uname().nodename}:{proc.pid}").stdout
        return out.split()
    try:
        for _ in range(300):
            if mine():
                break
            time.sleep(0.1)
        assert mine(), "the premise: the command's container runs"
        proc.send_signal(getattr(signal, f"SIG{sig}"))
        proc.wait(30)
        if sig == "TERM":
            for _ in range(100):
                if not mine():
                    break
                time.sleep(0.1)
            assert mine() == [], "SIGTERM ended the command and --rm removed its container"
        else:
            assert mine(), "a SIGKILLed docker CLI leaves its container"
            r = run("doctor", cwd=tmp_path)   # any command that asks the daemon reaps it
            assert "Traceback" not in r.stderr
            assert mine() == []
    finally:
        proc.kill()
        for cid in mine():
            docker("rm", "-f", cid)
