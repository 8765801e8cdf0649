"""What a refresh changes in one generated matrix file, and whether it may be written.

Refused (nothing written): a release or a variant that would disappear (a fact deleted
silently), a version that goes backwards (a pin, a companion, a CUDA line) unless a
hand-kept source says it corrects that very value, and a file that would not validate with
the rest of the matrix. Everything else is reported as a change, a reviewer reads it in the
diff."""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

from ..core.errors import MatrixError
from ..core.files import read_regular
from .pypi import Refused

MAX_FILE = 16 << 20


@dataclass
class Change:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)     # facts dropped inside a row
    refusals: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"added": self.added, "changed": self.changed, "removed": self.removed,
                "refusals": self.refusals}


def _version(text) -> Version | None:
    try:
        return Version(str(text).removeprefix("==")) if text is not None else None
    except InvalidVersion:
        return None


def _value(where: str, key: str, old, new, ch: Change,
           corrections: frozenset = frozenset()) -> None:
    """One fact: unchanged, changed, dropped, or (for versions) gone backwards; a version
    may go backwards only where `corrections` holds (where, key, old)."""
    if old == new:
        return
    if new is None:
        ch.removed.append(f"{where}: {key} {old!r} is no longer stated")
        return
    if old is None:
        ch.changed.append(f"{where}: {key} now {new!r}")
        return
    vo, vn = _version(old), _version(new)
    if isinstance(old, str) and vo is not None and vn is not None and vn < vo:
        if (where, key, old) in corrections:
            ch.changed.append(f"{where}: {key} corrected, {old} -> {new}")
        else:
            ch.refusals.append(f"{where}: {key} would go backwards, {old} -> {new}")
        return
    ch.changed.append(f"{where}: {key} {old!r} -> {new!r}")


def _inferred(where: str, old: dict, new: dict, ch: Change) -> None:
    def why(v):
        return (v.get("why") or "") if v.get("confidence") == "inferred" else None
    a, b = why(old), why(new)
    if a == b:
        return
    ch.changed.append(f"{where}: now inferred ({b})" if b is not None else
                      f"{where}: now stated (was inferred: {a})")


def _mapping(where: str, key: str, old: dict, new: dict, ch: Change,
             corrections: frozenset = frozenset()) -> None:
    """Each value of a mapping (`packages`, `companions`), as `key.NAME`."""
    for name in sorted(set(old) | set(new)):
        _value(where, f"{key}.{name}", old.get(name), new.get(name), ch, corrections)


def _listed(where: str, key: str, old: list, new: list, ch: Change) -> None:
    gone = [x for x in old if x not in new]
    more = [x for x in new if x not in old]
    if gone:
        ch.removed.append(f"{where}: {key} no longer lists {', '.join(map(str, gone))}")
    if more:
        ch.changed.append(f"{where}: {key} adds {', '.join(map(str, more))}")


def _fields(where: str, old: dict, new: dict, skip: set, ch: Change,
            corrections: frozenset = frozenset()) -> None:
    """Every field of one row but `skip`: lists, mappings and single values."""
    for f in [*new, *(f for f in old if f not in new)]:
        if f in skip:
            continue
        a, b = old.get(f), new.get(f)
        if isinstance(a, list) or isinstance(b, list):
            _listed(where, f, a or [], b or [], ch)
        elif isinstance(a, dict) or isinstance(b, dict):
            _mapping(where, f, a or {}, b or {}, ch, corrections)
        else:
            _value(where, f, a, b, ch, corrections)


def compare_releases(old: list[dict], new: list[dict],
                     corrections: frozenset = frozenset()) -> Change:
    """The change from `old` framework_releases rows to `new` ones; `corrections` holds the
    (row, key, old value) triples a hand-kept source corrects (a version that may go
    backwards, reported as corrected)."""
    ch = Change()
    key = lambda r: (r.get("framework"), str(r.get("version")))  # noqa: E731
    olds = {key(r): r for r in old if isinstance(r, dict)}
    news = {key(r): r for r in new}
    for k in news.keys() - olds.keys():
        ch.added.append(f"{k[0]} {k[1]} ({news[k]['source']})")
    for k in olds.keys() - news.keys():
        ch.refusals.append(f"{k[0]} {k[1]} would disappear (the index no longer lists it); "
                           f"remove it by hand in a reviewed commit if that is intended")
    for k in sorted(olds.keys() & news.keys(), key=lambda k: (k[0], _version(k[1]) or k[1])):
        o, n, where = olds[k], news[k], f"{k[0]} {k[1]}"
        _fields(where, o, n, skip={"framework", "version", "variants"}, ch=ch,
                corrections=corrections)
        ov = {v.get("name"): v for v in o.get("variants") or [] if isinstance(v, dict)}
        nv = {v["name"]: v for v in n.get("variants") or []}
        for name in sorted(ov.keys() - nv.keys(), key=str):
            ch.refusals.append(f"{where}: variant {name} would disappear")
        for name in sorted(nv.keys() - ov.keys()):
            ch.added.append(f"{where}: variant {name}")
        for name in sorted(ov.keys() & nv.keys()):
            a, b, w = ov[name], nv[name], f"{where} {name}"
            _inferred(w, a, b, ch)
            _fields(w, a, b, skip={"name", "confidence", "why"}, ch=ch,
                    corrections=corrections)
    return ch


def compare_platform_wheels(old: list[dict], new: list[dict],
                            mirrored: frozenset[str] = frozenset()) -> Change:
    """The change from `old` platform_wheels rows (a framework release's wheels for another
    platform) to `new` ones, keyed by package, version, platform and variant: a row that
    disappears, or a pin that goes backwards, is refused as for a framework's releases.
    The pins of a row of a package in `mirrored` are its release's variant's, copied from
    that framework's file (whose own refresh checked them): they follow it either way."""
    ch = Change()
    key = lambda r: tuple(str(r.get(k)) for k in  # noqa: E731
                          ("package", "version", "platform", "variant"))
    olds = {key(r): r for r in old if isinstance(r, dict)}
    news = {key(r): r for r in new if isinstance(r, dict)}
    for k in sorted(news.keys() - olds.keys()):
        ch.added.append(f"{' '.join(k)} ({news[k].get('source')})")
    for k in sorted(olds.keys() - news.keys()):
        ch.refusals.append(f"{' '.join(k)} would disappear (the index no longer lists it); "
                           f"remove it by hand in a reviewed commit if that is intended")
    for k in sorted(olds.keys() & news.keys()):
        o, n, where = olds[k], news[k], " ".join(k)
        copied = k[0] in mirrored
        _fields(where, o, n, skip={"package", "version", "platform", "variant", "confidence",
                                   "why", *(("packages",) if copied else ())}, ch=ch)
        a, b = o.get("packages") or {}, n.get("packages") or {}
        if copied and a != b:
            moved = ", ".join(f"{k} {a.get(k)} -> {b.get(k)}" for k in sorted({*a, *b})
                              if a.get(k) != b.get(k))
            ch.changed.append(f"{where}: packages follow its variant's: {moved}")
    return ch


def read_old(path: Path) -> tuple[str | None, dict | None]:
    """The file's text and data, or (None, None) when there is none yet."""
    if not path.exists():
        return None, None
    text = read_regular(path, MAX_FILE, "matrix file").decode("utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise Refused(f"{path}: the file there is not YAML ({str(e).splitlines()[0]}); fix "
                      f"or remove it first") from None
    return text, data if isinstance(data, dict) else {}


def validate_with_rest(folder: Path, name: str, text: str) -> None:
    """Load the matrix `folder` with `text` as its file `name`; Refused with the problems
    if it does not validate (a schema break, a version that is not one)."""
    from ..matrix.load import load_matrix
    with tempfile.TemporaryDirectory(prefix="envgen-refresh-") as tmp:
        for p in folder.glob("*.yaml"):
            if p.name != name and p.is_file() and not p.is_symlink():
                shutil.copyfile(p, Path(tmp) / p.name)
        (Path(tmp) / name).write_text(text, "utf-8")
        try:
            load_matrix(tmp)
        except MatrixError as e:
            problems = e.problems or [e]
            shown = "; ".join(f"line {p.line}: {p.message}" for p in problems[:3])
            raise Refused(f"the refreshed {name} would not validate with the rest of the "
                          f"matrix ({shown})") from None


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` in one rename, keeping its mode (a new file gets 0666 less umask,
    as `open` would give it, not mkstemp's 0600)."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
