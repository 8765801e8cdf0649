"""The closures reader: the full hash-pinned closure of every stack of a matrix folder,
stored as `<folder>/closures/<stack>.json`. A closure whose key still matches its stack's
inputs is kept as it is; the rest are resolved again with uv. A stack whose wheels come
from an index this machine cannot reach is reported, not written (it resolves on the
user's machine, once, cached by its inputs)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from ...errors import EnvgenError
from ...files import read_regular


def refresh_closures(m, folder: Path, names: list[str] | None = None,
                     check: bool = False, progress=lambda _line: None) -> dict:
    from ...closure import inputs_for, key_of, resolve_closure
    from ...resolve import Host, resolve
    from ...spec import parse_spec
    started = time.monotonic()
    out = folder / "closures"
    wanted = names or m.stack_names()
    result = {"reader": "closures", "folder": str(out), "kept": [], "written": [],
              "pending": [], "skipped": [], "failed": [], "removed": []}
    keep = set()
    for name in wanted:
        try:
            st = resolve(m, parse_spec(name, m), Host())
        except EnvgenError as e:
            result["failed"].append(f"{name}: not resolvable ({e.message})")
            continue
        path = out / f"{name}.json"
        if path.is_file():
            try:
                old = json.loads(read_regular(path, 16 << 20, "closure"))
            except (EnvgenError, ValueError):
                old = {}
            if isinstance(old, dict) and old.get("key") == key_of(inputs_for(st)):
                result["kept"].append(name)
                keep.add(path.name)
                continue
        if st.index_url:
            result["skipped"].append(f"{name}: its wheels come from {st.index_url}")
            continue
        if check:
            result["pending"].append(name)
            keep.add(path.name)
            continue
        progress(f"resolving the closure of {name} with uv")
        try:
            c = resolve_closure(st)
        except EnvgenError as e:
            result["failed"].append(f"{name}: {e.message}")
            continue
        out.mkdir(parents=True, exist_ok=True)
        from .change import write_atomic
        write_atomic(path, json.dumps(c.to_json(), indent=1) + "\n")
        keep.add(path.name)
        result["written"].append(f"{name}: {len(c.pins)} distributions")
    if not names and out.is_dir():
        for old_file in sorted(out.glob("*.json")):
            if old_file.name not in keep and old_file.stem not in m.stack_names():
                result["removed"].append(old_file.name)
                if not check:
                    old_file.unlink()
    result["seconds"] = round(time.monotonic() - started, 1)
    return result
