"""Certificates on disk: one current certificate per key, and every run kept in history.

A certificate's key is what was certified where: the image ID, the run profile (`--steps 3`,
`--gpus none` on a GPU host, `--multi-gpu`: `profile_of`), and the GPUs it ran on (their
product names and count) with the driver. The same image certified on another GPU or driver
is another certificate; a later run of the same key becomes the current one and the earlier
stays in history. The host's name is provenance, not part of the key.

Layout of `$ENVGEN_HOME/certs/` (docs/certificate-store.md):
  <id>[.<profile>].json                 current, a run on no GPU (the name older envgens used)
  <id>[.<profile>].<where>.json         current, a run on GPUs (`where` names GPUs, driver)
  history/<id>/<created>-<content>.json every certificate ever stored, named by its content

A certificate also names the image's content (`image_content`: its layers and its config
without the build's clock), so a rebuild of the same lock, which has another image ID, is
found certified (`latest_for`, `find`, `same_bits`).

Files written before the key had GPUs and drivers (`<id>[.<profile>].json` of a GPU run)
are read as they are; the next run of their key moves them into history."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ..core import files
from ..core import home as state
from ..core.errors import CheckFailed, InputError
from ..core.files import read_regular, write_json
from ..core.strictjson import loads as strict_loads
from ..matrix.wire import IMAGE_ID
from .certificate import intrinsic_problem, readable, where

_PROFILE = re.compile(r"[a-z0-9-]{1,40}")
_KEY = re.compile(r"[0-9a-f]{4,64}")
MAX_BYTES = 16 * 1024 * 1024
HISTORY = "history"


# ---- keys ----------------------------------------------------------------------------------

def key_of(cert: dict) -> tuple:
    """(image ID, profile, GPU, count, driver): one current certificate per key."""
    w = where(cert)
    profile = cert.get("profile") if isinstance(cert.get("profile"), str) else ""
    return (cert.get("image_id"), profile, w["gpu"], w["count"], w["driver"])


def canonical(cert: dict) -> dict:
    """The certificate as stored: without what a command added around it (`_path` of
    certify's --json, `schema_version` of every --json document)."""
    return {k: v for k, v in cert.items() if not k.startswith("_") and k != "schema_version"}


def content_id(cert: dict) -> str:
    """sha256 of the certificate's canonical JSON: the same certificate twice is one."""
    text = json.dumps(canonical(cert), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def file_name(cert: dict) -> str:
    """The name of the current certificate of `cert`'s key in the store (and of its copy
    in a report): `<id>[.<profile>][.<where>].json`; InputError when the image ID or the
    profile could not name a file."""
    image_id, profile = cert.get("image_id"), cert.get("profile") or ""
    if not isinstance(image_id, str) or not IMAGE_ID.fullmatch(image_id) or (
            profile and not (isinstance(profile, str) and _PROFILE.fullmatch(profile))):
        raise InputError(f"not an image ID and run profile: {str(image_id)[:80]!r} "
                         f"{str(profile)[:40]!r}")
    name = image_id.removeprefix("sha256:") + (f".{profile}" if profile else "")
    w = where(cert)
    if w["count"]:
        exact = hashlib.sha256(json.dumps(w, sort_keys=True).encode()).hexdigest()[:8]
        name += f".{w['count']}x-{_slug(w['gpu'])}-{_slug(w['driver'] or 'unknown')}-{exact}"
    return f"{name}.json"


def path_of(cert: dict) -> Path:
    """Where the store keeps the current certificate of `cert`'s key."""
    return state.certs_dir() / file_name(cert)


def _history_path(cert: dict) -> Path:
    created = re.sub(r"[^0-9TZ]", "", str(cert.get("created") or ""))[:16] or "undated"
    return (state.certs_dir() / HISTORY / cert["image_id"].removeprefix("sha256:")
            / f"{created}-{content_id(cert)[:16]}.json")


# ---- reading -------------------------------------------------------------------------------

def _read(p: Path) -> dict | None:
    try:
        c = strict_loads(read_regular(p, MAX_BYTES))
    except (OSError, ValueError, RecursionError, InputError):
        return None
    return c if readable(c) else None


def passed_over() -> list[str]:
    """What the store holds that is no certificate it can show, each as `NAME: why` (a
    file cut short, edited by hand, or put there by something else): said beside a list,
    never read as a certificate."""
    d = state.certs_dir()
    if d.exists() and not d.is_dir():
        return [f"{d} is not a folder, so no certificate is stored or read"]
    out = []
    for p in sorted(d.glob("*.json")) + sorted(d.glob(f"{HISTORY}/*/*.json")) \
            if d.is_dir() else []:
        try:
            c = strict_loads(read_regular(p, MAX_BYTES))
        except (OSError, ValueError, RecursionError, InputError) as e:
            why = getattr(e, "strerror", None) or getattr(e, "message", None) or \
                getattr(e, "msg", None) or type(e).__name__   # JSONDecodeError's msg
            out.append(f"{p.relative_to(d)}: cannot be read ({str(why)[:80]})")
            continue
        if not readable(c):
            out.append(f"{p.relative_to(d)}: not a certificate envgen wrote")
    return out


def _newest_first(certs) -> list[dict]:
    """Newest first; of two runs of the same time the failure first (a tie must not turn a
    failure into a pass), then by content, so every store picks the same one."""
    return sorted(certs, key=lambda c: (c.get("created", ""), not c.get("passed"),
                                        content_id(c)), reverse=True)


def _current_files(prefix: str = "") -> list[tuple[Path, dict]]:
    d = state.certs_dir()
    paths = sorted(d.glob(f"{prefix}*.json")) if d.is_dir() else []
    return [(p, c) for p in paths if (c := _read(p))]


def load_all() -> list[dict]:
    """The current certificate of every key, newest first."""
    best: dict[tuple, dict] = {}
    for c in _newest_first(c for _, c in _current_files()):
        best.setdefault(key_of(c), c)
    return list(best.values())


def load_history(image_id: str | None = None) -> list[dict]:
    """Every stored certificate (current ones and every earlier run), each once, newest
    first; of one image when `image_id` is given."""
    hexid = image_id.removeprefix("sha256:") if image_id else ""
    if image_id is not None and not IMAGE_ID.fullmatch(image_id):
        return []
    d = state.certs_dir() / HISTORY
    old = sorted((d / hexid).glob("*.json") if hexid else d.glob("*/*.json")) \
        if d.is_dir() else []
    seen: dict[str, dict] = {}
    for c in [c for _, c in _current_files(hexid)] + [c for p in old if (c := _read(p))]:
        if image_id is None or c["image_id"] == image_id:
            seen.setdefault(content_id(c), c)
    return _newest_first(seen.values())


def runs_by_key() -> dict[tuple, int]:
    """How many runs the store holds of each key (the current one included)."""
    out: dict[tuple, int] = {}
    for c in load_history():
        out[key_of(c)] = out.get(key_of(c), 0) + 1
    return out


# ---- writing -------------------------------------------------------------------------------

def check_writable() -> Path:
    """The certificate folder, proven writable before any work starts, so a run is never
    lost to a store it cannot save in."""
    return files.check_writable(state.certs_dir(), "certificates")


def store(cert: dict, now: float | None = None) -> tuple[str, Path]:
    """Keep `cert`: ("duplicate", path) when the store has it already, ("current", path)
    when it is now its key's newest run, ("history", path) when a newer run of its key is
    current. Nothing stored is lost: a current file replaced goes into history first.
    Every file is written whole (files.write_atomic), so a failure at any byte leaves the
    store as it was or as it should be, and storing the same certificate again finishes
    what a failed store left. CheckFailed when the certificate's own record refutes it
    (cert_trust: the one judgement of every door); OSError passes through."""
    why = intrinsic_problem(cert, now)
    if why:
        raise CheckFailed(f"the certificate of {str(cert.get('image_id'))[:19]} was not "
                          f"stored: {why}")
    cert = canonical(cert)
    cid, key = content_id(cert), key_of(cert)
    target = path_of(cert)
    state.certs_dir().mkdir(parents=True, exist_ok=True)
    with files.locked(state.certs_dir() / ".store"):
        wrote = False
        hist = _history_path(cert)
        mine = [(p, c) for p, c in _current_files(cert["image_id"][7:]) if key_of(c) == key]
        if not hist.exists():
            write_json(hist, cert)
            wrote = True
        for _, c in mine:   # earlier runs of the key: into history, then out of the way
            kept = _history_path(c)
            if not kept.exists():
                write_json(kept, c)
                wrote = True
        newest = _newest_first([cert, *(c for _, c in mine)])[0]
        if content_id(newest) != cid:
            return ("history" if wrote else "duplicate"), hist
        if not any(p == target and content_id(c) == cid for p, c in mine):
            write_json(target, cert)
            wrote = True
        for p, _ in mine:
            if p != target:
                p.unlink(missing_ok=True)
                wrote = True
        return ("current" if wrote else "duplicate"), target


def tied(cert: dict) -> dict | None:
    """The current certificate of `cert`'s key with the very same `created` and the other
    verdict, if the store has one: the two runs cannot be ordered, so the failure stays
    current (_newest_first) and the caller says so."""
    image_id = cert.get("image_id")
    if not isinstance(image_id, str) or not IMAGE_ID.fullmatch(image_id):
        return None
    return next((c for _, c in _current_files(image_id[7:])
                 if key_of(c) == key_of(cert) and c.get("created") == cert.get("created")
                 and bool(c.get("passed")) != bool(cert.get("passed"))), None)


def save(cert: dict) -> Path:
    """Store a certificate just made here (certify); its path in the store."""
    return store(cert)[1]


# ---- finding -------------------------------------------------------------------------------

def find(image: str, content: str | None = None) -> dict:
    """A certificate by full or short (4+ hex digits) image ID, or by a tag it recorded;
    the default run's when the image has several, the newest of those. `content` (the
    image's content_of, when the daemon has it) finds a certificate of the same bits built
    at another time."""
    if content and IMAGE_ID.fullmatch(content) and IMAGE_ID.fullmatch(image):
        found = latest_for(image, content)
        if found is not None:
            return found
    key = image.removeprefix("sha256:")
    by_id = _KEY.fullmatch(key) is not None
    if not by_id and (not image or len(image) > 300 or not image.isprintable()):
        raise InputError(f"{image[:80]!r} is neither an image ID (4 or more hex digits) nor "
                         f"an image tag")
    matches = [c for c in load_all()
               if (by_id and c["image_id"].removeprefix("sha256:").startswith(key))
               or image in c.get("image_tags", [])]
    if not matches:
        skipped = passed_over()
        more = (f"; {len(skipped)} file(s) of the store could not be read as certificates "
                f"(`envgen certs list` names them)") if skipped else ""
        raise InputError(f"no certificate for {image!r} (see `envgen certs list`){more}")
    if len({c["image_id"] for c in matches}) > 1:
        ids = ", ".join(sorted({c["image_id"][7:19] for c in matches}))
        raise InputError(f"{image!r} names more than one certified image ({ids}); give "
                         f"more of the image ID")
    return sorted(matches, key=lambda c: bool(c.get("profile")))[0]


def same_bits(cert: dict, image_id: str, content: str | None = None) -> bool:
    """Whether `cert` certified the image `image_id`, or one with the same content (its
    layers and clock-free config: a rebuild of the same lock, runtime.docker.content_of).
    A certificate from before content keys matches by image ID alone."""
    return cert.get("image_id") == image_id or (
        bool(content) and cert.get("image_content") == content)


def current_for(image_id: str, content: str | None = None) -> list[dict]:
    """The current certificate of every key (profile, GPU, driver) of an image, or of an
    image with the same content: what this store last found of it on each GPU and driver."""
    if not IMAGE_ID.fullmatch(image_id or ""):
        return []
    if content is not None and not IMAGE_ID.fullmatch(content):
        content = None
    return [c for c in load_all() if same_bits(c, image_id, content)]


def latest_for(image_id: str, content: str | None = None) -> dict | None:
    """The newest default run's certificate of an image (on whatever GPU), else its newest
    other one; with `content`, of the image or of any image with the same bits, the
    image's own first."""
    if not IMAGE_ID.fullmatch(image_id or ""):
        return None
    if content is not None and not IMAGE_ID.fullmatch(content):
        content = None
    mine = [c for c in load_all() if same_bits(c, image_id, content)]
    return sorted(mine, key=lambda c: (c["image_id"] != image_id, bool(c.get("profile"))))[0] \
        if mine else None
