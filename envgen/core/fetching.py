"""HTTP requests envgen makes to an index or a mirror the user named (closures, the Debian
base's snapshot check, the one probe of an index): redirects are followed only where they
keep the protection of the URL they came from. A 30x from https to plain http, or to a
scheme other than http(s), is refused before it is asked, as matrix refresh refuses one
(refresh/pypi.py, whose hosts are stricter still). Bodies are read through `chunks`
(or `head`), within a size and a wall-clock bound."""
from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request


class RedirectRefused(urllib.error.URLError):
    """A redirect that would drop https or leave http(s); an OSError, so callers that treat
    an index that does not answer say so for this too."""


class _KeepScheme(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old = urllib.parse.urlsplit(req.full_url).scheme
        new = urllib.parse.urlsplit(newurl).scheme
        if new not in ("http", "https") or (old == "https" and new != "https"):
            raise RedirectRefused(f"{req.full_url[:100]} redirected ({code}) to "
                                  f"{newurl[:100]}, which drops https: not followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_KeepScheme)


def urlopen(req, timeout: float):
    """urllib.request.urlopen with the redirect rule above."""
    return _OPENER.open(req, timeout=timeout)


class StreamLimit(OSError):
    """A body larger than allowed (`kind` "size") or slower than its deadline ("time")."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def chunks(stream, limit: int, seconds: float, size: int = 1 << 16, whole: bool = True):
    """The bytes of `stream` (an HTTP response or a file) as they arrive: StreamLimit as soon
    as more than `limit` arrive (`whole`; otherwise the first `limit` bytes are the end),
    or when they have taken more than `seconds` in all. The socket's timeout is per read,
    so without the deadline a server sending a byte every 20 s would keep a run going for
    ever."""
    read = getattr(stream, "read1", None) or stream.read
    deadline, got, past = time.monotonic() + seconds, 0, int(whole)
    while got < limit + past:
        chunk = read(min(size, limit + past - got))
        if not chunk:
            break
        got += len(chunk)
        if got > limit:
            raise StreamLimit("size", f"larger than {_bytes(limit)}")
        if time.monotonic() > deadline:
            raise StreamLimit("time", f"took more than {seconds:.0f} s")
        yield chunk


def head(stream, limit: int, seconds: float) -> bytes:
    """The first `limit` bytes of `stream` (fewer when it ends sooner), within `seconds`."""
    return b"".join(chunks(stream, limit, seconds, whole=False))


def _bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"
