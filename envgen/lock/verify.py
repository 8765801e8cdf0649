"""envgen.lock + a Docker daemon → drift. Per stack: the pinned image is here or is pulled
by its digest and has the pinned image ID; the lock's certificate is for that image and
passed; the closure the image was installed from carries the versions and sha256s the
lock pins; pip inside lists nothing more or less; with a rebuild, the layers of an image
built again from the lock are the pinned image's layers."""
from __future__ import annotations

from packaging.utils import canonicalize_name

from ..certs import store as certs
from ..certs.certificate import LEVELS, where_text
from ..certs.certificate import where as ran_on
from ..certs.store import same_bits
from ..core.errors import EnvgenError, EnvironmentMissing
from ..core.model import CLOSURE_PROJECT_KEYS, Stack, stack_key
from ..resolve.closure import parse_closure
from .write import CLOSURE_IN_IMAGE, installed_packages

# What verify does not compare, said rather than silently skipped.
NOT_CHECKED = (
    "base.id and base.reference: the base is checked through the image's own layers",
    "python.tag: the interpreter is checked through the image ID and its packages",
    "certificate.report details: its image ID (or content), stack name and pins, level "
    "(a CUDA stack needs a GPU run) and verdict are checked, and this host's store's "
    "failures of the image",
    "created, updated and matrix_sha256: they describe the lock, not the images",
)


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


def closure_drift(locked: list[dict], closure: dict | None, where: str) -> list[dict]:
    """Compare the lock's pins (versions and sha256s) with the closure the image was
    installed from (pip checked every file against it: --require-hashes)."""
    if closure is None:
        return [_item("closure-missing", f"{where} carries no closure "
                      f"({CLOSURE_IN_IMAGE}), so the sha256s the lock pins cannot be "
                      f"checked against what was installed")]
    try:
        cl = parse_closure(closure, f"{where}:{CLOSURE_IN_IMAGE}")
    except EnvgenError as e:
        return [_item("closure-invalid", e.message)]
    have = {canonicalize_name(p.name): p for p in cl.pins}
    out = []
    for r in locked:
        p = have.get(canonicalize_name(r["name"]))
        if p is None:
            continue   # package_drift reports it
        want = r["hashes"][0] if r["hashes"] else None
        got = f"sha256:{p.sha256}" if p.sha256 else None
        if p.version != r["version"]:
            out.append(_item("closure-version", f"{r['name']}: the lock pins {r['version']}, "
                             f"the image was installed from {p.version}",
                             package=r["name"], old=r["version"], new=p.version))
        elif want != got:
            out.append(_item("hash", f"{r['name']} {r['version']}: the lock pins "
                             f"{(want or 'no hash')[:23]}…, the image was installed from "
                             f"{(got or 'no hash')[:23]}…", package=r["name"], old=want,
                             new=got))
    return out


def _cert_drift(entry: dict, cert_for, content: str | None, runs_for=certs.current_for,
                level: str | None = None) -> list[dict]:
    """The lock's certificate, else this host's, of the pinned image or of one with
    `content`: the content the image found here has, never the lock's word for it (a lock
    claiming another certified image's content would borrow its pass). It must be of the
    entry's stack, at the level the stack needs, and passed; and a failure this host's
    store holds of the image is drift whatever the lock's certificate says (`runs_for`)."""
    pinned = entry["image"]["id"]
    cert = entry.get("certificate")
    if cert is None:
        cert = cert_for(pinned, content) if content else cert_for(pinned)
        where = "this host's certificates"
    else:
        where = "the lock"
    failures = _failed_here(pinned, cert, runs_for(pinned, content) if content
                            else runs_for(pinned))
    if cert is None:
        return [_item("certificate", f"no certificate for the pinned image {pinned[:19]} "
                      f"(run `envgen certify {pinned}`)"), *failures]
    if where == "the lock" and not same_bits(cert, pinned, content):
        return [_item("certificate", f"the certificate in {where} is for "
                      f"{str(cert.get('image_id'))[:19]}, not the pinned image {pinned[:19]}"),
                *failures]
    said = _stack_problem(entry["stack"], cert) or _level_problem(entry["stack"], cert, level)
    if said:
        return [_item("certificate", f"the certificate of {pinned[:19]} in {where} {said}"),
                *failures]
    if not cert.get("passed"):
        return [_item("certificate", f"the certificate of {pinned[:19]} in {where} failed "
                      f"(level {cert.get('level')}, {cert.get('created')})"), *failures]
    return failures


def _stack_problem(stack: dict, cert: dict) -> str | None:
    """The certificate is of the entry's stack: its name, then its pins (cert_trust.identity,
    whatever its reasons say)."""
    from ..certs.trust import identity
    from ..certs.view import stack_name
    want = stack_key(stack["stack"], (stack.get("project") or {}).get("name"))
    try:
        got = stack_name(cert)
    except (KeyError, TypeError, AttributeError):
        return "names no stack"
    if got != want:
        return f"is of stack {got[:60]}, not of {want}"
    if identity(cert["stack"]) != identity(stack):
        return f"is of other pins of {want} than the lock's"
    return None


def _level_problem(stack: dict, cert: dict, level: str | None = None) -> str | None:
    """A stack with CUDA is certified by a run on a GPU (level cuda or multi-gpu); a run at
    level cpu proves its training on the CPU only. `level` (verify --level): the lowest
    level asked for instead (cpu: the lock a CI job's GPU step starts from)."""
    if level is not None:
        have = cert.get("level")
        if have not in LEVELS or LEVELS.index(have) < LEVELS.index(level):
            return f"is at level {have}, below the --level {level} asked for"
        return None
    if stack.get("cuda") and cert.get("level") not in ("cuda", "multi-gpu"):
        return (f"is at level {cert.get('level')}: {stack['stack']} pins CUDA "
                f"{stack['cuda']}, which only a run on a GPU certifies (envgen certify "
                f"IMAGE --gpus all, then envgen lock IMAGE)")
    return None


def _failed_here(pinned: str, cert: dict | None, current: list[dict]) -> list[dict]:
    """Each failure this host's store holds as the current run of a key of the image (on a
    GPU and driver, or on no GPU), unless `cert` is a later pass of that very key (a tie
    goes to the failure) or is that failure: a pass on another GPU or driver does not
    undo it."""
    out = []
    for f in current:
        if f.get("passed") or _answered(cert, f):
            continue
        out.append(_item("certificate", f"this host's certificates hold a failure of "
                         f"{pinned[:19]} on {where_text(ran_on(f))} ({f.get('created')}"
                         f"{', profile ' + f['profile'] if f.get('profile') else ''}): the "
                         f"newest run of the image there failed", created=f.get("created")))
    return out


def _answered(cert: dict | None, failure: dict) -> bool:
    """Whether `cert` (the lock's or the one chosen here) is a later pass of the failure's
    key, or the failure itself (already said)."""
    if cert is None or certs.key_of(cert) != certs.key_of(failure):
        return False
    mine, theirs = str(cert.get("created")), str(failure.get("created"))
    return mine > theirs if cert.get("passed") else mine == theirs


def _find_or_pull(c, entry: dict, pull) -> tuple[str | None, list[dict], bool]:
    """(the image to check, drift, whether it was pulled): what the lock's tag names now,
    else the pinned image ID, else the pinned digest pulled from its registry."""
    from ..runtime.docker import content_of, image_or_none
    img_lock = entry["image"]
    tag, pinned, ref = img_lock.get("tag"), img_lock["id"], img_lock.get("pinned")
    by_tag = image_or_none(c, tag) if tag else None
    if by_tag is not None:
        # a rebuild of the lock has another image ID (the build's clock) but the same bits
        same = by_tag.id == pinned or (img_lock.get("content") is not None
                                       and content_of(by_tag.attrs) == img_lock["content"])
        drift = [] if same else [
            _item("image-id", f"{tag} is now {by_tag.id[:19]}, the lock pins {pinned[:19]}",
                  old=pinned, new=by_tag.id)]
        return by_tag.id, drift, False
    if image_or_none(c, pinned) is not None:
        # A lock that pins a registry digest does not need the machine-local tag.
        return pinned, ([_item("tag-missing", f"tag {tag} is gone; the pinned image "
                               f"{pinned[:19]} is still here")] if tag and not ref else []), \
            False
    if ref and pull is not None:
        try:
            img = pull(c, ref)
        except EnvironmentMissing:
            raise
        except EnvgenError as e:
            return None, [_item("pull-failed", e.message)], False
        if img.id != pinned:
            return img.id, [_item("image-id", f"pulling {ref} gave image {img.id[:19]}, the "
                                  f"lock pins {pinned[:19]}", old=pinned, new=img.id)], True
        if tag:   # name it as the lock does, so `docker run TAG` works on this machine too
            from ..core.image import split_tag
            img.tag(*split_tag(tag))
        return img.id, [], True
    return None, [_item("missing-image", f"image {tag or ''} ({pinned[:19]}) is not on this "
                        f"Docker daemon" + ("" if ref else " and the lock pins no registry "
                                            "digest to pull it by"), old=pinned, new=None)], \
        False


def _content(c, image: str | None) -> str | None:
    """The content key (layers and clock-free config) of the image found or pulled."""
    if image is None:
        return None
    from ..runtime.docker import content_of, image_or_none
    found = image_or_none(c, image)
    return content_of(found.attrs) if found is not None else None


def verify_stack(c, name: str, entry: dict, probe=installed_packages,
                 cert_for=certs.latest_for, rebuild=None, pull=None,
                 runs_for=certs.current_for, level: str | None = None) -> dict:
    """{"ok", "drift": [...], "pulled"} for one locked stack. `pull(c, ref) -> image`
    fetches a pinned digest missing here; `rebuild(stack, tag, closure) -> (image ID,
    layers)` builds the locked stack again from the lock's closure; `runs_for(image ID[,
    content])`: this host's current certificates of the image (certs.current_for)."""
    current, drift, pulled = _find_or_pull(c, entry, pull)
    real = _content(c, current)
    claimed = entry["image"].get("content")
    if claimed and real and claimed != real:
        drift.append(_item("image-content", f"the lock says the image's content is "
                           f"{claimed[:19]}, the image {current[:19]} has {real[:19]}",
                           old=claimed, new=real))
    # a pass of another image with the same bits counts only when the image here has them
    drift += _cert_drift(entry, cert_for, real if claimed and claimed == real else None,
                         runs_for, level)
    if current is not None:
        try:
            p = probe(c, current)
            drift += package_drift(entry["requirements"], p.packages)
            if entry.get("closure") is not None or p.closure is not None:
                drift += closure_drift(entry["requirements"], p.closure, current[:19])
        except EnvgenError as e:
            drift.append(_item("probe-failed", e.message))
    result: dict = {}
    if rebuild is not None:
        tmp_tag = f"envgen-verify/{name.lower()}:rebuild"   # a repository is lowercase
        before = _image_ids(c)
        rebuilt = None
        try:
            rebuilt, layers = rebuild(Stack.from_json(entry["stack"]), tmp_tag,
                                      lock_closure(entry))
            result["rebuilt"] = {"image_id": rebuilt, "layers": list(layers)}
            drift += package_drift(entry["requirements"], probe(c, rebuilt).packages,
                                   prefix="rebuild-")
            want = entry["image"].get("layers") or []
            if want and list(layers) != list(want):
                differ = [i for i, (a, b) in enumerate(zip(want, layers)) if a != b]
                drift.append(_item(
                    "rebuild-layers", f"the rebuilt image's layers differ from the pinned "
                    f"image's ({len(layers)} vs {len(want)} layers; first difference at layer "
                    f"{differ[0] if differ else min(len(want), len(layers))})",
                    old=want, new=list(layers)))
        except EnvgenError as e:
            drift.append(_item("rebuild-failed", f"rebuilding {name} failed: {e.message}"))
        finally:
            _drop_tag(c, tmp_tag, rebuilt, before)
    return {"ok": not drift, "drift": drift, "pulled": pulled, **result}


def _image_ids(c) -> set[str] | None:
    """The IDs of every image on the daemon; None when it does not say."""
    try:
        return {i.id for i in c.images.list(all=True)}
    except Exception:   # noqa: BLE001 - a daemon fault: then no image is removed below
        return None


def _drop_tag(c, tag: str, rebuilt: str | None, before: set[str] | None) -> None:
    """Remove the rebuild's tag, and the rebuilt image with it only when the rebuild made
    it: a warm cache gives back an image that was there before (the lock's own pinned
    image, untagged, among them), and removing the only tag of an image deletes it."""
    from ..runtime.docker import image_or_none, remove_image
    if rebuilt is None or (before is not None and rebuilt not in before):
        remove_image(c, tag)
        return
    img = image_or_none(c, rebuilt)
    if img is not None and len(img.tags) > 1:
        try:
            c.images.remove(tag)   # another name holds it: untagged, not deleted
        except Exception:   # noqa: BLE001 - a tag left behind is harmless; the image stays
            pass
    # else the tag is its only name: kept, so that an image this verify did not make stays


def lock_closure(entry: dict):
    """The closure a lock entry pins, for a rebuild; None when the lock has none (then the
    stored closure of the stack's inputs is used)."""
    info = entry.get("closure")
    if not info:
        return None
    from ..resolve import closure as cl
    stack = Stack.from_json(entry["stack"])
    return cl.parse_closure({"closure_version": cl.CLOSURE_VERSION, "stack": stack.stack,
                             "key": info.get("key"), "inputs": cl.inputs_for(stack),
                             "resolver": info.get("resolver", ""),
                             "created": info.get("created"),
                             "packages": entry["requirements"],
                             **{k: info[k] for k in CLOSURE_PROJECT_KEYS if k in info}},
                            "the lock")


def verify(c, lock: dict, **kw) -> dict:
    stacks = {name: verify_stack(c, name, entry, **kw)
              for name, entry in sorted(lock["stacks"].items())}
    return {"ok": all(s["ok"] for s in stacks.values()), "stacks": stacks,
            "not_checked": list(NOT_CHECKED)}
