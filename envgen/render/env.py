"""The one Jinja environment: StrictUndefined, no autoescape (not HTML), quoting filters.
Jinja is imported when the environment is first asked for, not with this module: a render
the render cache answers never needs it."""
from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from pathlib import Path

_SAFE_TOKEN = re.compile(r"[A-Za-z0-9._+=<>!~,:/@%*-]+")
# every character Python's str.splitlines() ends a line at (pip reads requirements files
# with it: U+2028 in a comment starts a live line there), and NUL
_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00]")


def line(value) -> str:
    """Text inside one line of a generated file (a comment's words): refused when it holds
    anything a reader of that file would take for the start of a new line."""
    text = str(value)
    if _BREAKS.search(text):
        raise ValueError(f"refusing a line break inside one line of a build file: {text!r}")
    return text


def template_dir() -> Path:
    here = Path(__file__).resolve()
    repo = here.parents[2] / "templates"
    return repo if repo.is_dir() else here.parents[1] / "data" / "templates"


def sh(value) -> str:
    """Quote a value for a shell word in a RUN line; refuse line breaks outright."""
    text = str(value)
    if _BREAKS.search(text):
        raise ValueError(f"refusing to put a line break into a shell command: {text!r}")
    return shlex.quote(text)


def token(value) -> str:
    """A version, name or URL placed bare (pins, FROM): it must be a plain token."""
    text = str(value)
    if not _SAFE_TOKEN.fullmatch(text):
        raise ValueError(f"refusing unsafe token in a build file: {text!r}")
    return text


def env_prefix(command: str, pairs) -> str:
    """`command` after the variables a source build reads (`DS_BUILD_OPS=0 pip`), each a
    plain token, so a shell line can set them for that one command."""
    return "".join(f"{token(k)}={token(v)} " for k, v in pairs) + command


def dockerquote(value) -> str:
    """A double-quoted Dockerfile string (LABEL/ENV): escape backslash, quote and `$`."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                           separators=(",", ":"))
    if _BREAKS.search(text):
        raise ValueError("refusing a line break in a Dockerfile string")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def labelvalue(value) -> str:
    """An Apptainer %labels value: the rest of its line, taken as it is (JSON included).
    Apptainer 1.2+ fills `{{ word }}` anywhere in a definition file but its comments (an
    undefined one fails the build, a defined one changes the label): in JSON a `{{` can
    only be inside a string, where `{\u007b` reads back the same; elsewhere it is refused."""
    if isinstance(value, str):
        if "{{" in value:
            raise ValueError("refusing '{{' in an Apptainer label (a build argument to it)")
        text = value
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":")).replace(
            "{{", "{\\u007b")
    if _BREAKS.search(text):
        raise ValueError("refusing a line break in an Apptainer label")
    return text


@lru_cache(maxsize=1)
def private_bytecode_cache():
    """The class of the template bytecode cache (made on first use: it subclasses Jinja's)."""
    import jinja2

    class _PrivateBytecodeCache(jinja2.FileSystemBytecodeCache):
        """Compiled templates under ENVGEN_HOME, used only while the folder and the file are
        this user's and writable by no one else (the cache holds code). Jinja checks each
        entry against its template's source, so an edited template compiles afresh."""

        def get_bucket(self, environment, name, filename, source):
            # The report's autoescaping overlay compiles the same source to other code: one
            # entry per setting, or a plain compile would be loaded for the HTML page.
            mode = "escaped" if environment.autoescape else "plain"
            return super().get_bucket(environment, f"{name}\x00{mode}", filename, source)

        def load_bytecode(self, bucket) -> None:
            from ..matrix.cache import _private
            path = Path(self._get_cache_filename(bucket))
            if _private(path.parent) and _private(path):
                super().load_bytecode(bucket)

        def dump_bytecode(self, bucket) -> None:
            from ..matrix.cache import _private
            if _private(Path(self.directory)):
                try:
                    super().dump_bytecode(bucket)
                except OSError:   # a full or read-only disk: compile next time instead
                    pass

    return _PrivateBytecodeCache


def _bytecode_cache():
    import os

    if os.environ.get("ENVGEN_NO_CACHE"):
        return None
    try:
        from ..core import home as state
        folder = state.home() / "cache" / "templates"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except Exception:   # no usable ENVGEN_HOME: render without the cache
        return None
    return private_bytecode_cache()(str(folder))


@lru_cache(maxsize=1)
def environment():
    """The jinja2.Environment every envgen template renders in."""
    import jinja2
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())), bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(sh=sh, token=token, dockerquote=dockerquote, labelvalue=labelvalue,
                       env_prefix=env_prefix, line=line)
    return env
