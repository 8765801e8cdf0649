"""`envgen certs import` and `merge`: certificates from files, logs and other stores into
this one. Each input is judged alone (cert_trust); a refused one does not stop the rest."""
from __future__ import annotations

from pathlib import Path

from ..core import home as state
from ..core.errors import EnvironmentMissing, InputError
from . import certificate
from . import inputs as cert_inputs
from . import store as certs
from . import trust as cert_trust


def store_folder(name: str) -> Path:
    """The certificate folder of another store: DIR/certs when DIR is an ENVGEN_HOME, else
    DIR itself; InputError when it is no folder or is this very store."""
    d = Path(name)
    if not d.is_dir():
        raise InputError("not a folder: merge takes other stores (an ENVGEN_HOME or its "
                         "certs/ folder)", file=name)
    d = d / "certs" if (d / "certs").is_dir() else d
    mine = state.certs_dir()
    if mine.exists() and d.resolve() == mine.resolve():
        raise InputError("this is this envgen's own store (ENVGEN_HOME); merge another",
                         file=name)
    return d


def _stopped(e: OSError, file: str, line: int, taken: list, refusals: list,
             dup: int) -> EnvironmentMissing:
    """The store failed (a full disk, a folder it may not write): exit 3, saying what was
    stored and what was not; the report of what was taken goes out with it."""
    stored = ", ".join(f"{c['file']}:{c['line']}" for c in taken[:5]) + (
        f" and {len(taken) - 5} more" if len(taken) > 5 else "")
    return EnvironmentMissing(
        f"the store could not take {file}:{line} ({e.strerror or e}): "
        f"{len(taken)} certificate(s) were stored before it"
        + (f" ({stored})" if taken else "")
        + ", it and every input after it were not; free the space or fix the folder's "
          "permissions and run the same command again (what is here already is skipped)",
        file=str(state.certs_dir()),
        output={"imported": len(taken), "duplicates": dup, "refused": len(refusals),
                "certificates": taken, "refusals": refusals, "stopped_at":
                {"file": file, "line": line, "why": e.strerror or str(e)}, "complete": False})


def summary(cert: dict) -> dict:
    """What an import reports of each certificate it took."""
    w = certificate.where(cert)
    from .view import stack_name
    return {"image_id": cert["image_id"], "stack": stack_name(cert),
            "profile": cert.get("profile") or "", "gpu": w["gpu"], "gpu_count": w["count"],
            "driver": w["driver"], "passed": cert["passed"], "created": cert["created"]}


def run_import(names: list[str], labels_of=lambda _id: None, lock: dict | None = None,
               stores: bool = False) -> dict:
    """Judge and store each certificate of `names`: {"imported", "duplicates", "refused",
    "certificates" [what was taken], "refusals" [{file, line, why}], "conflicts" [a pass
    and a failure of one key with the same `created`: the failure stays current],
    "skipped" [{file, why}: a folder's links and FIFOs, not followed]}. A duplicate is a
    certificate this store has or this run saw before; with `stores` (merge), a store's
    current file and its history copy are one certificate, not a duplicate."""
    taken, refusals, conflicts, skipped, dup = [], [], [], [], 0
    seen: set[str] = set()
    for file, line, cert, why in cert_inputs.read_inputs(names, skipped):
        if why is None:
            why = cert_trust.refusal(cert, labels_of, lock)
        if why is not None:
            refusals.append({"file": file, "line": line, "why": why})
            continue
        cid = certs.content_id(cert)
        if cid in seen:
            dup += not stores
            continue
        seen.add(cid)
        rival = certs.tied(cert)
        try:
            result, path = certs.store(cert)
        except OSError as e:
            raise _stopped(e, file, line, taken, refusals, dup) from None
        if result == "duplicate":
            dup += 1
            continue
        if rival is not None:
            conflicts.append(summary(cert) | {"file": file, "line": line, "why": (
                f"a pass and a failure of this image, profile, GPU and driver are both "
                f"dated {cert['created']}: the failure stays current")})
        taken.append(summary(cert) | {"file": file, "line": line,
                                                  "current": result == "current",
                                                  "path": str(path)})
    return {"imported": len(taken), "duplicates": dup, "refused": len(refusals),
            "certificates": taken, "refusals": refusals, "conflicts": conflicts,
            "skipped": skipped}
