"""`envgen [--matrix FOLDER] matrix refresh [READER…]`: regenerate matrix files from their
upstreams (PyPI's index and the wheels' METADATA), then the stored closures."""
from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import EnvgenError, InputError
from ._common import out_json, progress_for

ORDER = ("pytorch", "lightning", "pytorch-lightning", "transformers", "accelerate",
         "deepspeed", "nemo", "jax", "tensorflow", "keras", "tf-keras", "flax", "optax",
         "platforms", "closures")


def target_folder(args) -> Path:
    """The matrix folder to write: --matrix / ENVGEN_MATRIX, else the repository's
    matrices/ when envgen runs from a checkout (never the copy inside an installed wheel)."""
    from ..matrix.load import BUNDLED, bundled_path
    given = getattr(args, "matrix", None) or os.environ.get("ENVGEN_MATRIX")
    folder = Path(given) if given else bundled_path()
    if not given and folder == BUNDLED:
        raise InputError("this envgen is installed, so its bundled matrix is not yours to "
                         "rewrite; pass --matrix FOLDER (a matrix folder you keep in git)")
    if not folder.is_dir() or folder.is_symlink():
        raise InputError("matrix refresh writes into a matrix folder, and this is not one",
                         file=str(folder))
    if not os.access(folder, os.W_OK):
        raise InputError("the matrix folder is not writable", file=str(folder))
    from ..matrix import load_matrix
    load_matrix(folder)   # a folder that is no valid matrix is refused before any request
    return folder


def _summary(r: dict) -> list[str]:
    if r["reader"] == "closures":
        lines = [f"closures: {len(r['kept'])} kept, {len(r['written'])} resolved again"
                 + (f", {len(r['pending'])} to resolve again" if r["pending"] else "")
                 + f" ({r['seconds']} s)"]
        lines += [f"  resolved: {x}" for x in r["written"]]
        lines += [f"  stale: {x}" for x in r["pending"]]
        lines += [f"  skipped: {x}" for x in r["skipped"]]
        lines += [f"  removed (no such stack): {x}" for x in r["removed"]]
        lines += [f"  FAILED: {x}" for x in r["failed"]]
        return lines
    state = ("unchanged" if r.get("unchanged") else
             "written" if r["written"] else "would change (--check)")
    lines = [f"{r['reader']}: {r['file']} {state}: {r['releases']} releases "
             f"(was {r['previous_releases']}), {len(r['added'])} added, "
             f"{len(r['changed'])} changed, {len(r['removed'])} dropped facts; "
             f"{r['requests']} requests, {r.get('seconds', '-')} s"]
    lines += [f"  added: {x}" for x in r["added"]]
    lines += [f"  changed: {x}" for x in r["changed"]]
    lines += [f"  dropped: {x}" for x in r["removed"]]
    return lines


def run(args) -> int:
    from ..matrix import load_matrix
    from ..refresh import READERS, refresh
    from ..refresh.closures import refresh_closures
    names = list(dict.fromkeys(args.readers)) or list(ORDER)
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        raise InputError(f"no reader named {unknown[0][:40]!r}; readers: {', '.join(ORDER)}")
    folder = target_folder(args)
    from ..refresh.pypi import check_url
    check_url(args.index_url, "--index-url")   # before it is printed or followed
    progress = progress_for(args)
    results = []
    try:
        for name in (n for n in ORDER if n in names and n in READERS):
            progress(f"reading {args.index_url} for {name}")
            results += refresh([name], folder, index_url=args.index_url,
                               refetch=args.refetch, check=args.check, jobs=args.jobs)
        if "closures" in names:
            m = load_matrix(folder)
            results.append(refresh_closures(m, folder, check=args.check, progress=progress))
    except EnvgenError as e:
        if e.output is not None:
            e.output = {"results": results + [e.output]}
        raise
    for r in results:
        for w in r.get("warnings", []):
            progress(f"warning: {w}")
    changed = any(r.get("written") or (r.get("unchanged") is False) or r.get("pending")
                  for r in results)
    failed = any(r.get("failed") for r in results)
    if args.json:
        out_json({"results": results, "changed": changed})
    else:
        for r in results:
            print("\n".join(_summary(r)))
    if failed:
        return 1
    return 1 if args.check and changed else 0
