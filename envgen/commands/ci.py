"""`envgen ci github|bake [SPEC…]`: print a GitHub Actions workflow or a docker-bake.json."""
from __future__ import annotations

import sys

from .. import ci
from ._common import load_matrix_for, resolve_for


def run(args) -> int:
    m = load_matrix_for(args)
    specs = list(args.specs) or ci.default_specs(m.stack_names())
    stacks = [resolve_for(args, m, s) for s in specs]   # a bad spec is exit 2 before printing
    if args.kind == "github":
        sys.stdout.write(ci.github_workflow(specs, envgen_source=args.envgen_source,
                                            registry=args.registry))
        return 0
    sys.stdout.write(ci.bake(stacks))
    return 0
