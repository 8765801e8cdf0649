"""Reading envgen.lock: a reviewed input that arrives in pull requests as often as envgen
writes it, so every value is checked with the matrix's own patterns before anything uses
it (to name a folder, reach a RUN line, a docker call or a registry). Problems are
collected and reported together, each with the file:line of its stack's entry."""
from __future__ import annotations

import json
from pathlib import Path

from ..certs.certificate import created_problem, intrinsic_problem
from ..core.errors import InputError, MatrixError
from ..core.files import read_regular
from ..matrix import schema
from ..matrix.forms import errors, sentence
from ..matrix.wire import ONE_LINE, stack_problems
from ..resolve import closure

MAX_LOCK_BYTES = 64 * 1024 * 1024
# every stack of the matrix many times over; each entry costs its checks (~4 ms) and a
# verify's look at the daemon, so a lock of thousands would run for minutes
MAX_STACKS = 1000

LOCK_VERSION = 1


def _line_of(text: str, needle: str) -> int | None:
    i = text.find(needle)
    return text.count("\n", 0, i) + 1 if i >= 0 else None


_TOKEN_RE = None


def _keys(text: str):
    """(depth, object, decoded key, line) of every object key of a JSON text, in one walk
    over its strings and brackets: a string that a ':' follows is a key of the object it
    is in (`object` numbers the objects in the order they open). Escaped keys
    ("cr\\u0065ated") are decoded, so they are found as what they say."""
    import re
    global _TOKEN_RE
    _TOKEN_RE = _TOKEN_RE or re.compile(r'"(?:\\.|[^"\\])*"\s*:?|[{}\[\]]')
    line, last, opened, inside = 1, 0, 0, []
    for m in _TOKEN_RE.finditer(text):
        tok = m.group()
        if tok in "{[":
            opened += 1
            inside.append(opened)
        elif tok in "}]":
            if inside:
                inside.pop()
        elif tok.endswith(":"):
            line += text.count("\n", last, m.start())
            last = m.start()
            try:
                key = json.loads(tok[:-1].rstrip())
            except ValueError:
                continue
            yield len(inside), inside[-1] if inside else 0, key, line


def _key_lines(text: str, depth: int) -> dict[str, int]:
    """key → the line of its first occurrence as a key of an object `depth` levels in (1:
    the file's own keys, 2: a stack's name under "stacks"), not a same-named key deeper in
    (a certificate's "created")."""
    out: dict[str, int] = {}
    for level, _obj, key, line in _keys(text):
        if level == depth:
            out.setdefault(key, line)
    return out


def _key_line(text: str, key: str, depth: int) -> int | None:
    return _key_lines(text, depth).get(key)


def _second_line(text: str, key: str) -> int | None:
    """The line of the second copy of `key` in one object (json.loads refused the file for
    it)."""
    seen = set()
    for _level, obj, got, line in _keys(text):
        if got == key:
            if obj in seen:
                return line
            seen.add(obj)
    return None


def _whole(pattern) -> str:
    return f"^(?:{pattern.pattern})$"


_SHA = {"type": "string", "pattern": r"^sha256:[0-9a-f]{64}$"}
_TOKEN = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9:.+_-]{0,63}$"}
_REFERENCE = {"type": ["string", "null"], "maxLength": 255,   # a docker reference's words
              "pattern": r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$"}
# the file as a whole; a stack's entry is ENTRY, its stack wire.STACK
LOCK = {
    "type": "object", "message": "a lock file must be a JSON object",
    "yaml": False,
    "required": ["lock_version", "created", "matrix_sha256", "stacks"],
    "additionalProperties": False,
    "properties": {
        "lock_version": {"const": LOCK_VERSION, "message": "lock_version {value} is not "
                         f"supported (this envgen reads {LOCK_VERSION})"},
        "created": {**_TOKEN, "message": "created {value} is not a time like "
                                         "2026-12-01T09:40:00Z"},
        "updated": {**_TOKEN, "message": "updated {value} is not a time like "
                                         "2026-12-01T09:40:00Z"},
        "matrix_sha256": {**_TOKEN, "message": "matrix_sha256 {value} is not a sha256"},
        "stacks": {"type": "object", "maxProperties": MAX_STACKS,
                   "message": f"'stacks' must be an object of stack name → entry, at most "
                              f"{MAX_STACKS} of them"},
    },
}
# requirements[i]'s messages are said after its place (requirements[3].name ...)
_REQUIREMENT = {
    "type": "object", "message": " must be an object",
    "required": ["name", "version", "hashes"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": _whole(closure.NAME),
                 "message": ".name is not a distribution name"},
        "version": {"type": "string", "pattern": _whole(closure.VERSION),
                    "message": ".version is not a version"},
        "file": {"type": ["string", "null"], "pattern": _whole(closure.FILENAME),
                 "message": ".file is not a wheel or sdist file name"},
        "hashes": {"type": "array", "maxItems": 1,
                   "message": ".hashes must be a list of at most one sha256",
                   "items": {**_SHA, "message": ".hashes[0] must be sha256:<64 hex digits>"}},
        "hash_note": {"type": ["string", "null"], "maxLength": 400, "pattern": ONE_LINE,
                      "message": ".hash_note must be one short line"},
    },
}
ENTRY = {
    "type": "object", "message": "the entry must be an object",
    "yaml": False,
    "required": ["stack", "image", "base", "requirements"],
    "additionalProperties": False,
    "properties": {
        "stack": {"type": "object", "message": "'stack' must be an object"},   # wire.STACK
        "image": {
            "type": "object", "message": "'image' must be an object",
            "required": ["id", "tag"], "additionalProperties": False,
            "properties": {
                "id": {**_SHA, "message": "image.id must be sha256:<64 hex digits>"},
                "tag": {**_REFERENCE, "message": "image.tag is not an image tag "
                                                 "(NAME:TAG, at most 255 characters)"},
                "pinned": {**_REFERENCE, "message": "image.pinned is not a pinned reference"},
                "repo_digests": {"type": "array", "message": "image.repo_digests must be "
                                                             "repository@sha256 references",
                                 "items": {"type": "string", "maxLength": 399, "pattern":
                                           r"^[A-Za-z0-9][A-Za-z0-9._/:-]*"
                                           r"@sha256:[0-9a-f]{64}$"}},
                "content": {**_SHA, "type": ["string", "null"],
                            "message": "image.content must be sha256:<64 hex digits>"},
                "layers": {"type": "array", "items": _SHA,
                           "message": "image.layers must be sha256 layer digests"}}},
        "base": {
            "type": "object", "message": "'base' must be an object",
            "additionalProperties": False,
            "properties": {
                "reference": {**schema.IMAGE, "type": ["string", "null"],
                              "message": "base.reference is not an image reference"},
                "name": {**_REFERENCE, "message": "base.name is not an image reference"},
                "id": {**_SHA, "type": ["string", "null"],
                       "message": "base.id must be sha256:<64 hex digits>"}}},
        "python": {
            "type": ["object", "null"], "additionalProperties": False,
            "message": "python must be {{version: X.Y.Z, tag: a wheel tag}} or null",
            "properties": {
                "version": {"type": ["string", "null"],
                            "pattern": r"^3\.[0-9]{1,2}(\.[0-9]{1,3})?$"},
                "tag": {"type": ["string", "null"],
                        "pattern": r"^[A-Za-z0-9_.]{1,60}(-[A-Za-z0-9_.]{1,60}){2}$"}}},
        "closure": {
            "type": ["object", "null"], "additionalProperties": False,
            "required": ["key", "resolver", "created"],
            "message": "closure must be null or {{key, resolver, created}} as a closure has "
                       "them (and a project's kernel_build, pure_sdists and sdist_build)",
            "properties": {
                "key": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "resolver": {"type": "string", "maxLength": 200,
                             "pattern": r"^(?!-)[^\x00-\x1f\x7f]*$"},
                "created": {"type": "string",
                            "pattern": r"(?a)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"},
                # checked whole by resolve/closure.py parse_closure when a rebuild reads them
                "kernel_build": {"type": "object"},
                "pure_sdists": {"type": "array", "items": schema.NAME},
                "sdist_build": {"type": "object"}}},
        "requirements": {"type": "array", "message": "'requirements' must be a list",
                         "items": _REQUIREMENT},
        "unlocked": {"type": "array", "items": schema.NAME,
                     "message": "unlocked must be a list of package names"},
        "certificate": {   # a summary beside the whole certificate, judged as every door does
            "type": ["object", "null"], "message": "'certificate' must be an object or null",
            "required": ["image_id", "passed"],
            "properties": {
                "image_id": {**_SHA, "message": "certificate.image_id must be sha256:<64 hex "
                                                "digits>"},
                "passed": {"type": "boolean", "message": "certificate.passed must be true or "
                                                        "false"},
                "level": {"enum": ["cuda", "cpu", "multi-gpu", None],
                          "message": "certificate.level is not a certification level"},
                "gpus": {"type": "array", "message": "certificate: its gpus summary is not a "
                                                     "list of GPU names",
                         "items": {"type": "string", "pattern": r"^[\x20-\x7e]*$"}}}},
    },
}
_FIRST = ("stack", "image", "base", "requirements")   # their form is judged alone, first


def _said(err, schema_: dict) -> list[str]:
    """The problems one error of ENTRY or LOCK says: each missing key as such, a
    requirement's after its place."""
    path = list(err.absolute_path)
    if err.validator == "required" and len(path) <= 1 and path != ["certificate"]:
        return [f"missing key {'.'.join(map(str, [*path, k]))!r}"
                for k in err.validator_value if k not in err.instance]
    if err.validator == "required" and path[:1] == ["requirements"]:
        return [f"requirements[{path[1]}] needs 'name', 'version' and 'hashes'"]
    said = sentence(err, schema_)
    if err.validator == "additionalProperties":
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        return [f"{where.lstrip('.') or ('the lock file' if schema_ is LOCK else 'the entry')}"
                f": {said}"]
    if path[:1] == ["requirements"] and len(path) > 1:
        return [f"requirements[{path[1]}]{said}"]
    return [said]


def entry_problems(name, entry) -> list[str]:
    """What is wrong with one stack's entry of a lock: its name, ENTRY's form, the stack's
    (wire.STACK), and what a schema cannot say (a docker reference's grammar, a pin with
    neither a sha256 nor a note why, the whole certificate as the store judges it)."""
    if not (isinstance(name, str) and _matches(schema.NAME, name)):
        return ["the stack name must be a plain name (letters, digits, . _ + -)"]
    found = errors(entry, ENTRY)
    first = [e for e in found if not e.absolute_path or
             (len(e.absolute_path) == 1 and e.absolute_path[0] in _FIRST)]
    if first:
        return list(dict.fromkeys(s for e in first for s in _said(e, ENTRY)))
    p = stack_problems(entry["stack"])
    if not p:   # the entry's name is the stack it holds (a project's: PROJECT.STACK)
        from ..core.model import stack_key
        own = entry["stack"]
        key = stack_key(own.get("stack"), (own.get("project") or {}).get("name"))
        if key != name:
            p.append(f"the entry holds the stack {str(key)[:60]!r}, not {name[:60]!r}")
    p += [s for e in found for s in _said(e, ENTRY)]
    img = entry["image"]
    from ..core.image import parse_pinned, parse_tagged
    said = {tuple(e.absolute_path) for e in found}
    for key, parse in (("tag", parse_tagged), ("pinned", parse_pinned)):
        if isinstance(img.get(key), str) and ("image", key) not in said:   # said once
            try:
                parse(img[key])
            except InputError as e:
                p.append(f"image.{key}: {e.message}")
    from packaging.utils import canonicalize_name
    seen: dict[str, int] = {}
    for i, req in enumerate(entry["requirements"]):
        if not isinstance(req, dict) or not isinstance(req.get("name"), str):
            continue
        if req.get("hashes") == [] and not req.get("hash_note"):
            p.append(f"requirements[{i}]: {req['name'][:60]} has no sha256 and no "
                     f"hash_note saying why")
        name_ = canonicalize_name(req["name"])
        if name_ in seen:
            p.append(f"requirements[{i}]: {req['name'][:60]} is pinned twice (also "
                     f"requirements[{seen[name_]}])")
        seen.setdefault(name_, i)
        file = req.get("file")
        if isinstance(file, str) and canonicalize_name(_dist_of(file)) != name_:
            p.append(f"requirements[{i}]: the file {file[:80]!r} is not a file of "
                     f"{req['name'][:60]}")
    cert = entry.get("certificate")
    if cert is not None and not p:   # the whole certificate, as every door of the store
        why = intrinsic_problem(cert) or _summary_problem(cert)
        if why:
            p.append(f"certificate: {why}")
    if entry.get("closure") and not p:   # as a rebuild reads it (verify.lock_closure)
        p += _closure_problems(entry)
    return list(dict.fromkeys(p))


def _summary_problem(cert: dict) -> str | None:
    """The summary a reviewer reads first (gpus, driver) is the certificate's own host
    record, as lock/write.py cert_summary writes it."""
    host = cert.get("host") if isinstance(cert.get("host"), dict) else {}
    gpus = [g.get("name") for g in host.get("gpus") or [] if isinstance(g, dict)]
    if "gpus" in cert and cert["gpus"] != gpus:
        return "its gpus summary is not the GPUs its host record names"
    if "driver" in cert and cert["driver"] != host.get("driver"):
        return "its driver summary is not the driver its host record names"
    return None


def _closure_problems(entry: dict) -> list[str]:
    """The entry's closure record and requirements read as the closure a rebuild makes of
    them (resolve/closure.py parse_closure): a project's kernel_build, pure_sdists and
    sdist_build included."""
    from ..core.model import CLOSURE_PROJECT_KEYS
    info = entry["closure"]
    try:
        closure.parse_closure({
            "closure_version": closure.CLOSURE_VERSION, "key": info.get("key"),
            "inputs": {"requirements": [r.get("name") for r in entry["requirements"]]},
            "created": info.get("created"), "resolver": info.get("resolver", ""),
            "packages": entry["requirements"],
            **{k: info[k] for k in CLOSURE_PROJECT_KEYS if k in info}}, "the lock")
    except InputError as e:
        return [f"closure: {e.message.removeprefix('not a valid closure: ')}"]
    return []


def _dist_of(file: str) -> str:
    """The distribution a wheel's or sdist's file name names (its text before the version:
    a wheel's first field, an sdist's part before its last '-')."""
    if file.endswith(".whl"):
        return file.split("-", 1)[0]
    stem = file.removesuffix(".tar.gz").removesuffix(".zip")
    return stem.rsplit("-", 1)[0]


def _top_key(err) -> str:
    """The lock file's key a problem of LOCK is about (the first, for a non-object)."""
    if err.absolute_path:
        return err.absolute_path[0]
    if err.validator == "required":
        return min(set(err.validator_value) - set(err.instance), key=LOCK["required"].index)
    return LOCK["required"][0]


def _matches(fragment: dict, value: str) -> bool:
    import re
    body = fragment["pattern"].removeprefix("^").removesuffix("$").removesuffix(r"\Z")
    return re.fullmatch(body, value) is not None


class _LongNumber(ValueError):
    pass


class _Twice(ValueError):
    pass


class _Constant(ValueError):
    pass


def _constant(name: str):   # NaN, Infinity: Python reads them, JSON has none
    raise _Constant(name)


def _once(pairs: list) -> dict:
    """A JSON object whose keys are each given once: with two, json keeps the last, and a
    reviewer reading the first would approve what is not used."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        raise _Twice(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def _short_int(digits: str) -> int:
    # Python refuses to convert more than 4,300 digits, with a ValueError and no line.
    if len(digits) > 64:
        raise _LongNumber(digits)
    return int(digits)


def parse_lock(text: str, name: str) -> dict:
    """A lock file's content, or InputError naming every problem with file:line."""
    try:
        data = json.loads(text, parse_int=_short_int, object_pairs_hook=_once,
                          parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"not a valid lock file: {e.msg} (column {e.colno})", file=name,
                         line=e.lineno) from None
    except _LongNumber as e:
        raise InputError("not a valid lock file: a number longer than 64 digits", file=name,
                         line=_line_of(text, e.args[0])) from None
    except _Constant as e:
        raise InputError(f"not a valid lock file: {e.args[0]} is not a JSON number", file=name,
                         line=_line_of(text, e.args[0])) from None
    except _Twice as e:
        key = json.dumps(e.args[0])
        raise InputError(f"not a valid lock file: the key {key[:60]} is given twice in one "
                         f"object", file=name, line=_second_line(text, e.args[0])) from None
    except RecursionError:
        raise InputError("not a valid lock file: nested too deeply", file=name,
                         line=1) from None
    found = errors(data, LOCK)
    if isinstance(data, dict) and type(data.get("lock_version")) is not int \
            and "lock_version" in data and not found:   # 1.0 equals 1 to a schema
        raise InputError(f"lock_version {str(data['lock_version'])[:20]} is not supported "
                         f"(this envgen reads {LOCK_VERSION})", file=name,
                         line=_line_of(text, '"lock_version"'))
    if found:   # the first key's problem, at its line (a missing key's at line 1)
        e = min(found, key=lambda e: [*LOCK["properties"]].index(_top_key(e)))
        where = list(e.absolute_path)
        if e.validator == "additionalProperties":   # the first unknown key's own line
            where = sorted(set(e.instance) - set(LOCK["properties"]))[:1]
        raise InputError(_said(e, LOCK)[0], file=name,
                         line=(_key_line(text, where[0], 1) or 1) if where else 1)
    for key in ("created", "updated"):   # real times, not just tokens (the future aside)
        if key in data and created_problem(data[key], now=float("inf")):
            raise InputError(f"{key} {str(data[key])[:40]!r} is not a UTC time like "
                             f"2026-12-01T09:40:00Z", file=name,
                             line=_key_line(text, key, 1) or 1)
    problems, lines = [], None
    for stack, entry in data["stacks"].items():
        shown = repr(stack)[:60]
        found = entry_problems(stack, entry)
        if found and lines is None:   # one walk for every stack's line, only when needed
            lines = _key_lines(text, 2)
        line = found and (lines.get(stack) or _key_line(text, "stacks", 1))
        for what in found:
            problems.append(MatrixError(message=f"stack {shown}: {what}", file=name,
                                        line=line))
    if len(problems) == 1:
        e = problems[0]
        raise InputError(e.message, file=e.file, line=e.line)
    if problems:
        raise MatrixError(problems)
    return data


def stack_line(path: str | Path, name: str) -> int | None:
    """The line of stack `name`'s entry in a lock file read_lock took (None when unread)."""
    try:
        text = read_regular(Path(path), MAX_LOCK_BYTES, "lock file").decode("utf-8")
    except (OSError, UnicodeDecodeError, InputError):
        return None
    return _key_lines(text, 2).get(name)


def read_lock(path: str | Path) -> dict:
    path = Path(path)
    if path.is_symlink():
        raise InputError("a lock file may not be a symbolic link", file=str(path))
    try:
        text = read_regular(path, MAX_LOCK_BYTES, "lock file").decode("utf-8")
    except FileNotFoundError:
        raise InputError("no such lock file (create one with `envgen lock`)",
                         file=str(path)) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not a valid lock file: not UTF-8 text (byte 0x{e.object[e.start]:02x})",
                         file=str(path), line=e.object[:e.start].count(b"\n") + 1) from None
    except OSError as e:
        raise InputError(f"cannot read the lock file: {e.strerror or e}", file=str(path)) from None
    return parse_lock(text, str(path))
