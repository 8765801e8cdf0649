"""A login written into a URL (https://user:token@host/...) is a secret: envgen keeps URLs
in envgen.yaml, the closure, the lock, the Dockerfile and the image's files and labels, so
such a URL is refused, and the message shows it with the login masked. A private index's
login comes as ENVGEN_NETRC, a netrc file a build mounts as a secret (in no layer)."""
from __future__ import annotations

import re

_LOGIN = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@]*@)")


def has_login(url: str) -> bool:
    return bool(_LOGIN.match(url))


def masked(url: str) -> str:
    """`url` with the login before its host replaced by ***."""
    return _LOGIN.sub(r"\1***@", url)


def refusal(what: str, url: str) -> str:
    """The sentence for a URL that carries a login."""
    how = ("git's own credentials (a credential helper, or ~/.netrc)" if url.startswith("git+")
           else "ENVGEN_NETRC, a netrc file the resolver reads and each build mounts as a "
                "secret")
    return (f"{what} {masked(url)[:80]!r} carries a login (user:password@): envgen writes "
            f"URLs into its files and the image, so give the login by {how}")
