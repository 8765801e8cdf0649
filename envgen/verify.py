"""envgen.lock + this Docker daemon → drift: images missing or changed, certificates missing
or failed, packages added, removed or changed inside the images (or in a rebuild)."""
from __future__ import annotations

from packaging.utils import canonicalize_name

from . import certs
from .errors import EnvgenError
from .lock import installed_packages
from .model import Stack


def _item(kind: str, message: str, **detail) -> dict:
    return {"kind": kind, "message": message, **detail}


def package_drift(locked: list[dict], installed: dict, prefix: str = "") -> list[dict]:
    """Compare the lock's requirements with name → version installed in an image."""
    want = {canonicalize_name(r["name"]): (r["name"], r["version"]) for r in locked}
    have = {canonicalize_name(n): (n, v) for n, v in installed.items()}
    out = []
    for key in sorted(want.keys() | have.keys()):
        if key not in have:
            name, old = want[key]
            out.append(_item(prefix + "package-removed", f"{name} {old} is locked but not "
                             f"installed", package=name, old=old, new=None))
        elif key not in want:
            name, new = have[key]
            out.append(_item(prefix + "package-added", f"{name} {new} is installed but not "
                             f"locked", package=name, old=None, new=new))
        elif want[key][1] != have[key][1]:
            name, old = want[key]
            new = have[key][1]
            out.append(_item(prefix + "package-changed", f"{name} {old} → {new}",
                             package=name, old=old, new=new))
    return out


def _cert_drift(image_id: str, cert_for) -> list[dict]:
    cert = cert_for(image_id)
    if cert is None:
        return [_item("certificate", f"no certificate for the pinned image {image_id[:19]} "
                      f"(run `envgen certify {image_id}`)")]
    if not cert.get("passed"):
        return [_item("certificate", f"the latest certificate of {image_id[:19]} failed "
                      f"(level {cert.get('level')}, {cert.get('created')})")]
    return []


def verify_stack(c, name: str, entry: dict, probe=installed_packages,
                 cert_for=certs.latest_for, rebuild=None) -> dict:
    """{"ok", "drift": [...]} for one locked stack. `rebuild(stack, tag) -> image ID`, when
    given, rebuilds the locked Stack and its packages are compared too."""
    from .engine import image_or_none, remove_image
    img_lock = entry["image"]
    tag, pinned = img_lock.get("tag"), img_lock["id"]
    drift: list[dict] = []
    by_tag = image_or_none(c, tag) if tag else None
    by_id = image_or_none(c, pinned)
    current = None
    if by_tag is not None:
        current = by_tag.id
        if by_tag.id != pinned:
            drift.append(_item("image-id", f"{tag} is now {by_tag.id[:19]}, the lock pins "
                               f"{pinned[:19]}", old=pinned, new=by_tag.id))
    elif by_id is not None:
        current = by_id.id
        if tag:
            drift.append(_item("tag-missing", f"tag {tag} is gone; the pinned image "
                               f"{pinned[:19]} is still here"))
    else:
        drift.append(_item("missing-image", f"image {tag or ''} ({pinned[:19]}) is not on "
                           f"this Docker daemon", old=pinned, new=None))
    drift += _cert_drift(pinned, cert_for)
    if current is not None:
        try:
            drift += package_drift(entry["requirements"], probe(c, current).packages)
        except EnvgenError as e:
            drift.append(_item("probe-failed", e.message))
    if rebuild is not None:
        tmp_tag = f"envgen-verify/{name}:rebuild"
        try:
            rebuilt = rebuild(Stack.from_json(entry["stack"]), tmp_tag)
            drift += package_drift(entry["requirements"], probe(c, rebuilt).packages,
                                   prefix="rebuild-")
        except EnvgenError as e:
            drift.append(_item("rebuild-failed", f"rebuilding {name} failed: {e.message}"))
        finally:
            remove_image(c, tmp_tag)
    return {"ok": not drift, "drift": drift}


def verify(c, lock: dict, **kw) -> dict:
    stacks = {name: verify_stack(c, name, entry, **kw)
              for name, entry in sorted(lock["stacks"].items())}
    return {"ok": all(s["ok"] for s in stacks.values()), "stacks": stacks}
