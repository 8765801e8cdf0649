"""`envgen ci github|bake [SPEC…]`: print a GitHub Actions workflow or a docker-bake.json."""
from __future__ import annotations

import sys

from .. import ci
from ..errors import InputError
from ._common import load_matrix_for, resolve_for


def run(args) -> int:
    if getattr(args, "refresh", False):
        if args.kind != "github" or args.specs or args.registry:
            raise InputError("--refresh prints the scheduled matrix-refresh workflow: it goes "
                             "with `ci github` alone (no SPEC, no --registry)")
        sys.stdout.write(ci.refresh_workflow(envgen_source=args.envgen_source,
                                             folder=args.matrix or "matrices"))
        return 0
    m = load_matrix_for(args)
    specs = list(args.specs) or ci.default_specs(m.stack_names())
    stacks = [resolve_for(args, m, s) for s in specs]   # a bad spec is exit 2 before printing
    if args.kind == "github":
        sys.stdout.write(ci.github_workflow(specs, envgen_source=args.envgen_source,
                                            registry=args.registry))
        return 0
    sys.stdout.write(ci.bake(stacks))
    return 0
