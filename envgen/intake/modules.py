"""The top-level modules a distribution installs, read from its wheel without downloading
it: HTTP range requests for the zip's central directory and its .dist-info's top_level.txt
(else RECORD's first path parts), as pip's fast-deps reads METADATA."""
from __future__ import annotations

import io
import re
import zipfile

from ..core.archives import ARCHIVE_ERRORS, MAX_MEMBERS

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Ranged(io.RawIOBase):
    """A seekable read-only view of a remote file through Range requests."""

    def __init__(self, url: str, size: int | None = None):
        self.url, self.pos = url, 0
        self.size = size if size is not None else self._length()
        self.requests = 0

    def _get(self, start: int, end: int) -> bytes:
        import urllib.request

        from ..core import fetching
        self.requests += 1
        if self.requests > 20:
            raise OSError("too many range requests")
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}",
                                                        "User-Agent": "envgen"})
        with fetching.urlopen(req, timeout=30) as r:
            if r.status != 206:
                raise OSError("the server does not answer range requests")
            return fetching.head(r, end - start + 1, 60)

    def _length(self) -> int:
        import urllib.request

        from ..core import fetching
        req = urllib.request.Request(self.url, method="HEAD", headers={"User-Agent": "envgen"})
        with fetching.urlopen(req, timeout=30) as r:
            length = r.headers.get("Content-Length") or ""
        if not (length.isascii() and length.isdigit()):
            raise OSError(f"{self.url[:100]} states no length, so it cannot be read by range")
        return int(length)

    def seekable(self):
        return True

    def readable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, b):
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        # read ahead: a zip's central directory is read in many small pieces
        data = self._cached(self.pos, n)
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)

    _chunk: tuple[int, bytes] = (0, b"")

    def _cached(self, pos: int, n: int) -> bytes:
        start, data = self._chunk
        if not (start <= pos and pos + n <= start + len(data)):
            start = max(0, min(pos, self.size - max(n, 1 << 18)))
            data = self._get(start, min(self.size, start + max(n, 1 << 18)) - 1)
            self._chunk = (start, data)
        return data[pos - start:pos - start + n]


def _file_url(page: str, url) -> str:
    """A file's URL as its index page gives it (PEP 691 allows one relative to the page),
    fetched over https, or http from the index's own host: never a file:// or another
    scheme a hostile page names (OSError, which the caller turns into a guessed name)."""
    import urllib.parse
    if not isinstance(url, str):
        raise OSError("the index gives no URL for the file")
    whole = urllib.parse.urljoin(page, url)
    parts, own = urllib.parse.urlsplit(whole), urllib.parse.urlsplit(page)
    if parts.scheme != "https" and not (parts.scheme == "http" and
                                        parts.hostname == own.hostname):
        raise OSError(f"the index names the file at a {parts.scheme or 'relative'}: URL")
    return whole


def modules_of_wheel(url: str) -> list[str]:
    with zipfile.ZipFile(io.BufferedReader(_Ranged(url), 1 << 16)) as z:
        return _wheel_modules(z)


TOP_LEVEL_MAX = 1 << 20


def _wheel_modules(z: zipfile.ZipFile) -> list[str]:
    """A wheel's top-level modules: its top_level.txt, else the folders and .py files at
    its root (not its .dist-info or .data)."""
    names = z.namelist()
    top = next((n for n in names if n.endswith(".dist-info/top_level.txt")
                and n.count("/") == 1 and z.getinfo(n).file_size <= TOP_LEVEL_MAX), None)
    if top:   # a few names: one over 1 MiB (a bomb of gigabytes) is passed over, not read
        found = z.read(top).decode("utf-8", "replace").split()
    else:
        found = []
        for n in names:
            head = n.split("/", 1)[0]
            if head.endswith((".dist-info", ".data")) or "/" not in n and not \
                    n.endswith(".py"):
                continue
            found.append(head.removesuffix(".py"))
    return sorted({m for m in (x.split("/")[0] for x in found)
                   if _MODULE.fullmatch(m) and not m.startswith("_")})


def modules(pins, names: set[str], index: str, fetch=None, local=None
            ) -> tuple[list[str], list[str]]:
    """(modules, notes) for the pins whose canonical names are in `names`; `local` maps a
    canonical name to the file envgen already holds for it (a git reference's archive, a
    URL's or path's file), read in place of the index's."""
    from packaging.utils import canonicalize_name

    from ..resolve.closure import fetch_json
    fetch = fetch or fetch_json
    out, notes = set(), []
    for p in pins:
        name = canonicalize_name(p.name)
        if name not in names or not p.file:
            continue
        known = _remembered(p)
        if known is not None:
            out.update(known)
            continue
        try:
            held = (local or {}).get(name)
            if held is not None:
                found = _modules_of_file(held, p.sha256, name)
            else:
                files = fetch(f"{index}/{name}/").get("files") or []
                url = _file_url(f"{index}/{name}/", next(
                    f["url"] for f in files if f.get("filename") == p.file))
                found = modules_of_wheel(url) if p.file.endswith(".whl") else \
                    modules_of_sdist(url, p.sha256, name)
            if not found:
                found = [name.replace("-", "_")]
                notes.append(f"{p.name}: its {p.file} names no top-level module; import "
                             f"{found[0]} is guessed from its name")
            _remember(p, found)
        except (*ARCHIVE_ERRORS, LookupError, StopIteration) as e:
            guess = name.replace("-", "_")
            found = [guess]
            notes.append(f"{p.name}: its wheel's file list could not be read ({e}); "
                         f"import {guess} is guessed from its name")
        out.update(found)
    return sorted(out), notes


def _modules_of_file(path, sha256: str | None, name: str | None = None) -> list[str]:
    """A wheel's or source archive's top-level modules, from the file on this machine,
    checked against its sha256 first."""
    import hashlib
    with open(path, "rb") as f:   # read as it streams: a CUDA wheel is gigabytes
        digest = hashlib.sha256()
        while chunk := f.read(1 << 20):
            digest.update(chunk)
        if sha256 and digest.hexdigest() != sha256:
            raise OSError(f"{path} changed since it was pinned (its sha256 differs)")
        f.seek(0)
        if str(path).endswith(".whl"):
            with zipfile.ZipFile(f) as z:
                _count(len(z.infolist()))
                return _wheel_modules(z)
        return modules_of_archive(f, str(path).endswith(".zip"), name)


def _cache_file(pin):
    from ..core import home
    if not pin.sha256:
        return None
    return home.home() / "cache" / "modules" / f"{pin.sha256}.json"


def _remembered(pin):
    """The modules of a wheel read before, by its sha256 (a warm `init --from` asks no
    server)."""
    import json
    path = _cache_file(pin)
    try:
        data = json.loads(path.read_text()) if path else None
    except (OSError, ValueError):
        return None
    if isinstance(data, list) and all(isinstance(m, str) and _MODULE.fullmatch(m)
                                      for m in data):
        return data
    return None


def _remember(pin, found) -> None:
    from ..core.files import write_json
    path = _cache_file(pin)
    if path:
        try:
            write_json(path, sorted(found))
        except OSError:
            pass


MAX_SDIST = 32 * 1024 * 1024


def _count(n: int) -> None:
    if n > MAX_MEMBERS:
        raise ValueError(f"the archive has more than {MAX_MEMBERS} members, more than a "
                         f"package envgen reads")


def _tar_members(tar) -> list:
    """The members of `tar`, read one by one and refused past MAX_MEMBERS (getnames() reads
    them all first)."""
    listed = []
    for m in tar:
        listed.append(m)
        _count(len(listed))
    return listed


def modules_of_sdist(url: str, sha256: str | None, name: str | None = None) -> list[str]:
    """An sdist's top-level modules: its egg-info's top_level.txt, else the packages (a
    folder with __init__.py) and modules at its root or under src/. The sdist is read
    whole (at most 32 MiB) and checked against its sha256 first."""
    import hashlib
    import urllib.request

    from ..core import fetching
    req = urllib.request.Request(url, headers={"User-Agent": "envgen"})
    with fetching.urlopen(req, timeout=60) as r:
        try:
            data = b"".join(fetching.chunks(r, MAX_SDIST, 300))
        except fetching.StreamLimit as e:
            raise OSError(f"the sdist {e}") from None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise OSError("the sdist's sha256 differs from the index's")
    return modules_of_archive(data, url.split("?")[0].endswith(".zip"), name)


def modules_of_archive(data, is_zip: bool, name: str | None = None) -> list[str]:
    """The top-level modules of an sdist or source archive, from its bytes (or an open
    file of it). When none lies at its root or under src/ (crcmod 1.7 keeps python2/crcmod/
    and python3/crcmod/, its setup.py choosing one), a package or module named as the
    distribution `name` is looked for one or two folders deeper: found, it is read, not
    guessed. More than MAX_MEMBERS members is a ValueError."""
    import tarfile
    src = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    if is_zip:
        z = zipfile.ZipFile(src)
        names = z.namelist()
        _count(len(names))

        def read(n):   # over 1 MiB (a bomb): read as empty
            return z.read(n) if z.getinfo(n).file_size <= TOP_LEVEL_MAX else b""
    else:
        tar = tarfile.open(fileobj=src)
        members = {}
        for m in _tar_members(tar):
            members[m.name] = m   # the last of a name, as getmember() takes it
        names = list(members)

        def read(n):   # a link or folder reads empty: its target is not followed
            m = members[n]
            f = tar.extractfile(m) if m.isfile() and m.size <= TOP_LEVEL_MAX else None
            return f.read() if f else b""
    top = next((n for n in names if n.endswith(".egg-info/top_level.txt")), None)
    if top:
        found = read(top).decode("utf-8", "replace").split()
    else:
        found = []
        for n in names:
            parts = n.split("/")[1:]   # below the sdist's own folder
            if parts[:1] == ["src"]:
                parts = parts[1:]
            if len(parts) == 2 and parts[1] == "__init__.py" or len(parts) == 1 and \
                    parts[0].endswith(".py") and parts[0] != "setup.py":
                found.append(parts[0].removesuffix(".py"))
        own = (name or "").lower().replace("-", "_").replace(".", "_")
        if not found and own and any(
                n.split("/")[-2:] == [own, "__init__.py"] or n.split("/")[-1] == f"{own}.py"
                for n in names if 2 <= n.count("/") <= 4):
            found.append(own)
    return sorted({m for m in found if _MODULE.fullmatch(m) and not m.startswith("_")})
