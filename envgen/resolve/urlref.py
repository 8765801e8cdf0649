"""A file a team's requirement names by URL or path (`name @ https://host/x-1.0-py3-none-any.whl`,
`name @ file:///…/x-1.0.tar.gz`, or a bare `./wheels/x.whl` line): fetched once, kept by its
sha256 under ENVGEN_HOME/files/SHA256/, and pinned by that sha256. envgen.yaml writes the
URL with a `#sha256=` fragment (pip's own form), so every later build checks the bytes: a
file that changed since `init --from` is refused, naming the requirement. A wheel is
installed from the build context (project-archives/), an sdist goes through the builder
stage like a git reference's archive. https and file only; nothing that starts with '-'."""
from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from ..core import fetching
from ..core.errors import EnvironmentMissing, InputError, shown

SHA = re.compile(r"sha256=([0-9a-f]{64})")
SUFFIXES = (".whl", ".tar.gz", ".zip")
MAX_BYTES = 4 * 1024 ** 3   # a CUDA wheel is under 3 GB
TIMEOUT_S = 60.0
WHOLE_S = 300.0              # a file's download: this much time, and a second more
MIN_RATE = 64 * 1024          # for each MIN_RATE bytes that arrive (a slow link's 3 GB)
MOST_S = 3 * 3600.0           # and never more than this


def split(url: str) -> tuple[str, str | None]:
    """(the URL without its fragment, the sha256 its `#sha256=` fragment names or None)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "file") or url.startswith("-"):
        raise InputError(f"{shown(url)}: envgen fetches https and file URLs only")
    bare = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))
    m = SHA.fullmatch(parts.fragment) if parts.fragment else None
    if parts.fragment and m is None:
        raise InputError(f"{shown(url)}: the only fragment envgen reads is #sha256=<64 hex "
                         f"digits>")
    if not Path(parts.path).name.endswith(SUFFIXES):
        raise InputError(f"{shown(url)}: names no wheel or sdist (.whl, .tar.gz or .zip)")
    return bare, m.group(1) if m else None


def dist_version(name: str, filename: str) -> str:
    """The version a wheel's or sdist's file name gives, checked against `name`."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    try:
        dist, version = (parse_wheel_filename(filename)[:2] if filename.endswith(".whl")
                         else parse_sdist_filename(filename))
    except (InvalidWheelFilename, InvalidSdistFilename):
        raise InputError(f"{shown(filename)}: not a wheel or sdist file name") from None
    if canonicalize_name(dist) != canonicalize_name(name):
        raise InputError(f"{shown(filename)} is {dist}, not {name}")
    return str(version)


def kept_path(sha256: str, filename: str) -> Path:
    """Where ENVGEN_HOME keeps a fetched file: files/SHA256/FILE."""
    from ..core import home
    return home.home() / "files" / sha256 / filename


def fetch(name: str, url: str, sha256: str | None = None) -> tuple[Path, str, str]:
    """(the file kept under ENVGEN_HOME/files/SHA256/, its sha256, its version). With
    `sha256`, a file whose bytes differ is refused; a kept file is not fetched again."""
    bare, _ = split(url)
    filename = urllib.parse.unquote(Path(urllib.parse.urlsplit(bare).path).name)
    version = dist_version(name, filename)
    if sha256 is not None:
        kept = kept_path(sha256, filename)
        if kept.is_file():
            return kept, sha256, version
    with tempfile.TemporaryDirectory(prefix="envgen-file-") as tmp:
        part = Path(tmp) / filename
        digest = _copy(bare, part)
        if sha256 is not None and digest != sha256:
            raise InputError(f"{name} @ {shown(bare, 120)}: its sha256 is {digest}, not the "
                             f"{sha256} written for it: the file changed, or it is not the one "
                             f"the requirement was pinned to")
        path = kept_path(digest, filename)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(part), path)
    return path, digest, version


def _copy(url: str, to: Path) -> str:
    """Copy `url`'s bytes to `to`, at most MAX_BYTES; their sha256."""
    h = hashlib.sha256()
    try:
        if url.startswith("file:"):
            src = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
            if not Path(src).is_file():
                raise InputError(f"{shown(url)}: no such file")
            stream = open(src, "rb")
        else:
            req = urllib.request.Request(url, headers={"User-Agent": "envgen"})
            stream = fetching.urlopen(req, timeout=TIMEOUT_S)
        with stream as r, open(to, "wb") as out:
            for chunk in fetching.chunks(r, MAX_BYTES, WHOLE_S, 1 << 20, min_rate=MIN_RATE,
                                         most=MOST_S):
                h.update(chunk)
                out.write(chunk)
    except fetching.StreamLimit as e:
        if e.kind == "size":
            raise InputError(f"{shown(url)} {e}") from None
        raise EnvironmentMissing(f"{shown(url)} could not be read: it {e}") from None
    except OSError as e:
        raise EnvironmentMissing(f"{shown(url)} could not be read ({e})") from None
    return h.hexdigest()


def references(requirements) -> list[tuple[str, str, str]]:
    """(canonical name, URL without fragment, sha256) of each file requirement (not git)
    among requirement lines; project.load has checked each names its sha256."""
    from packaging.requirements import Requirement
    out = []
    for text in requirements:
        req = Requirement(text)
        if req.url and not req.url.startswith("git+"):
            bare, sha = split(req.url)
            if sha is None:
                raise InputError(f"{shown(text)}: a file requirement needs its #sha256=")
            out.append((re.sub(r"[-_.]+", "-", req.name).lower(), bare, sha))
    return out
