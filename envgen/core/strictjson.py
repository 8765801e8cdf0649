"""JSON as the standard has it, for files that come from elsewhere (a certificate, a lock):
Python's json also reads NaN and Infinity, which no other reader does (envgen would then
print them back under --json, where they are invalid), and keeps the last of a key given
twice, where a reviewer reading the first would approve what is not used."""
from __future__ import annotations

import json


class NotJSON(ValueError):
    """What standard JSON does not allow, with the reason."""


def _constant(name: str):
    raise NotJSON(f"{name} is not a JSON number")


def once(pairs: list) -> dict:
    """An object whose keys are each given once."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise NotJSON(f"the key {json.dumps(key)[:60]} is given twice in one object")
    return out


def loads(text, **kw):
    """json.loads refusing NaN, Infinity and a key given twice (NotJSON, a ValueError)."""
    return json.loads(text, parse_constant=_constant, object_pairs_hook=once, **kw)
