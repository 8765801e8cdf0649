"""Rendered texts, kept by what made them: a render whose views, templates and rendering code
are all unchanged reads its texts back instead of importing Jinja (about 40 ms of a 100 ms
`envgen render`). The key is the sha256 of every view written out as JSON (a record with
its class and fields), of every template file, of the code
that computes and filters what templates show, and of the installed Jinja. A view holding
a value JSON cannot write (other than a record) is not cached: it is rendered as always.

The cache holds build files, so it is trusted as the template bytecode cache is: read only
from a folder and file that are this user's and writable by no one else, written atomically,
ignored when unreadable, off with ENVGEN_NO_CACHE=1. A folder of more than KEEP entries
loses its oldest."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

KEEP = 400
# The code whose change changes a render of the same views (templates are hashed apart).
CODE = ("env.py", "views.py", "cache.py", "../core/model.py", "../core/record.py", "../__init__.py")


class Uncacheable(Exception):
    """A view holds a value this module cannot write out faithfully."""


def _digest_files(h, paths) -> None:
    for p in paths:
        h.update(str(p.name).encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"\0missing")
        h.update(b"\0")


_STATIC: dict[str, bytes] = {}


def _static(template_dir: Path) -> bytes:
    """The digest of the templates, the rendering code and Jinja: read once a process."""
    if str(template_dir) not in _STATIC:
        import importlib.util
        h = hashlib.sha256(b"envgen render cache 1\0")
        _digest_files(h, sorted(template_dir.iterdir()))
        here = Path(__file__).resolve().parent
        _digest_files(h, [here / c for c in CODE])
        spec = importlib.util.find_spec("jinja2")   # its version is in its __init__
        if spec is not None and spec.origin:
            _digest_files(h, [Path(spec.origin)])
        _STATIC[str(template_dir)] = h.digest()
    return _STATIC[str(template_dir)]


def key(jobs: dict[str, tuple[str, dict]], template_dir: Path) -> str:
    """The sha256 of {output: (template, view)} and of everything else a render reads.
    Dicts keep their order (what a template's loop sees); a tuple is written as a list; a
    record is written as the sha256 of its class and fields, once per object (the views of
    one stack share its Stack and Closure many times over)."""
    seen: dict[int, tuple[object, dict]] = {}

    def record(x):
        if id(x) in seen:
            return seen[id(x)][1]
        fields = getattr(type(x), "__record_fields__", None)
        if fields is None:
            raise Uncacheable(type(x).__name__)
        cls = type(x)
        body = json.dumps([f"{cls.__module__}.{cls.__qualname__}",
                           [[f.name, getattr(x, f.name)] for f in fields]],
                          separators=(",", ":"), default=record)
        out = {"record": hashlib.sha256(body.encode()).hexdigest()}
        seen[id(x)] = (x, out)   # x kept alive: its id is not reused while this runs
        return out
    h = hashlib.sha256(_static(template_dir))
    try:
        h.update(json.dumps(list(jobs.items()), separators=(",", ":"),
                            default=record).encode())
    except (TypeError, ValueError) as e:   # a key that is not a string, a cycle
        raise Uncacheable(str(e)) from None
    return h.hexdigest()


def folder() -> Path | None:
    if os.environ.get("ENVGEN_NO_CACHE"):
        return None
    try:
        from ..core import home as state
        d = state.home() / "cache" / "render"
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    except Exception:   # no usable ENVGEN_HOME: render without the cache
        return None
    return d


def load(d: Path, k: str, names) -> dict[str, str] | None:
    from ..matrix.cache import _private
    path = d / f"{k}.json"
    try:
        if not (_private(d) and _private(path)):
            return None
        texts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(texts, dict) or sorted(texts) != sorted(names) or \
            not all(isinstance(v, str) for v in texts.values()):
        return None
    return texts


def store(d: Path, k: str, texts: dict[str, str]) -> None:
    from ..matrix.cache import _private
    if not _private(d):
        return
    tmp = d / f".{k}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(texts, f)
        os.replace(tmp, d / f"{k}.json")
        entries = sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:max(0, len(entries) - KEEP)]:
            old.unlink(missing_ok=True)
    except OSError:   # a full or read-only disk: render again next time
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def render(jobs: dict[str, tuple[str, dict]], template_dir: Path, environment
           ) -> dict[str, str]:
    """{output: text} for {output: (template name, view)}; `environment()` gives the Jinja
    environment, asked for only when the texts are not in the cache."""
    d = folder()
    try:
        k = key(jobs, template_dir) if d is not None else None
    except Uncacheable:
        k = None
    if k is not None:
        hit = load(d, k, jobs)
        if hit is not None:
            return {name: hit[name] for name in jobs}
    env = environment()
    texts = {name: env.get_template(t).render(**view) for name, (t, view) in jobs.items()}
    if k is not None:
        store(d, k, texts)
    return texts
