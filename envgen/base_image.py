"""Bases: a Debian root filesystem made here with mmdebstrap and imported, tagged by its
content so it is built once and reused; or a registry image, pinned by digest."""
from __future__ import annotations

import email.utils
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from .errors import BuildFailed, EnvironmentMissing
from .model import BaseImage

PACKAGES = ("python3", "python3-venv", "ca-certificates", "passwd")
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def mirror_for(base: BaseImage) -> str:
    if base.snapshot:
        return f"https://snapshot.debian.org/archive/debian/{base.snapshot}"
    return os.environ.get("ENVGEN_DEBIAN_MIRROR", DEFAULT_MIRROR)


def _release(mirror: str, suite: str) -> tuple[str, int]:
    """sha256 of the suite's Release file (what the archive serves now) and its date."""
    url = f"{mirror}/dists/{suite}/Release"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            data = r.read()
    except OSError as e:
        raise EnvironmentMissing(f"cannot reach Debian's archive at {url} ({e}); set "
                                 f"ENVGEN_DEBIAN_MIRROR to a mirror you can reach") from e
    date = 0
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("Date:"):
            date = int(email.utils.parsedate_to_datetime(line[5:].strip()).timestamp())
            break
    return hashlib.sha256(data).hexdigest(), date


def local_tag(base: BaseImage, release_sha: str) -> str:
    key = json.dumps({"suite": base.suite, "packages": PACKAGES, "release": release_sha,
                      "variant": "minbase"}, sort_keys=True)
    return f"{base.image}:{base.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def ensure_base(c, base: BaseImage, log) -> str:
    """The reference a Dockerfile's FROM should use, making or pulling the base if needed."""
    from .engine import image_or_none
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
    from .engine import image_or_none
    mirror = mirror_for(base)
    release_sha, date = _release(mirror, base.suite)
    tag = local_tag(base, release_sha)
    if image_or_none(c, tag) is not None:
        log(f"base {tag} exists; reusing it")
        return tag
    if shutil.which("mmdebstrap") is None:
        raise EnvironmentMissing("mmdebstrap is not installed; run `apt-get install -y "
                                 "mmdebstrap` (it builds the Debian base image)")
    log(f"building base {tag} with mmdebstrap from {mirror} ({base.suite})")
    with tempfile.TemporaryDirectory(prefix="envgen-base-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        argv = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES),
                "--quiet", "--aptopt=Acquire::Retries=3",
                "--customize-hook=rm -rf \"$1\"/var/cache/apt/* \"$1\"/var/lib/apt/lists/*",
                base.suite, str(tar), mirror]
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(date)}
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise BuildFailed(f"mmdebstrap failed for base {base.name}: {' '.join(tail)}")
        changes = [f"LABEL io.envgen.base={base.name}",
                   f"LABEL io.envgen.base.release.sha256={release_sha}",
                   'CMD ["/bin/bash"]']
        repository, _, name = tag.partition(":")
        c.api.import_image_from_file(str(tar), repository=repository, tag=name,
                                     changes=changes)
    if image_or_none(c, tag) is None:
        raise BuildFailed(f"docker import of base {tag} did not create the image")
    return tag
