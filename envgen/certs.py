"""Certificates on disk: one JSON per image ID and run profile (the latest run of each),
written atomically. The default profile (what `envgen certify IMAGE` does with no flags on
this host) is `<id>.json`; a run with other parameters (`--steps 3`, `--gpus none` on a GPU
host, `--multi-gpu`) is another certificate, `<id>.<profile>.json`, and replaces nothing."""
from __future__ import annotations

import json
import re
from pathlib import Path

from . import files, state
from .errors import InputError
from .files import read_regular, write_json
from .lockfile import IMAGE_ID

_PROFILE = re.compile(r"[a-z0-9-]{1,40}")
_KEY = re.compile(r"[0-9a-f]{4,64}")


def profile_of(require: str, host_has_gpu: bool, steps: int | None, multi_gpu: bool) -> str:
    """'' for the default run on this host, else a short name of what differs."""
    parts = []
    if require == "cpu" and host_has_gpu:
        parts.append("cpu")
    if steps:
        parts.append(f"steps{steps}")
    if multi_gpu:
        parts.append("multi-gpu")
    return "-".join(parts)


def _path(image_id: str, profile: str = "") -> Path:
    if not IMAGE_ID.fullmatch(image_id or "") or (profile and not _PROFILE.fullmatch(profile)):
        raise InputError(f"not an image ID and run profile: {image_id[:80]!r} {profile!r}")
    name = image_id.removeprefix("sha256:") + (f".{profile}" if profile else "")
    return state.certs_dir() / f"{name}.json"


def check_writable() -> Path:
    """The certificate folder, proven writable before any work starts, so a run is never
    lost to a store it cannot save in."""
    return files.check_writable(state.certs_dir(), "certificates")


def save(cert: dict) -> Path:
    return write_json(_path(cert["image_id"], cert.get("profile") or ""), cert)


def _well_formed(c: object) -> bool:
    """A stored certificate that envgen can show: other files in the folder are skipped."""
    return (isinstance(c, dict) and isinstance(c.get("image_id"), str)
            and IMAGE_ID.fullmatch(c["image_id"]) is not None and isinstance(c.get("passed"), bool)
            and isinstance(c.get("stack"), dict) and isinstance(c["stack"].get("stack"), str)
            and isinstance(c.get("created", ""), str)
            and isinstance(c.get("image_tags", []), list)
            and all(isinstance(t, str) for t in c.get("image_tags", []))
            and isinstance(c.get("host", {}), dict)
            and isinstance(c.get("report", {}), dict))


def _read(p: Path) -> dict | None:
    try:
        c = json.loads(read_regular(p, 16 * 1024 * 1024))
    except (OSError, ValueError, RecursionError, InputError):
        return None
    return c if _well_formed(c) else None


def load_all() -> list[dict]:
    d = state.certs_dir()
    out = [c for p in (sorted(d.glob("*.json")) if d.is_dir() else []) if (c := _read(p))]
    return sorted(out, key=lambda c: c.get("created", ""), reverse=True)


def find(image: str) -> dict:
    """A certificate by full or short (4+ hex digits) image ID, or by a tag it recorded;
    the default run's when the image has several."""
    key = image.removeprefix("sha256:")
    by_id = _KEY.fullmatch(key) is not None
    if not by_id and (not image or len(image) > 300 or not image.isprintable()):
        raise InputError(f"{image[:80]!r} is neither an image ID (4 or more hex digits) nor "
                         f"an image tag")
    matches = [c for c in load_all()
               if (by_id and c["image_id"].removeprefix("sha256:").startswith(key))
               or image in c.get("image_tags", [])]
    if not matches:
        raise InputError(f"no certificate for {image!r} (see `envgen certs list`)")
    if len({c["image_id"] for c in matches}) > 1:
        ids = ", ".join(sorted({c["image_id"][7:19] for c in matches}))
        raise InputError(f"{image!r} names more than one certified image ({ids}); give "
                         f"more of the image ID")
    return sorted(matches, key=lambda c: bool(c.get("profile")))[0]


def latest_for(image_id: str) -> dict | None:
    """The default run's certificate of an image, else its newest other one."""
    if not IMAGE_ID.fullmatch(image_id or ""):
        return None
    default = _read(_path(image_id))
    if default is not None:
        return default
    others = [c for c in load_all() if c["image_id"] == image_id]
    return others[0] if others else None
