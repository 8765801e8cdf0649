#!/usr/bin/env python3
"""Resolve the full hash-pinned closure of every bundled stack and write it to
matrices/closures/<stack>.json, for review in the diff. `envgen build` of a bundled stack
then needs no resolver run and no network before the build.

    .venv/bin/python tools/refresh_closures.py            # every stack
    .venv/bin/python tools/refresh_closures.py pytorch-cu121

A stack whose wheels come from an index this machine cannot reach is reported and skipped;
it resolves on the user's machine instead (once, cached by its inputs)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envgen.closure import key_of, inputs_for, resolve_closure  # noqa: E402
from envgen.errors import EnvgenError  # noqa: E402
from envgen.matrix import load_matrix  # noqa: E402
from envgen.resolve import Host, resolve  # noqa: E402
from envgen.spec import parse_spec  # noqa: E402

OUT = ROOT / "matrices" / "closures"


def main(names: list[str]) -> int:
    m = load_matrix()
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = names or m.stack_names()
    keep = set()
    for name in wanted:
        try:
            st = resolve(m, parse_spec(name, m), Host())
        except EnvgenError as e:
            print(f"{name}: not resolvable ({e.message})")
            continue
        path = OUT / f"{name}.json"
        if path.is_file():
            old = json.loads(path.read_text())
            if old.get("key") == key_of(inputs_for(st)):
                print(f"{name}: unchanged inputs, closure kept ({len(old['packages'])} "
                      f"distributions)")
                keep.add(path.name)
                continue
        if st.index_url:
            print(f"{name}: skipped, its wheels come from {st.index_url} (resolved on the "
                  f"user's machine)")
            continue
        try:
            c = resolve_closure(st)
        except EnvgenError as e:
            print(f"{name}: FAILED: {e.message}")
            continue
        path.write_text(json.dumps(c.to_json(), indent=1) + "\n")
        keep.add(path.name)
        unhashed = [p.name for p in c.pins if not p.sha256]
        print(f"{name}: {len(c.pins)} distributions, "
              f"{len(c.pins) - len(unhashed)} hash-pinned -> {path.relative_to(ROOT)}")
    if not names:
        for stale in OUT.glob("*.json"):
            if stale.name not in keep:
                print(f"removing stale {stale.name}")
                stale.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
