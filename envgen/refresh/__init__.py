"""`envgen matrix refresh`: one reader per upstream, each regenerating one matrix file from
what that upstream publishes, as a change a reviewer reads in the diff.

    refresh(["pytorch"], folder)   ->  one result per reader (see `run_reader`)

A reader has FILE (the file it owns under the matrix folder), HEADER and
derive(run: pypi.Run) -> the document. Nothing is written when a sanity check fails
(pypi.Refused)."""
from __future__ import annotations

import time
from pathlib import Path

from . import addons, jax, platforms, pytorch, tensorflow
from .change import (
    compare_platform_wheels,
    compare_releases,
    read_old,
    validate_with_rest,
    write_atomic,
)
from .pypi import PYPI, Index, Refused, Run

# a base's reader before its add-ons' (Keras reads TensorFlow's rows' METADATA)
READERS = {"pytorch": pytorch,
           **{name: addons.reader(name) for name in addons.ADDONS
              if addons.base_of(name) == "pytorch"},
           "jax": jax, "tensorflow": tensorflow,
           **{name: addons.reader(name) for name in addons.ADDONS
              if addons.base_of(name) != "pytorch"},
           "platforms": platforms}

__all__ = ["READERS", "Refused", "refresh", "PYPI"]


def run_reader(name: str, folder: Path, index: Index, check: bool = False,
               jobs: int = 16) -> dict:
    """Regenerate `folder/<reader FILE>`; the result says what changed and whether it was
    written. Refused (nothing written) when a sanity check fails."""
    reader = READERS[name]
    started = time.monotonic()
    run = Run(index=index, jobs=jobs, folder=folder)
    doc = reader.derive(run)
    path = folder / reader.FILE
    old_text, old = read_old(path)
    change = compare_releases((old or {}).get("framework_releases") or [],
                              doc.get("framework_releases") or [],
                              frozenset(run.corrections))
    if "platform_wheels" in doc or "platform_wheels" in (old or {}):   # platforms.yaml
        rows = compare_platform_wheels((old or {}).get("platform_wheels") or [],
                                       doc.get("platform_wheels") or [],
                                       frozenset(getattr(reader, "MIRRORED", ())))
        for f in ("added", "changed", "removed", "refusals"):
            getattr(change, f).extend(getattr(rows, f))
    if old is not None:
        change.refusals += [f"section {s} would disappear" for s in old
                            if s not in doc]
    result = {"reader": name, "file": str(path),
              "releases": len(doc.get("framework_releases") or []),
              "previous_releases": len((old or {}).get("framework_releases") or []),
              **change.to_json(), "warnings": run.warnings, "written": False,
              "requests": index.requests}
    if change.refusals:
        raise Refused(f"refusing to write {path}: {change.refusals[0]}"
                      + (f" (and {len(change.refusals) - 1} more)"
                         if len(change.refusals) > 1 else ""), output=result)
    from .yamlout import dump
    text = dump(reader.HEADER, doc)
    result["unchanged"] = text == old_text
    validate_with_rest(folder, reader.FILE, text)
    if not check and not result["unchanged"]:
        write_atomic(path, text)
        result["written"] = True
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def refresh(names: list[str], folder: Path, index_url: str = PYPI, refetch: bool = False,
            check: bool = False, jobs: int = 16) -> list[dict]:
    index = Index(index_url, refresh=refetch)
    return [run_reader(n, folder, index, check=check, jobs=jobs) for n in names]
