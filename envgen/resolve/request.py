"""The front door of resolution, as every SPEC-taking command, the fleet and bench use it:
the matrix a run means (a path, ENVGEN_MATRIX, or the bundled one), the host constraints
its flags give, and a spec resolved with the folder's envgen.yaml where it applies.

The project file gives the spec when none is named, and its layer goes over the stack only
then, or when the named spec resolves to the project's own stack: a SPEC that names another
stack means that stack, as it is. `note` is told which, once per call."""
from __future__ import annotations

import os

from ..core.errors import EnvgenError, InputError, shown
from ..core.model import Stack


def load(path: str | None = None):
    """The matrix at `path`, else ENVGEN_MATRIX's, else the bundled one."""
    from ..matrix import load_matrix
    return load_matrix(path or os.environ.get("ENVGEN_MATRIX") or None)


def host(matrix, driver=None, gpu=None, cc=None, python=None, sources=None, platform=None):
    """The host constraints of flags (--driver, --gpu, --cc, --python, --sources, or
    ENVGEN_SOURCES, --platform)."""
    from .stack import host_from_flags
    return host_from_flags(matrix, driver=driver, gpu=gpu, cc=cc, python=python,
                           sources=sources if sources is not None else
                           os.environ.get("ENVGEN_SOURCES") or None,
                           platform=platform)


def _same_stack(a: Stack, b: Stack) -> bool:
    return a.replace(reasons=()) == b.replace(reasons=())


def _project_stack(matrix, proj, on) -> Stack:
    """The project file's spec resolved; what fails is told at its `stack:` line."""
    from .spec import parse_spec
    from .stack import resolve as resolve_stack
    try:
        return resolve_stack(matrix, parse_spec(proj.spec, matrix), on)
    except EnvgenError as e:
        if e.file is None:
            e.file, e.line = proj.layer.source or str(proj.path), proj.spec_line
        raise


def resolve(matrix, spec: str | None, on, note=lambda _msg: None) -> Stack:
    """`spec` (None: the project file's) resolved on host `on`, with the project's layer
    when it applies; InputError when there is neither a spec nor a project file."""
    from . import project
    from .spec import parse_spec
    from .stack import resolve as resolve_stack
    proj = project.current()
    named = spec is not None
    if not named:
        if proj is None:
            raise InputError(f"no SPEC given and no {project.FILE} in this folder; name a "
                             f"stack (`envgen matrix list`) or write the file with "
                             f"`envgen init STACK`")
        spec = proj.spec
    stack = resolve_stack(matrix, parse_spec(spec, matrix), on) if named else \
        _project_stack(matrix, proj, on)
    if proj is None:
        return stack
    own = not named or spec.strip() == proj.spec or _same_stack(
        stack, _project_stack(matrix, proj, on))
    if own:
        note(f"{proj.path.name}: project {proj.layer.name} goes over {stack.stack} "
             f"(image envgen/{proj.layer.name}); a SPEC naming another stack leaves it out")
    else:
        note(f"{proj.path.name} (project {proj.layer.name} over {proj.spec}) left out: "
             f"{shown(spec)} names another stack")
    return project.apply(stack, proj.layer) if own else stack
