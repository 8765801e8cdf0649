"""The Stack's JSON form as it comes back from outside: an image's io.envgen.stack label,
a lock entry, a certificate. Each value is checked against the matrix's own patterns
(schema.py), since a label or a lock is as untrusted as a matrix file; `stack_problems`
says what is wrong, `stack_from_labels` gives the Stack or one sentence why not."""
from __future__ import annotations

import json
import re

from ..core.errors import InputError
from ..core.model import PLATFORMS, Stack
from . import schema

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
    # absent from amd64 stacks and from every label, lock and certificate written before it
    _check(p, data.get("platform", "linux/amd64") in PLATFORMS,
           f"stack.platform must be {' or '.join(PLATFORMS)}")
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
        _check(p, base.get("arch", "") in ("", "arm64"), "stack.base.arch must be arm64 "
               "or absent")
        _check(p, (base.get("arch") == "arm64") == (data.get("platform") == "linux/arm64"),
               "stack.base.arch and stack.platform disagree")
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
        p += layer_problems(data["project"])
    if not p:
        try:
            Stack.from_json(data)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            p.append(f"'stack' is not a resolved stack ({type(e).__name__}: {e})"[:200])
    return p


def stack_from_labels(labels: dict, what: str) -> Stack:
    """The Stack an image's (or a SIF's) io.envgen.stack label carries, checked as a lock's
    stack is (a label is as untrusted); InputError naming `what` otherwise."""
    if "io.envgen.stack" not in labels:
        raise InputError(f"{what} has no io.envgen.stack label: it was not built by "
                         f"envgen, so there is no stack to certify against")
    from ..matrix.wire import stack_problems
    raw = labels["io.envgen.stack"]
    try:
        data = json.loads(raw) if isinstance(raw, str) and len(raw) < 1 << 20 else None
    except (ValueError, RecursionError):
        data = None
    problems = stack_problems(data) if data is not None else ["not JSON"]
    if problems:
        raise InputError(f"{what}: its io.envgen.stack label is not a stack envgen "
                         f"wrote ({problems[0]})")
    return Stack.from_json(data)


# a project file's layer (resolve/project.py reads the file with these)
PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
PROJECT_PIP = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,98})\s*==\s*"
                         r"([0-9][0-9A-Za-z.+!_-]{0,59})")
PROJECT_APT = re.compile(r"[a-z0-9][a-z0-9+.-]{0,62}")
PROJECT_REL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+@-]{0,127}"
                         r"(/[A-Za-z0-9_][A-Za-z0-9._+@-]{0,127})*/?")
PROJECT_MAX_FILES = 2000
PROJECT_MAX_ARGS = 64
_SHA256 = re.compile(r"[0-9a-f]{64}")


def layer_problems(data) -> list[str]:
    """What is wrong with a stack's `project` object read from a lock or a label; [] when
    every value is one a project file could have given."""
    if not isinstance(data, dict) or set(data) - {"name", "pip", "apt", "files", "smoke"}:
        return ["stack.project must be an object of name, pip, apt, files and smoke"]
    p = []
    if not (isinstance(data.get("name"), str) and PROJECT_NAME.fullmatch(data["name"])):
        p.append("stack.project.name is not a name")
    pip = data.get("pip", {})
    if not isinstance(pip, dict) or not all(
            isinstance(n, str) and isinstance(v, str) and PROJECT_PIP.fullmatch(f"{n}=={v}")
            for n, v in pip.items()):
        p.append("stack.project.pip must map names to exact versions")
    apt = data.get("apt", [])
    if not isinstance(apt, list) or not all(isinstance(a, str) and PROJECT_APT.fullmatch(a)
                                            for a in apt):
        p.append("stack.project.apt must be Debian package names")
    files = data.get("files", [])
    ok = isinstance(files, list) and len(files) <= PROJECT_MAX_FILES
    for f in files if ok else ():
        ok = ok and isinstance(f, dict) and set(f) == {"src", "dest", "sha256", "mode"} and \
            all(isinstance(f[k], str) for k in f) and all(
                PROJECT_REL.fullmatch(f[k]) and ".." not in f[k].split("/")
                for k in ("src", "dest")) \
            and _SHA256.fullmatch(f["sha256"]) is not None and f["mode"] in ("644", "755")
    if not ok:
        p.append("stack.project.files must be {src, dest, sha256, mode} of relative paths")
    smoke = data.get("smoke", [])
    if not isinstance(smoke, list) or len(smoke) > PROJECT_MAX_ARGS or not all(
            isinstance(a, str) and a and len(a) <= 1000 and not any(ord(c) < 32 for c in a)
            for a in smoke):
        p.append("stack.project.smoke must be a list of one-line arguments")
    return p
