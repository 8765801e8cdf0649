"""HTTP requests envgen makes to an index or a mirror the user named (closures, the Debian
base's snapshot check, the one probe of an index): redirects are followed only where they
keep the protection of the URL they came from. A 30x from https to plain http, or to a
scheme other than http(s), is refused before it is asked, as matrix refresh refuses one
(refresh/pypi.py, whose hosts are stricter still)."""
from __future__ import annotations

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
