"""Every ENVGEN_* variable, checked when a command starts, before any work: a value out of
its documented range is one sentence naming the variable (exit 2), not a failure minutes
later in the middle of a build, and never a traceback. cli_help.ENVIRONMENT documents each;
tests/test_cli_help.py holds the two lists equal."""
from __future__ import annotations

import os
import re

from .errors import EnvironmentMissing, InputError, shown
from .provenance import REVISION, SOURCE_URL

MAX_PATH = 4096


def _path(name: str, value: str, empty_ok: bool = False) -> None:
    if not value and empty_ok:
        return
    if not value or len(value) > MAX_PATH or not value.isprintable() or value.startswith("-"):
        raise InputError(f"{name}={shown(value)} is not a path (1 to {MAX_PATH} printable "
                         f"characters, not starting with '-')")


def _home(name: str, value: str) -> None:
    _path(name, value)
    if os.path.exists(value) and not os.path.isdir(value):   # the host's state: exit 3
        raise EnvironmentMissing(f"{name}={shown(value)} is a file, not a folder: envgen "
                                 f"cannot write certificates or caches in it; point it at a "
                                 f"folder")


def _file(name: str, value: str) -> None:
    _path(name, value)
    if not os.path.isfile(value):
        raise InputError(f"{name}={shown(value)} is not a file")


def _secret_file(name: str, value: str) -> None:
    """A file a build mounts as a secret: BuildKit reads `--secret id=..,src=PATH` as CSV,
    so a comma or a quote in the path would make another field of it."""
    _file(name, value)
    if any(c in value for c in ',"'):
        raise InputError(f"{name}={shown(value)}: a build cannot mount a file whose path "
                         f"holds a comma or a quote; move it to a plain path")


def _number(low: float, high: float, unit: str):
    def check(name: str, value: str) -> None:
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not low <= number <= high:   # NaN fails too
            raise InputError(f"{name}={shown(value)} must be a number of {unit} from "
                             f"{low:g} to {high:g}")
    return check


def _pattern(pattern: str | re.Pattern, what: str):
    compiled = re.compile(pattern)

    def check(name: str, value: str) -> None:
        if not compiled.fullmatch(value):
            raise InputError(f"{name}={shown(value)} is not {what}")
    return check


def _url(what: str, pattern: str | None = None):
    """An http(s) URL (or `pattern`) that carries no login: envgen writes these URLs into
    closures, locks and images, and a message would show it."""
    fits = _pattern(pattern or _URL, what)

    def check(name: str, value: str) -> None:
        from .logins import has_login, refusal
        if has_login(value):   # before the pattern: its message would show the login
            raise InputError(refusal(name, value))
        fits(name, value)
        if value.startswith("http"):
            _port(name, value)
    return check


def _port(name: str, value: str) -> None:
    import urllib.parse
    try:
        urllib.parse.urlsplit(value).port   # the pattern lets http://host:abc through
    except ValueError as e:
        why = str(e)[:1].lower() + str(e)[1:80]
        raise InputError(f"{name}={shown(value)} is not a URL envgen can ask ({why})") \
            from None


_URL = r"https?://[A-Za-z0-9._~:/?#@!*+,;=%\[\]-]{1,2000}"
CHECKS = {
    "ENVGEN_HOME": _home,
    "ENVGEN_MATRIX": _path,
    "ENVGEN_PROJECT": lambda n, v: _path(n, v, empty_ok=True),
    "ENVGEN_DOCKER": _path,
    "ENVGEN_APPTAINER": _path,
    "ENVGEN_NETRC": _secret_file,
    "ENVGEN_DOCKER_PING_TIMEOUT": _number(1, 86400, "seconds"),
    "ENVGEN_DOCKER_TIMEOUT": _number(1, 86400, "seconds"),
    "ENVGEN_BUILD_IDLE_TIMEOUT": _number(1, 86400, "seconds"),
    "ENVGEN_REFRESH_BACKOFF": _number(0, 60, "seconds"),
    "ENVGEN_BUILD_NETWORK": _pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}",
                                     "a network name (default, host, none or a network "
                                     "of the daemon)"),
    "ENVGEN_PYPI_SIMPLE": _url("an http(s) URL of a simple index"),
    "ENVGEN_DEBIAN_MIRROR": _url("an http(s) URL of a Debian mirror"),
    "ENVGEN_SOURCES": _url("auto, pypi, index or an http(s) URL", r"auto|pypi|index|" + _URL),
    "ENVGEN_SOURCE_URL": _pattern(SOURCE_URL, "an https URL of a repository"),
    "ENVGEN_REVISION": _pattern(REVISION, "a commit id (7 to 64 lowercase hex digits)"),
    "ENVGEN_DEBUG": _pattern(r"[^\x00-\x1f]{0,20}", "a flag (1 or 0)"),
    "ENVGEN_NO_CACHE": _pattern(r"[^\x00-\x1f]{0,20}", "a flag (1 or 0)"),
    "ENVGEN_NO_HOST_BUILDS": _pattern(r"[01]", "1 or 0"),
}


def check(environ=None) -> None:
    """Every ENVGEN_* variable that is set and not empty, against its range; InputError for
    the first one out of it. A variable set to '' counts as unset (ENVGEN_PROJECT: none)."""
    env = os.environ if environ is None else environ
    for name, rule in CHECKS.items():
        value = env.get(name)
        if value is None or (value == "" and name != "ENVGEN_PROJECT"):
            continue
        rule(name, value)


def checked(name: str, environ=None) -> str | None:
    """The value of `name` (None when unset or empty), after its check: for a library caller
    that reads a variable the CLI checked at start, so the rule is written once."""
    env = os.environ if environ is None else environ
    value = env.get(name) or None
    if value is not None:
        CHECKS[name](name, value)
    return value
