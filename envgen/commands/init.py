"""`envgen init [STACK]`: write an annotated envgen.yaml in the current folder."""
from __future__ import annotations

import re
from pathlib import Path

from ..core.errors import InputError
from ..core.files import write_atomic
from ..resolve import project
from ._common import load_matrix_for, out_json

# The stack of `make demo`: its closure is bundled (`envgen matrix list`), so a new project
# builds where PyTorch's own indexes are out of reach, and it certifies on a CPU-only host.
DEFAULT_STACK = "pytorch-cu121"


def run(args) -> int:
    path = Path(args.output or project.FILE)
    if (path.exists() or path.is_symlink()) and not args.force:
        raise InputError(f"{path} exists; edit it, or pass --force to write a new one")
    m = load_matrix_for(args)
    from ..resolve.spec import parse_spec
    from ..resolve.stack import host_from_flags, resolve
    spec = args.spec or DEFAULT_STACK
    stack = resolve(m, parse_spec(spec, m), host_from_flags(m))   # refuses a spec now
    name = args.name or re.sub(r"[^a-z0-9._-]+", "-", Path.cwd().name.lower()).strip("-._")
    if not project.NAME.fullmatch(name or ""):
        raise InputError(f"--name {name!r} must be 1-63 of a-z 0-9 . _ - (it names the image)")
    text = project.init_text(spec if any(c in spec for c in "=<>,") else stack.stack, name)
    write_atomic(path, text)
    loaded = project.load(path)   # what was written reads back as a project
    if args.json:
        out_json({"path": str(path), "stack": loaded.spec, "name": loaded.layer.name})
    else:
        print(f"wrote {path}: stack {loaded.spec}, image envgen/{loaded.layer.name}; "
              f"edit it, then `envgen build`")
    return 0
