"""The files envgen holds for a project's requirements named by git reference, URL or path:
the sdist `git archive` made of a commit, and each file kept under ENVGEN_HOME by its
sha256."""
from __future__ import annotations

import re
from pathlib import Path

from ..core.model import ProjectLayer, canonical_name


def file_requirements(layer: ProjectLayer) -> list[tuple[str, str, str]]:
    """(name, URL, sha256) of each file the layer's requirements name by URL or path."""
    from .urlref import references
    return references(layer.requirements)


def git_requirements(layer: ProjectLayer) -> list[tuple[str, str, str]]:
    """(name, repository, commit) of each git reference of the layer's requirements."""
    from .gitref import references
    return references(layer.requirements)


def held_files(layer: ProjectLayer) -> dict[str, Path]:
    """canonical name → the file envgen holds for each git reference (the sdist `git
    archive` made of its commit) and each requirement named by URL or path (the file, kept
    under ENVGEN_HOME), git references first."""
    from .gitref import archive
    from .urlref import fetch
    held = {canonical_name(n): archive(n, repo, commit)[0]
            for n, repo, commit in git_requirements(layer)}
    held.update((canonical_name(n), fetch(n, url, sha)[0])
                for n, url, sha in file_requirements(layer))
    return held


GIT_NOTE = re.compile(r"built from git \S+ at ([0-9a-f]{40})")


def held_sdist(pin) -> bool:
    """A closure's pin whose sdist envgen holds (a git reference's archive, a file named by
    URL or path) rather than the index serving it: its note says which."""
    return bool(pin.sdist and pin.note and (
        pin.note.startswith("from ") or GIT_NOTE.fullmatch(pin.note)))


def kept_bytes(pin) -> bytes | None:
    """The bytes of a held sdist ENVGEN_HOME keeps, found from the closure alone (a stack
    read back from a lock has no requirement lines): files/SHA256/FILE or
    archives/COMMIT/FILE, read once and checked against the pin's sha256; None when this
    machine has not kept it (or keeps other bytes under its name)."""
    import hashlib

    from .gitref import archive_dir
    from .urlref import kept_path
    m = GIT_NOTE.fullmatch(pin.note or "")
    path = archive_dir(m.group(1)) / pin.file if m else kept_path(pin.sha256 or "-", pin.file)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == pin.sha256 else None
