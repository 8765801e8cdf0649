"""Faults for real: daemons that hang or fail (fake Docker APIs on unix sockets), signals
sent to a real `envgen certify` and `envgen build`, a full tmpfs as ENVGEN_HOME, and an
unprivileged user. Each runs the real CLI in a subprocess and checks what is left behind."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import services
from services import ROOT, TAG, alive, children_of, docker, envgen, labelled_containers

FAST = {"ENVGEN_DOCKER_PING_TIMEOUT": "2", "ENVGEN_DOCKER_TIMEOUT": "5"}


def _no_traceback(r):
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-2000:]


# ---- daemons that hang or fail: no real daemon needed -------------------------------------------

COMMANDS = {
    "build": ["build", "pytorch-cu121"],
    "certify": ["certify", "envgen-test/nothing:1", "--gpus", "none"],
    "lock": ["lock", "pytorch-cu121", "-o", "{tmp}/out.lock"],
    "doctor": ["doctor"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_daemon_that_accepts_and_never_answers_is_exit_3_within_the_timeout(
        tmp_path, command):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    with services.fake_daemon(tmp_path, "hang") as host:
        started = time.monotonic()
        r = envgen(*argv, env={**FAST, "DOCKER_HOST": host,
                               "ENVGEN_HOME": str(tmp_path / "home")}, timeout=120)
        took = time.monotonic() - started
    _no_traceback(r)
    assert r.returncode == 3, r.stderr
    assert took < 30, f"{command} took {took:.0f} s against a hung daemon"
    assert "did not answer within 2 s" in r.stdout + r.stderr
    assert not (tmp_path / "out.lock").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_daemon_that_answers_ping_then_http_500_is_exit_3_naming_it(tmp_path, command):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    with services.fake_daemon(tmp_path, "500") as host:
        r = envgen(*argv, env={**FAST, "DOCKER_HOST": host,
                               "ENVGEN_HOME": str(tmp_path / "home")}, timeout=120)
    _no_traceback(r)
    assert r.returncode == 3, r.stderr
    assert "injected fault: the daemon is failing" in r.stdout + r.stderr
    assert not (tmp_path / "out.lock").exists()


# ---- an unprivileged user -----------------------------------------------------------------------

def _as_nobody(*argv, env=None, timeout=120) -> subprocess.CompletedProcess:
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
           sys.executable, "-m", "envgen", *argv]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ENVGEN_", "DOCKER_"))}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**clean, "HOME": "/nonexistent", **(env or {})})


@pytest.fixture
def nobody():
    """A folder the unprivileged user can reach (pytest's tmp_path is private to root):
    `/tmp/envgen-nobody-*/`, with `home/` owned by that user and `root-owned/` not."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("switching to an unprivileged user needs root and setpriv")
    if _as_nobody("--version").returncode != 0:
        pytest.skip("the unprivileged user cannot run this Python")
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="envgen-nobody-", dir="/tmp"))
    base.chmod(0o755)
    (base / "home").mkdir()
    os.chown(base / "home", 65534, 65534)
    (base / "root-owned").mkdir(mode=0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_an_unprivileged_user_without_socket_access_is_told_so(nobody):
    sock = Path("/var/run/docker.sock")
    if not sock.exists() or sock.stat().st_mode & 0o006:
        pytest.skip("no Docker socket closed to other users here")
    r = _as_nobody("certify", "envgen-test/nothing:1", "--gpus", "none",
                   env={"ENVGEN_HOME": str(nobody / "home")})
    _no_traceback(r)
    assert r.returncode == 3
    assert "permission denied on the Docker socket unix:///var/run/docker.sock" in r.stderr
    assert "docker group" in r.stderr


def test_an_unprivileged_user_with_a_read_only_store_is_stopped_before_the_run(nobody):
    store = nobody / "root-owned"
    r = _as_nobody("certify", "envgen-test/nothing:1", "--gpus", "none",
                   env={"ENVGEN_HOME": str(store)})
    _no_traceback(r)
    assert r.returncode == 3
    assert f"cannot write certificates in {store}/certs: Permission denied" in r.stderr


# ---- a real daemon, a real image ----------------------------------------------------------------

docker_only = [pytest.mark.docker, pytest.mark.skipif(not services.first_daemon_answers(),
                                                      reason="no Docker daemon answers")]


def _default_signals() -> None:
    # A suite started in the background (`make test &`, nohup) hands its children SIGINT
    # ignored, and Python then keeps ignoring it: envgen must see Ctrl-C as a terminal sends it.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start(argv, env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envgen", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, preexec_fn=_default_signals)


def _wait_for(predicate, seconds: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"no {what} within {seconds} s")


@pytest.mark.parametrize("sig,burst", [(signal.SIGTERM, 1), (signal.SIGINT, 1),
                                       (signal.SIGTERM, 40)])
@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_sigterm_or_ctrl_c_during_certify_removes_the_container_and_saves_nothing(
        tmp_path, sig, burst):
    # burst 40: SIGTERM again every 25 ms while envgen cleans up, as a Slurm job's time limit
    # signals every process of the job and the fleet task forwards the same signal.
    home = tmp_path / "home"
    proc = _start(["certify", TAG, "--gpus", "none"], {"ENVGEN_HOME": str(home)})
    try:
        # polled closely, so the signal often lands while the container is still being
        # created, before envgen holds a handle to it (the window a CI run once hit)
        _wait_for(lambda: labelled_containers(proc.pid), 60, "certification container",
                  every=0.01)
        for _ in range(burst):
            if proc.poll() is not None:
                break
            proc.send_signal(sig)
            time.sleep(0.025)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "nothing half-done was kept" in err
    assert labelled_containers(proc.pid) == []
    assert list((home / "certs").glob("*.json")) == []


@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_the_container_of_a_killed_envgen_is_reaped_by_the_next_run(tmp_path):
    home = tmp_path / "home"
    proc = _start(["certify", TAG, "--gpus", "none"], {"ENVGEN_HOME": str(home)})
    try:
        _wait_for(lambda: labelled_containers(proc.pid), 60, "certification container")
        proc.kill()                       # SIGKILL: envgen runs no cleanup at all
        proc.wait(30)
        left = labelled_containers(proc.pid)
        assert left, "the premise: a SIGKILLed envgen leaves its container"
        r = envgen("doctor", env={"ENVGEN_HOME": str(home)})   # any command that asks Docker
        _no_traceback(r)
        assert labelled_containers(proc.pid) == []
    finally:
        for cid in labelled_containers(proc.pid):
            docker("rm", "-f", cid)


# The container names the test process, which outlives it, as its owner: killed, this
# envgen leaves a container that no other envgen on the daemon takes for an orphan (one
# would reap it, as designed, before it could end itself) until its deadline, long after
# its own limit ended it. And this one reaps nothing: other runs' containers are theirs.
_HOLD = """
import os, socket, sys
from envgen.runtime import docker as engine
engine.owner = lambda: f"{socket.gethostname()}:{os.getppid()}"
engine.reap = lambda c: []
c = engine.client()
engine.run_to_end(c, sys.argv[1], ["sleep", "600"], float(sys.argv[2]), network_mode="none",
                  labels={"io.envgen.test": sys.argv[3]})
"""


def own_containers(label: str) -> list[str]:
    return docker("ps", "-aq", "--filter", f"label=io.envgen.test={label}").stdout.split()


@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_a_container_whose_envgen_was_killed_ends_itself_at_its_own_limit(tmp_path):
    label = f"own-limit-{os.urandom(6).hex()}"
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, TAG, "3", label], cwd=ROOT)
    try:
        cid = _wait_for(lambda: own_containers(label), 60, "container")[0]
        proc.kill()
        proc.wait(30)
        started = time.monotonic()

        def exited():
            r = docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", cid)
            return r.stdout.split() if r.stdout.startswith("exited") else None
        status = _wait_for(exited, 3 + 30 + 30, "exit of the container on its own")
        # SIGALRM (14) ended it, at 3 s + the 30 s grace after it was started
        assert status == ["exited", str(128 + signal.SIGALRM)]
        assert time.monotonic() - started < 3 + 30 + 10
    finally:
        proc.kill()
        for c in own_containers(label):
            docker("rm", "-f", c)


@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_a_killed_envgen_build_takes_its_docker_build_child_with_it(tmp_path, home):
    iid_before = set(Path("/tmp").glob("envgen-iid-*"))
    proc = _start(["build", "pytorch-cu121", "--no-cache", "--tag", "envgen-test/killed:1"],
                  {"ENVGEN_HOME": home})
    try:
        def builder():
            found = []
            for p in children_of(proc.pid):
                try:
                    if b"--iidfile" in Path(f"/proc/{p}/cmdline").read_bytes():
                        found.append(p)
                except OSError:   # a probe that ended meanwhile
                    pass
            return found
        child = _wait_for(builder, 120, "docker build child")[0]
        _wait_for(lambda: "step " in (proc.stderr.readline() or ""), 120, "first step")
        proc.kill()
        proc.wait(30)
        _wait_for(lambda: not alive(child), 30, "end of the docker build child")
    finally:
        proc.kill()
        docker("rmi", "envgen-test/killed:1")
    assert set(Path("/tmp").glob("envgen-iid-*")) == iid_before
    assert docker("image", "inspect", "envgen-test/killed:1").returncode != 0


# ---- a full disk --------------------------------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs as ENVGEN_HOME, filled until `free_pages` 4 KiB pages are left."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")

    def fill(free_pages: int) -> Path:
        (mnt / "certs").mkdir(exist_ok=True)
        left = os.statvfs(mnt).f_bavail - free_pages
        with open(mnt / "filler", "wb") as f:
            f.write(b"x" * 4096 * max(0, left))
            f.flush()
            os.fsync(f.fileno())
        assert os.statvfs(mnt).f_bavail == free_pages
        return mnt
    try:
        yield fill
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_a_full_envgen_home_stops_certify_before_it_runs_anything(tiny_tmpfs):
    home = tiny_tmpfs(0)
    started = time.monotonic()
    r = envgen("certify", TAG, "--gpus", "none", env={"ENVGEN_HOME": str(home)})
    _no_traceback(r)
    assert r.returncode == 3
    assert "cannot write certificates" in r.stderr and "No space left on device" in r.stderr
    assert time.monotonic() - started < 15     # the payload (about 15 s) never started


@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_a_disk_that_fills_during_certify_loses_no_result(tiny_tmpfs):
    home = tiny_tmpfs(1)      # room for the store's check, not for a certificate
    r = envgen("certify", TAG, "--gpus", "none", env={"ENVGEN_HOME": str(home)})
    _no_traceback(r)
    assert r.returncode == 3
    assert "passed but its certificate could not be saved" in r.stderr
    cert = json.loads(r.stdout)
    assert cert["passed"] is True and cert["level"] == "cpu"
    # no partial file either (the store's lock and its empty history folder hold no result)
    assert [p for p in (home / "certs").rglob("*") if p.is_file() and
            p.name != ".store.lock"] == []


@pytest.mark.usefixtures("built")
@pytest.mark.docker
def test_a_payload_under_a_user_that_maps_to_root_is_refused_by_its_own_pid_1(tmp_path):
    """An image whose USER is a name /etc/passwd maps to uid 0 (`toor`) passes the name
    check; the container's PID 1 refuses to start the payload, so certify fails (exit 1)
    saying why, and nothing is stored."""
    ref = "envgen-test/toor:1"
    (tmp_path / "Dockerfile").write_text(
        f"FROM {TAG}\nUSER root\nRUN echo 'toor:x:0:0::/root:/bin/sh' >> /etc/passwd\n"
        "USER toor\n")
    assert docker("build", "-q", "-t", ref, str(tmp_path)).returncode == 0
    try:
        home = tmp_path / "home"
        r = envgen("certify", ref, "--gpus", "none", env={"ENVGEN_HOME": str(home)})
        _no_traceback(r)
        assert r.returncode == 1, r.stderr[-2000:]
        assert "refused to run the payload as root" in r.stdout + r.stderr
        assert not [p for p in (home / "certs").glob("*.json")
                    if json.loads(p.read_text())["passed"]]
    finally:
        docker("rmi", ref)
