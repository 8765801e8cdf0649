"""A throw-away dockerd for cold figures: its own data root, exec root, socket and bridge,
no iptables. Emptying its build cache (cache mounts included) touches nobody else's: the
shared daemon's cache is never pruned by a benchmark. Builds there reach the index through
the host's network (ENVGEN_BUILD_NETWORK=host), as the teammate daemon of tests/ does.

    with own_daemon() as host:   # unix:///tmp/envgen-bench-…/docker.sock
        ...DOCKER_HOST=host...
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BRIDGE = "envgen-bench"
SUBNET = "172.31.251.1/24"


def _bridge() -> bool:
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        return False
    for argv in (["ip", "link", "add", BRIDGE, "type", "bridge"],
                 ["ip", "addr", "add", SUBNET, "dev", BRIDGE],
                 ["ip", "link", "set", BRIDGE, "up"]):
        subprocess.run(argv, capture_output=True, check=True)
    return True


def docker(host: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "-H", host, *args], capture_output=True, text=True,
                          check=check)


@contextmanager
def own_daemon(wait_s: float = 60) -> Iterator[str]:
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        raise SystemExit("a throw-away dockerd needs root and dockerd (apt-get install docker.io)")
    root = Path(tempfile.mkdtemp(prefix="envgen-bench-", dir="/tmp"))
    (root / "daemon.json").write_text("{}")
    host = f"unix://{root}/docker.sock"
    made = _bridge()
    log = open(root / "dockerd.log", "wb")
    proc = subprocess.Popen(
        [dockerd, "--config-file", str(root / "daemon.json"), "--data-root", str(root / "data"),
         "--exec-root", str(root / "x"), "--pidfile", str(root / "docker.pid"), "-H", host,
         "--storage-driver", "overlay2", "--bridge", BRIDGE, "--iptables=false",
         "--ip-masq=false"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while docker(host, "info", check=False).returncode != 0:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"the throw-away dockerd did not answer on {host}")
            time.sleep(0.3)
        yield host
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        mounts = [ln.split()[1] for ln in Path("/proc/self/mounts").read_text().splitlines()]
        for m in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        if made:
            subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def empty_cache(host: str) -> None:
    """The throw-away daemon's whole build cache, cache mounts included."""
    docker(host, "builder", "prune", "-af")


if __name__ == "__main__":   # a daemon to try things by hand: prints its host, ends on Enter
    with own_daemon() as h:
        print(h, flush=True)
        input()
