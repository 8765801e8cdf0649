"""Certified images → envgen.lock: each stack's image ID, base, certificate, and the packages
installed inside the image, pinned by the sha256 of the exact wheel PyPI serves for it."""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from ..certs import store as certs
from ..core.errors import CheckFailed, InputError
from ..core.files import locked, write_atomic
from ..core.image import PAYLOAD_DIR
from ..core.model import CLOSURE_PROJECT_KEYS, Stack, stack_key
from ..resolve.closure import SIMPLE_URL, fetch_json, parse_closure, platform_tags
from ..resolve.closure import pick_file as _pick
from ..runtime.docker import image_or_none, run_to_end
from .read import LOCK_VERSION, MAX_STACKS, parse_lock, read_lock  # noqa: F401 (the lock's API)

CLOSURE_IN_IMAGE = f"{PAYLOAD_DIR}/closure.json"
# Seeded into the venv by `python -m venv` from the base's bundled wheels (Debian rebuilds
# them), so PyPI's hash of the same version is not the hash of what is installed.
BOOTSTRAP = {"pip", "setuptools", "wheel"}

# Runs inside the image (network none): the standard library and pip only.
PROBE = r"""
import json, subprocess, sys
from importlib import metadata
out = {"python": "%d.%d" % sys.version_info[:2], "tags": [], "packages": [], "direct": {}}
try:
    from pip._vendor.packaging import tags
    out["tags"] = [str(t) for t in tags.sys_tags()]
except Exception:
    pass
r = subprocess.run([sys.executable, "-m", "pip", "list", "--format=json"],
                   capture_output=True, text=True)
if r.returncode:
    out["error"] = (r.stderr or r.stdout)[-400:]
else:
    out["packages"] = json.loads(r.stdout)
for d in metadata.distributions():
    text = d.read_text("direct_url.json")
    if text:
        out["direct"][d.metadata["Name"]] = json.loads(text).get("url")
try:
    with open(CLOSURE_PATH) as f:
        out["closure"] = json.load(f)
except (OSError, ValueError):
    out["closure"] = None
print(json.dumps(out))
""".replace("CLOSURE_PATH", repr(CLOSURE_IN_IMAGE))


@dataclass(frozen=True)
class Probe:
    """What an image has installed, as pip inside it reports."""

    python: str
    packages: dict                 # name → version, names as pip lists them
    tags: tuple[str, ...] = ()     # the interpreter's wheel tags, most preferred first
    direct: dict = field(default_factory=dict)   # name → URL for installs not from an index
    closure: dict | None = None    # the closure the image was built from, as it holds it


def installed_packages(c, image: str, timeout: int = 180) -> Probe:
    """Run pip inside `image` with no network; the container is removed on every path."""
    try:
        code, out, err = run_to_end(c, image, ["python", "-c", PROBE], timeout,
                                    network_mode="none", labels={"io.envgen.probe": "1"})
    except TimeoutError:
        raise CheckFailed(f"listing the packages in {image} did not finish within "
                          f"{timeout} s") from None
    try:
        data = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CheckFailed(f"cannot list the packages in {image}: python exited {code}: "
                          f"{' | '.join(err.strip().splitlines()[-2:])[:300]}") from None
    if data.get("error"):
        raise CheckFailed(f"`pip list` failed in {image}: {data['error'].strip()[:300]}")
    return Probe(python=data["python"],
                 packages={p["name"]: p["version"] for p in data["packages"]},
                 tags=tuple(data.get("tags") or ()), direct=dict(data.get("direct") or {}),
                 closure=data.get("closure") if isinstance(data.get("closure"), dict) else None)


def pin(name: str, version: str, probe: Probe, stack: Stack, fetch=fetch_json,
        simple_url: str = SIMPLE_URL) -> dict:
    """One requirement of the lock: name, version, and the sha256 of its file on PyPI, or
    `hashes: []` with a `hash_note` saying why there is none."""
    entry = {"name": name, "version": version, "hashes": []}
    canon = canonicalize_name(name)
    provided = {canonicalize_name(n) for n in dict(stack.base.provides)}
    pinned = {canonicalize_name(n) for n in dict(stack.packages)}
    note = None
    if canon in provided:
        note = f"preinstalled in the base image {stack.base.reference}, not installed by pip"
    elif "+" in version:
        note = (f"local version {version} is not on PyPI; it came from "
                f"{stack.index_url or 'a per-variant wheel index'}")
    elif name in probe.direct:
        note = f"installed from {probe.direct[name]}, not from an index"
    elif canon in BOOTSTRAP and canon not in pinned:
        note = "seeded by `python -m venv` from the base's bundled wheel, not from PyPI"
    if note:
        return entry | {"hash_note": note}
    try:
        data = fetch(f"{simple_url}/{canon}/")
    except LookupError:
        return entry | {"hash_note": f"{name} is not on {simple_url}"}
    except OSError as e:
        return entry | {"hash_note": f"{simple_url} could not be read ({e})"}
    chosen, is_sdist = _pick(data.get("files") or [], name, version,
                             probe.tags or platform_tags(probe.python))
    if chosen is None:
        return entry | {"hash_note": f"{simple_url} has no file of {name} {version} for "
                                     f"Python {probe.python} on this platform"}
    sha = (chosen.get("hashes") or {}).get("sha256")
    entry["file"] = chosen["filename"]
    if not sha:
        return entry | {"hash_note": f"the index serves no sha256 for {chosen['filename']}"}
    entry["hashes"] = [f"sha256:{sha}"]
    if is_sdist:
        entry["hash_note"] = "no wheel for this platform: pip built it from this sdist"
    return entry


def requirements(probe: Probe, stack: Stack, fetch=fetch_json, workers: int = 8) -> list:
    simple = os.environ.get("ENVGEN_PYPI_SIMPLE", SIMPLE_URL).rstrip("/")
    items = sorted(probe.packages.items(), key=lambda kv: canonicalize_name(kv[0]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda kv: pin(kv[0], kv[1], probe, stack, fetch, simple),
                             items))


def cert_summary(cert: dict | None) -> dict | None:
    """The certificate as the lock carries it: whole (host, report, checks), plus the
    summary fields a reviewer reads first."""
    if not cert:
        return None
    host = cert.get("host") or {}
    summary = {"image_id": cert.get("image_id"), "level": cert.get("level"),
               "passed": bool(cert.get("passed")), "created": cert.get("created"),
               "gpus": [g.get("name") for g in host.get("gpus") or []],
               "driver": host.get("driver")}
    return {**{k: v for k, v in cert.items() if not k.startswith("_")}, **summary}


def certified_images(load_all=certs.load_all, exists=lambda _id: True):
    """The newest certificate's image for each stack: ([image IDs], [(stack, why) skipped])."""
    chosen, skipped, seen = [], [], set()
    for cert in load_all():
        data = cert.get("stack") or {}
        name = data.get("stack")
        if name and isinstance(data.get("project"), dict):   # a project's image: its own key
            name = stack_key(name, data["project"].get("name"))
        if not name or name in seen:
            continue
        seen.add(name)
        if exists(cert["image_id"]):
            chosen.append(cert["image_id"])
        else:
            skipped.append((name, (f"its certified image {cert['image_id'][:19]} is no longer "
                                  f"on this Docker daemon")))
    return chosen, skipped


def lock_entry(c, ref: str, probe=installed_packages, fetch=fetch_json,
               cert_for=certs.latest_for) -> tuple[str, dict]:
    """(stack name, lock entry) for one image, by tag or ID."""
    from ..core.image import default_tag
    from ..runtime.docker import inspect_target
    t = inspect_target(c, ref)
    st = t.stack
    tag = ref if ref in t.tags else (default_tag(st) if default_tag(st) in t.tags
                                      else (t.tags[0] if t.tags else None))
    base_name = t.labels.get("org.opencontainers.image.base.name")
    base_img = image_or_none(c, base_name) if base_name else None
    p = probe(c, t.image_id)
    img = c.images.get(t.image_id)
    layers = list((img.attrs.get("RootFS") or {}).get("Layers") or [])
    closure_info, unlocked = None, []
    if p.closure is not None:
        # The image holds the closure it was installed from (--require-hashes --no-deps):
        # that is what the lock pins, after the same validation as any lock value.
        cl = parse_closure(p.closure, f"{ref}:{CLOSURE_IN_IMAGE}")
        reqs = [pin.to_json() for pin in cl.pins]
        closure_info = {"key": cl.key, "resolver": cl.resolver, "created": cl.created}
        extra = cl.to_json()   # a project's kernel stage, pure sdists and sdists' build tools
        closure_info.update((k, extra[k]) for k in CLOSURE_PROJECT_KEYS if k in extra)
        have = {canonicalize_name(x.name) for x in cl.pins}
        unlocked = sorted(n for n in p.packages if canonicalize_name(n) not in have)
    else:
        reqs = requirements(p, st, fetch)
    return st.key, {
        "stack": st.to_json(),
        "image": {"tag": tag, "id": t.image_id, "repo_digests": list(t.repo_digests),
                  "pinned": None, "layers": layers, "content": t.content},
        "base": {"reference": st.base.reference, "name": base_name,
                 "id": base_img.id if base_img is not None else None},
        "python": {"version": p.python, "tag": p.tags[0] if p.tags else None},
        "closure": closure_info,
        "requirements": reqs,
        "unlocked": unlocked,
        "certificate": cert_summary(cert_for(t.image_id, t.content)),
    }


# ---- the lock file ------------------------------------------------------------------------

def turn_for(path: Path) -> Path:
    """Where writers of the lock at `path` take turns: a file under ENVGEN_HOME/locks named
    by the sha256 of the lock's real path, so nothing is left beside the user's committed
    envgen.lock (an fcntl lock on the lock file itself would not hold: write_atomic renames
    a new file over it, and the next writer locks the new inode)."""
    import hashlib

    from ..core.home import home
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    return home() / "locks" / key


def write_lock(path: str | Path, entries: dict, matrix_sha256: str) -> dict:
    """Merge `entries` into the lock at `path`, one writer at a time; returns the result.
    A malformed existing lock is an InputError, never overwritten."""
    path = Path(path)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        with locked(turn_for(path)):
            old = read_lock(path) if path.exists() else None
            stacks = dict(sorted({**(old["stacks"] if old else {}), **entries}.items()))
            if len(stacks) > MAX_STACKS:   # read_lock would refuse what this wrote
                raise InputError(f"the lock would hold {len(stacks)} stacks, more than the "
                                 f"{MAX_STACKS} a lock may hold; write several locks",
                                 file=str(path))
            data = {"lock_version": LOCK_VERSION,
                    "created": old["created"] if old else now, "updated": now,
                    "matrix_sha256": matrix_sha256, "stacks": stacks}
            write_atomic(path, json.dumps(data, indent=2) + "\n")
    except OSError as e:
        raise InputError(f"cannot write the lock file: {e.strerror or e}",
                         file=str(path)) from None
    return data
