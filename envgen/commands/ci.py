"""`envgen ci github|bake|devcontainer [SPEC…]`: print a GitHub Actions workflow, a
docker-bake.json or a devcontainer.json."""
from __future__ import annotations

import os
import sys

from ..core.errors import InputError, shown
from ..render import ci
from ._common import load_matrix_for, resolve_for


def run(args) -> int:
    if args.gpu_runner is not None and (args.kind != "github" or args.refresh):
        raise InputError("--gpu-runner names the runner of the GPU certification job: it goes "
                         "with `ci github` (not with --refresh)")
    if args.lock is not None and args.kind != "devcontainer":
        raise InputError("--lock goes with `ci devcontainer`: it takes the image pinned there")
    if args.kind == "bake" and (args.registry is not None or args.envgen_source is not None):
        raise InputError("--registry and --envgen-source go with `ci github` (--registry with "
                         "`ci devcontainer` too): a docker-bake.json names neither")
    if args.refresh:
        if args.kind != "github" or args.specs or args.registry:
            raise InputError("--refresh prints the scheduled matrix-refresh workflow: it goes "
                             "with `ci github` alone (no SPEC, no --registry)")
        source = ci.pick_envgen_source(args.envgen_source)
        text = ci.refresh_workflow(envgen_source=source, folder=_matrix(args) or "matrices")
        _warn_unhashed(source)
        sys.stdout.write(text)
        return 0
    if args.kind == "devcontainer":
        return _devcontainer(args)
    # Every input is checked before anything is printed: the labels, then each spec.
    gpu_runner = ci.gpu_runner_labels(args.gpu_runner) if args.kind == "github" else None
    matrix = _matrix(args)
    if args.kind == "github" and matrix is not None:
        ci.matrix_folder(matrix)
    m = load_matrix_for(args)
    specs = list(args.specs) or ci.default_specs(m.stack_names())
    twice = next((s for i, s in enumerate(specs) if s in specs[:i]), None)
    if twice is not None:   # one matrix entry per spec: a second would clash with the first
        raise InputError(f"SPEC {shown(twice)} is given twice: give each stack once")
    stacks = [resolve_for(args, m, s) for s in specs]   # a bad spec is exit 2 before printing
    # one lock entry and one bake target per stack: two specs of one stack would clash
    first = {}
    for spec, st in zip(specs, stacks, strict=True):
        if st.key in first:
            raise InputError(f"SPECs {shown(first[st.key])} and {shown(spec)} both resolve to "
                             f"stack {st.key}: give each stack once")
        first[st.key] = spec
    if args.kind == "github":
        source = ci.pick_envgen_source(args.envgen_source)
        text = ci.github_workflow(specs, envgen_source=source, registry=args.registry,
                                  gpu_runner=gpu_runner, matrix=matrix)
        _warn_unhashed(source)
        sys.stdout.write(text)
        return 0
    sys.stdout.write(ci.bake(stacks))
    return 0


def _matrix(args) -> str | None:
    """The matrix the command was given (--matrix, else ENVGEN_MATRIX): a workflow's envgen
    steps must read the same one."""
    return getattr(args, "matrix", None) or os.environ.get("ENVGEN_MATRIX") or None


def _warn_unhashed(source: str) -> None:
    warning = ci.by_version_only(source)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)


def _devcontainer(args) -> int:
    from ..core.image import default_tag
    from ..lock.read import read_lock
    from ..render import devcontainer as dc
    if len(args.specs) != 1:
        raise InputError(f"`ci devcontainer` takes exactly one SPEC (the stack to develop "
                         f"in), not {len(args.specs)}")
    if args.envgen_source is not None:
        raise InputError("--envgen-source goes with `ci github`: a dev container runs the "
                         "image, not envgen")
    if args.registry is not None and args.lock is not None:
        raise InputError("give --registry (the pushed tag) or --lock (the pinned digest), "
                         "not both")
    stack = resolve_for(args, load_matrix_for(args), args.specs[0])
    if args.lock is not None:
        stack, image = dc.from_lock(read_lock(args.lock), stack.key, args.lock)
    elif args.registry is not None:
        image = dc.pushed_reference(stack, args.registry)
    else:
        image = default_tag(stack)
    sys.stdout.write(dc.devcontainer(stack, image))
    return 0
