"""Bases: a Debian root filesystem made here with mmdebstrap from a pinned archive snapshot
and imported under a tag named by its recipe (so a cached base is found with no network
request), or a registry image, pinned by digest."""
from __future__ import annotations

import email.utils
import os
import shutil
import subprocess
import time
from pathlib import Path

from ..core import fetching
from ..core import home as state
from ..core.errors import BuildFailed, EnvironmentMissing
from ..core.model import BaseImage
from ..runtime import docker as engine
from .steps import HEARTBEAT_S

DEFAULT_MIRROR = "http://deb.debian.org/debian"


def snapshot_url(base: BaseImage) -> str:
    return f"https://snapshot.debian.org/archive/debian/{base.snapshot}"


def archive_state(mirror: str, suite: str, timeout: int = 20) -> str | None:
    """The Date of the suite's Release file on `mirror`, as a snapshot stamp
    (20260711T101637Z); None when the mirror does not answer."""
    try:
        with fetching.urlopen(f"{mirror}/dists/{suite}/Release", timeout=timeout) as r:
            head = fetching.head(r, 4096, timeout).decode("utf-8", "replace")
    except OSError:
        return None
    for line in head.splitlines():
        if line.startswith("Date:"):
            try:
                when = email.utils.parsedate_to_datetime(line[5:].strip())
                return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when.timestamp()))
            except (ValueError, TypeError, OverflowError):   # a garbled Release file
                return None
    return None


def choose_mirror(base: BaseImage, state=archive_state) -> str:
    """A mirror that serves exactly the base's snapshot. ENVGEN_DEBIAN_MIRROR must; the
    default mirror is used when it happens to (a frozen or local mirror), else
    snapshot.debian.org, which serves every past state."""
    if not base.snapshot:
        return os.environ.get("ENVGEN_DEBIAN_MIRROR", DEFAULT_MIRROR)
    wanted = os.environ.get("ENVGEN_DEBIAN_MIRROR")
    if wanted:
        seen = state(wanted, base.suite)
        if seen != base.snapshot:
            raise EnvironmentMissing(
                f"ENVGEN_DEBIAN_MIRROR={wanted} serves {base.suite} as of {seen or 'nothing'}"
                f" (its Release file), but base {base.name} is pinned to snapshot "
                f"{base.snapshot}; a different archive state would make a different base. "
                f"Unset it to use {snapshot_url(base)}")
        return wanted
    if state(DEFAULT_MIRROR, base.suite) == base.snapshot:
        return DEFAULT_MIRROR
    return snapshot_url(base)


def ensure_base(c, base: BaseImage, log) -> str:
    """The reference a Dockerfile's FROM should use, making or pulling the base if needed."""
    from ..runtime.docker import image_or_none
    if base.kind == "local":
        return _ensure_local(c, base, log)
    img = image_or_none(c, base.reference)
    if img is None:
        log(f"pulling {base.reference}")
        try:
            img = c.images.pull(base.reference)
        except Exception as e:
            raise EnvironmentMissing(f"cannot pull base {base.reference} ({e}); this host "
                                     f"may not reach its registry: use a local base such as "
                                     f"base=debian-bookworm, or load the image first") from e
    digests = img.attrs.get("RepoDigests") or []
    if base.digest:
        return base.reference
    if digests:
        return digests[0]
    return base.reference   # made on this host (docker import): no registry digest exists


def _ensure_local(c, base: BaseImage, log) -> str:
    from ..runtime.docker import image_or_none
    tag = base.local_tag
    if image_or_none(c, tag) is not None:
        log(f"base {tag} exists; reusing it")
        return tag
    make_local_base(base, log)
    if image_or_none(c, tag) is None:
        raise BuildFailed(f"making base {tag} did not create the image")
    return tag


def make_local_base(base: BaseImage, log, docker: str | None = None,
                    timeout: int = 1800) -> str:
    """Run the base's rendered recipe (the same `base/build-base.sh` `envgen render`
    writes), from a mirror serving the pinned snapshot."""
    from ..render.views import render_base_script
    if shutil.which("mmdebstrap") is None:
        raise EnvironmentMissing("mmdebstrap is not installed; run `apt-get install -y "
                                 "mmdebstrap` (it builds the Debian base image)")
    docker = docker or os.environ.get("ENVGEN_DOCKER") or shutil.which("docker")
    if not docker:
        raise EnvironmentMissing("no docker CLI on PATH (it imports the base image)")
    mirror = choose_mirror(base)
    log(f"building base {base.local_tag} with mmdebstrap from {mirror} ({base.suite}, "
        f"snapshot {base.snapshot})")
    started = time.monotonic()
    with state.scratch("base") as tmp:
        script = Path(tmp) / "build-base.sh"
        script.write_text(render_base_script(base))
        env = {**os.environ, "ENVGEN_DEBIAN_MIRROR": mirror, "DOCKER": docker,
               "TMPDIR": tmp}
        proc = subprocess.Popen(["sh", str(script)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True, preexec_fn=engine.die_with_parent)
        try:
            out, err = _wait_saying(proc, timeout, log, f"building base {base.local_tag}")
        except BaseException:   # a signal or Ctrl-C: its session, not only sh, ends here
            _kill_session(proc)
            raise
        if out is None:
            raise BuildFailed(f"making base {base.name} took longer than {timeout} s")
    if proc.returncode != 0:
        tail = (err or out).strip().splitlines()[-3:]
        raise BuildFailed(f"making base {base.name} failed: {' '.join(tail)[:400]}")
    log(f"built base {base.local_tag} in {time.monotonic() - started:.1f} s")
    return base.local_tag


def _kill_session(proc) -> None:
    engine.end_session(proc, grace=0)   # the recipe's whole session: sh and mmdebstrap
    proc.communicate()


def _wait_saying(proc, timeout: float, log, doing: str, every: float = HEARTBEAT_S):
    """(stdout, stderr) of `proc`, saying `doing: still running (N s)` every `every` s
    while it runs silently; (None, None) when it is killed after `timeout` s."""
    started = time.monotonic()
    while True:
        elapsed = time.monotonic() - started
        try:
            return proc.communicate(timeout=max(0.01, min(every, timeout - elapsed)))
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - started
            if elapsed >= timeout:   # the recipe's whole session: sh and mmdebstrap under it
                _kill_session(proc)
                return None, None
            log(f"{doing}: still running ({elapsed:.0f} s)")
