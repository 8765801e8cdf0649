"""The smoke-training payloads: one `<name>_smoke.py` per framework, plus the sibling files
it imports (the shared `_harness.py`, the base framework's payload for a framework built
over another). All of them travel into the image side by side."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

SMOKE_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def payload_files(smoke: str) -> tuple[str, ...]:
    """File names of payload `smoke` and of every sibling module it imports, directly or
    not, the payload first; () when there is no such payload."""
    first = f"{smoke}_smoke.py"
    if not (SMOKE_DIR / first).is_file():
        return ()
    out, todo = [], [first]
    while todo:
        name = todo.pop(0)
        if name in out:
            continue
        out.append(name)
        tree = ast.parse((SMOKE_DIR / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            if isinstance(node, ast.ImportFrom) and node.module == "envgen.smoke":
                mods = [a.name for a in node.names]
            for mod in mods:
                sibling = f"{mod.rsplit('.', 1)[-1]}.py"
                if (SMOKE_DIR / sibling).is_file() and sibling != "__init__.py":
                    todo.append(sibling)
    return tuple(out)
