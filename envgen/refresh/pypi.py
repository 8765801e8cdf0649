"""Reading a Python package index the way pip does: PEP 691 JSON simple pages, and each
wheel's METADATA (PEP 658 `<wheel>.metadata` where served; otherwise the one member read out
of the wheel with HTTP range requests, never the whole wheel).

Responses are cached under ENVGEN_HOME (simple pages for an hour, wheel metadata for good:
a wheel never changes once uploaded). Only https is followed, or http on the loopback
interface (a recorded index under test)."""
from __future__ import annotations

import email.parser
import hashlib
import io
import json
import os
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .. import __version__
from ..core import fetching
from ..core import home as state
from ..core.archives import ARCHIVE_ERRORS, CONTENT_ERRORS, MAX_MEMBERS
from ..core.errors import CheckFailed, EnvironmentMissing, InputError

PYPI = "https://pypi.org/simple"
SIMPLE_TTL = 3600
TIMEOUT = 60
UA = f"envgen/{__version__} (matrix refresh)"
JSON_PAGE = "application/vnd.pypi.simple.v1+json"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_PAGE = 64 << 20      # torch's JSON page is ~5 MB
MAX_METADATA = 4 << 20
MAX_SDIST = 64 << 20     # DeepSpeed's is 2 MB
REQUEST_S = 300          # one request's whole answer (a 64 MB page at 220 KB/s)
RANGE_BUDGET = 8 << 20   # what reading one wheel's METADATA may fetch (torch's: ~200 KB)

CPU_ENV = {
    "platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux",
    "os_name": "posix", "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


class Refused(CheckFailed):
    """Upstream data fails a sanity check; nothing is written (exit 1)."""


def check_url(url: str, what: str) -> str:
    """`url` if it is https, or http to this machine; InputError otherwise (a login in it
    too: it would be printed and written; ENVGEN_NETRC carries logins)."""
    from ..core.logins import has_login, refusal
    if isinstance(url, str) and has_login(url):
        raise InputError(refusal(what, url))
    try:
        u = urllib.parse.urlsplit(url)
        host = u.hostname or ""
    except ValueError:   # a bad port or bracket: no URL to follow
        u, host = None, ""
    if u and len(url) <= 2000 and url.isprintable() and (
            u.scheme == "https" and host or u.scheme == "http" and host in LOOPBACK):
        return url
    raise InputError(f"{what} {url[:100]!r} is not an https URL (plain http is accepted only "
                     f"on this machine's loopback interface)")


def origin(url: str) -> str:
    u = urllib.parse.urlsplit(url)
    return f"{u.scheme}://{(u.hostname or '').lower()}" + (f":{u.port}" if u.port else "")


# where an index's files may lie besides the index itself (PyPI serves them from its CDN)
FILE_HOSTS = {"https://pypi.org": ("https://files.pythonhosted.org",)}


def _allowed(index: str, url: str, what: str) -> str:
    """`url` if check_url takes it and it lies on the index's own origin (or where that
    index serves its files); InputError otherwise: a page or a redirect naming another
    host is not followed there."""
    check_url(url, what)
    home = origin(index)
    if origin(url) not in (home, *FILE_HOSTS.get(home, ())):
        raise InputError(f"{what} {url[:100]!r} is not on the index's own host {home}")
    return url


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to a URL the first one could have been: on the index's
    own host (or its file host), and never from https to plain http."""

    def __init__(self, index: str):
        super().__init__()
        self.index = index

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        _allowed(self.index, newurl, f"the redirect ({code}) from {req.full_url[:100]} to")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class Index:
    """One package index, with the on-disk cache and retries."""

    def __init__(self, url: str = PYPI, refresh: bool = False, cache: Path | None = None):
        self.url = check_url(url.rstrip("/"), "the index URL")
        self._opener = urllib.request.build_opener(_CheckedRedirects(self.url))
        self.refresh = refresh
        self.cache = cache or state.home() / "cache" / "refresh"
        self._lock = threading.Lock()
        self.requests = 0
        self._pages: dict[str, dict] = {}   # project -> its parsed page, once per run

    # -- HTTP ------------------------------------------------------------------------------

    def _cache_path(self, key: str) -> Path:
        h = hashlib.sha256(key.encode()).hexdigest()
        return self.cache / h[:2] / h

    def _open(self, req: urllib.request.Request, limit: int,
              expect: int | None = None) -> tuple[int, bytes]:
        """(status, body) with retries on 5xx and network errors; 404 is (404, b'').
        A status other than `expect` is Refused before the body is read."""
        _allowed(self.url, req.full_url, "a URL the index named")
        for attempt in range(4):
            try:
                with self._lock:
                    self.requests += 1
                with fetching.urlopen(req, TIMEOUT, self._opener) as r:
                    if expect is not None and r.status != expect:
                        raise Refused(f"{req.full_url}: the server ignored the Range header "
                                      f"(HTTP {r.status}); envgen does not download whole "
                                      f"wheels")
                    try:
                        body = b"".join(fetching.chunks(r, limit, REQUEST_S))
                    except fetching.StreamLimit as e:
                        if e.kind == "short":   # the connection dropped: asked again
                            raise ConnectionError(f"the answer {e}") from None
                        if e.kind == "size":   # what it says is not what an index says
                            raise Refused(f"{req.full_url}: the answer {e}") from None
                        # too slow, or not HTTP: the server's fault (exit 3), as urlref says
                        raise EnvironmentMissing(f"{req.full_url}: the answer {e}") from None
                    return r.status, body
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return 404, b""
                if e.code < 500 or attempt == 3:
                    raise EnvironmentMissing(f"{req.full_url} answered HTTP {e.code}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                if attempt == 3:
                    reason = getattr(e, "reason", e)
                    raise EnvironmentMissing(f"the package index did not answer "
                                             f"{req.full_url} ({reason})") from None
            time.sleep(min(2 ** attempt, 4) * float(os.environ.get("ENVGEN_REFRESH_BACKOFF")
                                                    or "1"))   # checked at start (environ)
        raise AssertionError("unreachable")

    def get(self, url: str, accept: str | None = None, ttl: float | None = None,
            limit: int = MAX_PAGE, keep: bool = True) -> bytes | None:
        """GET through the cache; None for a 404 (remembered too). With `keep` False the
        cache is neither read nor written: the caller keeps what it checked."""
        key = url + "\n" + (accept or "")
        path = self._cache_path(key)
        if keep and path.is_file() and not (self.refresh and ttl is not None):
            if ttl is None or time.time() - path.stat().st_mtime < ttl:
                data = path.read_bytes()
                return None if data == b"\0404" else data
        headers = {"User-Agent": UA, **({"Accept": accept} if accept else {})}
        status, data = self._open(urllib.request.Request(url, headers=headers), limit)
        if status == 404:
            data = b"\0404"
        if keep:
            self._store(path, data)
        return None if status == 404 else data

    def _store(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_bytes(data)
        tmp.replace(path)

    # -- the index -------------------------------------------------------------------------

    def project(self, name: str) -> dict:
        """The PEP 691 page of `name`, its file URLs made absolute (parsed once per Index:
        a reader of 150 releases asks for numpy's page 150 times)."""
        if name not in self._pages:
            self._pages[name] = self._project(name)
        return self._pages[name]

    def _project(self, name: str) -> dict:
        url = f"{self.url}/{name}/"
        data = self.get(url, accept=JSON_PAGE, ttl=SIMPLE_TTL)
        if data is None:
            raise Refused(f"{name}: the index {self.url} has no such project")
        try:
            page = json.loads(data)
            files = page["files"]
            for f in files:
                f["url"] = urllib.parse.urljoin(url, f["url"])
                if not isinstance(f["filename"], str):
                    raise TypeError("filename")
                for key, kinds in (("upload-time", str), ("requires-python", str),
                                   ("size", int), ("yanked", (bool, str)),
                                   ("hashes", dict)):
                    if f.get(key) is not None and not isinstance(f[key], kinds):
                        raise TypeError(f"{key} of {f['filename'][:60]}")
        except (ValueError, KeyError, TypeError) as e:
            raise Refused(f"{name}: the index's page is not a PEP 691 JSON page "
                          f"({type(e).__name__}: {str(e)[:80]})") from None
        return page

    def metadata(self, f: dict) -> tuple[str, str]:
        """METADATA of the wheel file entry `f`, and how it was read: 'pep658' or 'range'."""
        data = self.get(f["url"] + ".metadata", limit=MAX_METADATA)
        if data is not None:
            return data.decode("utf-8", "replace"), "pep658"
        path = self._cache_path("zip-metadata:" + f["url"])
        if path.is_file():
            return path.read_text("utf-8"), "range"
        size = f.get("size")
        if not isinstance(size, int) or size <= 0:
            raise Refused(f"{f['filename']}: the index gives no size, so its METADATA cannot "
                          f"be read with range requests")
        raw = io.BufferedReader(_RangeFile(self, f["url"], size), buffer_size=1 << 16)
        try:
            with zipfile.ZipFile(raw) as z:
                names = [n for n in z.namelist()
                         if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                if len(names) != 1:
                    raise Refused(f"{f['filename']}: expected one .dist-info/METADATA, found "
                                  f"{len(names)}")
                if z.getinfo(names[0]).file_size > MAX_METADATA:
                    raise Refused(f"{f['filename']}: its METADATA is over 4 MiB")
                text = z.read(names[0]).decode("utf-8", "replace")
        except (*CONTENT_ERRORS, MemoryError, OverflowError) as e:   # the index not
            # answering stays the fault it is
            raise Refused(f"{f['filename']}: not a readable wheel ({type(e).__name__}: "
                          f"{str(e)[:80]})") from None
        self._store(path, text.encode("utf-8"))
        return text, "range"


    def sdist_metadata(self, f: dict) -> str:
        """PKG-INFO of the sdist file entry `f`: the whole archive is read (a tar.gz has no
        index to range-read), checked against the index's sha256, and only PKG-INFO kept
        (a wrong answer is not kept: the next run asks again)."""
        path = self._cache_path("sdist-pkg-info-2:" + f["url"])
        if path.is_file():
            return path.read_text("utf-8")
        want = (f.get("hashes") or {}).get("sha256")
        if not isinstance(want, str) or len(want) != 64:
            raise Refused(f"{f['filename']}: the index gives no sha256 for it")
        data = self.get(f["url"], limit=MAX_SDIST, keep=False)   # checked before it is kept
        if data is None or hashlib.sha256(data).hexdigest() != want:
            raise Refused(f"{f['filename']}: the file does not match the index's sha256")
        text = pkg_info(data, f["filename"])
        self._store(path, text.encode("utf-8"))
        return text


def pkg_info(data: bytes, filename: str) -> str:
    """The top-level PKG-INFO of an sdist (.tar.gz) held in `data`. Where it states no
    Requires-Dist but the sdist has a top-level requirements/requirements.txt (DeepSpeed
    before 0.16.1: its setup.py reads that file into install_requires), each requirement
    line of that file is added as a Requires-Dist."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            listed = []
            for m in t:   # read member by member, bounded (64 MB of gzip can hold millions)
                listed.append(m)
                if len(listed) > MAX_MEMBERS:
                    raise Refused(f"{filename}: more than {MAX_MEMBERS} members; not an "
                                  f"sdist envgen reads")
            members = [m for m in listed
                       if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")]
            if len(members) != 1 or members[0].size > MAX_METADATA:
                raise Refused(f"{filename}: expected one top-level PKG-INFO under 4 MiB, found "
                              f"{len(members)}")
            text = t.extractfile(members[0]).read().decode("utf-8", "replace")
            if "\nRequires-Dist:" in text.split("\n\n", 1)[0]:
                return text
            top = members[0].name.split("/")[0]
            req = next((m for m in listed if m.isfile() and m.size <= MAX_METADATA
                        and m.name == f"{top}/requirements/requirements.txt"), None)
            if req is None:
                return text
            lines = t.extractfile(req).read().decode("utf-8", "replace").splitlines()
    except ARCHIVE_ERRORS as e:
        raise Refused(f"{filename}: not a readable sdist ({e})") from None
    head, sep, body = text.partition("\n\n")
    added = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        try:
            Requirement(line)
        except InvalidRequirement:
            raise Refused(f"{filename}: requirements/requirements.txt has a line that is "
                          f"no requirement: {line[:80]!r}") from None
        added.append(f"Requires-Dist: {line}")
    return "\n".join([head.rstrip("\n"), *added]) + (sep + body if sep else "\n")


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests, reading at
    most RANGE_BUDGET bytes in all (a wheel whose zip directory claims the whole file, or
    2**40 bytes, is refused, not downloaded)."""

    def __init__(self, index: Index, url: str, size: int):
        self.index, self.url, self.size, self.pos = index, url, size, 0
        self.read_so_far = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, off, whence=0):
        self.pos = {0: off, 1: self.pos + off, 2: self.size + off}[whence]
        return self.pos

    def readinto(self, b):
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        if self.read_so_far + n > RANGE_BUDGET:
            raise Refused(f"{self.url}: reading its METADATA would take more than "
                          f"{RANGE_BUDGET >> 20} MiB of range requests (its zip directory "
                          f"is that large, or says so)")
        self.read_so_far += n
        req = urllib.request.Request(self.url, headers={
            "User-Agent": UA, "Range": f"bytes={self.pos}-{self.pos + n - 1}"})
        _, data = self.index._open(req, n, expect=206)
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


# ---- wheels ------------------------------------------------------------------------------

def cpython_of(tag) -> str | None:
    """'3.11' for a cp311-cp311 tag; None for free-threaded (cp313t), abi3, PyPy."""
    interp, abi = tag.interpreter, tag.abi
    if not interp.startswith("cp") or abi.endswith("t") or abi in ("abi3", "none"):
        return None
    digits = interp[2:]
    if len(digits) < 2 or not digits.isdigit():   # cp, cp3: no CPython version envgen reads
        return None
    return f"{digits[0]}.{digits[1:]}"


def is_linux_x86_64(tag) -> bool:
    p = tag.platform
    return (p.startswith("manylinux") or p.startswith("linux")) and p.endswith("_x86_64")


def releases(page: dict, first: Version | None = None) -> dict[Version, list[dict]]:
    """Final releases -> their non-yanked wheel entries, each with 'python' (or None),
    'build' (tuple), 'linux_x86_64' and 'pure' (a py3-none-any wheel)."""
    out: dict[Version, list[dict]] = {}
    for f in page["files"]:
        if not f["filename"].endswith(".whl") or f.get("yanked"):
            continue
        try:
            _, ver, build, tags = parse_wheel_filename(f["filename"])
        except InvalidWheelFilename as e:
            raise Refused(f"the index lists a wheel with an invalid name: {e}") from None
        if ver.is_prerelease or ver.is_devrelease or ver.is_postrelease or ver.local:
            continue
        if first is not None and ver < first:
            continue
        pys = {cpython_of(t) for t in tags} - {None}
        out.setdefault(ver, []).append({
            **f, "python": max(pys, key=Version) if pys else None, "build": build,
            "linux_x86_64": any(is_linux_x86_64(t) for t in tags),
            "pure": any(t.platform == "any" and t.interpreter.startswith("py3") for t in tags)})
    return out


def sdist_releases(page: dict) -> dict[Version, dict]:
    """Final releases -> their non-yanked .tar.gz source distribution."""
    out: dict[Version, dict] = {}
    for f in page["files"]:
        if not f["filename"].endswith(".tar.gz") or f.get("yanked"):
            continue
        try:
            _, ver = parse_sdist_filename(f["filename"])
        except (InvalidSdistFilename, InvalidVersion):
            continue
        if not (ver.is_prerelease or ver.is_devrelease or ver.is_postrelease or ver.local):
            out[ver] = f
    return out


def classifier_pythons(metadata: str) -> list[str]:
    """The CPython lines a package's `Programming Language :: Python :: 3.N` classifiers
    name: what a package without Requires-Python states it supports."""
    msg = email.parser.Parser().parsestr(metadata, headersonly=True)
    out = set()
    for c in msg.get_all("Classifier") or []:
        parts = [x.strip() for x in c.split("::")]
        if len(parts) == 3 and parts[:2] == ["Programming Language", "Python"] and \
                parts[2].count(".") == 1 and parts[2].replace(".", "").isdigit():
            out.add(parts[2])
    return sorted(out, key=Version)


def best_wheels(files: list[dict]) -> dict[str, dict]:
    """CPython version -> the Linux x86_64 wheel pip would pick (highest build tag)."""
    best: dict[str, dict] = {}
    for f in files:
        if not f["linux_x86_64"] or f["python"] is None:
            continue
        cur = best.get(f["python"])
        if cur is None or f["build"] > cur["build"]:
            best[f["python"]] = f
    return best


def requirements(metadata: str, python: str, what: str,
                 extras: frozenset[str] = frozenset()) -> list[Requirement]:
    """Requires-Dist entries that apply on Linux x86_64 CPython `python` (with `extras`)."""
    msg = email.parser.Parser().parsestr(metadata, headersonly=True)
    envs = [{**CPU_ENV, "python_version": python, "python_full_version": python + ".0",
             "extra": e} for e in ("", *sorted(extras))]
    out = []
    for line in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement as e:
            raise Refused(f"{what}: cannot parse its requirement {line[:80]!r} ({e})") from None
        if req.marker is not None:
            if "extra" in str(req.marker) and not extras:
                continue
            try:
                applies = any(req.marker.evaluate(env) for env in envs)
            except (UndefinedComparison, UndefinedEnvironmentName, InvalidVersion) as e:
                raise Refused(f"{what}: its requirement {str(req)[:80]!r} has a marker "
                              f"that cannot be evaluated ({e})") from None
            if not applies:
                continue
        out.append(req)
    return out


def newest_per_minor(versions, first: Version) -> list[Version]:
    """The newest patch of each major.minor line from `first` on, oldest line first."""
    lines: dict[tuple[int, int], Version] = {}
    for v in versions:
        if v >= first:
            key = (v.major, v.minor)
            lines[key] = max(lines.get(key, v), v)
    return sorted(lines.values())


def exact_pin(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return specs[0].version
    return None


def newest_matching(index: Index, project: str, specifier) -> str:
    """The newest final release of `project` inside `specifier` with a Linux x86_64 (or
    pure-Python) wheel: what pip would install today."""
    return str(matching(index, project, specifier)[0])


def matching(index: Index, project: str, specifier) -> list[Version]:
    """Every final release of `project` inside `specifier` with a Linux x86_64 (or
    pure-Python) wheel, newest first; Refused when there is none."""
    versions = set()
    for f in index.project(project)["files"]:
        if f.get("yanked") or not f["filename"].endswith(".whl"):
            continue
        try:
            _, ver, _, tags = parse_wheel_filename(f["filename"])
        except (InvalidWheelFilename, InvalidVersion):   # not a wheel pip would take either
            continue
        # a local version (0.7.0+mirror.1) is a mirror's own build, never PyPI's
        if ver.local is None and any(is_linux_x86_64(t) or t.platform == "any" for t in tags):
            versions.add(ver)
    ok = [v for v in versions if specifier.contains(v, prereleases=False)]
    if not ok:
        raise Refused(f"{project}{specifier}: no Linux x86_64 wheel on the index satisfies it")
    return sorted(ok, reverse=True)


@dataclass
class Run:
    """One reader's run: the index it reads, its parallelism, the warnings it collects."""

    index: Index
    jobs: int = 16
    warnings: list[str] = field(default_factory=list)
    folder: Path | None = None   # the matrix folder written to (a reader may read its rows)
    # (row, key, old value) a hand-kept source corrects: that value may go backwards
    corrections: set[tuple[str, str, str]] = field(default_factory=set)

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def needs_in(table, version) -> dict:
    """The needs fields of a release row: the first (range, needs, why[, over]) entry of a
    reader's NEEDS table whose range holds `version` (`over`: the base range they apply in)."""
    for spec, what, why, *over in table:
        if SpecifierSet(spec).contains(version, prereleases=True):
            return {"needs": dict(what), "needs_why": why,
                    **({"needs_over": over[0]} if over else {})}
    return {}
