"""Every input file's form, checked as the matrix's is: a JSON Schema made of the matrix
schema's fragments (matrix/schema.py), its problems described the same way and placed at
their file:line where the document carries line marks (matrix/yamlfile.py). The inputs
keep their schemas beside their readers (the certificate's in certs/certificate.py, the
fleet spec's in fleet/spec.py); what a schema cannot say (a duplicate, a GPU the matrix
must know, a pass its own record refutes) stays in code beside them."""
from __future__ import annotations

import copy
import json

from .schema import _anchor_end, _describe, line_of

_VALIDATORS: dict[str, object] = {}


def _validator(schema: dict):
    """One validator per schema, built on first use (jsonschema's import is not free)."""
    key = json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(key)
    if v is None:
        import jsonschema
        hard = copy.deepcopy(schema)
        _anchor_end(hard)   # `$` would let a trailing newline through
        v = _VALIDATORS[key] = jsonschema.Draft202012Validator(hard)
    return v


def _shown(value) -> str:
    return repr(value)[:40]


def sentence(err, schema: dict) -> str:
    """A problem as its schema words it: the `message` of the deepest schema node on the
    way to what failed (formatted with the value, shown short), else as the matrix's
    problems read (schema._describe). A missing key is worded by its own node, value None.
    A number where a string goes is said to be YAML's reading unless the schema says
    `"yaml": False` (a JSON form)."""
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(known))
        more = f" and {len(extra) - 5} more" if len(extra) > 5 else ""   # one short line
        return (f"unknown key {', '.join(_shown(k) for k in extra[:5])}{more} (known: "
                f"{', '.join(known)})")
    if err.validator in ("anyOf", "oneOf") and err.context:
        # the branch of the value's own type says why (a string's pattern, not "not an object")
        told = [e for e in err.context if e.validator != "type"] or list(err.context)
        err = min(told, key=lambda e: len(e.absolute_path))
    path, value = list(err.absolute_schema_path), err.instance
    if err.validator == "required":
        missing = sorted(set(err.validator_value) - set(err.instance or ()))[:1]
        path, value = [*path[:-1], "properties", *missing], None
    node, msg = schema, schema.get("message")
    for key in path:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and "message" in node:
            msg = node["message"]
    if not msg:
        return _describe(err)
    said = msg.format(value=_shown(value))
    if err.validator == "type" and "string" in err.validator_value and schema.get("yaml", 1) \
            and isinstance(value, (int, float)) and not isinstance(value, bool):
        said += f" (quote it: YAML reads {value!r} as a number)"
    return said


def field_path(err) -> list:
    """Where a problem is: its document path, with the missing key for a `required`."""
    path = list(err.absolute_path)
    if err.validator == "required":
        path += sorted(set(err.validator_value) - set(err.instance or ()))[:1]
    return path


def errors(doc, schema: dict) -> list:
    """jsonschema's errors of `doc`, in document order."""
    return sorted(_validator(schema).iter_errors(doc),
                  key=lambda e: list(map(str, field_path(e))))


def problems(doc, schema: dict) -> list[tuple[int | None, str]]:
    """Every problem of `doc` against `schema`, by line, as (line, sentence);
    line is None where `doc` has no line marks (JSON)."""
    out = []
    for err in errors(doc, schema):
        path = field_path(err)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            path += sorted(set(err.instance) - set(err.schema.get("properties", {})))[:1]
        out.append((line_of(doc, path), sentence(err, schema)))
    return sorted(out, key=lambda p: p[0] or 0)


def first_problem(doc, schema: dict) -> str | None:
    """The first problem of `doc` against `schema`, or None."""
    found = problems(doc, schema)
    return found[0][1] if found else None
