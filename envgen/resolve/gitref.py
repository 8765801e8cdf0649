"""A git reference of a team's requirements (`name @ git+https://host/repo.git@REF`): pinned
to a commit (a branch or tag resolves once, with `git ls-remote`, and the commit is what
envgen.yaml records), and packed as an sdist with `git archive` (tar.gz, the same bytes for
the same commit and git) whose sha256 the closure records. Archives are kept under
ENVGEN_HOME/archives/COMMIT/. Every value reaches git after `--`, none starts with '-'."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

from ..core.errors import EnvironmentMissing, InputError, shown

COMMIT = re.compile(r"[0-9a-f]{40}")
REF = re.compile(r"[A-Za-z0-9._/][A-Za-z0-9._/+-]{0,199}")
TIMEOUT_S = 120


def split(url: str) -> tuple[str, str]:
    """(repository URL, ref) of git+SCHEME://...@REF."""
    parts = urllib.parse.urlsplit(url.removeprefix("git+"))
    if parts.scheme not in ("https", "file"):
        raise InputError(f"git reference {shown(url)}: envgen fetches https and file only")
    if parts.query or parts.fragment and not re.fullmatch(r"egg=[A-Za-z0-9._-]+",
                                                          parts.fragment):
        raise InputError(f"git reference {shown(url)}: envgen packs the repository's root "
                         f"at a commit, and reads no query or fragment but #egg=NAME "
                         f"(#subdirectory= is not supported)")
    path, at, ref = parts.path.rpartition("@")
    if not at or not REF.fullmatch(ref) or ".." in ref:
        raise InputError(f"git reference {shown(url)} names no commit, tag or branch envgen "
                         f"accepts")
    repo = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    if repo.startswith("-"):
        raise InputError(f"git reference {shown(url)} looks like an option")
    return repo, ref


def _git(*argv: str, cwd: str | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true",
           "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        # a file git shows need not be UTF-8 (a setup.cfg in Latin-1): what envgen reads of
        # it (a version) is ASCII, so a byte that does not decode is replaced, not fatal
        r = subprocess.run(["git", *argv], capture_output=True, text=True, cwd=cwd, env=env,
                           timeout=TIMEOUT_S, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise EnvironmentMissing("git is not installed; envgen needs it for a git "
                                 "reference (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentMissing(f"git {argv[0]} did not finish in {TIMEOUT_S} s") from None
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines() or ["no output"]
        # git's own reason is its fatal: line; what follows it is advice
        said = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1])
        raise InputError(f"git {argv[0]} failed: {said[:200]}")
    return r.stdout


def commit_of(repo: str, ref: str) -> str:
    """The commit `ref` names in `repo` (itself when it is a full commit id)."""
    if COMMIT.fullmatch(ref):
        return ref
    out = _git("ls-remote", "--", repo, ref, f"refs/tags/{ref}^{{}}")
    found = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if COMMIT.fullmatch(sha):
            found[name] = sha
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in found:
            return found[name]
    raise InputError(f"{repo} has no branch or tag {ref!r}; name a commit, tag or branch "
                     f"it has")


def archive_dir(commit: str) -> Path:
    """Where ENVGEN_HOME keeps the sdists `git archive` made of a commit: archives/COMMIT."""
    from ..core import home
    return home.home() / "archives" / commit


def archive(name: str, repo: str, commit: str) -> tuple[Path, str, str]:
    """(the sdist NAME-VERSION.tar.gz of `commit`, its sha256, its version); the version
    is read from the commit's pyproject.toml [project] or setup.cfg [metadata], never by
    running anything."""
    if not COMMIT.fullmatch(commit):
        raise InputError(f"{commit!r} is not a commit id")
    folder = archive_dir(commit)
    found = sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []
    # the repositories this commit was fetched from: kept by commit alone, an archive
    # would also stand for a repository that does not exist, or does not hold it
    seen = folder / "repositories"
    if found and repo in (seen.read_text().splitlines() if seen.is_file() else ()):
        path = found[0]
        version = path.name[:-len(".tar.gz")].rsplit("-", 1)[1]
        return path, hashlib.sha256(path.read_bytes()).hexdigest(), version
    with tempfile.TemporaryDirectory(prefix="envgen-git-") as tmp:
        _git("clone", "--quiet", "--bare", "--", repo, f"{tmp}/repo.git")
        try:
            _git("cat-file", "-e", f"{commit}^{{commit}}", cwd=f"{tmp}/repo.git")
        except InputError:   # else its files read as missing: "the version is computed"
            raise InputError(f"{repo} has no commit {commit}; name a commit, tag or branch "
                             f"it has") from None
        if found:   # the same commit, so the same files: the archive stands, now for it too
            _remember(seen, repo)
            path = found[0]
            version = path.name[:-len(".tar.gz")].rsplit("-", 1)[1]
            return path, hashlib.sha256(path.read_bytes()).hexdigest(), version
        version = _version(name, repo, commit, f"{tmp}/repo.git")
        dist = re.sub(r"[-_.]+", "_", name).lower()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{dist}-{version}.tar.gz"
        part = folder / f".{path.name}.part"
        _git("archive", "--format=tar.gz", f"--prefix={dist}-{version}/", "-o", str(part),
             commit, cwd=f"{tmp}/repo.git")
        part.replace(path)
        _remember(seen, repo)
    return path, hashlib.sha256(path.read_bytes()).hexdigest(), version


def _remember(seen: Path, repo: str) -> None:
    """Add `repo` to the archive folder's list of repositories that hold its commit."""
    have = seen.read_text().splitlines() if seen.is_file() else []
    if repo not in have:
        from ..core.files import write_atomic
        write_atomic(seen, "".join(f"{r}\n" for r in [*have, repo]))


def _version(name: str, repo: str, commit: str, git_dir: str) -> str:
    import configparser

    from packaging.version import InvalidVersion, Version
    try:
        text = _git("show", f"{commit}:pyproject.toml", cwd=git_dir)
        import tomllib
        project = tomllib.loads(text).get("project")
        v = project.get("version") if isinstance(project, dict) else None
    except (InputError, ValueError, RecursionError):
        v = None
    if not isinstance(v, str):
        try:
            cfg = configparser.ConfigParser(interpolation=None)
            cfg.read_string(_git("show", f"{commit}:setup.cfg", cwd=git_dir))
            v = cfg.get("metadata", "version", fallback=None)
        except (InputError, configparser.Error):
            v = None
    try:
        return str(Version(v)) if isinstance(v, str) else _no_version(name, repo, commit)
    except InvalidVersion:
        return _no_version(name, repo, commit)


def _no_version(name, repo, commit):
    raise InputError(f"{name} at {repo}@{commit[:12]}: its version is not written in "
                     f"pyproject.toml [project] or setup.cfg [metadata] (it is computed), so "
                     f"envgen cannot pin it; tag a release with a static version")


def references(requirements) -> list[tuple[str, str, str]]:
    """(canonical name, repository, commit) of each git reference among requirement lines."""
    from packaging.requirements import Requirement
    out = []
    for text in requirements:
        req = Requirement(text)
        if req.url and req.url.startswith("git+"):
            repo, commit = split(req.url)
            out.append((re.sub(r"[-_.]+", "-", req.name).lower(), repo, commit))
    return out
