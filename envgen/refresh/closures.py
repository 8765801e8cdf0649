"""The closures reader: the full hash-pinned closure of every stack of a matrix folder,
stored as `<folder>/closures/<stack>.json`. A closure whose key still matches its stack's
inputs is kept as it is; the rest are resolved again with uv. A stack whose wheels come
from an index this machine cannot reach is reported, not written (it resolves on the
user's machine, once, cached by its inputs).

A stack built over another (NeMo over PyTorch) is resolved over its base stack's closure.
When that base stack is not one of the matrix's own (pytorch-cu124 on Python 3.13, where
NeMo's code needs a newer Python than the default base's), its closure is stored beside it
as `<stack>.base.json`: every stored closure's key then rests on stored closures alone."""
from __future__ import annotations

import json
import time
from pathlib import Path

from ..core.errors import EnvgenError
from ..core.files import read_regular

# stacks of another platform whose closures ship too (a platform's names are not in
# m.stack_names(), which lists linux/amd64's): the small CPU stack CI checks for aarch64,
# and JAX's, which a Grace host (GH200) resolves to
OTHER_PLATFORMS = ("pytorch-cpu-arm64", "jax-cpu-arm64", "jax-cuda13-arm64")


def refresh_closures(m, folder: Path, names: list[str] | None = None,
                     check: bool = False, progress=lambda _line: None) -> dict:
    from ..resolve.closure import inputs_for, key_of
    from ..resolve.spec import parse_spec
    from ..resolve.stack import Host, resolve
    started = time.monotonic()
    out = folder / "closures"
    wanted = names or [*m.stack_names(), *OTHER_PLATFORMS]
    result = {"reader": "closures", "folder": str(out), "kept": [], "written": [],
              "pending": [], "skipped": [], "failed": [], "removed": []}
    keep = set()
    for name in wanted:
        try:
            st = resolve(m, parse_spec(name, m), Host())
        except EnvgenError as e:
            result["failed"].append(f"{name}: not resolvable ({e.message})")
            continue
        if st.builds_on:
            base = st.base_stack()
            own = out / f"{base.stack}.json"
            if not (own.is_file() and _key(own) == key_of(inputs_for(base, resolve=False))):
                if not _store(base, out / f"{name}.base.json", f"{name} (its base stack)",
                              check, result, keep, progress):
                    continue
        _store(st, out / f"{name}.json", name, check, result, keep, progress)
    if not names and out.is_dir():
        for old_file in sorted(out.glob("*.json")):
            if old_file.name not in keep and old_file.stem not in wanted:
                result["removed"].append(old_file.name)
                if not check:
                    old_file.unlink()
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _key(path: Path) -> str | None:
    try:
        old = json.loads(read_regular(path, 16 << 20, "closure"))
    except (EnvgenError, ValueError):
        return None
    return old.get("key") if isinstance(old, dict) else None


def _store(st, path: Path, name: str, check: bool, result: dict, keep: set,
           progress) -> bool:
    """Keep `path` when its key is the stack's, else resolve and write it (a closure the
    user's cache already holds for these inputs is written as it is). False when the stack
    has no closure here."""
    from ..resolve.closure import find, inputs_for, key_of, resolve_closure
    if path.is_file() and _key(path) == key_of(inputs_for(st)):
        result["kept"].append(name)
        keep.add(path.name)
        return True
    if st.index_url:
        result["skipped"].append(f"{name}: its wheels come from {st.index_url}")
        return False
    if check:
        result["pending"].append(name)
        keep.add(path.name)
        return True
    found = find(st)   # the user's cache, or another stored file, with these very inputs
    if found:
        c = found[0]
    else:
        progress(f"resolving the closure of {name} with uv")
        try:
            c = resolve_closure(st)
        except EnvgenError as e:
            result["failed"].append(f"{name}: {e.message}")
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    from .change import write_atomic
    write_atomic(path, json.dumps(c.to_json(), indent=1) + "\n")
    keep.add(path.name)
    result["written"].append(f"{name}: {len(c.pins)} distributions")
    return True
