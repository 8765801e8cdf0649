"""The files envgen holds for a project's requirements named by git reference, URL or path:
the sdist `git archive` made of a commit, and each file kept under ENVGEN_HOME by its
sha256."""
from __future__ import annotations

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


def archives(layer: ProjectLayer) -> bool:
    """Whether a builder stage mounts project-archives/: a git reference, or an sdist named
    by URL or path."""
    return bool(git_requirements(layer) or any(
        not url.endswith(".whl") for _n, url, _s in file_requirements(layer)))
