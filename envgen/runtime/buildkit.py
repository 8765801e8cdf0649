"""The Docker engine's builds, as processes: the BuildKit CLI (`docker buildx build`, or a
pre-23 `docker build` with DOCKER_BUILDKIT=1) run on a context folder, its output read line
by line under an idle timeout, the image ID from --iidfile; or the docker SDK's classic
builder where there is no such CLI. Nothing here reads the output: each line goes to the
caller's callback, and a failed build's sentence is the caller's (build/buildkit.py keeps
the log, the steps and the diagnoses). DockerEngine.build (runtime/engine.py) picks one."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..core.errors import BuildFailed, EnvironmentMissing
from ..core.model import DEFAULT_PLATFORM
from .docker import BuildCli, causes, daemon_failed, die_with_parent, end_session, timed_out

IDLE_S = 1800.0   # a build that prints nothing for this long is stuck (a hung daemon)
TICK_S = 1.0      # how often a silent build's callback is given None (for a heartbeat)


def _lines(proc, idle: float, tick: float | None = None):
    """The child's output lines, read from the raw pipe (a buffered reader would hide lines
    from select); None after each `tick` s without output (for a heartbeat); TimeoutError
    after `idle` s without any output."""
    import selectors
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    pending = b""
    last = time.monotonic()
    try:
        while True:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                raise TimeoutError(idle)
            if not sel.select(timeout=min(left, tick) if tick else left):
                if tick:
                    yield None
                continue
            last = time.monotonic()
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            *done, pending = (pending + chunk).split(b"\n")
            for raw in done:
                yield raw.decode("utf-8", "replace") + "\n"
        if pending:
            yield pending.decode("utf-8", "replace")
    finally:
        sel.close()


def buildkit_argv(cli: BuildCli, context: Path, dockerfile: Path, iid: Path, *,
                  no_cache: bool = False, platform: str = DEFAULT_PLATFORM,
                  build_args: dict | None = None, secrets=(), network: str | None = None
                  ) -> list[str]:
    """The BuildKit command line of one untagged build; `secrets` are (id, path) pairs."""
    argv = [*cli.argv, "--progress=plain", "--iidfile", str(iid), "-f", str(dockerfile)]
    for sid, src in secrets:
        argv += ["--secret", f"id={sid},src={src}"]
    if no_cache:
        argv.append("--no-cache")
    if platform != DEFAULT_PLATFORM:   # linux/arm64: its steps run through QEMU on x86_64
        argv += ["--platform", platform]
    for key, value in (build_args or {}).items():
        argv += ["--build-arg", f"{key}={value}"]
    if network:   # e.g. "none" on an offline daemon
        argv.append(f"--network={network}")
    argv.append(str(context))
    return argv


def build_buildkit(cli: BuildCli, context: Path, iid: Path | None, *, dockerfile: Path,
                   on_line: Callable[[str | None], None], failed: Callable[[], str],
                   log: str, idle: float = IDLE_S, **options) -> str:
    """Run the BuildKit CLI on `context` and return the image ID it wrote to --iidfile
    `iid`; None: a file of this run's own, in a private folder beside the context (a
    shared name would let a concurrent build of the same stack read, or delete, this one's
    ID), removed at the end. Each output line goes to `on_line`, and None each TICK_S s of
    silence; past `idle` s of silence the build is stopped (EnvironmentMissing); a build
    that fails raises BuildFailed(`failed()`). `log` names where the caller keeps it."""
    if iid is None:
        scratch = Path(tempfile.mkdtemp(prefix=f".{context.name}.", suffix=".iid",
                                        dir=context.parent))
        try:
            return build_buildkit(cli, context, scratch / "iid", dockerfile=dockerfile,
                                  on_line=on_line, failed=failed, log=log, idle=idle,
                                  **options)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    iid.unlink(missing_ok=True)
    argv = buildkit_argv(cli, context, dockerfile, iid, **options)
    env = {**os.environ, **dict(cli.env)}
    try:
        # a session of its own: a CLI that runs buildx as a plugin (a 20.10 client) leaves
        # the plugin's process, which drives the build, running when only the CLI is killed
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, preexec_fn=die_with_parent,
                                start_new_session=True)
        try:
            for line in _lines(proc, idle, tick=TICK_S):
                on_line(line)
            rc = proc.wait()
        except TimeoutError:
            end_session(proc)
            raise EnvironmentMissing(f"the build printed nothing for {idle:g} s "
                                     f"(ENVGEN_BUILD_IDLE_TIMEOUT) and was stopped: the Docker "
                                     f"daemon or BuildKit is stuck; the log is {log}") from None
        except BaseException:
            end_session(proc)
            raise
        if rc != 0 or not iid.exists():
            why = failed()
            raise why if isinstance(why, Exception) else BuildFailed(why)
        return iid.read_text().strip()
    finally:
        iid.unlink(missing_ok=True)


def build_classic(c, context: Path, *, dockerfile: Path, on_line: Callable[[str], None],
                  log: str, failed: Callable[[], str | Exception] | None = None,
                  idle: float = IDLE_S, no_cache: bool = False,
                  platform: str = DEFAULT_PLATFORM, build_args: dict | None = None,
                  network: str | None = None) -> str:
    """Build `context` with the docker SDK's classic builder (no secrets, no cache mounts)
    and return the image ID; each text it streams goes to `on_line`, an error it reports
    too, then the caller's `failed()` reading of it (a sentence: BuildFailed; an exception,
    e.g. EnvironmentMissing for a full disk: raised). A daemon that fails the request
    itself (HTTP 5xx) is this host's fault (exit 3); past `idle` s without a word from
    the daemon the build is given up (EnvironmentMissing). `log` names the caller's log."""
    import docker

    def fail(error: str, cause: BaseException | None = None):
        on_line(error.rstrip("\n") + "\n")
        why = failed() if failed else None
        if isinstance(why, Exception):
            raise why from cause
        status = getattr(getattr(cause, "response", None), "status_code", None) or 0
        if cause is not None and (status >= 500 or not status):
            raise EnvironmentMissing(f"{daemon_failed(cause)}; the log is {log}") from cause
        raise BuildFailed(why or f"build failed: {error.strip()[:160]}; the log is {log}"
                          ) from cause

    image_id = None
    try:
        for chunk in c.api.build(path=str(context),
                                 dockerfile=str(dockerfile.relative_to(context)), rm=True,
                                 forcerm=True, decode=True, nocache=no_cache,
                                 buildargs=build_args or None, network_mode=network,
                                 platform=None if platform == DEFAULT_PLATFORM else platform,
                                 timeout=idle):   # the socket's read timeout: idle seconds
            on_line(chunk.get("stream") or chunk.get("status") or "")
            if "error" in chunk:
                fail(chunk["error"])
            aux = chunk.get("aux") or {}
            image_id = aux.get("ID", image_id)
    except docker.errors.APIError as e:
        fail(" ".join(str(getattr(e, "explanation", None) or e).split()), e)
    except (BuildFailed, EnvironmentMissing):
        raise
    except Exception as e:
        if any(timed_out(x) for x in causes(e)):
            raise EnvironmentMissing(f"the classic build had no word from the Docker daemon "
                                     f"for {idle:g} s (ENVGEN_BUILD_IDLE_TIMEOUT) and was "
                                     f"given up: the daemon is stuck; the log is {log}"
                                     ) from None
        raise
    if not image_id:
        raise BuildFailed(f"the classic builder returned no image ID; the log is {log}")
    return image_id
