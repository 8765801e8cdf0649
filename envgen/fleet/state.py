"""The fleet's state files in its folder (tasks.json, jobs.json): their schemas, and the one
reader that both `envgen fleet --collect` and the in-job task runner use."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import EnvironmentMissing, InputError

MAX_STATE = 16 << 20    # tasks.json and jobs.json: envgen's own, a few KB a task
_INDEX = {"type": "integer", "minimum": 0, "maximum": 1_000_000}
_SCRIPT = {"type": "string", "pattern": r"^slurm/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.sbatch$"}
_TEXT = {"type": "string", "maxLength": 1000}
_MAYBE_TEXT = {"anyOf": [{"type": "null"}, _TEXT]}
TASKS_SCHEMA = {
    "type": "object", "required": ["tasks", "fleet_sha256"],
    "properties": {"tasks": {"type": "array", "maxItems": 100_000, "items": {
        "type": "object", "required": ["index", "stack", "spec", "target", "script"],
        "properties": {"index": _INDEX, "array_index": _INDEX, "stack": _TEXT, "spec": _TEXT,
                       "target": _TEXT, "image": _MAYBE_TEXT, "sif": _MAYBE_TEXT,
                       "multi_gpu": {"type": "boolean"}, "script": _SCRIPT}}}}}
JOBS_SCHEMA = {
    "type": "object", "required": ["submissions"],
    "properties": {"submissions": {"type": "array", "maxItems": 100_000, "items": {
        "type": "object", "required": ["script", "job_id", "indices"],
        "properties": {"script": _SCRIPT,
                       "job_id": {"type": "string", "pattern": r"^[0-9]{1,20}$"},
                       "indices": {"type": "array", "maxItems": 100_000, "items": _INDEX},
                       "submitted": _TEXT}}}}}


def read_json(path: Path, default, schema: dict):
    """A state file of the folder, bounded and checked against its schema: InputError with
    the file (exit 2) when it is not what envgen wrote, EnvironmentMissing when it cannot
    be read; `default` when it does not exist."""
    from jsonschema import Draft202012Validator

    from ..core.files import read_regular
    if path.is_symlink():   # envgen writes a regular file there: a link is someone else's
        raise InputError("not envgen's fleet state: a symbolic link", file=str(path))
    try:
        doc = json.loads(read_regular(path, MAX_STATE, "fleet state file"))
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as e:
        raise InputError(f"not envgen's fleet state: not JSON ({e.msg})", file=str(path),
                         line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise InputError("not envgen's fleet state: not UTF-8 text", file=str(path),
                         line=e.object[:e.start].count(b"\n") + 1) from None
    except (ValueError, RecursionError):
        raise InputError("not envgen's fleet state: nested too deeply or not JSON",
                         file=str(path)) from None
    except OSError as e:
        raise EnvironmentMissing(f"cannot read it: {e.strerror or e}", file=str(path)) from None
    err = next(iter(Draft202012Validator(schema).iter_errors(doc)), None)
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "the document"
        raise InputError(f"not envgen's fleet state: at {where}: "
                         f"{' '.join(err.message.split())[:200]}", file=str(path))
    return doc
