"""Stack → image: ensure the base, render the context, have the engine build it
(runtime/engine.py: Docker's BuildKit CLI, or its classic builder), tag only after success.
What the build's output means stays here: the engine hands each line to this wing, which
writes the log, turns BuildKit's steps into progress (build/steps.py) and a failure into one
sentence (the failed step, or explain_failure's diagnosis)."""
from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..core import home as state
from ..core.environ import checked
from ..core.errors import BuildFailed, EnvironmentMissing, InputError
from ..core.files import check_writable, locked
from ..core.image import default_tag, parse_tagged, split_tag
from ..core.model import Closure, Stack
from ..resolve.closure import CA_BUNDLE, closure_for
from ..runtime import docker as daemon
from ..runtime.buildkit import IDLE_S
from ..runtime.engine import DockerEngine, Engine
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
# fetch_uv.py's one line (the uv stage of a stack that installs from PyPI)
_FETCH_UV = re.compile(r"envgen: (the installer uv: .+)$", re.M)
_NO_SPACE = re.compile(r"No space left on device", re.I)   # the daemon (Go) says it lowercase
_NO_DAEMON = re.compile(r"Cannot connect to the Docker daemon|error during connect")
_NO_NETWORK = re.compile(r"Temporary failure in name resolution|Failed to establish a new "
                         r"connection|Network is unreachable|No route to host|"
                         r"dns error|failed to lookup address")


def explain_failure(lines: list[str]) -> str | None:
    """One sentence for the failures a user can act on, from the build's own words."""
    text = "\n".join(lines)
    fetch = _FETCH_UV.search(text)
    if fetch:
        return fetch.group(1).rstrip()
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
    return next((said for pattern, said in _HOST_FAULTS if pattern.search(text)), None)


# what this host lacks, not what the stack is: exit 3 (contract.md), not 1
_HOST_FAULTS = (
    (_NO_NETWORK, "pip inside the build could not reach the package index (no network or no "
                  "DNS in the build's containers; ENVGEN_BUILD_NETWORK=host uses the host's)"),
    (_NO_SPACE, "the disk the Docker daemon builds on is full (No space left on device); "
                "free space there (docker builder prune, docker image prune) and build again"),
    (_NO_DAEMON, "the Docker daemon stopped answering during the build"))


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
          tag_it: bool = True, engine: Engine | None = None) -> BuildResult:
    """Build `stack` from its closure (the stored one unless given, as `verify --rebuild`
    gives the lock's), installing only those files, each checked against its sha256.
    `tag_it=False` leaves the image untagged (the caller tags it once it is certified).
    The engine builds (DockerEngine over `client` unless given); this wing makes the base
    and the context, keeps the log and reads the output for `progress` and the errors."""
    tag = tag or default_tag(stack)
    parse_tagged(tag)
    for folder in (state.logs_dir(), state.contexts_dir()):
        check_writable(folder)
    c = client or getattr(engine, "client", None) or daemon.client()
    engine = engine or DockerEngine(c)
    # what builds is settled first: a refusal comes before any base is pulled or made
    used = engine.builder(builder)
    if not used.buildkit and os.environ.get("ENVGEN_NETRC"):
        raise InputError("ENVGEN_NETRC is set, but the classic builder cannot mount it as a "
                         "secret (only BuildKit can, leaving it in no layer): build with "
                         "--builder buildkit (docker buildx) or unset ENVGEN_NETRC")
    started = time.monotonic()
    origin = "given"
    if closure is None:
        closure, origin = closure_for(stack, progress=progress)
    base_ref = ensure_base(c, stack.base, progress)
    logs = state.logs_dir()
    log_path = logs / f"build-{stack.stack}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    ctx = state.contexts_dir() / stack.stack

    def waiting() -> None:
        progress(f"another envgen is building {stack.stack} from {ctx}; waiting for it to "
                 f"finish")
    # one build at a time per context folder, from its render to its image: a second build
    # of the same stack name (another --python, say) would rewrite the Dockerfile mid-build
    with locked(ctx.with_name(f".{stack.stack}"), on_wait=waiting):
        write_context(stack, closure, ctx, base_ref=base_ref, buildkit=used.buildkit)
        if not used.buildkit:
            progress("no BuildKit: the classic builder neither mounts caches nor stamps file "
                     "times, so this image's layers are not reproducible bit for bit")
        with open(log_path, "w") as log:
            output = (BuildKitOutput if used.buildkit else ClassicOutput)(log, log_path,
                                                                          progress)
            image_id = engine.build(
                ctx, builder=builder, no_cache=no_cache, platform=stack.platform,
                build_args=build_args(stack, closure), secrets=build_secrets(),
                network=checked("ENVGEN_BUILD_NETWORK") or None,
                idle=daemon.seconds_from_env("ENVGEN_BUILD_IDLE_TIMEOUT", IDLE_S),
                on_line=output.line, failed=output.failed, log=str(log_path))
    if tag_it:
        tag_image(c, image_id, tag)
    img = c.images.get(image_id)
    return BuildResult(image_id=image_id, tag=tag, stack=stack, base_ref=base_ref,
                       log=str(log_path), seconds=time.monotonic() - started,
                       builder=used.describe, size_bytes=int(img.attrs.get("Size") or 0),
                       closure=closure, closure_from=origin,
                       layers=tuple((img.attrs.get("RootFS") or {}).get("Layers") or ()))


MIRROR_URL = re.compile(r"https?://[A-Za-z0-9._~:/%+-]{1,300}")


def build_args(stack: Stack, closure: Closure) -> dict[str, str]:
    """A project's apt step, and the builder stages of its sdists, on a local Debian base
    read the base's snapshot from a mirror that serves it (ENVGEN_DEBIAN_MIRROR, the default
    mirror when it does, else snapshot.debian.org): the same choice that made the base.
    Asked only when a rendered step reads it (views.reads_debian_mirror, from the closure's
    sdists, which a project stack read back from a lock keeps)."""
    from ..render.views import reads_debian_mirror
    if not reads_debian_mirror(stack, closure):
        return {}   # no step reads a Debian mirror: none is asked
    from .base import choose_mirror
    mirror = choose_mirror(stack.base)
    if not MIRROR_URL.fullmatch(mirror):
        raise InputError(f"ENVGEN_DEBIAN_MIRROR={mirror[:60]!r} is not a plain http(s) URL")
    return {"ENVGEN_DEBIAN_MIRROR": mirror}


def build_secrets() -> tuple[tuple[str, str], ...]:
    """The files a BuildKit build mounts as secrets, as (id, path): this host's CA bundle
    (`ca`, for an index behind a TLS proxy) and ENVGEN_NETRC (`netrc`, a private index's
    login); neither is left in a layer."""
    secrets = []
    if os.path.exists(CA_BUNDLE):
        secrets.append(("ca", CA_BUNDLE))
    netrc = os.environ.get("ENVGEN_NETRC")
    if netrc:
        secrets.append(("netrc", netrc))
    return tuple(secrets)


def _diagnosed(tail, log_path: Path) -> str | EnvironmentMissing | None:
    """explain_failure's sentence of a failed build's last lines: an EnvironmentMissing
    (exit 3) when what failed is this host's (its network, its disk, its daemon)."""
    explained = explain_failure(list(tail))
    if not explained:
        return None
    text = f"build failed: {explained}; the log is {log_path}"
    return EnvironmentMissing(text) if any(explained == said for _, said in _HOST_FAULTS) \
        else text


class BuildKitOutput:
    """BuildKit's plain output, read line by line as the engine hands it over: each line to
    the log, the steps to `progress` (a heartbeat when a step is silent: the engine hands
    None then), the step that failed and the build's last words for `failed()`, the
    sentence of a failed build."""

    def __init__(self, log, log_path: Path, progress):
        self.log, self.log_path, self.progress = log, log_path, progress
        self.steps = Steps()
        self.tail: deque[str] = deque(maxlen=400)
        self.failed_step = self.error_line = ""

    def line(self, line: str | None) -> None:
        beat = self.steps.heartbeat()
        if beat is not None:
            self.progress(beat)
        if line is None:
            return
        self.log.write(line)
        self.tail.append(line.rstrip("\n"))
        event = self.steps.feed(line)
        if event is not None:
            self.progress(event)
        if _ERROR_STEP.search(line) and not self.failed_step:
            self.failed_step = self.steps.last_header or line.strip()
        if re.search(r"error|Error|ERROR", line) and "ERROR [" not in line:
            self.error_line = line.strip()

    def failed(self) -> str | EnvironmentMissing:
        """The sentence of the failed build; an EnvironmentMissing (exit 3) when what failed
        is this host's (its network, its disk, its daemon), not the stack."""
        step = self.failed_step or self.steps.last_header or "before the first step"
        diagnosed = _diagnosed(self.tail, self.log_path)
        if diagnosed:
            return diagnosed
        why = f" ({self.error_line[:200]})" if self.error_line and \
            self.error_line.strip() != step.strip() else ""
        return f"build failed at {step[:160]}{why}; the log is {self.log_path}"


class ClassicOutput:
    """The classic builder's output, text by text: to the log, each `Step k/n : ...` to
    `progress` with the seconds since the build started; `failed()` reads the last words
    (the error the engine hands over last) as BuildKitOutput.failed does."""

    def __init__(self, log, log_path: Path, progress):
        self.log, self.log_path, self.progress = log, log_path, progress
        self.started = time.monotonic()
        self.tail: deque[str] = deque(maxlen=400)

    def line(self, text: str | None) -> None:
        if text is None:
            return
        self.log.write(text)
        self.tail.extend(text.rstrip("\n").splitlines())
        if text.startswith("Step "):
            self.progress(f"{text.strip()[:80]} [{time.monotonic() - self.started:.0f}s]")

    def failed(self) -> str | EnvironmentMissing:
        diagnosed = _diagnosed(self.tail, self.log_path)
        if diagnosed:
            return diagnosed
        error = next((ln.strip() for ln in reversed(self.tail) if ln.strip()), "")
        return f"build failed: {error[:160]}; the log is {self.log_path}"
