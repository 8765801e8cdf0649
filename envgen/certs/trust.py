"""Whether a certificate may join a store, whatever the door (`certify`, `certs import`,
`certs merge`, `fleet --collect`): it must be a certificate envgen wrote, its pass must be
earned by its own checks and exit code, it may not claim a time after now, and its image
must be the one its stack and the lock say, where envgen can know them. Each judge returns
the one sentence why not, or None. Pure but for the callables and the clock passed in."""
from __future__ import annotations

import calendar
import json
import re
import time

from ..core.model import Stack, stack_key
from ..matrix.wire import IMAGE_ID, stack_problems

SCHEMA = 1
LEVELS = ("cuda", "cpu", "multi-gpu")
SKEW_S = 300   # how far after this host's clock a `created` may be (clocks of a cluster drift)
_CREATED = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?Z")
_PROFILE = re.compile(r"[a-z0-9-]{0,40}")
# fields a person reads in a table: printable ASCII, one line, no room for a sequence
_GPU_NAME = re.compile(r"[\x20-\x7e]{1,128}")
_DRIVER = re.compile(r"\d{1,4}(\.\d{1,4}){0,3}")
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,299}")
_CHECK_NAME = re.compile(r"[\x20-\x7e]{1,200}")


def _shown(value, limit: int = 40) -> str:
    return repr(value)[:limit]


def created_problem(created, now: float | None = None) -> str | None:
    """`created` is a real UTC time (2026-12-01T12:00:00Z) no more than SKEW_S after `now`
    (this host's clock): a certificate from the future would outrank every real run of its
    key for as long as its date lies ahead."""
    m = _CREATED.fullmatch(created) if isinstance(created, str) else None
    if m is None:
        return f"created {_shown(created)} is not a UTC time like 2026-12-01T12:00:00Z"
    y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
    try:
        when = calendar.timegm(time.strptime(created[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        when = None
    if when is None or not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60
                            and sec < 60) or y < 2000:
        return f"created {_shown(created)} is not a real date and time"
    now = time.time() if now is None else now
    if when > now + SKEW_S:
        return (f"created {created} lies {(when - now) / 3600:.1f} h after this host's clock "
                f"(a certificate from the future would outrank every real run of its key)")
    return None


def _gpus_problem(host) -> str | None:
    if not isinstance(host, dict) or not isinstance(host.get("gpus", []), list):
        return "host is not {driver, gpus: [{name, ...}]}"
    for g in host.get("gpus", []):
        if not isinstance(g, dict) or not isinstance(g.get("name", ""), str):
            return "host is not {driver, gpus: [{name, ...}]}"
        if "name" in g and not _GPU_NAME.fullmatch(g["name"]):
            return (f"host.gpus names a GPU {_shown(g['name'])}: not one line of printable "
                    f"ASCII as nvidia-smi names GPUs")
    driver = host.get("driver")
    if driver not in (None, "") and not (isinstance(driver, str) and _DRIVER.fullmatch(driver)):
        return f"host.driver {_shown(driver)} is not a driver version like 580.95.05"
    return None


def form_problem(cert, now: float | None = None) -> str | None:
    """Not a certificate this envgen reads: wrong type, schema or field (`now`: this host's
    clock, for `created`)."""
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
    why = created_problem(cert.get("created"), now)
    if why:
        return why
    if cert.get("level") is not None and cert.get("level") not in LEVELS:
        return f"level {_shown(cert.get('level'))} is not one of {', '.join(LEVELS)}"
    if not isinstance(cert.get("profile", ""), str) or not _PROFILE.fullmatch(
            cert.get("profile", "")):
        return f"profile {_shown(cert.get('profile'))} is not a run profile"
    tags = cert.get("image_tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return "image_tags is not a list of tags"
    bad = next((t for t in tags if not _TAG.fullmatch(t)), None)
    if bad is not None:
        return f"image_tags holds {_shown(bad)}, which is not an image reference"
    problems = stack_problems(cert.get("stack"))
    if problems:
        return f"its stack is not one envgen wrote ({problems[0]})"
    why = _gpus_problem(cert.get("host", {}))
    if why:
        return why
    report = cert.get("report")
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list) \
            or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                       and isinstance(c.get("passed"), bool) for c in report["checks"]):
        return "report.checks is not a list of {name, passed} checks"
    bad = next((c["name"] for c in report["checks"] if not _CHECK_NAME.fullmatch(c["name"])),
               None)
    if bad is not None:
        return f"report.checks names a check {_shown(bad)}: not one line of printable ASCII"
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


def intrinsic_problem(cert, now: float | None = None) -> str | None:
    """What the certificate's own content gives away, with nothing else to compare: its
    form, and a pass its record contradicts. Every door into the store asks this."""
    return form_problem(cert, now) or pass_problem(cert)


def refusal(cert, labels_of=lambda _id: None, lock: dict | None = None,
            now: float | None = None) -> str | None:
    """Why `cert` may not join the store, or None."""
    return (intrinsic_problem(cert, now) or image_problem(cert, labels_of)
            or lock_problem(cert, lock))
