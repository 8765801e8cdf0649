"""Reading envgen.lock: a reviewed input that arrives in pull requests as often as envgen
writes it, so every value is checked with the matrix's own patterns before anything uses
it (to name a folder, reach a RUN line, a docker call or a registry). Problems are
collected and reported together, each with the file:line of its stack's entry."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .closure import parse_pin
from .errors import InputError, MatrixError
from .files import read_regular
from .matrix import schema
from .model import Stack

MAX_LOCK_BYTES = 64 * 1024 * 1024

LOCK_VERSION = 1
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def _pattern(spec: dict) -> re.Pattern:
    return re.compile(spec["pattern"].removeprefix("^").removesuffix("$").removesuffix(r"\Z"))


NAME = _pattern(schema.NAME)
VERSION = _pattern(schema.VERSION)
PYTHON = _pattern(schema.PYTHON)
IMAGE = _pattern(schema.IMAGE)
CUDA = _pattern(schema.CUDA_VER)
DRIVER = _pattern(schema.DRIVER)
CC = _pattern(schema.CC)
URL = _pattern(schema.URL)
SNAPSHOT = re.compile(r"[0-9]{8}T[0-9]{6}Z")
GLIBC = re.compile(r"2\.[0-9]{2}")
PIN_SPEC = _pattern(schema.PIN_SPEC)
BUILD_ENV_NAME = _pattern(schema.BUILD_ENV_NAME)
EXTRA = _pattern(schema.EXTRA)
BUILD_ENV_VALUE = _pattern(schema.BUILD_ENV_VALUE)


def _line_of(text: str, needle: str) -> int | None:
    i = text.find(needle)
    return text.count("\n", 0, i) + 1 if i >= 0 else None


def _check(problems: list, ok: bool, what: str) -> None:
    if not ok:
        problems.append(what)


def _opt(value, pattern: re.Pattern) -> bool:
    return value is None or (isinstance(value, str) and pattern.fullmatch(value) is not None)


def _req(value, pattern: re.Pattern) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def stack_problems(data) -> list[str]:
    """What is wrong with a lock's `stack` object; [] when it is a resolved stack whose
    every value could have come from a valid matrix."""
    p: list[str] = []
    if not isinstance(data, dict):
        return ["'stack' must be an object"]
    missing = [k for k in ("stack", "framework", "packages", "python", "base", "driver",
                           "wheel_source") if k not in data]
    if missing:
        return [f"missing key 'stack.{k}'" for k in missing]
    _check(p, _req(data.get("stack"), NAME), "stack.stack is not a stack name")
    _check(p, _req(data.get("python"), PYTHON), "stack.python is not a Python version")
    for key, pat in (("cuda", CUDA), ("cuda_release", CUDA), ("cudnn", VERSION),
                     ("nccl", VERSION), ("ptx", CC)):
        _check(p, _opt(data.get(key), pat), f"stack.{key} is not a version")
    _check(p, _opt(data.get("index_url"), URL), "stack.index_url is not a plain URL")
    _check(p, _req(data.get("wheel_source"), NAME), "stack.wheel_source is not a name")
    _check(p, _req(data.get("smoke"), NAME), "stack.smoke is not a payload name")
    lic = data.get("licenses", "")   # absent in locks written before it
    _check(p, lic == "" or schema.canonical_license(lic) == lic,
           "stack.licenses is not an SPDX licence expression")
    fw = data.get("framework")
    if isinstance(fw, dict):
        for key in ("name", "package", "variant"):
            _check(p, _req(fw.get(key), NAME), f"stack.framework.{key} is not a name")
        _check(p, _req(fw.get("version"), VERSION), "stack.framework.version is not a version")
        for key in ("companions", "addons"):
            names = fw.get(key, [])
            _check(p, isinstance(names, list) and all(_req(c, NAME) for c in names),
                   f"stack.framework.{key} must be names")
        on = fw.get("builds_on")
        _check(p, on is None or isinstance(on, dict) and _req(on.get("name"), NAME)
               and _req(on.get("package"), NAME),
               "stack.framework.builds_on must be null or {name, package}")
    else:
        p.append("stack.framework must be an object")
    pkgs = data.get("packages")
    if isinstance(pkgs, dict):
        for n, v in pkgs.items():
            _check(p, _req(n, NAME) and (_req(v, VERSION) or _req(v, PIN_SPEC)),
                   f"stack.packages has an invalid pin {str(n)[:40]!r}")
    else:
        p.append("stack.packages must be an object")
    drv = data.get("driver")
    if isinstance(drv, dict):
        for key in ("minimum", "toolkit"):
            _check(p, _opt(drv.get(key), DRIVER), f"stack.driver.{key} is not a driver version")
    else:
        p.append("stack.driver must be an object")
    ccs = data.get("compute_capabilities", [])
    _check(p, isinstance(ccs, list) and all(_req(c, CC) for c in ccs),
           "stack.compute_capabilities must be X.Y values")
    rc = data.get("require_cuda")
    _check(p, rc is None or (isinstance(rc, str) and re.fullmatch(r"[a-z0-9 ,.<>=_-]{1,300}", rc)
                             is not None), "stack.require_cuda has characters it cannot hold")
    reasons = data.get("reasons", [])
    _check(p, isinstance(reasons, list) and all(
        isinstance(r, str) and len(r) < 500 and not any(ord(ch) < 32 for ch in r)
        for r in reasons), "stack.reasons must be one-line sentences")
    base = data.get("base")
    if isinstance(base, dict):
        _check(p, _req(base.get("name"), NAME), "stack.base.name is not a name")
        _check(p, base.get("kind") in ("local", "registry", "framework"),
               "stack.base.kind must be local, registry or framework")
        _check(p, _req(base.get("image"), IMAGE), "stack.base.image is not an image reference")
        _check(p, _opt(base.get("suite"), NAME), "stack.base.suite is not a suite name")
        _check(p, _opt(base.get("snapshot"), SNAPSHOT), "stack.base.snapshot is not a snapshot")
        _check(p, _opt(base.get("digest"), IMAGE_ID), "stack.base.digest is not a sha256 digest")
        _check(p, _req(base.get("python"), PYTHON), "stack.base.python is not a Python version")
        _check(p, base.get("glibc") in (None, "") or _req(base.get("glibc"), GLIBC),
               "stack.base.glibc is not a glibc version")
        _check(p, _opt(base.get("cuda"), CUDA), "stack.base.cuda is not a CUDA version")
        _check(p, base.get("os") in (None, "") or _req(base.get("os"), NAME),
               "stack.base.os is not a name")
        prov = base.get("provides") or {}
        _check(p, isinstance(prov, dict) and all(_req(n, NAME) and _req(v, VERSION)
                                                 for n, v in prov.items()),
               "stack.base.provides must map names to versions")
        if base.get("kind") == "local" and not base.get("suite"):
            p.append("stack.base: a local base needs a suite")
    else:
        p.append("stack.base must be an object")
    src = data.get("from_source")
    if src is not None:
        _check(p, isinstance(src, dict) and set(src) <= {"packages", "env"}
               and isinstance(src.get("packages"), list) and src["packages"]
               and all(_req(n, NAME) for n in src["packages"])
               and isinstance(src.get("env", {}), dict)
               and all(_req(k, BUILD_ENV_NAME) and _req(v, BUILD_ENV_VALUE)
                       for k, v in src.get("env", {}).items()),
               "stack.from_source must be {packages: [names], env: {NAME: value}} with "
               "plain names and values")
    extras = data.get("extras")
    if extras is not None:
        _check(p, isinstance(extras, dict) and extras
               and all(_req(n, NAME) and _req(e, EXTRA) for n, e in extras.items()),
               "stack.extras must map package names to an extra name ([a-z0-9-], not starting "
               "with -, at most 40 characters)")
    unpinned = data.get("unpinned")
    _check(p, unpinned is None or (isinstance(unpinned, list) and unpinned
                                   and all(_req(n, NAME) for n in unpinned)),
           "stack.unpinned must be a list of package names")
    if data.get("project") is not None:
        from .project import layer_problems
        p += layer_problems(data["project"])
    if not p:
        try:
            Stack.from_json(data)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            p.append(f"'stack' is not a resolved stack ({type(e).__name__}: {e})"[:200])
    return p


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
    from .registry import parse_pinned, parse_tagged
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
