"""Where an image's recipe comes from: the team's repository and commit, for the OCI
`source` and `revision` labels. Known from ENVGEN_SOURCE_URL / ENVGEN_REVISION, else from
GitHub Actions' own variables (GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_SHA); unknown
otherwise, and then the labels are left out rather than guessed."""
from __future__ import annotations

import os
import re

from .errors import InputError

SOURCE_URL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~-]+){1,8}")
REVISION = re.compile(r"[0-9a-f]{7,64}")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


def _checked(name: str, value: str, pattern: re.Pattern, what: str) -> str:
    if not pattern.fullmatch(value):
        raise InputError(f"{name}={value[:60]!r} is not {what}")
    return value


def current(environ=None) -> tuple[str | None, str | None]:
    """(source URL, revision), each None when unknown. A value that is set but malformed is
    refused: it would go into a label of every image."""
    env = os.environ if environ is None else environ
    source = env.get("ENVGEN_SOURCE_URL") or None
    revision = env.get("ENVGEN_REVISION") or None
    if source is None and env.get("GITHUB_REPOSITORY"):
        repo = _checked("GITHUB_REPOSITORY", env["GITHUB_REPOSITORY"], _REPOSITORY,
                        "an OWNER/NAME repository")
        server = env.get("GITHUB_SERVER_URL") or "https://github.com"
        source = f"{server.rstrip('/')}/{repo}"
    if revision is None and env.get("GITHUB_SHA"):
        revision = env["GITHUB_SHA"]
    if source is not None:
        _checked("the source URL (ENVGEN_SOURCE_URL or GITHUB_SERVER_URL)", source, SOURCE_URL,
                 "an https URL of a repository")
    if revision is not None:
        _checked("the revision (ENVGEN_REVISION or GITHUB_SHA)", revision, REVISION,
                 "a commit id (7 to 64 lowercase hex digits)")
    return source, revision
