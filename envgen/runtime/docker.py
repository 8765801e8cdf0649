"""The Docker edge: the SDK for images and containers, a BuildKit-capable CLI for builds
(found here, run by runtime/buildkit.py). docker-py cannot drive BuildKit
(docker/docker-py#2230), so builds shell out."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache

from ..core import home as state
from ..core import leftovers
from ..core.errors import EnvironmentMissing, InputError
from ..core.model import Stack
from ..core.signals import deferred
from ..matrix.wire import stack_from_labels

START_HINT = ("start it with `setsid dockerd >/tmp/dockerd.log 2>&1 &` as root (after "
              "`apt-get install -y docker.io`), or `sudo systemctl start docker`")


PING_S = 15.0    # a daemon that accepts and never answers is given up after this
CALL_S = 120.0   # the bound on any one later call (reads of a stream included)
OWNER_LABEL = "io.envgen.owner"        # HOST:PID of the envgen that started a container
DEADLINE_LABEL = "io.envgen.deadline"  # epoch seconds after which it has no business running
PIDNS_LABEL = "io.envgen.pidns"        # the owner's PID namespace: its pid means nothing outside
CALL_LABEL = "io.envgen.call"          # one run_to_end's token: finds a container half-created


def seconds_from_env(name: str, default: float) -> float:
    """A timeout from the environment (ENVGEN_DOCKER_TIMEOUT and friends), or the default;
    its range is core/environ.py's, which the CLI checks at start."""
    from ..core.environ import checked
    value = checked(name)
    return float(value) if value else default


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def causes(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def timed_out(e: BaseException) -> bool:
    """A call to the daemon that got no answer in time (requests' ReadTimeout and friends)."""
    return "timed out" in str(e).lower() or "timeout" in type(e).__name__.lower()


def unreachable(e: BaseException, waited: float) -> EnvironmentMissing:
    """The one sentence for a daemon that cannot be talked to, naming why."""
    host = docker_host()
    chain = list(causes(e))
    if any(isinstance(x, PermissionError) for x in chain):
        return EnvironmentMissing(
            f"permission denied on the Docker socket {host}: run envgen as a member of the "
            f"docker group (`sudo usermod -aG docker $USER`, then log in again) or as root")
    if any(timed_out(x) for x in chain):
        return EnvironmentMissing(
            f"the Docker daemon at {host} accepted the connection but did not answer within "
            f"{waited:g} s (ENVGEN_DOCKER_PING_TIMEOUT); restart it, or check what holds it")
    return EnvironmentMissing(f"no Docker daemon answers at {host} ({type(chain[-1]).__name__})"
                              f"; {START_HINT}")


def daemon_failed(e: BaseException) -> EnvironmentMissing | None:
    """A docker SDK or transport error that reached the shell, as one sentence (exit 3), or
    None when `e` is not one. A daemon that answered ping may still fail later (HTTP 500)."""
    mod = type(e).__module__ or ""
    if not mod.startswith(("docker", "requests", "urllib3")):
        return None
    chain = list(causes(e))
    if any("timeout" in type(x).__name__.lower() for x in chain):
        return EnvironmentMissing(f"the Docker daemon at {docker_host()} stopped answering "
                                  f"(no reply within ENVGEN_DOCKER_TIMEOUT s)")
    status = getattr(getattr(e, "response", None), "status_code", None)
    what = getattr(e, "explanation", None) or str(e)
    what = " ".join(str(what).split())[:200]
    if status:
        return EnvironmentMissing(f"the Docker daemon at {docker_host()} failed a request "
                                  f"(HTTP {status}: {what})")
    return EnvironmentMissing(f"the Docker daemon at {docker_host()} failed: {what}")


def client():
    """A docker SDK client that has answered a ping, or EnvironmentMissing (exit 3). The
    first calls (API version, ping) wait PING_S at most; every later call CALL_S
    (ENVGEN_DOCKER_PING_TIMEOUT, ENVGEN_DOCKER_TIMEOUT). Containers that a killed envgen
    left behind are removed here, so every command that talks to the daemon reaps them."""
    import docker
    ping = seconds_from_env("ENVGEN_DOCKER_PING_TIMEOUT", PING_S)
    call = seconds_from_env("ENVGEN_DOCKER_TIMEOUT", CALL_S)
    try:
        c = docker.from_env(timeout=ping)
        c.ping()
    except Exception as e:  # DockerException, requests' and OSError variants
        raise unreachable(e, ping) from e
    c.api.timeout = call
    reap(c)
    return c


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_namespace() -> str:
    """This process's PID namespace (two CI containers may share a host name and pids)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def orphaned(labels: dict, now: float, host: str | None = None) -> bool:
    """Whether a container labelled by envgen has outlived what started it: its envgen
    (on this host) is gone, or its deadline has passed."""
    host = host or socket.gethostname()
    try:
        if float(labels.get(DEADLINE_LABEL, "inf")) < now:
            return True
    except ValueError:
        return True
    who, _, pid = labels.get(OWNER_LABEL, "").rpartition(":")
    if labels.get(PIDNS_LABEL, "") != pid_namespace():
        return False   # another namespace's pid cannot be checked from here: the deadline decides
    return who == host and pid.isdigit() and not state.pid_alive(int(pid))


def _remove_labelled(c, token: str) -> bool:
    """Remove the containers of this call by their label; False when the daemon did not."""
    try:
        for ct in c.containers.list(all=True, filters={"label": f"{CALL_LABEL}={token}"}):
            ct.remove(force=True)
    except Exception:  # the daemon is gone too: the next envgen's reap() removes it
        return False
    return True


def _inherited(c, ct, labels: dict) -> bool:
    """Whether the container's envgen labels came from its image (a container inherits
    its image's labels): then envgen did not start it, and it is not envgen's to remove."""
    try:
        image = c.images.get(ct.attrs.get("Image") or ct.image.id).labels or {}
    except Exception:   # its image is gone: the labels were set at create, by envgen
        return False
    return any(image.get(k) is not None and image.get(k) == labels.get(k)
               for k in (OWNER_LABEL, CALL_LABEL))


def reap(c) -> list[str]:
    """Remove envgen's containers whose envgen was killed (SIGKILL leaves no chance to clean
    up) or that ran past their deadline. Returns their IDs; never fails the command."""
    removed = []
    try:
        for ct in c.containers.list(all=True, filters={"label": CALL_LABEL}):
            labels = ct.labels or {}
            if orphaned(labels, time.time()) and not _inherited(c, ct, labels):
                ct.remove(force=True)
                removed.append(ct.id)
    except Exception:  # reaping is housekeeping: a daemon fault shows in the real call
        pass
    return removed


def end_session(proc, grace: float = 5.0) -> None:
    """End `proc` (started with start_new_session) and every process of its session: SIGTERM
    first (buildx cancels the build on the daemon), SIGKILL to what is left after `grace`
    s; then reap it."""
    import signal
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while True:
        proc.poll()   # reap the CLI, so that the group is empty once its plugin ends too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        time.sleep(0.1)
    proc.wait()


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when envgen dies, SIGKILL included, so no
    `docker build` outlives the envgen that started it (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass


@dataclass(frozen=True)
class BuildCli:
    """How to run a BuildKit build from the command line."""

    argv: tuple[str, ...]       # e.g. ("docker", "buildx", "build", "--load")
    env: tuple[tuple[str, str], ...]
    describe: str


def _run(argv, env=None, timeout=20) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except (OSError, subprocess.TimeoutExpired):
        return None


@lru_cache(maxsize=1)
def buildkit_cli() -> BuildCli | None:
    """The first docker CLI that can build with BuildKit: buildx, or a pre-23 client whose
    `docker build` still takes DOCKER_BUILDKIT=1. None when there is no such client."""
    seen, candidates = set(), []
    for c in (os.environ.get("ENVGEN_DOCKER"), shutil.which("docker"), "/usr/bin/docker",
              "/usr/local/bin/docker"):
        if c and os.path.exists(c) and os.path.realpath(c) not in seen:
            seen.add(os.path.realpath(c))
            candidates.append(c)
    for docker in candidates:
        r = _run([docker, "buildx", "version"])
        if r and r.returncode == 0:
            return BuildCli((docker, "buildx", "build", "--load"), (), f"{docker} buildx")
    for docker in candidates:
        r = _run([docker, "version", "--format", "{{.Client.Version}}"])
        if r and r.stdout.strip():
            major = r.stdout.strip().split(".")[0]
            if major.isdigit() and int(major) < 23:
                return BuildCli((docker, "build"), (("DOCKER_BUILDKIT", "1"),),
                                f"{docker} build (DOCKER_BUILDKIT=1)")
    return None


def image_or_none(c, ref: str):
    """The image `ref` names on this daemon, or None (a malformed reference names none)."""
    import docker

    from ..core.image import parse_image_ref
    try:
        parse_image_ref(ref)
    except InputError:
        return None
    try:
        return c.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as e:
        if "invalid reference" in str(e).lower():
            return None
        raise


def remove_image(c, ref: str) -> None:
    import docker
    try:
        c.images.remove(ref, force=True)
    except docker.errors.ImageNotFound:
        pass


# The container's own time limit, run as its PID 1 by the image's python: it starts the
# command in a process group of its own, and when the alarm fires (or docker stops it) it
# kills that group and exits. So the command ends even when the envgen that waits for it
# was killed. A handler is installed, so the alarm is not ignored as a PID 1's default
# signals are; no docker-init is needed (some daemons lack one). Grandchildren that lose
# their parent are reaped here too.
# certification's: a payload never runs as uid 0, whatever name the image's user has
_NO_ROOT = """
import os, sys
if os.getuid() == 0 or os.geteuid() == 0:
    sys.stderr.write("envgen: refused to run the payload as root (uid 0): the image's user "
                     "maps to root; envgen certifies as a user that is not root\\n")
    os._exit(126)
"""
# the end of a container's PID 1 (this one and envgen run's): it reaps every process that
# ends under it and exits with its child's code (128 + N for a signal N)
CHILD_WAIT = """
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        os._exit(1)
    if pid == child:
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
"""
_LIMIT = """
import os, signal, sys
limit, argv = int(sys.argv[1]), sys.argv[2:]
child = os.fork()
if child == 0:
    os.setpgid(0, 0)
    os.execvp(argv[0], argv)
def stop(signum, _frame):
    try:
        os.killpg(child, signal.SIGKILL if signum == signal.SIGALRM else signum)
    except ProcessLookupError:
        pass
    if signum == signal.SIGALRM:
        sys.stderr.write(f"envgen: the container's own time limit of {limit} s ended it\\n")
        os._exit(128 + signum)
for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, stop)
signal.alarm(limit)
""" + CHILD_WAIT
GRACE_S = 30
# A payload that prints without end fills neither the daemon's disk nor envgen's memory:
# its log keeps the last 64 MB (the report is its last line), read once it ends.
_LOG_CONFIG = {"type": "json-file", "config": {"max-size": "64m", "max-file": "1"}}


def _follow(container, on_line):
    """Hand each line the container writes to stderr to `on_line`, as it comes, from a
    thread; best effort (a stream that breaks just stops the live lines: the whole output
    is read again once the container ends)."""
    import threading

    def pump():
        import signal
        # Signals go to the main thread, whose wait() they must interrupt: none lands here.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        pending = b""
        try:
            for chunk in container.logs(stdout=False, stderr=True, stream=True, follow=True):
                *done, pending = (pending + chunk).split(b"\n")
                for raw in done:
                    on_line(raw.decode("utf-8", "replace"))
        except Exception:  # the daemon closed the stream, or a read timed out: no more lines
            pass
    t = threading.Thread(target=pump, name="envgen-follow", daemon=True)
    t.start()
    return t


def run_to_end(c, image: str, command: list[str], timeout: float, before_start=None,
               labels: dict | None = None, on_stderr_line=None, refuse_root: bool = False,
               **create_kwargs) -> tuple[int, str, str]:
    """Run `command` (its first word a program on the image's PATH; the image has python)
    in a new container of `image` and return (exit code, stdout, stderr). Past `timeout` s
    the container is killed and TimeoutError raised; past timeout + GRACE_S it ends itself.
    It is removed on every path, Ctrl-C and SIGTERM included; after a SIGKILL the next
    envgen removes it (`reap`). `before_start(container)` may inspect it first;
    `on_stderr_line(text)` sees the container's stderr line by line while it runs.
    `refuse_root`: the container's PID 1 starts nothing as uid 0 (certification)."""
    limit = int(timeout) + GRACE_S
    token = os.urandom(8).hex()
    labels = {**(labels or {}), OWNER_LABEL: owner(), PIDNS_LABEL: pid_namespace(),
              DEADLINE_LABEL: str(int(time.time()) + limit + GRACE_S), CALL_LABEL: token}
    container = None
    try:
        # A signal waits until the daemon has answered (each call is bounded by the client's
        # timeout): cut short while a request was in flight, the daemon went on to make the
        # container after a search for it had found nothing, or to start it while it was
        # being removed, and the removal failed.
        with deferred() as held:
            try:
                pid1 = (_NO_ROOT + _LIMIT) if refuse_root else _LIMIT
                container = c.containers.create(image, command=["python", "-c", pid1,
                                                                str(limit), *command],
                                                detach=True, labels=labels,
                                                **{"log_config": _LOG_CONFIG, **create_kwargs})
            except BaseException:
                # made, but no handle came back (a fault while docker-py read the reply or
                # inspected the new container): find it by its token
                _remove_labelled(c, token)
                raise
            if not held:   # a signal came: the container is removed, never started
                if before_start is not None:
                    before_start(container)
                container.start()
        follower = _follow(container, on_stderr_line) if on_stderr_line else None
        try:
            code = int(container.wait(timeout=timeout).get("StatusCode", -1))
        except Exception as e:  # requests' ReadTimeout and friends
            if not timed_out(e):
                raise
            try:
                container.kill()
            except Exception as k:   # it ended just then (409 not running, 404 gone)
                if getattr(getattr(k, "response", None), "status_code", None) not in (404,
                                                                                    409):
                    raise
            raise TimeoutError(f"no exit within {timeout} s") from None
        if follower is not None:
            follower.join(timeout=5)
        stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        return code, stdout, stderr
    finally:
        if container is not None:
            _remove(c, container, token)


def _remove(c, container, token: str, tries: int = 5) -> None:
    """Remove the container (killing it), trying again while the daemon is busy with it
    ("removal already in progress", a start it has not finished); then by its token."""
    for attempt in range(tries):
        try:
            container.remove(force=True)
            return
        except Exception as e:  # noqa: PERF203 - a daemon fault: look again shortly
            if getattr(getattr(e, "response", None), "status_code", None) == 404:
                return   # already gone (the daemon's "no such container")
            if timed_out(e):
                # a daemon that does not answer: asking again waits as long each time
                # (minutes in all); the next envgen's reap removes it by its labels
                leftovers.note(f"container {_short(container, token)}")
                return
            time.sleep(0.2 * (attempt + 1))
    if not _remove_labelled(c, token):
        leftovers.note(f"container {_short(container, token)}")


def _short(container, token: str) -> str:
    cid = getattr(container, "id", None)
    return cid[:12] if isinstance(cid, str) and cid else f"labelled {CALL_LABEL}={token}"


# What an image's bits are, for a container that runs them: its layers (by content) and
# the parts of its config a run reads. Left out: `created` and the history's times (a
# rebuild stamps its own clock: the 20.10 daemon's BuildKit and `docker import` do, whatever
# SOURCE_DATE_EPOCH says), and `Image`, `Hostname`, `ContainerConfig` (the build's own
# container and parent image ID, which the layers already pin).
CONTENT_CONFIG = ("User", "Env", "Cmd", "Entrypoint", "WorkingDir", "Labels", "ExposedPorts",
                  "Volumes", "StopSignal", "Shell", "Healthcheck", "OnBuild", "ArgsEscaped")


def content_of(attrs: dict) -> str:
    """sha256 of an image's content as `docker inspect` shows it: the layers' digests, the
    platform and the config a container runs with, without any clock. Two builds of the
    same lock that give the same layers give the same content, though their image IDs
    differ by the build's time (docs/certificate-store.md)."""
    import hashlib
    import json
    cfg = attrs.get("Config") or {}
    doc = {"rootfs": list((attrs.get("RootFS") or {}).get("Layers") or []),
           "architecture": attrs.get("Architecture") or "", "os": attrs.get("Os") or "",
           "variant": attrs.get("Variant") or "",
           "config": {k: cfg[k] for k in CONTENT_CONFIG if cfg.get(k) not in (None, "", [], {})}}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Target:
    image_id: str
    tags: tuple[str, ...]
    stack: Stack
    env: dict
    user: str
    labels: dict
    repo_digests: tuple[str, ...]
    content: str = ""   # content_of: what the bits are, whatever the build's clock


def inspect_target(c, ref: str) -> Target:
    """The image `ref` names on this daemon with the Stack its label carries, checked."""
    img = image_or_none(c, ref)
    if img is None:
        raise InputError(f"no image {ref!r} on this Docker daemon (build it with "
                         f"`envgen build SPEC`)")
    cfg = img.attrs.get("Config") or {}
    labels = cfg.get("Labels") or {}
    stack = stack_from_labels(labels, f"image {ref}")
    env = dict(x.split("=", 1) for x in cfg.get("Env") or [] if "=" in x)
    return Target(img.id, tuple(img.tags), stack, env, cfg.get("User") or "", dict(labels),
                  tuple(img.attrs.get("RepoDigests") or ()), content_of(img.attrs))
