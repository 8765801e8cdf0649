"""Real services for tests, on loopback only: an OCI registry (distribution's
`docker-registry`, Debian package docker-registry), a second Docker daemon playing a
teammate's machine, and a plain HTTP server with a test's own handler. Each is a context
manager that skips the test (pytest.skip) where it cannot run and leaves nothing behind:
process group stopped, temporary folders deleted."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The one real build of the default stack that the Docker tests share (conftest `built`).
TAG = "envgen-test/pytorch-cu121:ci"
SMALL_TAG = "envgen-test/jax-cpu:ci"
OWN_NAMESPACE = "envgen-test/"   # every tag a test gives starts so


def envgen(*args, env=None, timeout=1800) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, as a user runs it."""
    import sys
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, **(env or {})})


def docker(*args, host: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    return subprocess.run(["docker", *args], capture_output=True, text=True, env=env)


def free_build_cache(host: str) -> None:
    """Drop all build cache of a daemon the tests started themselves (`second_daemon`).
    Never the first daemon's: its cache is the user's too (a `make demo` rebuild takes 2 s
    with it and minutes without), and nothing tells a test's cache records from theirs."""
    if not host:
        raise ValueError("free_build_cache prunes only a daemon the tests started")
    docker("builder", "prune", "--all", "--force", host=host)


def image_names(host: str | None = None) -> frozenset[str]:
    """Every name (`repo:tag`, `repo@sha256:…`) and image ID on the daemon now: what was
    there before the tests, which their clean-up leaves alone."""
    r = docker("image", "ls", "--all", "--no-trunc", "--digests", "--format",
               "{{.ID}} {{.Repository}} {{.Tag}} {{.Digest}}", host=host)
    names = set()
    for line in r.stdout.splitlines():
        image_id, repo, tag, digest = (line.split() + ["<none>"] * 4)[:4]
        names.add(image_id)
        if repo != "<none>" and tag != "<none>":
            names.add(f"{repo}:{tag}")
        if repo != "<none>" and digest != "<none>":
            names.add(f"{repo}@{digest}")
    return frozenset(names)


def remove_own_image(ref: str, before: frozenset[str], host: str | None = None) -> None:
    """Remove what the tests made of image `ref` (an ID or a name): each of its names that
    was not there `before` or is in the tests' own namespace, one `docker rmi NAME` each,
    then the image by ID only when no name is left and it was not there before either.
    Never `rmi -f ID`: a reproducible build gives the user's `make demo` image this very
    ID, and -f by ID removes every tag."""
    def names_of(image: str) -> tuple[str, list[str]] | None:
        r = docker("image", "inspect", image, host=host)
        if r.returncode != 0:
            return None
        info = json.loads(r.stdout)[0]
        return info["Id"], [*(info.get("RepoTags") or []), *(info.get("RepoDigests") or [])]
    found = names_of(ref)
    if found is None:
        return   # gone already
    image_id, names = found
    for name in names:
        if name not in before or name.startswith(OWN_NAMESPACE):
            docker("rmi", name, host=host)
    left = names_of(image_id)
    if left is not None and not left[1] and image_id not in before:
        docker("rmi", image_id, host=host)


def first_daemon_answers() -> bool:
    try:
        import docker
        docker.from_env(timeout=10).ping()
        return True
    except Exception:  # no SDK, no socket, no answer: all mean the same here
        return False


@contextmanager
def certified_build(spec: str, tag: str, home: str, before: frozenset[str]) -> Iterator[dict]:
    """`envgen build SPEC --certify --gpus none --tag TAG --json` (it must pass), its JSON;
    what it made of the image is removed after (`remove_own_image`). Skips where no Docker
    daemon answers."""
    if not first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    r = envgen("build", spec, "--certify", "--gpus", "none", "--tag", tag, "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    try:
        yield out
    finally:
        remove_own_image(out["image_id"], before)


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 answering with `handler` (a
    BaseHTTPRequestHandler class); `url` is its base. close() or a with block stops it."""

    def __init__(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def free_port() -> int:
    """A loopback port nothing listens on now (also what a stopped registry looks like)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` different loopback ports nothing listens on now (each held while the next is
    chosen, so no two are the same)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _need(binary: str, why: str) -> str:
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/bin/{binary}", f"/usr/sbin/{binary}") if os.access(p, os.X_OK)),
        None)
    if path is None:
        pytest.skip(f"{binary} is not installed ({why})")
    if not first_daemon_answers():
        pytest.skip("no Docker daemon answers")
    return path


def _stop(proc: subprocess.Popen, grace_s: float = 20) -> None:
    """SIGTERM the process group (each service is its own session), SIGKILL past grace."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-1500:]
    except OSError:
        return ""


@dataclass
class Registry:
    host: str            # 127.0.0.1:PORT, to put in front of a repository path
    root: Path
    process: subprocess.Popen


@contextmanager
def registry(root: Path, *, readonly: bool = False, wait_s: float = 15) -> Iterator[Registry]:
    """A distribution 2.8 registry on 127.0.0.1 (plain HTTP: a loopback registry is
    insecure by default in dockerd), storing under `root`; read-only refuses every push."""
    binary = _need("docker-registry", "apt-get install -y docker-registry")
    storage: dict = {"filesystem": {"rootdirectory": str(root / "storage")},
                     "maintenance": {"uploadpurging": {"enabled": False}}}
    if readonly:
        storage["maintenance"]["readonly"] = {"enabled": True}
    for _attempt in range(3):   # another process may take the free port before we bind it
        port = free_port()
        config = root / "config.yml"
        config.write_text(json.dumps({   # JSON is YAML
            "version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": storage, "http": {"addr": f"127.0.0.1:{port}"}}))
        log = root / "registry.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([binary, "serve", str(config)], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        try:
            if _wait_http(f"http://127.0.0.1:{port}/v2/", proc, wait_s):
                yield Registry(f"127.0.0.1:{port}", root, proc)
                return
        finally:
            _stop(proc)
        if "address already in use" not in _tail(log):
            break
    raise RuntimeError(f"docker-registry did not answer on 127.0.0.1:{port}: {_tail(log)}")


def _wait_http(url: str, proc: subprocess.Popen, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.1)
    return False


@dataclass
class Daemon:
    host: str            # unix:///tmp/envgen-d2-…/docker.sock
    root: Path
    process: subprocess.Popen

    def client(self, timeout: int = 60):
        import docker
        return docker.DockerClient(base_url=self.host, timeout=timeout)


@contextmanager
def second_daemon(wait_s: float = 60) -> Iterator[Daemon]:
    """A second dockerd with its own data root, exec root (and so its own managed
    containerd), pidfile, socket and bridge, and no iptables, so it shares nothing with
    the first daemon but the kernel. Not `--bridge=none`: a daemon started that way deletes
    the host's docker0, which the first daemon's builds need. overlay2, not vfs: vfs keeps
    a full copy of the file system per layer, 40 GB for one CUDA image."""
    binary = _need("dockerd", "apt-get install -y docker.io")
    if os.geteuid() != 0:
        pytest.skip("a second dockerd needs root")
    if shutil.which("containerd") is None:
        pytest.skip("containerd is not on PATH (dockerd starts its own from there)")
    # under /tmp, short: the unix socket path limit is 107 bytes, and containerd's socket
    # lies deeper still (<exec-root>/containerd/containerd.sock)
    root = Path(tempfile.mkdtemp(prefix="envgen-d2-", dir="/tmp"))
    (root / "daemon.json").write_text("{}")   # not /etc/docker/daemon.json: flags would clash
    host = f"unix://{root}/docker.sock"
    log = root / "dockerd.log"
    argv = [binary, "--config-file", str(root / "daemon.json"), "--data-root",
            str(root / "data"), "--exec-root", str(root / "x"), "--pidfile",
            str(root / "docker.pid"), "-H", host, "--storage-driver", "overlay2",
            "--bridge", BRIDGE, "--iptables=false", "--ip-masq=false"]
    made_bridge = _make_bridge()
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            daemon = Daemon(host, root, proc)
            if not _wait_ping(daemon, wait_s):
                raise RuntimeError(f"the second dockerd did not answer on {host}: "
                                   f"{_tail(log)}")
            yield daemon
        finally:
            _stop(proc)
    finally:
        _unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)
        if made_bridge:
            subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


BRIDGE = "envgen-d2"


def _make_bridge() -> bool:
    """The second daemon's own bridge (True when made here, to delete on teardown)."""
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        return False
    for argv in (["ip", "link", "add", BRIDGE, "type", "bridge"],
                 ["ip", "addr", "add", "172.31.250.1/24", "dev", BRIDGE],
                 ["ip", "link", "set", BRIDGE, "up"]):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a bridge for the second dockerd: {r.stderr.strip()}")
    return True


def _wait_ping(daemon: Daemon, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and daemon.process.poll() is None:
        try:
            c = daemon.client(timeout=5)
            try:
                if c.ping():
                    return True
            finally:
                c.close()
        except Exception:  # the socket is not there yet
            time.sleep(0.2)
    return False


def _unmount_under(root: Path) -> None:
    """A daemon killed mid-way may leave mounts (netns, shm) that block deleting its root."""
    try:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return
    for m in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)


@contextmanager
def fake_daemon(folder: Path, fault: str) -> Iterator[str]:
    """A Docker API on a unix socket that misbehaves as a broken daemon does; yields its
    DOCKER_HOST. `hang`: accepts every connection and never answers. `500`: answers the
    version handshake and ping as Docker 20.10 does, then HTTP 500 to every other call.
    Runs in this process's threads; the socket is gone when the block ends."""
    import http.server
    import socketserver
    import threading

    path = folder / f"fake-{fault}.sock"

    class Hang(socketserver.BaseRequestHandler):
        def handle(self):
            while not stop.wait(0.2):   # hold the connection, say nothing
                pass

    class Faulty(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def address_string(self):
            return "fake"

        def log_message(self, *_):
            pass

        def _send(self, code: int, body: dict | str, ctype="application/json"):
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Api-Version", "1.41")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            route = self.path.split("?")[0].rstrip("/")
            if route.endswith("/_ping"):
                return self._send(200, "OK", "text/plain")
            if route.endswith("/version"):
                return self._send(200, {"Version": "20.10.24", "ApiVersion": "1.41",
                                        "MinAPIVersion": "1.12", "Os": "linux"})
            self._send(500, {"message": "injected fault: the daemon is failing"})

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _answer

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    stop = threading.Event()
    server = Server(str(path), Hang if fault == "hang" else Faulty)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)


def labelled_containers(owner_pid: int, host: str | None = None) -> list[str]:
    """IDs of containers (running or not) that envgen process `owner_pid` started."""
    name = socket.gethostname()
    r = docker("ps", "-aq", "--filter", f"label=io.envgen.owner={name}:{owner_pid}",
               host=host)
    return r.stdout.split()


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is `pid`, read from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Slurm:
    root: Path
    env: dict            # SLURM_CONF and PATH for the clients (sbatch, sacct, sinfo)
    partitions: tuple[str, ...]


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.access(p, os.X_OK)), None)


@contextmanager
def slurm_cluster(wait_s: float = 60) -> Iterator[Slurm]:
    """A single-node Slurm cluster on this machine (Debian's slurm-wlm and munge): munged on
    its own socket, slurmctld and slurmd on free loopback ports, a minimal slurm.conf in a
    temporary folder, partitions `cpu` (the default) and `short`. No slurmdbd: accounting is
    off, so `sacct` answers that it is disabled and envgen reads `scontrol show job`. Every
    daemon is its own session, stopped at the end; the folder is deleted."""
    need = {n: _binary(n) for n in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol")}
    if None in need.values():
        pytest.skip("slurm-wlm and munge are not installed (tools/bootstrap.sh installs them)")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd runs jobs as root")
    root = Path(tempfile.mkdtemp(prefix="envgen-slurm-", dir="/tmp"))
    root.chmod(0o755)
    for d in ("state", "spool", "munge"):
        (root / d).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True,
                   capture_output=True)
    key.chmod(0o400)
    sock = root / "munge" / "munge.sock"
    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    mem_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 2
    conf = root / "slurm.conf"
    env = {"SLURM_CONF": str(conf)}
    full = {**os.environ, **env}
    procs: list[subprocess.Popen] = []

    def write_conf(ctld: int, slurmd_port: int) -> None:
        conf.write_text("\n".join([
            "ClusterName=envgen-test", f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld}", f"SlurmdPort={slurmd_port}", "SlurmUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={sock}",
            f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/slurmctld.log", f"SlurmdLogFile={root}/slurmd.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "ReturnToService=2",
            "MinJobAge=3600", "KillWait=15", "OverTimeLimit=0", "InactiveLimit=0",
            "SlurmctldTimeout=30", "SlurmdTimeout=60", "MessageTimeout=10",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN",
            f"PartitionName=cpu Nodes={host} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=short Nodes={host} MaxTime=10 State=UP", ""]))

    def start(argv: list[str], log: str) -> subprocess.Popen:
        with open(root / log, "wb") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, env=full)
        procs.append(p)
        return p

    def come_up(deadline: float) -> str | None:
        """Start slurmctld (on its own port first: slurmd's connections take ephemeral
        ports, where the chosen ones lie too) and slurmd; None once the node is idle, else
        why not."""
        ctld, slurmd_port = free_ports(2)
        write_conf(ctld, slurmd_port)
        ctl = start([need["slurmctld"], "-D", "-i", "-f", str(conf)], "slurmctld.out")
        while ctl.poll() is None and not _listening(ctld) and time.monotonic() < deadline:
            time.sleep(0.1)
        start([need["slurmd"], "-D", "-f", str(conf)], "slurmd.out")
        while time.monotonic() < deadline:
            r = subprocess.run([need["scontrol"], "show", "node", host], capture_output=True,
                               text=True, env=full)
            if r.returncode == 0 and re.search(r"State=(IDLE|MIXED)", r.stdout):
                break
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.5)
        else:
            return (f"the test Slurm node did not come up: "
                    f"{_tail(root / 'slurmctld.log')}{_tail(root / 'slurmd.log')}")
        dead = [p.args[0] for p in procs if p.poll() is not None]
        if dead:
            return (f"{dead} exited: {_tail(root / 'slurmctld.out')}"
                    f"{_tail(root / 'slurmd.out')}{_tail(root / 'munged.out')}")
        return None
    try:
        start([need["munged"], "--foreground", "--force", f"--socket={sock}",
               f"--key-file={key}", f"--pid-file={root}/munge/munged.pid",
               f"--log-file={root}/munge/munged.log", f"--seed-file={root}/munge/seed"],
              "munged.out")
        deadline = time.monotonic() + wait_s
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for _attempt in range(3):   # a chosen port taken before its daemon bound it: again
            why = come_up(time.monotonic() + wait_s)
            if why is None or "Address already in use" not in why:
                break
            for p in procs[1:]:
                _stop(p, grace_s=20)
            del procs[1:]
            shutil.rmtree(root / "state", ignore_errors=True)
            (root / "state").mkdir()
        if why is not None:
            raise RuntimeError(why)
        yield Slurm(root, env, ("cpu", "short"))
    finally:
        for p in reversed(procs):
            _stop(p, grace_s=20)
        shutil.rmtree(root, ignore_errors=True)
