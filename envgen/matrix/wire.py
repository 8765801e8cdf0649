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

# a project file's layer (resolve/project.py reads the file with these)
PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
_PIP_NAME, _PIP_VERSION = r"[A-Za-z0-9][A-Za-z0-9._-]{0,98}", r"[0-9][0-9A-Za-z.+!_-]{0,59}"
PROJECT_PIP = re.compile(rf"({_PIP_NAME})\s*==\s*({_PIP_VERSION})")
# Debian's package names: two or more characters; never ending in '-', which apt-get install
# reads as "remove this package"
PROJECT_APT = re.compile(r"[a-z0-9][a-z0-9+.-]{0,61}[a-z0-9+]")
PROJECT_REL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+@-]{0,127}"
                         r"(/[A-Za-z0-9_][A-Za-z0-9._+@-]{0,127})*/?")
PROJECT_MAX_FILES = 2000
PROJECT_MAX_ARGS = 64


def _whole(pattern: re.Pattern | str) -> str:
    """A regular expression as a schema's whole-value pattern."""
    return f"^(?:{getattr(pattern, 'pattern', pattern)})$"


def _says(fragment: dict, message: str, null: bool = False) -> dict:
    """A matrix fragment (schema.py) worded as this form words it; `null`: or null."""
    node = {**fragment, "message": message}
    if null:
        node["type"] = [fragment["type"], "null"]
    return node


def _or_empty(fragment: dict, message: str) -> dict:
    """A fragment's string, "" or null."""
    body = fragment["pattern"].removeprefix("^").removesuffix("$").removesuffix(r"\Z")
    return {"type": ["string", "null"], "pattern": f"^(?:{body})?$", "message": message}


def _names(message: str = "", null: bool = False, least: int = 0) -> dict:
    return {"type": ["array", "null"] if null else "array", "items": schema.NAME,
            "minItems": least, **({"message": message} if message else {})}


CUDA_ARCH = r"^[1-9][0-9]?\.[0-9][af]?$"   # a compute capability: 9.0, 12.0, 9.0a
# no control character, NEL, U+2028 or U+2029: nothing starts a new line (pip reads
# requirements with str.splitlines(), which ends lines at all of them)
ONE_LINE_CHARS = re.compile(r"[^\x00-\x1f\x7f\x85\u2028\u2029]*")   # fullmatch it
ONE_LINE = f"^{ONE_LINE_CHARS.pattern}$"
_PROJECT = {   # a project file's layer (envgen.yaml) as the Stack carries it
    "type": ["object", "null"],
    "message": "stack.project must be an object of name, pip, apt, files, smoke and "
               "cuda_archs",
    "propertyNames": {"enum": ["name", "pip", "apt", "files", "smoke", "cuda_archs"]},
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": _whole(PROJECT_NAME),
                 "message": "stack.project.name is not a name"},
        "pip": {"type": "object", "message": "stack.project.pip must map names to exact "
                                             "versions",
                "propertyNames": {"pattern": _whole(_PIP_NAME)},
                "additionalProperties": {"type": "string", "pattern": _whole(_PIP_VERSION)}},
        "apt": {"type": "array", "message": "stack.project.apt must be Debian package names",
                "items": {"type": "string", "pattern": _whole(PROJECT_APT)}},
        "files": {"type": "array", "maxItems": PROJECT_MAX_FILES,
                  "message": "stack.project.files must be {{src, dest, sha256, mode}} of "
                             "relative paths",
                  "items": {"type": "object", "required": ["src", "dest", "sha256", "mode"],
                            "propertyNames": {"enum": ["src", "dest", "sha256", "mode"]},
                            "properties": {
                                **{k: {"type": "string", "pattern":   # no `..` folder
                                       r"^(?!(.*/)?\.\.(/|$))" + _whole(PROJECT_REL)[1:]}
                                   for k in ("src", "dest")},
                                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                "mode": {"enum": ["644", "755"]}}}},
        "smoke": {"type": "array", "maxItems": PROJECT_MAX_ARGS,
                  "message": "stack.project.smoke must be a list of one-line arguments",
                  "items": {"type": "string", "minLength": 1, "maxLength": 1000,
                            "pattern": ONE_LINE}},
        "cuda_archs": {"type": "array", "maxItems": 32,
                       "message": "stack.project.cuda_archs must be compute capabilities "
                                  "like 9.0",
                       "items": {"type": "string", "pattern": CUDA_ARCH}},
    },
}
_VERSION_OR_RANGE = {"anyOf": [schema.VERSION, schema.PIN_SPEC]}
_ENV_VALUE = {**schema.BUILD_ENV_VALUE, "not": {"pattern": "^-"}}   # never an option
# the keys a missing one of which is said as such; any other is worded by its own node
MISSING_SAID = ("stack", "framework", "packages", "python", "base", "driver", "wheel_source")
STACK = {   # the Stack's JSON form (core/model.py Stack.to_json), every value as a matrix's
    "type": "object", "message": "'stack' must be an object",
    "yaml": False,
    "required": [*MISSING_SAID, "smoke"],
    "additionalProperties": False,
    "properties": {
        "stack": _says(schema.NAME, "stack.stack is not a stack name"),
        "framework": {
            "type": "object", "message": "stack.framework must be an object",
            "required": ["name", "package", "variant", "version"],
            "additionalProperties": False,
            "properties": {
                **{k: _says(schema.NAME, f"stack.framework.{k} is not a name")
                   for k in ("name", "package", "variant")},
                "version": _says(schema.VERSION, "stack.framework.version is not a version"),
                **{k: _names(f"stack.framework.{k} must be names")
                   for k in ("companions", "addons")},
                "builds_on": {"type": ["object", "null"], "required": ["name", "package"],
                              "additionalProperties": False,
                              "properties": {"name": schema.NAME, "package": schema.NAME},
                              "message": "stack.framework.builds_on must be null or "
                                         "{{name, package}}"}}},
        "packages": {"type": "object", "message": "stack.packages must be an object",
                     "propertyNames": {**schema.NAME,
                                       "message": "stack.packages has an invalid pin {value}"},
                     "additionalProperties": {**_VERSION_OR_RANGE, "message":
                                              "stack.packages has an invalid pin {value}"}},
        "python": _says(schema.PYTHON, "stack.python is not a Python version"),
        **{k: _says(schema.CUDA_VER, f"stack.{k} is not a version", null=True)
           for k in ("cuda", "cuda_release")},
        **{k: _says(schema.VERSION, f"stack.{k} is not a version", null=True)
           for k in ("cudnn", "nccl")},
        "ptx": _says(schema.CC, "stack.ptx is not a version", null=True),
        "base": {
            "type": "object", "message": "stack.base must be an object",
            "required": ["name", "kind", "image", "python"],
            "additionalProperties": False,
            "properties": {
                "name": _says(schema.NAME, "stack.base.name is not a name"),
                "kind": {"enum": ["local", "registry", "framework"],
                         "message": "stack.base.kind must be local, registry or framework"},
                "image": _says(schema.IMAGE, "stack.base.image is not an image reference"),
                "suite": _says(schema.NAME, "stack.base.suite is not a suite name", null=True),
                "snapshot": {"type": ["string", "null"], "pattern": r"^[0-9]{8}T[0-9]{6}Z$",
                             "message": "stack.base.snapshot is not a snapshot"},
                "digest": {**schema.DIGEST, "message": "stack.base.digest is not a sha256 "
                                                       "digest"},
                "python": _says(schema.PYTHON, "stack.base.python is not a Python version"),
                "glibc": _or_empty({"pattern": r"^2\.[0-9]{2}$"},
                                   "stack.base.glibc is not a glibc version"),
                "cuda": _says(schema.CUDA_VER, "stack.base.cuda is not a CUDA version",
                              null=True),
                "os": _or_empty(schema.NAME, "stack.base.os is not a name"),
                "arch": {"enum": ["", "arm64"], "message": "stack.base.arch must be arm64 or "
                                                           "absent"},
                "cuda_compat": {"type": "boolean",
                                "message": "stack.base.cuda_compat must be true or false"},
                "provides": {"type": ["object", "null"], "propertyNames": schema.NAME,
                             "additionalProperties": schema.VERSION,
                             "message": "stack.base.provides must map names to versions"}},
            # a local base is made from a Debian suite's snapshot
            "if": {"required": ["kind"], "properties": {"kind": {"const": "local"}}},
            "then": {"required": ["suite"], "properties": {"suite": {"minLength": 1}},
                     "message": "stack.base: a local base needs a suite"}},
        "wheel_source": _says(schema.NAME, "stack.wheel_source is not a name"),
        "index_url": _says(schema.URL, "stack.index_url is not a plain URL", null=True),
        "driver": {"type": "object", "message": "stack.driver must be an object",
                   "additionalProperties": False,
                   "properties": {k: _says(schema.DRIVER, f"stack.driver.{k} is not a driver "
                                                          f"version", null=True)
                                  for k in ("minimum", "toolkit")}},
        "require_cuda": {"type": ["string", "null"],
                         "pattern": r"^[a-z0-9][a-z0-9 ,.<>=_-]{0,299}$",
                         "message": "stack.require_cuda has characters it cannot hold"},
        "compute_capabilities": {"type": "array", "items": schema.CC,
                                 "message": "stack.compute_capabilities must be X.Y values"},
        "forward_compat": {"type": "boolean",
                           "message": "stack.forward_compat must be true or false"},
        "smoke": _says(schema.NAME, "stack.smoke is not a payload name"),
        "reasons": {"type": "array", "message": "stack.reasons must be one-line sentences",
                    "items": {"type": "string", "maxLength": 499, "pattern": ONE_LINE}},
        "matrix_sha256": {"type": "string", "pattern": "^([0-9a-f]{64})?$",
                          "message": "stack.matrix_sha256 is not a sha256"},
        # absent in locks written before it; an SPDX expression (checked below)
        "licenses": {"type": "string", "maxLength": 300,
                     "message": "stack.licenses is not an SPDX licence expression"},
        "from_source": {"type": ["object", "null"], "required": ["packages"],
                        "additionalProperties": False,
                        "message": "stack.from_source must be {{packages: [names], env: "
                                   "{{NAME: value}}}} with plain names and values",
                        "properties": {"packages": _names(least=1),
                                       "env": {"type": "object",
                                               "propertyNames": schema.BUILD_ENV_NAME,
                                               "additionalProperties": _ENV_VALUE}}},
        "extras": {"type": ["object", "null"], "minProperties": 1,
                   "propertyNames": schema.NAME, "additionalProperties": schema.EXTRA,
                   "message": "stack.extras must map package names to an extra name "
                              "([a-z0-9-], not starting with -, at most 40 characters)"},
        "unpinned": _names("stack.unpinned must be a list of package names", null=True,
                           least=1),
        "env": {"type": "object", "propertyNames": schema.BUILD_ENV_NAME,
                "additionalProperties": _ENV_VALUE,
                "message": "stack.env must map variable names to plain values"},
        "project": _PROJECT,
        # absent from amd64 stacks and from every label, lock and certificate before it
        "platform": {"enum": list(PLATFORMS),
                     "message": f"stack.platform must be {' or '.join(PLATFORMS)}"},
    },
}


def stack_problems(data) -> list[str]:
    """What is wrong with a `stack` object read back (a lock's, a label's, a
    certificate's); [] when it is a resolved stack whose every value could have come from a
    valid matrix. STACK says most; the code below what a schema cannot."""
    from .forms import errors, sentence
    if not isinstance(data, dict):
        return ["'stack' must be an object"]
    found = errors(data, STACK)
    missing = [f"missing key 'stack.{k}'" for e in found if e.validator == "required"
               and not e.absolute_path for k in sorted(set(e.validator_value) - set(data))
               if k in MISSING_SAID]
    if missing:
        return missing
    p = list(dict.fromkeys(
        (f"{'.'.join(map(str, ['stack', *e.absolute_path]))}: " if e.validator ==
         "additionalProperties" else "") + sentence(e, STACK) for e in found))
    lic, base = data.get("licenses", ""), data.get("base")
    if isinstance(lic, str) and lic and schema.canonical_license(lic) != lic:
        p.append("stack.licenses is not an SPDX licence expression")
    if isinstance(base, dict) and \
            (base.get("arch") == "arm64") != (data.get("platform") == "linux/arm64"):
        p.append("stack.base.arch and stack.platform disagree")
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
