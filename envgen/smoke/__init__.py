"""The smoke-training payloads: one `<name>_smoke.py` per framework, plus the sibling files
it imports (the shared `_harness.py`, the base framework's payload for a framework built
over another). All of them travel into the image side by side."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

SMOKE_DIR = Path(__file__).resolve().parent


def _imports(text: str):
    """The import statements of a module's source: its import lines parsed one by one (a
    payload is large, its imports few); the whole file where an import spans lines."""
    nodes = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("import ", "from ")):
            try:
                nodes += ast.parse(stripped).body
            except SyntaxError:   # a parenthesised import over several lines
                return [n for n in ast.walk(ast.parse(text))
                        if isinstance(n, (ast.Import, ast.ImportFrom))]
    return nodes


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
        for node in _imports((SMOKE_DIR / name).read_text(encoding="utf-8")):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            if isinstance(node, ast.ImportFrom) and node.module == "envgen.smoke":
                mods = [a.name for a in node.names]
            for mod in mods:
                sibling = f"{mod.rsplit('.', 1)[-1]}.py"
                if (SMOKE_DIR / sibling).is_file() and sibling != "__init__.py":
                    todo.append(sibling)
    return tuple(out)
