"""`envgen certs import` and `merge`: certificates from files, logs and other stores into
this one. Each input is judged alone (cert_trust); a refused one does not stop the rest."""
from __future__ import annotations

from pathlib import Path

from . import cert_inputs, cert_trust, certs, state
from .errors import InputError


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


def run_import(names: list[str], labels_of=lambda _id: None, lock: dict | None = None,
               stores: bool = False) -> dict:
    """Judge and store each certificate of `names`: {"imported", "duplicates", "refused",
    "certificates" [what was taken], "refusals" [{file, line, why}]}. A duplicate is a
    certificate this store has or this run saw before; with `stores` (merge), a store's
    current file and its history copy are one certificate, not a duplicate."""
    taken, refusals, dup = [], [], 0
    seen: set[str] = set()
    for file, line, cert, why in cert_inputs.read_inputs(names):
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
        result, path = certs.store(cert)
        if result == "duplicate":
            dup += 1
            continue
        taken.append(cert_trust.summary(cert) | {"file": file, "line": line,
                                                  "current": result == "current",
                                                  "path": str(path)})
    return {"imported": len(taken), "duplicates": dup, "refused": len(refusals),
            "certificates": taken, "refusals": refusals}
