"""HTTP requests envgen makes to an index or a mirror the user named (closures, the Debian
base's snapshot check, the one probe of an index): redirects are followed only where they
keep the protection of the URL they came from. A 30x from https to plain http, or to a
scheme other than http(s), is refused before it is asked, as matrix refresh refuses one
(refresh/pypi.py, whose hosts are stricter still). Bodies are read through `chunks`
(or `head`), within a size and a wall-clock bound."""
from __future__ import annotations

import http.client
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


class NotHttp(urllib.error.URLError):
    """A server that answered something other than HTTP (an SSH banner, a status line of
    70 KB), or a URL that cannot be asked at all (a port that is no number): urllib raises
    these as http.client.HTTPException or ValueError, which callers that treat an index
    that does not answer (OSError) would let through as a bug."""

    def __str__(self):
        return str(self.reason)


_OPENER = urllib.request.build_opener(_KeepScheme)


def urlopen(req, timeout: float, opener=None):
    """urllib.request.urlopen with the redirect rule above (or `opener`'s own), its
    non-OSError failures made NotHttp."""
    url = req if isinstance(req, str) else getattr(req, "full_url", "")
    try:
        return (opener or _OPENER).open(req, timeout=timeout)
    except OSError:
        raise
    except (http.client.InvalidURL, ValueError) as e:
        raise NotHttp(f"{str(url)[:100]} is not a URL envgen can ask ({_said(e)})") from None
    except http.client.HTTPException as e:
        raise NotHttp(f"{str(url)[:100]} did not answer in HTTP "
                      f"({type(e).__name__}: {_said(e)})") from None


def _said(e: Exception) -> str:
    """`e`'s text as one printable line: a server's garbage is shown, never printed raw."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(e)).split())[:80]


class StreamLimit(OSError):
    """A body larger than allowed (`kind` "size"), slower than its deadline ("time"), cut
    short of the length its server announced ("short"), or not readable ("bad"). Its text
    is a predicate ("is larger than 32 MiB", "took more than 120 s"): a caller puts the
    thing read before it."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def chunks(stream, limit: int, seconds: float, size: int = 1 << 16, whole: bool = True,
           min_rate: float = 0.0, most: float | None = None):
    """The bytes of `stream` (an HTTP response or a file) as they arrive: StreamLimit as soon
    as more than `limit` arrive (`whole`; otherwise the first `limit` bytes are the end),
    when they have taken more than `seconds` (plus one second per `min_rate` bytes
    received: a large file on a slow link is given its time, a server sending a byte every
    20 s is not; the socket's timeout is per read and would never trip; never more than
    `most` seconds), or when the response ends before its Content-Length ("short"), or
    its framing is broken ("bad")."""
    read = getattr(stream, "read1", None) or stream.read
    start, got, past = time.monotonic(), 0, int(whole)
    while got < limit + past:
        try:
            chunk = read(min(size, limit + past - got))
        except http.client.IncompleteRead:   # a chunked body cut short
            raise StreamLimit("short", f"ended after {got} bytes, before its last chunk") \
                from None
        except http.client.HTTPException as e:   # a chunk-size line of 70 KB and such
            raise StreamLimit("bad", f"is not a readable HTTP body ({type(e).__name__})") \
                from None
        if not chunk:
            if whole and (getattr(stream, "length", None) or 0) > 0:
                raise StreamLimit("short", f"ended after {got} bytes, "
                                           f"{stream.length} short of its Content-Length")
            break
        got += len(chunk)
        if got > limit:
            raise StreamLimit("size", f"is larger than {_bytes(limit)}")
        allowed = seconds + (got / min_rate if min_rate else 0.0)
        if most is not None:
            allowed = min(allowed, most)
        if time.monotonic() - start > allowed:
            raise StreamLimit("time", f"took more than {allowed:.0f} s")
        yield chunk


def head(stream, limit: int, seconds: float) -> bytes:
    """The first `limit` bytes of `stream` (fewer when it ends sooner), within `seconds`."""
    return b"".join(chunks(stream, limit, seconds, whole=False))


def _bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"
