"""The matrix schema (JSON Schema) and its validation with file:line for every problem."""
from __future__ import annotations

import re
from functools import lru_cache

from ..core.errors import MatrixError

# Patterns double as the injection guard: nothing that reaches a template can carry a
# quote, a space, a `$`, a `;` or a newline.
VERSION = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)*([.+-]?[A-Za-z0-9]+)*$",
           "maxLength": 40, "format": "pep440"}   # the pattern guards; packaging decides
DRIVER = {"type": "string", "pattern": r"^[0-9]{3}(\.[0-9]{1,3}){1,2}$"}
CUDA_VER = {"type": "string", "pattern": r"^[0-9]{1,2}\.[0-9]{1,2}(\.[0-9]{1,3})?$"}
CC = {"type": "string", "pattern": r"^[0-9]{1,2}\.[0-9]$"}
NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"}
GPU_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9 ._+()/-]{0,79}$"}
PYTHON = {"type": "string", "pattern": r"^3\.[0-9]{1,2}$"}
PYTHON_PATCH = {"type": "string", "pattern": r"^3\.[0-9]{1,2}\.[0-9]{1,3}$"}
URL = {"type": "string", "pattern": r"^https?://[A-Za-z0-9._~:/?#@!*+,=%-]+$", "maxLength": 300}
SOURCE = {"type": "string", "pattern": r"^(https?://|pypi:)[^\s'\"`$\\]+$", "maxLength": 400}
IMAGE = {"type": "string",
         "pattern": r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$",
         "maxLength": 200}
DIGEST = {"type": ["string", "null"], "pattern": r"^sha256:[a-f0-9]{64}$"}
MONTH = {"type": ["string", "null"], "pattern": r"^[0-9]{4}-[0-9]{2}$"}
SPECIFIER = {"type": "string", "pattern": r"^[<>=!~0-9., ]+$", "maxLength": 60}
# a variable a source build reads (DS_BUILD_OPS=0): it reaches a RUN line, so plain words
BUILD_ENV_NAME = {"type": "string", "pattern": r"^[A-Z][A-Z0-9_]{0,39}$"}
# a package extra envgen installs (`nemo-toolkit[asr]`): a plain lower-case name
EXTRA = {"type": "string", "pattern": r"^[a-z0-9][a-z0-9-]{0,39}$"}
BUILD_ENV_VALUE = {"type": "string", "pattern": r"^[A-Za-z0-9._-]{0,40}$"}
PIN_SPEC = {"type": "string", "maxLength": 60,
            "pattern": r"^(==|>=|<=|~=|!=|<|>)[0-9][0-9A-Za-z.*]*(,(==|>=|<=|~=|!=|<|>)"
                       r"[0-9][0-9A-Za-z.*]*)*$"}
PINS = {"type": "object", "propertyNames": NAME, "additionalProperties": VERSION}
# Requires-Dist pins of a wheel: exact versions, or the wildcard/range the wheel states.
WHEEL_PINS = {"type": "object", "propertyNames": NAME,
              "additionalProperties": {"anyOf": [VERSION, PIN_SPEC]}}


# An SPDX licence expression (PEP 639): identifiers, LicenseRef-… among them, joined by
# AND, OR and WITH, with parentheses; the `spdx` format asks packaging for the rest.
_SPDX_TERM = r"\(*(?!(AND|OR|WITH)\b)[A-Za-z0-9][A-Za-z0-9.+-]*\)*"
LICENSE = {"type": "string", "maxLength": 300, "format": "spdx",
           "pattern": rf"^{_SPDX_TERM}( (AND|OR|WITH) {_SPDX_TERM})*$"}
LICENSES = {"type": "object", "propertyNames": NAME, "additionalProperties": LICENSE}

PLATFORM = {"enum": ["linux/amd64", "linux/arm64"]}
CONFIDENCE = {"enum": ["stated", "inferred"]}
# one line of prose: no control character, nor any other character a reader splitting
# lines the way Python's str.splitlines() does takes for a line's end (NEL, U+2028, U+2029)
WHY = {"type": "string", "maxLength": 400,
       "pattern": "^[^\\x00-\\x1f\\x7f\\x85\\u2028\\u2029]+$"}


def _entry(required: dict, optional: dict | None = None) -> dict:
    # Every row may say that no source states its fact (confidence: inferred) and why.
    props = {**required, **(optional or {}), "source": SOURCE, "confidence": CONFIDENCE,
             "why": WHY}
    return {"type": "object", "additionalProperties": False, "properties": props,
            "required": sorted([*required, "source"])}


# A GPU's (or an architecture's) last driver branch: a newer branch does not know it. Its
# source is its own (the deprecation notice, not the first driver's release notes); a why
# says it is inferred and how.
LAST_BRANCH = {"last_branch": {"type": "string", "pattern": r"^[0-9]{3}$"},
               "last_branch_source": SOURCE, "last_branch_why": WHY}


def _last_branch(entry: dict) -> dict:
    """An entry that may name a last branch, which then needs its own source."""
    return {**entry, "dependentRequired": {"last_branch": ["last_branch_source"]}}


def _platform(entry: dict) -> dict:
    """A GPU that fixes its host's platform (Grace) says where that is stated."""
    return {**entry, "dependentRequired": {**entry.get("dependentRequired", {}),
                                           "platform": ["platform_source"]}}


def _list(item: dict) -> dict:
    return {"type": "array", "items": item}


VARIANT_NAME = {"type": "string", "pattern": r"^(cu[0-9]{3}|cuda[0-9]{2}|cpu)$"}
VARIANT = {
    "type": "object", "additionalProperties": False,
    "required": ["name", "cuda", "sources"],
    "properties": {
        "name": VARIANT_NAME,
        # the distribution that installs the framework in this variant, where it is not
        # the framework's own package (TensorFlow's CPU build: tensorflow-cpu)
        "package": NAME,
        "cuda": {"anyOf": [CUDA_VER, {"type": "null"}]},
        "cudnn": {"anyOf": [VERSION, {"type": "null"}]},
        "nccl": {"anyOf": [VERSION, {"type": "null"}]},
        "compute_capabilities": _list(CC),
        "ptx": {"anyOf": [CC, {"type": "null"}]},
        "sources": {**_list(NAME), "minItems": 1},
        "packages": WHEEL_PINS,
        "license": LICENSE,   # the CUDA libraries' (their nvidia-* wheels' METADATA)
        "confidence": CONFIDENCE, "why": WHY,
    },
}

SECTIONS = {
    "drivers": _list(_entry(
        {"branch": {"type": "string", "pattern": r"^[0-9]{3}$"}, "first": DRIVER,
         "latest": DRIVER},
        {"lts": {"type": "boolean"}, "eol": MONTH, "latest_source": SOURCE})),
    "cuda_majors": _list(_entry(
        {"major": {"type": "integer", "minimum": 9, "maximum": 99}, "minimum_driver": DRIVER})),
    "cuda": _list(_entry(
        {"version": CUDA_VER, "toolkit_driver": DRIVER},
        {"runtime": VERSION, "compute_capabilities": _list(CC), "released": MONTH})),
    "forward_compat": _list(_entry(
        {"cuda": CUDA_VER, "branches": _list({"type": "string", "pattern": r"^[0-9]{3}$"})},
        {"gpu_classes": _list({"enum": ["datacenter", "workstation", "jetson"]})})),
    "gpus": _list(_platform(_last_branch(_entry(
        {"name": GPU_NAME, "cc": CC,
         "class": {"enum": ["datacenter", "workstation", "geforce", "jetson"]}},
        {"aliases": _list(GPU_NAME), "arch": NAME, "brand": NAME, "min_driver": DRIVER,
         "min_driver_source": SOURCE, **LAST_BRANCH,
         # the host platform the GPU comes in (Grace: linux/arm64), with its own source
         "platform": PLATFORM, "platform_source": SOURCE})))),
    "gpu_architectures": _list(_last_branch(_entry({"arch": NAME, "min_driver": DRIVER},
                                                   LAST_BRANCH))),
    # a cuDNN release's oldest supported compute capability, where NVIDIA dropped older
    # GPUs (its support matrix); a framework row pinning it claims none below
    "libraries": _list(_entry({"name": NAME, "version": VERSION, "cuda": SPECIFIER},
                              {"min_cc": CC, "min_cc_source": SOURCE})),
    "frameworks": _list(_entry(
        {"name": NAME, "package": NAME},
        {"companions": _list(NAME), "smoke": NAME,
         # a framework installed over another one's stack (Lightning over PyTorch)
         "builds_on": NAME,
         # its package has no Linux wheel: pip builds the sdist, without isolation
         "from_source": {"type": "object", "additionalProperties": False,
                         "required": ["source"],
                         # the distributions built from sdists (default: its own package)
                         "properties": {"source": SOURCE, "packages": _list(NAME), "env": {
                             "type": "object",
                             "propertyNames": BUILD_ENV_NAME,
                             "additionalProperties": BUILD_ENV_VALUE}}},
         # the extra of its package the image installs, and the source that names it
         "extra": {"type": "object", "additionalProperties": False,
                   "required": ["name", "source"],
                   "properties": {"name": EXTRA, "source": SOURCE}},
         # base-closure pins its own requirements exclude: the closure resolves them anew
         # (a layer of its own), the lower layers stay the base's
         "unpin": {"type": "object", "additionalProperties": False,
                   "required": ["packages", "source"],
                   "properties": {"packages": {**_list(NAME), "minItems": 1},
                                  "source": SOURCE}},
         # frameworks it may also be installed over, for which of its releases (Keras 3
         # over JAX or PyTorch), and the source that says so
         "also_over": {"type": "object", "additionalProperties": False,
                       "required": ["frameworks", "releases", "source"],
                       "properties": {"frameworks": {**_list(NAME), "minItems": 1},
                                      "releases": SPECIFIER, "source": SOURCE}},
         # a variable the image's environment sets, its value per base framework
         # (Keras: KERAS_BACKEND), and the source that names it
         "env": {"type": "object", "additionalProperties": False,
                 "required": ["variable", "values", "source"],
                 "properties": {"variable": BUILD_ENV_NAME, "source": SOURCE,
                                "values": {"type": "object", "propertyNames": NAME,
                                           "additionalProperties": BUILD_ENV_VALUE,
                                           "minProperties": 1}}}})),
    "framework_releases": _list(_entry(
        {"framework": NAME, "version": VERSION, "pythons": {**_list(PYTHON), "minItems": 1}},
        {"variants": {**_list(VARIANT), "minItems": 1},
         # what a release of a builds_on framework needs, as its Requires-Dist states it
         "requires": {"type": "object", "propertyNames": NAME,
                      "additionalProperties": SPECIFIER},
         "released": MONTH, "companions": PINS,
         # as the wheel's METADATA states it (License-Expression, License or classifier)
         "license": LICENSE, "companion_licenses": LICENSES,
         "requires_python": {"anyOf": [SPECIFIER, {"type": "null"}]},
         # patch releases its code needs beyond Requires-Python: per Python line, the
         # first patch that has what it calls (read from its source, so inferred)
         "python_floors": {**_list(PYTHON_PATCH), "minItems": 1},
         "python_floors_why": {**WHY, "minLength": 1},
         # what its code needs that its Requires-Dist does not state (read from its source,
         # so inferred): resolved in the add-ons' layer like `requires`
         "needs": {"type": "object", "propertyNames": NAME, "additionalProperties": SPECIFIER,
                   "minProperties": 1},
         "needs_why": {**WHY, "minLength": 1},
         # the base framework's versions over which `needs` applies (all when absent)
         "needs_over": SPECIFIER,
         # builds upstream has that envgen does not serve, each with the reason (TensorFlow
         # before its and-cuda extra; JAX's CUDA wheels only on Google's find-links page)
         "refused_variants": {"type": "object", "propertyNames": VARIANT_NAME,
                              "additionalProperties": {**WHY, "minLength": 1},
                              "minProperties": 1},
         "pypi_variant": {"anyOf": [VARIANT_NAME, {"type": "null"}]}})),
    # the OCI platforms envgen builds for, as pip, uv, Debian and QEMU name them
    "platforms": _list(_entry(
        {"name": PLATFORM, "machine": {"enum": ["x86_64", "aarch64"]},
         "debian": {"enum": ["amd64", "arm64"]},
         "wheel_tag": {"type": "string", "pattern": r"^manylinux_2_[0-9]{2}_(x86_64|aarch64)$"},
         "uv": {"type": "string", "pattern": r"^(x86_64|aarch64)-manylinux_2_[0-9]{2}$"}})),
    # what PyPI serves of a framework release for a platform other than linux/amd64
    # (refresh/platforms.py reads the wheels' names and METADATA)
    "platform_wheels": _list(_entry(
        {"package": NAME, "version": VERSION, "platform": PLATFORM, "variant": VARIANT_NAME,
         "pythons": {**_list(PYTHON), "minItems": 1}},
        {"packages": WHEEL_PINS,
         # a CUDA build of its own on that platform: the GPUs its wheel has code for
         "compute_capabilities": _list(CC), "ptx": {"anyOf": [CC, {"type": "null"}]}})),
    "wheel_sources": _list(_entry(
        {"name": NAME, "kind": {"enum": ["pypi", "index"]}, "url": URL})),
    "bases": _list(_entry(
        {"name": NAME, "kind": {"enum": ["local", "registry", "framework"]}, "image": IMAGE,
         "python": PYTHON},
        {"digest": DIGEST, "suite": {"anyOf": [NAME, {"type": "null"}]},
         "snapshot": {"type": ["string", "null"], "pattern": r"^[0-9]{8}T[0-9]{6}Z$"},
         "os": NAME, "glibc": {"type": "string", "pattern": r"^2\.[0-9]{2}$"},
         "cuda": {"anyOf": [CUDA_VER, {"type": "null"}]},
         "cuda_compat": {"type": "boolean"}, "provides": PINS,
         # the CPython patch release its python3 is at its snapshot
         "python_patch": PYTHON_PATCH,
         "default": {"type": "boolean"}})),
}

FILE_SCHEMA = {"type": "object", "additionalProperties": False, "properties": SECTIONS,
               "minProperties": 1}


def _anchor_end(node) -> None:
    r"""`$` also matches before a trailing newline; `\Z` does not. Patterns must end hard."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str) and node["pattern"].endswith("$"):
            node["pattern"] = node["pattern"][:-1] + r"\Z"
        for v in node.values():
            _anchor_end(v)
    elif isinstance(node, list):
        for v in node:
            _anchor_end(v)


_anchor_end(FILE_SCHEMA)
def canonical_license(value: str) -> str | None:
    """`value` written as packaging writes SPDX expressions, or None when it is not one
    (an unknown identifier, a broken expression). packaging < 24.2 cannot tell: then the
    pattern alone decides."""
    if not isinstance(value, str) or not re.fullmatch(LICENSE["pattern"], value):
        return None
    try:
        from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
    except ImportError:
        return value
    try:
        return canonicalize_license_expression(value)
    except InvalidLicenseExpression:
        return None


def _spdx(value) -> bool:
    """An SPDX expression, written the one way packaging writes it ('MIT', not 'mit'); a
    value the pattern refuses is reported once, by the pattern."""
    if isinstance(value, str) and re.fullmatch(LICENSE["pattern"], value) \
            and canonical_license(value) != value:
        raise ValueError(value)
    return True


def _pep440(value) -> bool:
    """A version as packaging parses it (12.x.banana matches the pattern, not this)."""
    from packaging.version import Version
    if isinstance(value, str):
        Version(value)
    return True


@lru_cache(maxsize=1)
def _validator():
    """Built on first use: importing jsonschema costs more than a cached matrix load."""
    import jsonschema
    formats = jsonschema.FormatChecker(formats=())
    formats.checks("pep440", raises=ValueError)(_pep440)
    formats.checks("spdx", raises=ValueError)(_spdx)
    return jsonschema.Draft202012Validator(FILE_SCHEMA, format_checker=formats)


def line_of(doc, path) -> int | None:
    """The line of the deepest key or item on `path` that recorded one."""
    node, line = doc, getattr(doc, "line", None)
    for key in path:
        lines = getattr(node, "lines", None)
        try:
            if lines is not None:
                line = lines[key]
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
    return line


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(err) -> str:   # a jsonschema.ValidationError
    where = ".".join(str(p) for p in err.absolute_path) or "top level"
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return f"{where}: unknown key(s) {', '.join(extra)}"
    if err.validator == "dependentRequired":
        return f"{where}: {err.message.replace(' is a dependency of ', ' is required with ')}"
    if err.validator == "required":
        return f"{where}: {err.message.replace(' is a required property', '')} is required"
    if err.validator == "pattern":
        return f"{where}: {_short(err.instance)} is not a valid value here"
    if err.validator == "format" and err.validator_value == "spdx":
        return f"{where}: {_short(err.instance)} is not an SPDX licence expression as " \
               f"packaging writes it"
    if err.validator == "format":
        return f"{where}: {_short(err.instance)} is not a version (PEP 440, as packaging reads it)"
    if err.validator in ("type", "anyOf") and isinstance(err.instance, (float, int)) \
            and not isinstance(err.instance, bool):
        return f"{where}: {err.instance!r} is a number; quote versions (\"{err.instance}\")"
    if err.validator == "anyOf":
        return f"{where}: {_short(err.instance)} is not a valid value here"
    if err.validator == "minProperties" and not err.absolute_path:
        return "the file holds no matrix sections"
    if err.validator == "type":
        return f"{where}: {_short(err.instance)} is not of type {err.validator_value!r}"
    return f"{where}: {err.message[:200]}"


def validate(doc, name: str) -> list[MatrixError]:
    """Every schema problem in one parsed file, each with its line."""
    if doc is None:
        return [MatrixError(message="the file holds no matrix sections", file=name, line=1)]
    problems = []
    for err in sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.path))):
        path = list(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            path += extra[:1]   # point at the unknown key itself
        problems.append(MatrixError(message=_describe(err), file=name,
                                    line=line_of(doc, path)))
    return problems
