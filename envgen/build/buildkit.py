"""Stack → image: ensure the base, render the context, build with BuildKit (or the classic
builder), tag only after success. The log goes to a file; progress goes to a callback."""
from __future__ import annotations

import os
import re
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..core import home as state
from ..core.environ import checked
from ..core.errors import BuildFailed, EnvironmentMissing, InputError
from ..core.files import check_writable
from ..core.image import default_tag, parse_tagged, split_tag
from ..core.model import DEFAULT_PLATFORM, Closure, Stack
from ..resolve.closure import CA_BUNDLE, closure_for
from ..runtime import docker as engine
from .base import ensure_base
from .context import write_context
from .steps import Steps

_ERROR_STEP = re.compile(r"^#\d+ ERROR|^ERROR: |failed to solve|executor failed running")
# pip's words for a file whose bytes are not the ones the closure pins:
#     torch==2.4.1 from https://…/torch-2.4.1-….whl:
#         Expected sha256 0000…
#              Got        5fa9…
_HASH_PACKAGE = re.compile(r"(?:^#\d+ [\d.]+)?\s*([A-Za-z0-9._-]+==\S+) from (https?://\S+)")
_HASH_EXPECTED = re.compile(r"Expected sha256 ([0-9a-f]{64})")
_HASH_GOT = re.compile(r"Got\s+([0-9a-f]{64})")
# uv's words for the same:   Hash mismatch for `torch==2.4.1`  Expected: sha256:0000…
#                            Computed: sha256:5fa9… (each on a line of its own)
_UV_HASH = re.compile(r"Hash mismatch for `([A-Za-z0-9._-]+==[^`\s]+)`")
_UV_SHA = re.compile(r"sha256:([0-9a-f]{64})")
_NO_NETWORK = re.compile(r"Temporary failure in name resolution|Failed to establish a new "
                         r"connection|Network is unreachable|No route to host|"
                         r"dns error|failed to lookup address")


def explain_failure(lines: list[str]) -> str | None:
    """One sentence for the failures a user can act on, from the build's own words."""
    text = "\n".join(lines)
    uv = _UV_HASH.search(text)
    if uv:
        after = text[uv.end():]
        exp, got = after.find("Expected:"), after.find("Computed:")
        e = _UV_SHA.search(after, exp) if exp >= 0 else None
        g = _UV_SHA.search(after, got) if got >= 0 else None
        detail = (f" (the closure pins sha256:{e.group(1)[:16]}…, the index served "
                  f"sha256:{g.group(1)[:16]}…)") if e and g else ""
        return (f"{uv.group(1)} on the index does not match the sha256 its closure pins"
                f"{detail}: the file changed since the closure was resolved, or the index "
                f"is not the one it was resolved against")
    if "THESE PACKAGES DO NOT MATCH THE HASHES" in text:
        pkg = next((m.group(1) for ln in lines if (m := _HASH_PACKAGE.match(ln.strip()))),
                   "a package")
        exp, got = _HASH_EXPECTED.search(text), _HASH_GOT.search(text)
        detail = (f" (the closure pins sha256:{exp.group(1)[:16]}…, the index served "
                  f"sha256:{got.group(1)[:16]}…)") if exp and got else ""
        return (f"{pkg} on the index does not match the sha256 its closure pins{detail}: "
                f"the file changed since the closure was resolved, or the index is not the "
                f"one it was resolved against")
    if _NO_NETWORK.search(text):
        return ("pip inside the build could not reach the package index (no network or no "
                "DNS in the build's containers; ENVGEN_BUILD_NETWORK=host uses the host's)")
    return None


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tag: str
    stack: Stack
    base_ref: str
    log: str
    seconds: float
    builder: str
    size_bytes: int
    closure: Closure | None = None
    closure_from: str = ""
    layers: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"image_id": self.image_id, "tag": self.tag, "base": self.base_ref,
                "log": self.log, "seconds": round(self.seconds, 2), "builder": self.builder,
                "size_bytes": self.size_bytes, "layers": list(self.layers),
                "closure": {"key": self.closure.key, "from": self.closure_from,
                            "packages": len(self.closure.pins),
                            "hashed": sum(1 for p in self.closure.pins if p.sha256)}
                if self.closure else None,
                "stack": self.stack.to_json()}


def _quiet(_msg: str) -> None:
    pass


def tag_image(c, image_id: str, tag: str) -> None:
    repo, name = split_tag(tag)
    if not c.images.get(image_id).tag(repo, name):
        raise BuildFailed(f"could not tag {image_id} as {tag}")


def build(stack: Stack, tag: str | None = None, progress=_quiet, no_cache: bool = False,
          builder: str = "auto", client=None, closure: Closure | None = None,
          tag_it: bool = True) -> BuildResult:
    """Build `stack` from its closure (the stored one unless given, as `verify --rebuild`
    gives the lock's), installing only those files, each checked against its sha256.
    `tag_it=False` leaves the image untagged (the caller tags it once it is certified)."""
    tag = tag or default_tag(stack)
    parse_tagged(tag)
    for folder in (state.logs_dir(), state.contexts_dir()):
        check_writable(folder)
    c = client or engine.client()
    started = time.monotonic()
    origin = "given"
    if closure is None:
        closure, origin = closure_for(stack, progress=progress)
    base_ref = ensure_base(c, stack.base, progress)
    cli = engine.buildkit_cli() if builder in ("auto", "buildkit") else None
    if builder == "buildkit" and cli is None:
        raise EnvironmentMissing("no docker CLI that can use BuildKit (docker buildx, or a "
                                 "client older than 23 with DOCKER_BUILDKIT=1)")
    logs = state.logs_dir()
    log_path = logs / f"build-{stack.stack}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    ctx = state.contexts_dir() / stack.stack
    write_context(stack, closure, ctx, base_ref=base_ref, buildkit=cli is not None)
    args = build_args(stack)
    if cli is not None:
        image_id = _build_buildkit(cli, ctx, log_path, progress, no_cache,
                                   iid=ctx.with_name(f".{stack.stack}.iid"), build_args=args,
                                   platform=stack.platform)
        used = cli.describe
    else:
        progress("no BuildKit: the classic builder neither mounts caches nor stamps file "
                 "times, so this image's layers are not reproducible bit for bit")
        image_id = _build_classic(c, ctx, log_path, progress, no_cache, args,
                                  platform=stack.platform)
        used = "docker SDK classic builder"
    if tag_it:
        tag_image(c, image_id, tag)
    img = c.images.get(image_id)
    return BuildResult(image_id=image_id, tag=tag, stack=stack, base_ref=base_ref,
                       log=str(log_path), seconds=time.monotonic() - started, builder=used,
                       size_bytes=int(img.attrs.get("Size") or 0), closure=closure,
                       closure_from=origin,
                       layers=tuple((img.attrs.get("RootFS") or {}).get("Layers") or ()))


MIRROR_URL = re.compile(r"https?://[A-Za-z0-9._~:/%+-]{1,300}")


def build_args(stack: Stack) -> dict[str, str]:
    """A project's apt step, and the builder stage of its sdists, on a local Debian base
    read the base's snapshot from a mirror that serves it (ENVGEN_DEBIAN_MIRROR, the default
    mirror when it does, else snapshot.debian.org): the same choice that made the base."""
    if stack.project is None or not (stack.project.apt or stack.project.requirements) \
            or stack.base.kind != "local" or not stack.base.snapshot:
        return {}
    from .base import choose_mirror
    mirror = choose_mirror(stack.base)
    if not MIRROR_URL.fullmatch(mirror):
        raise InputError(f"ENVGEN_DEBIAN_MIRROR={mirror[:60]!r} is not a plain http(s) URL")
    return {"ENVGEN_DEBIAN_MIRROR": mirror}


IDLE_S = 1800.0   # a build that prints nothing for this long is stuck (a hung daemon)


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


def _build_buildkit(cli, ctx: Path, log_path: Path, progress, no_cache: bool,
                    iid: Path, build_args: dict | None = None,
                    platform: str = DEFAULT_PLATFORM) -> str:
    """Run the BuildKit CLI on `ctx`; the image ID comes from --iidfile `iid` (beside the
    context, not in /tmp: a killed run leaves nothing there, the next one overwrites it)."""
    iid.unlink(missing_ok=True)
    try:
        return _run_buildkit(cli, ctx, log_path, progress, no_cache, iid, build_args or {},
                             platform)
    finally:
        iid.unlink(missing_ok=True)


def _run_buildkit(cli, ctx: Path, log_path: Path, progress, no_cache: bool,
                  iid: Path, build_args: dict | None = None,
                  platform: str = DEFAULT_PLATFORM) -> str:
    from ..runtime.docker import seconds_from_env
    idle = seconds_from_env("ENVGEN_BUILD_IDLE_TIMEOUT", IDLE_S)
    argv = [*cli.argv, "--progress=plain", "--iidfile", str(iid), "-f",
            str(ctx / "Dockerfile")]
    if os.path.exists(CA_BUNDLE):
        argv += ["--secret", f"id=ca,src={CA_BUNDLE}"]
    netrc = os.environ.get("ENVGEN_NETRC")
    if netrc:
        argv += ["--secret", f"id=netrc,src={netrc}"]
    if no_cache:
        argv.append("--no-cache")
    if platform != DEFAULT_PLATFORM:   # linux/arm64: its steps run through QEMU on x86_64
        argv += ["--platform", platform]
    for key, value in (build_args or {}).items():
        argv += ["--build-arg", f"{key}={value}"]
    network = checked("ENVGEN_BUILD_NETWORK")   # e.g. "none" on an offline daemon
    if network:
        argv.append(f"--network={network}")
    argv.append(str(ctx))
    env = {**os.environ, **dict(cli.env)}
    failed_step, error_line = "", ""
    tail: deque[str] = deque(maxlen=400)
    steps = Steps()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=engine.die_with_parent)
        try:
            for line in _lines(proc, idle, tick=1.0):
                beat = steps.heartbeat()
                if beat is not None:
                    progress(beat)
                if line is None:
                    continue
                log.write(line)
                tail.append(line.rstrip("\n"))
                event = steps.feed(line)
                if event is not None:
                    progress(event)
                if _ERROR_STEP.search(line) and not failed_step:
                    failed_step = steps.last_header or line.strip()
                if re.search(r"error|Error|ERROR", line) and "ERROR [" not in line:
                    error_line = line.strip()
            rc = proc.wait()
        except TimeoutError:
            proc.kill()
            proc.wait()
            raise EnvironmentMissing(f"the build printed nothing for {idle:g} s "
                                     f"(ENVGEN_BUILD_IDLE_TIMEOUT) and was stopped: the Docker "
                                     f"daemon or BuildKit is stuck; the log is {log_path}") \
                from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0 or not iid.exists():
        step = failed_step or steps.last_header or "before the first step"
        explained = explain_failure(list(tail))
        if explained:
            raise BuildFailed(f"build failed: {explained}; the log is {log_path}")
        why = f" ({error_line[:200]})" if error_line else ""
        raise BuildFailed(f"build failed at {step[:160]}{why}; the log is {log_path}")
    return iid.read_text().strip()


def _build_classic(c, ctx: Path, log_path: Path, progress, no_cache: bool,
                   build_args: dict | None = None, platform: str = DEFAULT_PLATFORM) -> str:
    import docker
    image_id = None
    started = time.monotonic()
    with open(log_path, "w") as log:
        try:
            for chunk in c.api.build(path=str(ctx), dockerfile="Dockerfile", rm=True,
                                     forcerm=True, decode=True, nocache=no_cache,
                                     buildargs=build_args or None,
                                     platform=None if platform == DEFAULT_PLATFORM
                                     else platform,
                                     timeout=IDLE_S):
                text = chunk.get("stream") or chunk.get("status") or ""
                log.write(text)
                if text.startswith("Step "):
                    progress(f"{text.strip()[:80]} [{time.monotonic() - started:.0f}s]")
                if "error" in chunk:
                    log.write(chunk["error"] + "\n")
                    raise BuildFailed(f"build failed: {chunk['error'].strip()[:160]}; the log "
                                      f"is {log_path}")
                aux = chunk.get("aux") or {}
                image_id = aux.get("ID", image_id)
        except docker.errors.APIError as e:
            raise BuildFailed(f"build failed: {e}; the log is {log_path}") from e
    if not image_id:
        raise BuildFailed(f"the classic builder returned no image ID; the log is {log_path}")
    return image_id
