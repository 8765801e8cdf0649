"""What a reader returns: the team's requirements as written, each with where it is written,
the indexes the file names, and notes on what was mapped, dropped or could not be read."""
from __future__ import annotations

import re
import urllib.parse

from ..core.errors import InputError
from ..core.record import dataclass

# What a target runs (the image's platform), and what "every platform" means when a
# marker is judged: a marker false on all of these excludes every platform envgen builds for
# and every one a team would name.
PLATFORMS = (("linux", "Linux", "x86_64", "posix"), ("linux", "Linux", "aarch64", "posix"),
             ("win32", "Windows", "AMD64", "nt"), ("darwin", "Darwin", "arm64", "posix"),
             ("darwin", "Darwin", "x86_64", "posix"))
PYTHONS = tuple(f"3.{m}" for m in range(7, 16))
SCHEMES = ("https", "file")
MAX_LINE = 4000


@dataclass(frozen=True)
class Wanted:
    """One requirement: its line as written (options such as --hash left out), the
    distribution's canonical name, and where it is written."""

    text: str
    name: str
    file: str
    line: int
    kind: str = "index"          # index | url | git | path
    hashes: tuple[str, ...] = ()  # sha256 hex digits the file gives (--hash, a lock)
    constraint: bool = False     # -c, or a lock's pin of a package no one asked for
    origin: str = ""              # "conda": a conda name taken from PyPI as it is

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Intake:
    path: str
    kind: str
    requirements: tuple[Wanted, ...]
    indexes: tuple[str, ...] = ()      # --index-url first when given ("" when not), then extras
    find_links: tuple[str, ...] = ()
    python: str | None = None          # a Python the file asks for (conda's python=3.10)
    variant: str | None = None         # a CUDA variant the file names (an index, cudatoolkit)
    requires_python: str = ""          # pyproject.toml's requires-python ("" for none)
    requires_python_at: str = ""       # its FILE:LINE
    notes: tuple[str, ...] = ()

    @property
    def index_url(self) -> str:
        return self.indexes[0] if self.indexes else ""

    @property
    def extra_indexes(self) -> tuple[str, ...]:
        return self.indexes[1:]


def bad(message: str, file: str, line: int | None = None) -> InputError:
    return InputError(message, file=file, line=line)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*")
_QUERY_VALUE = re.compile(r"([?&][^=&#\s'\"]*=)[^&#\s'\"]*")
# a query key whose value is a secret: private_token, access_token, api_key, X-Amz-Signature
_SECRET_KEY = re.compile(r"token|key|secret|pass|pwd|auth|sig|credential|session", re.I)


def hidden(text: str) -> str:
    """`text` as an echo may show it: each URL's login masked as logins.masked masks it
    (`https://***@host`), and each value of its query (`?private_token=***`)."""
    from ..core.logins import masked
    return _URL.sub(lambda m: _QUERY_VALUE.sub(r"\1***", masked(m.group())), text)


def show(value: object, limit: int = 60) -> str:
    """A value from the team's file, quoted and cut short (errors.shown), logins and query
    values masked first: a cut never leaves half a secret."""
    text = hidden(repr(value))
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def masked_line(text: str) -> str:
    """A line that is no requirement (a .env's `KEY=value`, /etc/passwd's `root:x:0:...`),
    quoted as far as its first `=`, `:` or space, the rest masked: enough to find the line,
    never its value."""
    m = re.match(r"[^=:\s]{0,40}[=:\s]?", text)
    return show(m.group() + ("***" if len(m.group()) < len(text) else ""))


def no_login(text: str, file: str, line: int) -> None:
    """A line with a login in a URL (`https://user:token@host`, anywhere in it) is refused
    before anything of the line is echoed."""
    login = re.search(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@'\"]*@\S*", text)
    if login is not None:
        from ..core.logins import refusal
        raise bad(refusal("the URL", login.group()), file, line)


def check_url(url: str, what: str, file: str, line: int, git: bool = False) -> str:
    """An https or file URL with no option-like value and no login; InputError otherwise."""
    from ..core.logins import has_login, refusal
    if not url or url.startswith("-"):
        raise bad(f"{what} {show(url)} looks like an option, not a URL", file, line)
    if has_login(url.removeprefix("git+")):
        raise bad(refusal(what, url), file, line)
    query = urllib.parse.urlsplit(url).query
    secret = [k for k, _, _v in (p.partition("=") for p in query.split("&") if "=" in p)
              if _SECRET_KEY.search(k)]
    if secret:
        raise bad(f"{what} {show(url)} carries a token in its query ({show(secret[0])}=***): "
                  f"envgen writes URLs into its files and the image, so give the login by "
                  f"ENVGEN_NETRC, a netrc file the resolver reads and each build mounts as a "
                  f"secret", file, line)
    if any(ord(c) < 33 or c in "\"'`\\<>{}|^" for c in url) or len(url) > 2000:
        raise bad(f"{what} {show(url)} holds a character a URL does not", file, line)
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.removeprefix("git+") if git else parts.scheme
    if scheme not in SCHEMES:
        raise bad(f"{what} {show(url)}: the scheme {parts.scheme or '(none)'!r} is not "
                  f"followed; envgen fetches https and file URLs only (write https://...)",
                  file, line)
    if scheme == "https" and not parts.hostname:
        raise bad(f"{what} {show(url)} names no host", file, line)
    if scheme == "file" and parts.netloc not in ("", "localhost"):   # read here, whatever
        raise bad(f"{what} {show(url)} names the host {parts.netloc[:40]!r}: a file URL "
                  f"is read on this machine (file:///path)", file, line)
    return url


def check_index(url: str, what: str, file: str, line: int) -> str:
    """An index URL: check_url's, and no query or fragment (envgen.yaml keeps an index as
    its plain https URL)."""
    check_url(url, what, file, line)
    parts = urllib.parse.urlsplit(url)
    if parts.query or parts.fragment:
        raise bad(f"{what} {show(url)}: an index is its plain URL, with no query or "
                  f"fragment (a login goes in ENVGEN_NETRC)", file, line)
    return url


_GIT_REF = re.compile(r"[A-Za-z0-9._/][A-Za-z0-9._/+-]{0,199}")


def git_parts(url: str, file: str, line: int) -> tuple[str, str]:
    """(repository URL, ref) of `git+https://host/repo.git@REF`; the ref is checked: a value
    git would read as an option, or no ref at all, is refused."""
    check_url(url, "the git reference", file, line, git=True)
    parts = urllib.parse.urlsplit(url.removeprefix("git+"))
    path, at, ref = parts.path.rpartition("@")
    if not at:
        raise bad(f"the git reference {show(url)} names no commit, tag or branch "
                  f"(write ...git@v1.2 or @<commit>): envgen pins it to a commit", file, line)
    if not _GIT_REF.fullmatch(ref) or ref.startswith("-") or ".." in ref:
        raise bad(f"the git reference {show(url)}: the ref {show(ref)} is not a commit, tag "
                  f"or branch name (none starts with '-')", file, line)
    repo = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    return repo, ref
