"""One requirement line, as PEP 508 and pip write them, read with packaging: `name[extra]
>=1; marker`, `name @ https://...`, `git+https://host/repo.git@REF#egg=name`, a wheel's
path or URL. A line that is none of these is one sentence with its file:line."""
from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from .model import (
    MAX_LINE,
    PLATFORMS,
    PYTHONS,
    Wanted,
    bad,
    check_url,
    git_parts,
    masked_line,
    show,
)

_EGG = re.compile(r"(?:^|&)egg=([A-Za-z0-9][A-Za-z0-9._-]*)")


def environments():
    for sys_platform, system, machine, os_name in PLATFORMS:
        for py in PYTHONS:
            yield {"sys_platform": sys_platform, "platform_system": system,
                   "platform_machine": machine, "os_name": os_name, "python_version": py,
                   "python_full_version": py + ".0", "implementation_name": "cpython",
                   "platform_python_implementation": "CPython", "extra": ""}


def target_env(python: str) -> dict:
    """The image's environment: CPython `python` on x86_64 Linux."""
    return {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "os_name": "posix", "python_version": python, "python_full_version": python + ".0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "extra": ""}


def check_marker(marker: Marker | None, text: str, file: str, line: int) -> None:
    """A marker true nowhere (no platform, no Python 3.7 to 3.15) is refused."""
    if marker is None:
        return
    try:
        if any(marker.evaluate(env) for env in environments()):
            return
    except Exception as e:   # packaging's UndefinedComparison and kin
        raise bad(f"{show(text)}: its marker cannot be evaluated ({e})", file, line) from None
    raise bad(f"{show(text)}: its marker ({marker}) is false on every platform and Python "
              f"(Linux, Windows, macOS; 3.7 to 3.15), so it installs nowhere; fix or drop the "
              f"marker", file, line)


def _from_filename(url: str, file: str, line: int) -> str:
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    try:
        if name.endswith(".whl"):
            return str(parse_wheel_filename(name)[0])
        return str(parse_sdist_filename(name)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        raise bad(f"{show(url)}: cannot tell the distribution from the file name "
                  f"{show(name)}; write NAME @ URL", file, line) from None


def parse(text: str, file: str, line: int, base: Path | None = None,
          hashes: tuple[str, ...] = (), constraint: bool = False) -> Wanted:
    """A Wanted of one line (options already taken off); InputError with file:line when it
    is not a requirement."""
    text = text.strip()
    if len(text) > MAX_LINE:
        raise bad("the line is too long to be a requirement", file, line)
    if text.startswith("-"):
        raise bad(f"{show(text)} is an option envgen does not read here; a requirement starts "
                  f"with a name, a URL or a path", file, line)
    # pip's own forms that PEP 508 lacks: a VCS URL with #egg=, a URL or path of a file
    if text.startswith("git+"):
        url, _, marker = text.partition(";")
        url = url.strip()
        frag = urllib.parse.urlsplit(url).fragment
        if "subdirectory=" in frag:   # the root would be built in its place
            raise bad(f"{show(url, 60)}: a #subdirectory= is not supported (envgen builds "
                      f"the repository's root)", file, line)
        egg = _EGG.search(frag)
        if not egg:
            raise bad(f"{show(text)}: a git reference names its distribution: write NAME @ "
                      f"{show(url.split('#')[0], 40)}", file, line)
        text = f"{egg.group(1)} @ {url.split('#')[0]}" + (f" ; {marker.strip()}" if marker
                                                           else "")
    elif re.match(r"^[a-z][a-z0-9+.-]*://", text):
        url, _, marker = text.partition(";")
        check_url(url.strip(), "the URL", file, line)
        text = f"{_from_filename(url.strip(), file, line)} @ {url.strip()}" + (
            f" ; {marker.strip()}" if marker else "")
    elif "@" not in text.split(";")[0] and (
            text.split(";")[0].strip().endswith((".whl", ".tar.gz", ".zip"))
            or text.startswith((".", "/"))):
        where, _, marker = text.partition(";")
        where = where.strip()
        path = Path(where) if base is None else (base / where)
        try:
            found = path.is_file()
        except OSError as e:   # a name too long, a loop of links
            raise bad(f"{show(text)}: cannot be read ({e.strerror})", file, line) from None
        if not found:
            raise bad(f"{show(text)}: no such file (a local wheel or sdist path is read from "
                      f"the requirements file's folder)", file, line)
        name = _from_filename(path.name, file, line)
        text = f"{name} @ {path.resolve().as_uri()}" + (f" ; {marker.strip()}" if marker
                                                        else "")
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        # the line may be a .env's or /etc/passwd's: its value is never echoed
        raise bad(f"{masked_line(text)} is not a requirement ({str(e).splitlines()[0][:120]})",
                  file, line) from None
    kind = "index"
    if req.url:
        if req.url.startswith("git+"):
            git_parts(req.url, file, line)
            kind = "git"
        else:
            check_url(req.url, "the URL", file, line)
            kind = "path" if req.url.startswith("file:") else "url"
    check_marker(req.marker, text, file, line)
    return Wanted(text=str(req), name=canonicalize_name(req.name), file=file, line=line,
                  kind=kind, hashes=hashes, constraint=constraint)
