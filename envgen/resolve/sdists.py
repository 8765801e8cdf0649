"""What a project's sdist needs to become a wheel: a C, C++, Cython, Fortran or Rust build
needs Debian's compiler in the builder stage; a pure-Python one needs only pip and the
backend pip fetches for it, so its stage skips the compiler (on this machine installing gcc,
g++ and the Python headers took 17.7 s of a 59 s project build: docs/benchmarks.md). And
what its build backend needs (its pyproject.toml's [build-system] requires), which the
closure pins by hash for the builder stage instead of pip's isolated environment taking
it from the index unpinned."""
from __future__ import annotations

import functools
import re
import tarfile
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from ..core.archives import ARCHIVE_ERRORS

# sources a compiler builds, and the build files of native builds
NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hpp", ".pyx", ".pxd",
                   ".f", ".f90", ".f95", ".cu", ".rs", ".go", ".m", ".mm", ".s", ".asm")
NATIVE_FILES = frozenset({"Cargo.toml", "CMakeLists.txt", "meson.build", "configure",
                          "Makefile", "setup.cfg.in"})


# PEP 518: an sdist with no [build-system] table builds with setuptools and wheel (pip's
# fallback, the legacy setup.py path)
DEFAULT_BUILD_REQUIRES = ("setuptools>=40.8.0", "wheel")
_MAX_MEMBER = 1 << 20
_MAX_REQUIRES = 50


def members(path: Path, wanted) -> dict[str, bytes] | None:
    """Files of an sdist (a .tar.gz or a .zip) whose path `wanted` accepts, read (each at
    most 1 MiB); None when the file cannot be read as an archive (a damaged member makes
    the whole archive unreadable, not a member quietly missing)."""
    read = _read(str(path), wanted)
    return None if read is None else read[1]


def _read(path: str, wanted) -> tuple[tuple[str, ...], dict[str, bytes]] | None:
    """(every member name, the files `wanted` accepts of at most 1 MiB), in one pass over
    the archive; None when it cannot be read as one."""
    files: dict[str, bytes] = {}
    try:
        if path.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                listed = tuple(z.namelist())
                for i in z.infolist():
                    if wanted(i.filename) and not i.is_dir() and i.file_size <= _MAX_MEMBER:
                        files[i.filename] = z.read(i)
        else:
            with tarfile.open(path, "r:*") as t:
                seen = []
                for m in t:
                    seen.append(m.name)
                    if m.isfile() and wanted(m.name) and m.size <= _MAX_MEMBER:
                        f = t.extractfile(m)
                        files[m.name] = f.read() if f else b""
                listed = tuple(seen)
    except ARCHIVE_ERRORS:
        return None
    return listed, files


def top_level(name: str) -> bool:   # folder/setup.py, not folder/tests/x/setup.py
    return name.count("/") <= 1


def build_requires(path: Path) -> tuple[str, ...] | str:
    """What the sdist's build backend needs installed: its top-level pyproject.toml's
    [build-system] requires, or setuptools and wheel when it has no such table (PEP 518).
    A backend that lists setuptools gets wheel beside it: setuptools before 70.1 asks for
    wheel at build time, which a build without isolation does not install. A string (why)
    when the archive or its requires cannot be read."""
    scanned = _scan(path)
    if scanned is None:
        return f"{path.name} cannot be read as an archive"
    listed, read = scanned
    own = sorted({n for n in listed if top_level(n)
                  and n.rsplit("/", 1)[-1] == "pyproject.toml"})
    if len(own) > 1:   # NAME-VERSION/ is the sdist's own folder; another is not read
        stem = re.sub(r"\.(tar\.gz|zip|tgz|tar)$", "", path.name)
        own = [n for n in own if n == f"{stem}/pyproject.toml"]
        if not own:
            return f"{path.name}: it has more than one top-level pyproject.toml"
    if own and own[0] not in read:
        return (f"{path.name}: its pyproject.toml is not a regular file of at most "
                f"{_MAX_MEMBER >> 20} MiB")
    table = _build_system(read[own[0]].decode("utf-8", "replace")) if own else None
    if isinstance(table, str):
        return f"{path.name}: pyproject.toml {table}"
    if table is None:
        wanted = list(DEFAULT_BUILD_REQUIRES)
    else:
        wanted = table.get("requires")
        if not isinstance(wanted, list) or not all(isinstance(r, str) for r in wanted) or \
                len(wanted) > _MAX_REQUIRES:
            return (f"{path.name}: pyproject.toml's [build-system] requires is not a list of "
                    f"at most {_MAX_REQUIRES} requirement strings")
    out, named = [], set()
    for r in wanted:
        try:
            req = Requirement(r)
        except InvalidRequirement:
            return f"{path.name}: pyproject.toml's build requirement {r[:80]!r} is not valid"
        if req.url:
            return (f"{path.name}: the build requirement {req.name} names a URL, which "
                    f"envgen cannot pin by hash")
        out.append(str(req))
        named.add(req.name.lower())
    if "setuptools" in named and "wheel" not in named:
        out.append("wheel")
    return tuple(out)


def _build_system(text: str) -> dict | None | str:
    """The [build-system] table of a pyproject.toml (None when it has none), or why it cannot
    be read. Python 3.10 has no tomllib: the table's requires list is read by pattern."""
    try:
        import tomllib
    except ImportError:   # Python 3.10
        m = re.search(r"^\[build-system\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        if m is None:
            return None
        req = re.search(r"^requires\s*=\s*\[(.*?)\]", m.group(1), re.M | re.S)
        return {"requires": re.findall(r"[\"']([^\"']*)[\"']", req.group(1))} if req else {}
    try:
        table = tomllib.loads(text).get("build-system")
    except ValueError as e:   # TOMLDecodeError
        return f"is not valid TOML ({e})"
    except RecursionError:
        return "is not valid TOML (nested too deeply)"
    if table is None:
        return None
    return table if isinstance(table, dict) else "has a [build-system] that is not a table"


def names(path: Path) -> list[str] | None:
    """The member names of an sdist (.tar.gz, .zip), or None when it cannot be read."""
    scanned = _scan(path)
    return None if scanned is None else list(scanned[0])


_OWN = ("PKG-INFO", "pyproject.toml")   # what build_requires and static_requirements read


def _scan(path: Path) -> tuple[tuple[str, ...], dict[str, bytes]] | None:
    """(every member name, the top-level PKG-INFO and pyproject.toml files of at most
    1 MiB) of an sdist, read in one pass and kept while the file stays the same size and
    age: resolving a team's project asks each sdist three questions. None when it cannot
    be read as an archive."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _scan_once(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _scan_once(path: str, _size: int, _mtime_ns: int):
    return _read(path, lambda n: top_level(n) and n.rsplit("/", 1)[-1] in _OWN)


def needs_compiler(path: Path) -> bool:
    """True unless the sdist holds no native source and no native build file: an archive
    that cannot be read needs the compiler (the safe side)."""
    members = names(path)
    if members is None:
        return True
    return any(n.lower().endswith(NATIVE_SUFFIXES) or n.rsplit("/", 1)[-1] in NATIVE_FILES
               for n in members)


_LISTS = ("requires-dist", "provides-extra")


def static_requirements(path: Path) -> bool:
    """True when the sdist states its requirements in a form a resolver reads without
    running its build backend: a top-level PKG-INFO of Metadata-Version 2.2 or later that
    marks neither Requires-Dist nor Provides-Extra dynamic (PEP 643), or a pyproject.toml
    [project] table whose dependencies and optional-dependencies are not dynamic (PEP 621).
    False otherwise, and for an archive that cannot be read: uv then runs the backend (the
    sdist's setup.py, or the build requirements its pyproject.toml names) to ask."""
    from email.parser import HeaderParser

    from packaging.version import InvalidVersion, Version
    scanned = _scan(path)
    files = scanned[1] if scanned is not None else None
    if not files:
        return False
    for name in sorted(files, key=lambda k: k.count("/")):
        text = files[name].decode("utf-8", "replace")
        if name.endswith("PKG-INFO"):
            headers = HeaderParser().parsestr(text, headersonly=True)
            try:
                version = Version(str(headers.get("Metadata-Version", "")).strip())
            except InvalidVersion:
                continue
            dynamic = {str(d).strip().lower() for d in headers.get_all("Dynamic") or ()}
            if version >= Version("2.2") and not dynamic & set(_LISTS):
                return True
        elif _static_project(text):
            return True
    return False


def _static_project(text: str) -> bool:
    try:
        import tomllib
    except ImportError:   # Python 3.10: not read, so not known to be static
        return False
    try:
        project = tomllib.loads(text).get("project")
    except (ValueError, RecursionError):
        return False
    if not isinstance(project, dict) or not isinstance(project.get("name"), str):
        return False
    dynamic = project.get("dynamic", [])
    return isinstance(dynamic, list) and not {"dependencies", "optional-dependencies"} & {
        d for d in dynamic if isinstance(d, str)}
