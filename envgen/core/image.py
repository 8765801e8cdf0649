"""What an envgen image is, in names every wing shares: image references and tags as the
distribution grammar has them (validated strictly: they come from flags and lock files),
the tag `envgen build` gives a stack, the user and folder of the payload inside it, and the
Stack its io.envgen.stack label carries. Pure: nothing here talks to a daemon."""
from __future__ import annotations

import re

from .errors import InputError
from .model import Stack

NAME_MAX = 255      # distribution/reference NameTotalLengthMax


# The distribution reference grammar (distribution/reference/regexp.go, v2.8, the one
# Docker 20.10 speaks: no IPv6 literals), anchored by fullmatch so that a trailing newline
# cannot slip past a `$`.
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
                     rf"(?::(?P<port>[0-9]{{1,5}}))?")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_FORMAT = "host[:port]/path, lowercase, such as localhost:5000/team/envgen"


def _show(text: str) -> str:
    """A hostile value, quoted so that newlines and control characters stay visible."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


def parse_repository(text: object) -> str:
    """`text` when it is a repository reference without tag or digest, else InputError."""
    if not isinstance(text, str):
        raise InputError(f"a repository must be a string ({_FORMAT}), not "
                         f"{type(text).__name__}")
    login, at, after = text.partition("@")
    if at and "/" not in login and not after.startswith("sha256:"):   # user:token@host/...
        raise InputError(f"the repository {_show('***@' + text.partition('@')[2])} "
                         f"carries a login (user:password@): envgen writes repositories into "
                         f"locks and CI files, so log in with `docker login` instead")
    shown = _show(text)
    if not text:
        raise InputError(f"the repository is empty; give one as {_FORMAT}")
    if len(text) > NAME_MAX:
        raise InputError(f"the repository {shown} is {len(text)} characters long; "
                         f"the limit is {NAME_MAX}")
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise InputError(f"the repository {shown} contains whitespace or a control character")
    if "@" in text:
        raise InputError(f"the repository {shown} carries a digest; give the repository "
                         f"alone ({_FORMAT})")
    domain, path = _split_domain(text)
    if domain is not None:
        _check_domain(domain, shown)
    components = path.split("/")
    if ":" in components[-1]:
        raise InputError(f"the repository {shown} carries a tag; give the repository alone "
                         f"and the tag separately")
    for comp in components:
        if not _PATH_COMPONENT.fullmatch(comp):
            why = ("path components must be lowercase" if comp != comp.lower()
                   and _PATH_COMPONENT.fullmatch(comp.lower()) else
                   f"{comp!r} is not a path component (lowercase letters and digits joined "
                   f"by '.', '_', '__' or '-')")
            raise InputError(f"the repository {shown} is not valid: {why}")
    return text


def _split_domain(name: str) -> tuple[str | None, str]:
    """(registry host or None, path): docker's rule, the first component names a registry
    only when it looks like a host."""
    first, slash, rest = name.partition("/")
    if slash and (first == "localhost" or any(c in first for c in ".:")):
        return first, rest
    return None, name


def _check_domain(domain: str, shown: str) -> None:
    m = _DOMAIN.fullmatch(domain)
    if m is None or (m["port"] and not 0 < int(m["port"]) <= 65535):
        raise InputError(f"the repository {shown} does not start with a valid registry "
                         f"host[:port] ({domain!r})")


def parse_pinned(text: object) -> tuple[str, str]:
    """(repository, digest) of `repository@sha256:<64 hex>`, else InputError."""
    if not isinstance(text, str):
        raise InputError(f"a pinned image must be a string (repository@sha256:<64 hex>), "
                         f"not {type(text).__name__}")
    repository, at, digest = text.partition("@")
    if not at:
        raise InputError(f"{_show(text)} is not pinned by digest; give "
                         f"repository@sha256:<64 lowercase hex digits>")
    if not _DIGEST.fullmatch(digest):
        raise InputError(f"{_show(text)} does not end in a digest sha256:<64 lowercase hex "
                         f"digits>")
    return parse_repository(repository), digest


def familiar(name: str) -> str:
    """An image name as the Docker daemon writes it in RepoTags and RepoDigests
    (docker.io/library/x -> x, docker.io/org/x -> org/x), so a name a user wrote matches the
    daemon's."""
    name = name.removeprefix("docker.io/")
    return name.removeprefix("library/") if name.count("/") == 1 else name


def split_tag(ref: str) -> tuple[str, str]:
    """(repository, tag) of `ref`; the tag defaults to `latest`. A `:` before the last `/`
    is a registry port, not a tag (localhost:5000/team/img)."""
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repo, tag


def parse_tagged(text: object) -> tuple[str, str]:
    """(repository, tag) of a `repository[:tag]` reference, each checked with the same
    grammar as a pushed repository; else InputError."""
    if not isinstance(text, str):
        raise InputError(f"an image reference must be a string, not {type(text).__name__}")
    if "@" in text:   # else `x@sha256:` reads as repository 'x@sha256' with an empty tag
        raise InputError(f"{_show(text)} names a digest; a tag is repository[:tag] (such as "
                         f"envgen/team:v1), and the daemon gives the digest")
    repository, tag = split_tag(text)
    if not _TAG.fullmatch(tag):
        raise InputError(f"the tag of {_show(text)} is not valid (letters, digits, '_', '.' "
                         f"and '-', at most 128, not starting with '.' or '-')")
    return parse_repository(repository), tag


def parse_image_ref(text: object) -> str:
    """`text` when it names a local image as the daemon would read it: an image ID
    (`sha256:<64 hex>`), `repository[:tag]` (a short ID is one) or `repository@digest`;
    else InputError. Checked before any daemon sees it."""
    if isinstance(text, str) and _DIGEST.fullmatch(text):   # an image ID has a digest's form
        return text
    if isinstance(text, str) and "@" in text:
        parse_pinned(text)
    else:
        parse_tagged(text)
    return text


def default_tag(stack: Stack) -> str:
    if stack.project is not None:   # a team's image: its name, then the stack under it
        return f"envgen/{stack.project.name}:{stack.stack}-py{stack.python}-{stack.base.name}"
    return f"envgen/{stack.stack}:{stack.version}-py{stack.python}-{stack.base.name}"


UID = 10001  # not 1000: vendor bases (Ubuntu 24.04) already use it


PAYLOAD_DIR = "/opt/envgen"


