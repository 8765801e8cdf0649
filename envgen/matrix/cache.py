"""A validated matrix, kept between runs: keyed by the sha256 of every file's name and bytes
(and envgen's version), so a changed byte validates again and nothing is ever stale. Only
a matrix that passed validation is stored. The cache is private to its user: its folder
and files must be owned by them and writable by no one else, or it is not used (a pickle
from someone else would be their code)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
from pathlib import Path

from .. import __version__
from ..core import home as state

KEEP = 8   # matrices kept, the most recently used


def code_files() -> list[Path]:
    """The code a cached matrix depends on: the rules that validated it (matrix/*.py) and
    the classes it is made of (model.py): a pickle of an older class is stale too."""
    here = Path(__file__).parent
    return [*sorted(here.glob("*.py")), here.parent / "core" / "model.py"]


def key_of(files: list[Path]) -> str | None:
    from ..core.errors import InputError
    from ..core.files import read_regular
    from .yamlfile import MAX_BYTES
    h = hashlib.sha256(__version__.encode() + b"\0")
    for code in code_files():
        h.update(code.read_bytes())
    try:
        for f in files:   # a FIFO or a huge file: no key; the loader names the problem
            h.update(str(f.resolve()).encode() + b"\0" + read_regular(f, MAX_BYTES) + b"\0")
    except (OSError, InputError):
        return None
    return h.hexdigest()


def _folder() -> Path:
    return state.home() / "cache"


def _private(path: Path) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def get(key: str | None):
    if key is None or os.environ.get("ENVGEN_NO_CACHE"):
        return None
    path = _folder() / f"matrix-{key}.pickle"
    if not (_private(_folder()) and _private(path)):
        return None
    try:
        with open(path, "rb") as f:
            matrix = pickle.load(f)
    except Exception:  # a torn or foreign file: validate from scratch instead
        return None
    with contextlib.suppress(OSError):
        os.utime(path)   # used now: the last to be pruned
    return matrix


def put(key: str | None, matrix) -> None:
    if key is None or os.environ.get("ENVGEN_NO_CACHE"):
        return
    folder = _folder()
    tmp = folder / f".matrix-{key}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private(folder):
            return
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(matrix, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / f"matrix-{key}.pickle")
        _prune(folder)
    except OSError:   # a read-only or full home: the next run validates again
        with contextlib.suppress(OSError):   # a failed write leaves no temporary file
            tmp.unlink(missing_ok=True)


def _prune(folder: Path) -> None:
    """Keep the KEEP matrices used last (a bundled matrix and a --matrix one, or two
    checkouts, used in turn do not evict each other at every call)."""
    def used(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0
    for old in sorted(folder.glob("matrix-*.pickle"), key=used, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
