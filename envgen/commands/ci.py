"""`envgen ci github|bake [SPEC…]`: print a GitHub Actions workflow or a docker-bake.json."""
from __future__ import annotations

import sys

from .. import ci


def run(args) -> int:
    from ._common import load_matrix_for as _matrix, resolve_for as _resolve
    m = _matrix(args)
    specs = list(args.specs) or ci.default_specs(m.stack_names())
    stacks = [_resolve(args, m, s) for s in specs]   # a bad spec is exit 2 before printing
    if args.kind == "github":
        sys.stdout.write(ci.github_workflow(specs))
        return 0
    sys.stdout.write(ci.bake(stacks))
    return 0
