"""Whether a certificate from elsewhere agrees with what envgen can know beside it: the
image on this daemon must carry the stack the certificate claims, and a lock that pins the
stack must pin this image. `refusal` adds these to the certificate's own judgement
(certificate.intrinsic_problem) for the doors that bring certificates from elsewhere.
Each judge returns the one sentence why not, or None. Pure but for the callables passed."""
from __future__ import annotations

import json

from ..core.model import Stack, stack_key
from ..matrix.wire import stack_problems
from .certificate import intrinsic_problem

# What names an environment: the stack's name (a project's included) and its pins. The
# rest of a stack (`reasons`, `licenses`, the matrix's hash, the driver floor derived from
# the pins) describes it: editing a sentence of it must not make another stack of it.
IDENTITY = ("stack", "framework", "packages", "python", "cuda", "cuda_release", "cudnn",
            "nccl", "base", "index_url", "from_source", "extras", "env", "project",
            "platform")


def identity(stack) -> dict | None:
    """The pins of a stack (as Stack.to_json writes them, so a field left at its default
    compares equal), or None when it is no stack."""
    try:
        full = Stack.from_json(stack).to_json()
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return {k: full.get(k) for k in IDENTITY}


def _same_stack(a, b) -> bool:
    return identity(a) is not None and identity(a) == identity(b)


def _same_words(a, b) -> bool:
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
    if not _same_words(label, cert["stack"]):   # the image's own label, to the letter
        here, claimed = _named(label), _named(cert["stack"])
        return (f"image {short} on this daemon is {here}, not the {claimed} the certificate "
                f"claims" if here != claimed else
                f"image {short} on this daemon carries another {here} stack "
                f"({'other pins' if not _same_stack(label, cert['stack']) else 'other words'}) "
                f"than the certificate claims") + " (forged or mismatched image ID)"
    return None


def _named(stack: dict) -> str:
    fw = stack.get("framework") if isinstance(stack.get("framework"), dict) else {}
    return f"{stack.get('stack')} {fw.get('version')}"


def lock_problem(cert: dict, lock: dict | None) -> str | None:
    """A lock entry of the certificate's stack pins the image of that very stack: a
    certificate of the same stack (its name and pins: `identity`, whatever its reasons
    say) with another image ID is not of the locked image."""
    if not lock:
        return None
    st = cert["stack"]
    name = stack_key(st["stack"], (st.get("project") or {}).get("name")
                     if isinstance(st.get("project"), dict) else None)
    entry = lock.get("stacks", {}).get(name)
    if not isinstance(entry, dict) or not _same_stack(entry.get("stack"), st):
        return None
    pinned = entry["image"]["id"]
    content = entry["image"].get("content")
    if pinned != cert["image_id"] and not (content and cert.get("image_content") == content):
        return (f"the lock pins {name} as image {pinned[:19]}; this certificate of the same "
                f"stack is of {cert['image_id'][:19]}")
    return None


def refusal(cert, labels_of=lambda _id: None, lock: dict | None = None,
            now: float | None = None) -> str | None:
    """Why `cert` may not join the store, or None."""
    return (intrinsic_problem(cert, now) or image_problem(cert, labels_of)
            or lock_problem(cert, lock))
