"""Whether a certificate from elsewhere (another host's store, a job's log) may join this
store: it must be a certificate envgen wrote, its pass must be earned by its own checks, and
its image must be the one its stack and the lock say, where envgen can know them. Each
judge returns the one sentence why not, or None. Pure but for the callables passed in."""
from __future__ import annotations

import json
import re

from . import certs
from .lockfile import IMAGE_ID, stack_problems
from .model import Stack, stack_key

SCHEMA = 1
_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_PROFILE = re.compile(r"[a-z0-9-]{0,40}")


def _shown(value, limit: int = 40) -> str:
    return repr(value)[:limit]


def form_problem(cert) -> str | None:
    """Not a certificate this envgen reads: wrong type, schema or field."""
    if not isinstance(cert, dict):
        return f"not a certificate: a JSON {type(cert).__name__}, not an object"
    if "schema" not in cert:
        return "not an envgen certificate: it has no `schema`"
    if cert["schema"] != SCHEMA or isinstance(cert["schema"], bool):
        return (f"certificate schema {_shown(cert['schema'])} is not one this envgen reads "
                f"({SCHEMA})")
    if not isinstance(cert.get("image_id"), str) or not IMAGE_ID.fullmatch(cert["image_id"]):
        return f"image_id {_shown(cert.get('image_id'))} is not sha256:<64 hex digits>"
    if not isinstance(cert.get("passed"), bool):
        return "`passed` is not true or false"
    if not isinstance(cert.get("created"), str) or not _CREATED.fullmatch(cert["created"]):
        return f"created {_shown(cert.get('created'))} is not a UTC time like " \
               f"2026-12-01T12:00:00Z"
    if not isinstance(cert.get("profile", ""), str) or not _PROFILE.fullmatch(
            cert.get("profile", "")):
        return f"profile {_shown(cert.get('profile'))} is not a run profile"
    tags = cert.get("image_tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and len(t) < 300 for t in tags):
        return "image_tags is not a list of tags"
    problems = stack_problems(cert.get("stack"))
    if problems:
        return f"its stack is not one envgen wrote ({problems[0]})"
    host = cert.get("host", {})
    if not isinstance(host, dict) or not isinstance(host.get("gpus", []), list) \
            or not all(isinstance(g, dict) and isinstance(g.get("name", ""), str)
                       for g in host.get("gpus", [])) \
            or not isinstance(host.get("driver") or "", str):
        return "host is not {driver, gpus: [{name, ...}]}"
    report = cert.get("report")
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list) \
            or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                       and isinstance(c.get("passed"), bool) for c in report["checks"]):
        return "report.checks is not a list of {name, passed} checks"
    return None


def pass_problem(cert: dict) -> str | None:
    """A pass the certificate's own record contradicts (after form_problem found none)."""
    if not cert["passed"]:
        return None   # a failure on record is honest whatever its checks say
    report = cert["report"]
    failed = [c["name"] for c in report["checks"] if not c["passed"]]
    if failed:
        return (f"it claims a pass but its check {failed[0]!r} failed"
                + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    code = cert.get("exit_code")
    if code != 0 or isinstance(code, bool):
        return f"it claims a pass but the payload exited {_shown(code)}, not 0"
    if report.get("passed") is not True:
        return "it claims a pass but its payload's report did not pass"
    if not report["checks"]:
        return "it claims a pass with no checks run"
    return None


def _same_stack(a, b) -> bool:
    try:
        return Stack.from_json(a).to_json() == Stack.from_json(b).to_json()
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def image_problem(cert: dict, labels_of) -> str | None:
    """`labels_of(image_id)` gives the labels of that image on this daemon (None when it
    is not here): one that is here must carry the stack the certificate claims."""
    labels = labels_of(cert["image_id"])
    if labels is None:
        return None
    raw = labels.get("io.envgen.stack")
    try:
        label = json.loads(raw) if isinstance(raw, str) and len(raw) < 1 << 20 else None
    except (ValueError, RecursionError):
        label = None
    short = cert["image_id"][:19]
    if label is None or stack_problems(label):
        return (f"image {short} on this daemon has no stack label envgen wrote, but the "
                f"certificate claims {cert['stack']['stack']}")
    if not _same_stack(label, cert["stack"]):
        here, claimed = _named(label), _named(cert["stack"])
        return (f"image {short} on this daemon is {here}, not the {claimed} the certificate "
                f"claims" if here != claimed else
                f"image {short} on this daemon carries another {here} stack (other pins) "
                f"than the certificate claims") + " (forged or mismatched image ID)"
    return None


def _named(stack: dict) -> str:
    fw = stack.get("framework") if isinstance(stack.get("framework"), dict) else {}
    return f"{stack.get('stack')} {fw.get('version')}"


def lock_problem(cert: dict, lock: dict | None) -> str | None:
    """A lock entry of the certificate's stack pins the image of that very stack: a
    certificate of the same stack with another image ID is not of the locked image."""
    if not lock:
        return None
    st = cert["stack"]
    name = stack_key(st["stack"], (st.get("project") or {}).get("name")
                     if isinstance(st.get("project"), dict) else None)
    entry = lock.get("stacks", {}).get(name)
    if not isinstance(entry, dict) or not _same_stack(entry.get("stack"), st):
        return None
    pinned = entry["image"]["id"]
    if pinned != cert["image_id"]:
        return (f"the lock pins {name} as image {pinned[:19]}; this certificate of the same "
                f"stack is of {cert['image_id'][:19]}")
    return None


def refusal(cert, labels_of=lambda _id: None, lock: dict | None = None) -> str | None:
    """Why `cert` may not join the store, or None."""
    return (form_problem(cert) or pass_problem(cert) or image_problem(cert, labels_of)
            or lock_problem(cert, lock))


def summary(cert: dict) -> dict:
    """What an import reports of each certificate it took."""
    w = certs.where(cert)
    return {"image_id": cert["image_id"], "stack": cert["stack"]["stack"],
            "profile": cert.get("profile") or "", "gpu": w["gpu"], "gpu_count": w["count"],
            "driver": w["driver"], "passed": cert["passed"], "created": cert["created"]}
