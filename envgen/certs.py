"""Certificates on disk: one JSON per image ID (the latest run), written atomically."""
from __future__ import annotations

import json
from pathlib import Path

from . import state
from .errors import InputError
from .files import write_json


def _path(image_id: str) -> Path:
    return state.certs_dir() / (image_id.replace("sha256:", "") + ".json")


def save(cert: dict) -> Path:
    return write_json(_path(cert["image_id"]), cert)


def load_all() -> list[dict]:
    out = []
    d = state.certs_dir()
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda c: c.get("created", ""), reverse=True)


def find(image: str) -> dict:
    """A certificate by full or short image ID, or by a tag it recorded."""
    key = image.replace("sha256:", "")
    matches = [c for c in load_all()
               if c["image_id"].replace("sha256:", "").startswith(key)
               or image in c.get("image_tags", [])]
    if not matches:
        raise InputError(f"no certificate for {image!r} (see `envgen certs list`)")
    return matches[0]


def latest_for(image_id: str) -> dict | None:
    p = _path(image_id)
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None
