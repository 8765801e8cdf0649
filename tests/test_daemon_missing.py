"""No Docker daemon: exit 3 and one sentence on how to start it (no daemon needed)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_build_without_a_daemon_is_exit_3_with_how_to_start_it(tmp_path):
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no.sock", "ENVGEN_HOME": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "envgen", "build", "pytorch-cu121"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 3
    assert "no Docker daemon answers" in r.stderr and "dockerd" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
