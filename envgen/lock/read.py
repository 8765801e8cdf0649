"""Reading envgen.lock: a reviewed input that arrives in pull requests as often as envgen
writes it, so every value is checked with the matrix's own patterns before anything uses
it (to name a folder, reach a RUN line, a docker call or a registry). Problems are
collected and reported together, each with the file:line of its stack's entry."""
from __future__ import annotations

import json
from pathlib import Path

from ..certs.certificate import intrinsic_problem
from ..core.errors import InputError, MatrixError
from ..core.files import read_regular
from ..matrix.wire import IMAGE_ID, NAME, _check, _req, stack_problems
from ..resolve.closure import parse_pin

MAX_LOCK_BYTES = 64 * 1024 * 1024

LOCK_VERSION = 1


def _line_of(text: str, needle: str) -> int | None:
    i = text.find(needle)
    return text.count("\n", 0, i) + 1 if i >= 0 else None


def entry_problems(name, entry) -> list[str]:
    p: list[str] = []
    if not _req(name, NAME):
        return ["the stack name must be a plain name (letters, digits, . _ + -)"]
    if not isinstance(entry, dict):
        return ["the entry must be an object"]
    for key, kind in (("stack", dict), ("image", dict), ("base", dict),
                      ("requirements", list)):
        if not isinstance(entry.get(key), kind):
            p.append(f"missing key {key!r}" if key not in entry else
                     f"{key!r} must be a{'n object' if kind is dict else ' list'}")
    if p:
        return p
    p += stack_problems(entry["stack"])
    img = entry["image"]
    for key in ("id", "tag"):
        if key not in img:
            p.append(f"missing key 'image.{key}'")
    _check(p, _req(img.get("id"), IMAGE_ID), "image.id must be sha256:<64 hex digits>")
    from ..core.image import parse_pinned, parse_tagged
    _check(p, not isinstance(img.get("tag"), str) or len(img["tag"]) <= 255,
           "image.tag is longer than 255 characters")
    for key, parse in (("tag", parse_tagged), ("pinned", parse_pinned)):
        if img.get(key) is not None:
            try:
                parse(img[key])
            except InputError as e:
                p.append(f"image.{key}: {e.message}")
    digests = img.get("repo_digests", [])
    _check(p, isinstance(digests, list) and all(isinstance(d, str) and len(d) < 400 and
                                                "@sha256:" in d for d in digests),
           "image.repo_digests must be repository@sha256 references")
    _check(p, img.get("content") is None or _req(img["content"], IMAGE_ID),
           "image.content must be sha256:<64 hex digits>")
    layers = img.get("layers", [])
    _check(p, isinstance(layers, list) and all(_req(x, IMAGE_ID) for x in layers),
           "image.layers must be sha256 layer digests")

    def bad(what):
        return InputError(what)
    for i, req in enumerate(entry["requirements"]):
        if isinstance(req, dict) and not all(k in req for k in ("name", "version", "hashes")):
            p.append(f"requirements[{i}] needs 'name', 'version' and 'hashes'")
            continue
        try:
            parse_pin(req, f"requirements[{i}]", bad)
        except InputError as e:
            p.append(e.message)
    cert = entry.get("certificate")
    if cert is not None:
        if not isinstance(cert, dict):
            p.append("'certificate' must be an object or null")
        else:
            _check(p, _req(cert.get("image_id"), IMAGE_ID),
                   "certificate.image_id must be sha256:<64 hex digits>")
            _check(p, isinstance(cert.get("passed"), bool), "certificate.passed must be "
                                                            "true or false")
            _check(p, cert.get("level") in ("cuda", "cpu", "multi-gpu", None),
                   "certificate.level is not a certification level")
            if not p:   # the whole certificate, judged as every door of the store judges it
                why = intrinsic_problem(cert)
                gpus = cert.get("gpus", [])
                if why is None and not (isinstance(gpus, list) and all(
                        isinstance(g, str) and g.isprintable() and g.isascii() for g in gpus)):
                    why = "its gpus summary is not a list of GPU names"
                if why:
                    p.append(f"certificate: {why}")
    return p


class _LongNumber(ValueError):
    pass


def _short_int(digits: str) -> int:
    # Python refuses to convert more than 4,300 digits, with a ValueError and no line.
    if len(digits) > 64:
        raise _LongNumber(digits)
    return int(digits)


def parse_lock(text: str, name: str) -> dict:
    """A lock file's content, or InputError naming every problem with file:line."""
    try:
        data = json.loads(text, parse_int=_short_int)
    except json.JSONDecodeError as e:
        raise InputError(f"not a valid lock file: {e.msg} (column {e.colno})", file=name,
                         line=e.lineno) from None
    except _LongNumber as e:
        raise InputError("not a valid lock file: a number longer than 64 digits", file=name,
                         line=_line_of(text, e.args[0])) from None
    except RecursionError:
        raise InputError("not a valid lock file: nested too deeply", file=name,
                         line=1) from None
    if not isinstance(data, dict):
        raise InputError("a lock file must be a JSON object", file=name, line=1)
    for key in ("lock_version", "created", "matrix_sha256", "stacks"):
        if key not in data:
            raise InputError(f"missing key {key!r}", file=name, line=1)
    if data["lock_version"] != LOCK_VERSION:
        raise InputError(f"lock_version {repr(data['lock_version'])[:20]} is not supported "
                         f"(this envgen reads {LOCK_VERSION})", file=name,
                         line=_line_of(text, '"lock_version"'))
    if not isinstance(data["stacks"], dict):
        raise InputError("'stacks' must be an object of stack name → entry", file=name,
                         line=_line_of(text, '"stacks"'))
    problems = []
    for stack, entry in data["stacks"].items():
        shown = repr(stack)[:60]
        line = _line_of(text, json.dumps(stack) + ":") or _line_of(text, '"stacks"')
        for what in entry_problems(stack, entry):
            problems.append(MatrixError(message=f"stack {shown}: {what}", file=name,
                                        line=line))
    if len(problems) == 1:
        e = problems[0]
        raise InputError(e.message, file=e.file, line=e.line)
    if problems:
        raise MatrixError(problems)
    return data


def read_lock(path: str | Path) -> dict:
    path = Path(path)
    if path.is_symlink():
        raise InputError("a lock file may not be a symbolic link", file=str(path))
    try:
        text = read_regular(path, MAX_LOCK_BYTES, "lock file").decode("utf-8")
    except FileNotFoundError:
        raise InputError("no such lock file (create one with `envgen lock`)",
                         file=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the lock file: {e}", file=str(path)) from None
    return parse_lock(text, str(path))
