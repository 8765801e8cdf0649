"""Push and pull by digest: the only module that talks to registries.

A pushed image is named by `repository@sha256:<manifest digest>`, which a teammate's daemon
can pull and get the very image (the same image ID) that was certified here. Repositories
and digests come from flags and lock files, so they are validated strictly before any
daemon sees them. The daemon does the talking to the registry; this module bounds how long
it may stay silent and turns what it reports into one sentence and an exit code."""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ..core.errors import CheckFailed, EnvgenError, EnvironmentMissing, InputError
from ..core.image import (
    _DIGEST,
    _TAG,
    _show,
    _split_domain,
    familiar,
    parse_pinned,
    parse_repository,
)
from .docker import image_or_none

SILENCE_S = 120.0   # a daemon that reports no progress for this long is stuck, not busy

# What the daemon reports, in the words a user acts on. The first needle found wins.
_REASONS = (
    ("connection refused", "nothing listens there (connection refused)"),
    ("no such host", "its host name does not resolve"),
    ("timeout", "it did not answer in time"),
    ("http 405", "it refuses uploads (HTTP 405: a read-only registry, or pushes not allowed)"),
    ("method not allowed", "it refuses uploads (a read-only registry, or pushes not allowed)"),
    ("server gave http response to https client",
     "it speaks plain HTTP, and this daemon does not list it as an insecure registry"),
    ("x509", "its TLS certificate is not trusted by this daemon"),
)
_DENIED = re.compile(r"unauthorized|authentication required|denied|forbidden|\b40[13]\b", re.I)
_MISSING = re.compile(r"manifest unknown|name unknown|manifest for \S+ not found|"
                      r"repository does not exist", re.I)


def _registry_of(repository: str) -> str:
    return _split_domain(repository)[0] or "docker.io"


def _reason(message: str) -> str:
    low = message.lower()
    for needle, reason in _REASONS:
        if needle in low:
            return reason
    line = " ".join(message.split())
    line = line if len(line) <= 240 else line[:237] + "..."
    return f"access denied ({line})" if _DENIED.search(message) else line


@contextmanager
def _talking(c, what: str, registry: str, timeout: float) -> Iterator[None]:
    """Bound every read from the daemon to `timeout` s of silence (a registry that accepts a
    connection and never answers would otherwise hang the daemon, and us with it), and turn
    transport failures into exit 3. The SDK's push and pull take no timeout of their own; it
    reads one per request from `c.api`, so the caller's client is bounded for a while."""
    import docker
    import requests
    import urllib3

    old = c.api.timeout
    c.api.timeout = timeout
    try:
        yield
    except (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError) as e:
        raise EnvironmentMissing(f"{what} {registry} failed: neither the Docker daemon nor "
                                 f"the registry said anything for {timeout:g} s") from e
    except docker.errors.APIError as e:
        raise EnvironmentMissing(f"{what} {registry} failed: "
                                 f"{_reason(str(e.explanation or e))}") from e
    except (docker.errors.DockerException, requests.exceptions.RequestException,
            urllib3.exceptions.HTTPError, OSError) as e:
        raise EnvironmentMissing(f"{what} {registry} failed: the Docker daemon stopped "
                                 f"answering ({type(e).__name__})") from e
    finally:
        c.api.timeout = old


def _read(lines: Iterable) -> tuple[str | None, str | None]:
    """(the manifest digest the stream reported, its first error) of a progress stream."""
    digest = None
    for line in lines:
        if not isinstance(line, dict):
            continue
        error = line.get("error") or (line.get("errorDetail") or {}).get("message")
        if error:
            return digest, str(error)
        aux = line.get("aux")
        if isinstance(aux, dict) and _DIGEST.fullmatch(str(aux.get("Digest", ""))):
            digest = aux["Digest"]
    return digest, None


def _same_repository(name: str, repository: str) -> bool:
    """RepoDigests name Docker Hub images in the familiar form (`org/x`, `x`)."""
    return familiar(name) == familiar(repository)


def push(c, image_ref: str, repository: str, tag: str, *, timeout: float = SILENCE_S) -> str:
    """Push `image_ref` (on the daemon behind SDK client `c`) as `repository:tag` and return
    `repository@sha256:<manifest digest>`. A failed push leaves the tag as it was before, so
    no local name claims an image was pushed when it was not. `timeout` bounds how long the
    daemon may go without a word (uploads report progress all along), not the whole push."""
    if not isinstance(image_ref, str) or not image_ref:
        raise InputError("the image to push must be named by a non-empty string")
    repository = parse_repository(repository)
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise InputError(f"the tag {_show(str(tag))} is not valid (letters, digits, '_', '.' "
                         f"and '-', at most 128, not starting with '.' or '-')")
    registry, target = _registry_of(repository), f"{repository}:{tag}"
    with _talking(c, f"pushing {target} to", registry, timeout):
        image = image_or_none(c, image_ref)
        if image is None:
            raise EnvironmentMissing(f"the Docker daemon has no image {_show(image_ref)} "
                                     f"to push")
        before = image_or_none(c, target)
        only_name = not image.attrs.get("RepoTags") and not image.attrs.get("RepoDigests")
        image.tag(repository, tag)
    try:
        with _talking(c, f"pushing {target} to", registry, timeout):
            reported, error = _read(c.api.push(repository, tag=tag, stream=True, decode=True))
            if error:
                raise EnvironmentMissing(f"pushing {target} to {registry} failed: "
                                         f"{_reason(error)}")
            image.reload()
        recorded = {d.partition("@")[2] for d in image.attrs.get("RepoDigests") or ()
                    if _same_repository(d.partition("@")[0], repository)}
        if reported is None and len(recorded) == 1:
            reported = next(iter(recorded))   # a daemon too old to report the digest
        if reported is None or reported not in recorded:
            raise CheckFailed(f"pushing {target} to {registry} gave no digest both the "
                              f"registry and the daemon agree on (registry: {reported}, "
                              f"daemon: {sorted(recorded) or 'none'})")
        return f"{repository}@{reported}"
    except EnvgenError as e:
        if not _undo_tag(c, target, before, image.id, only_name):
            raise
        raise type(e)(f"{e.message}; the tag {target} is kept because it is the image's "
                      f"only name") from e
    except BaseException:
        _undo_tag(c, target, before, image.id, only_name)
        raise


def _undo_tag(c, target: str, before, image_id: str, only_name: bool) -> bool:
    """Put `target` back as it was; True when it had to be kept. Untagging an image's only
    name would delete the image itself, which is worse than a tag that names it."""
    if before is not None and before.id == image_id:
        return False                      # the tag was there before the push: not ours
    if before is None and only_name:
        return True
    try:
        if before is None:
            c.images.remove(target, noprune=True)
        else:
            repository, _, tag = target.rpartition(":")
            c.api.tag(before.id, repository, tag, force=True)
    except Exception:  # best effort: the daemon may be the very thing that failed
        pass
    return False


def pull(c, pinned: str, *, timeout: float = SILENCE_S):
    """Pull exactly `repository@sha256:…` into the daemon behind `c`; the SDK image.
    A registry without that digest is exit 1 (the thing checked is false); a registry or
    daemon that does not answer is exit 3."""
    import docker

    repository, digest = parse_pinned(pinned)
    registry, ref = _registry_of(repository), f"{repository}@{digest}"

    def failed(message: str, missing: bool) -> EnvgenError:
        if missing or _MISSING.search(message):
            return CheckFailed(f"the registry {registry} has no image with digest {digest} in "
                               f"{repository} ({' '.join(message.split())[:200]})")
        if "verification failed" in message.lower():   # the daemon checked the bytes
            return CheckFailed(f"the registry {registry} served other bytes than digest "
                               f"{digest} names ({' '.join(message.split())[:200]})")
        return EnvironmentMissing(f"pulling {ref} from {registry} failed: {_reason(message)}")

    with _talking(c, f"pulling {ref} from", registry, timeout):
        try:
            _, error = _read(c.api.pull(repository, tag=digest, stream=True, decode=True))
        except docker.errors.APIError as e:  # what fails before any progress is an HTTP error
            raise failed(str(e.explanation or e), isinstance(e, docker.errors.NotFound)) from e
        if error:
            raise failed(error, False)
        return c.images.get(ref)
