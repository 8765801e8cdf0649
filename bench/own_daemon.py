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


# Outbound traffic of the daemon's bridge, masqueraded as docker0's is by the shared daemon,
# for builds that cannot ask for the host's network (buildx 0.13's bake has no `network`
# key); each rule is deleted again when the daemon goes.
_OUTBOUND = (("-t", "nat", "POSTROUTING", "-s", "172.31.251.0/24", "!", "-o", BRIDGE,
              "-j", "MASQUERADE"),
             ("FORWARD", "-i", BRIDGE, "!", "-o", BRIDGE, "-j", "ACCEPT"),
             ("FORWARD", "-o", BRIDGE, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED",
              "-j", "ACCEPT"))


def _rule(action: str, rule: tuple) -> bool:
    table = list(rule[:2]) if rule[0] == "-t" else []
    rest = list(rule[2:] if table else rule)
    argv = ["iptables", *table, action, rest[0], *rest[1:]]
    return subprocess.run(argv, capture_output=True).returncode == 0


@contextmanager
def own_daemon(wait_s: float = 60, outbound: bool = False) -> Iterator[str]:
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        raise SystemExit("a throw-away dockerd needs root and dockerd (apt-get install docker.io)")
    root = Path(tempfile.mkdtemp(prefix="envgen-bench-", dir="/tmp"))
    (root / "daemon.json").write_text("{}")
    host = f"unix://{root}/docker.sock"
    made = _bridge()
    added = [r for r in _OUTBOUND if outbound and _rule("-I", r)]
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
        for r in added:
            _rule("-D", r)
        if made:
            subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def empty_cache(host: str) -> None:
    """The throw-away daemon's whole build cache, cache mounts included."""
    docker(host, "builder", "prune", "-af")


if __name__ == "__main__":   # a daemon to try things by hand: prints its host, ends on Enter
    with own_daemon() as h:
        print(h, flush=True)
        input()
