"""From a team's requirements to a stack: the framework requirements (with the variant a
local version, a PyTorch index or conda's cudatoolkit names) become a spec, resolved by the
matrix's resolver for each target GPU; then envgen.yaml's text."""
from __future__ import annotations

import json
import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..core.errors import EnvgenError, InputError
from ..resolve.spec import variants_of
from .line import target_env
from .model import Intake, Wanted

_TORCH_INDEX = re.compile(r"^https://download\.pytorch\.org/whl/(?:nightly/)?(cu[0-9]{3}|cpu)/?$")
DEFAULT_PYTHON = "3.11"


def framework_parts(intake: Intake, matrix, python: str | None):
    """(spec parts in resolver order, variant, the Wanted each framework comes from)."""
    env = target_env(python or DEFAULT_PYTHON)
    clauses: dict[str, list[str]] = {}
    origin: dict[str, Wanted] = {}
    variant = intake.variant
    for w in intake.requirements:
        if w.kind != "index":
            continue
        req = Requirement(w.text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        fw = matrix.framework(canonicalize_name(req.name))
        if fw is None:
            continue
        origin.setdefault(fw.name, w)
        # an extra that names one of the framework's variants picks it (`jax[cpu]`,
        # `jax[cuda12]`: JAX's own install lines); other extras are the team's to install
        picked = sorted(canonicalize_name(e) for e in req.extras) if req.extras else []
        variant = next((e for e in picked if e in variants_of(matrix, fw)), variant)
        spec = [str(s) for s in req.specifier]
        for s in req.specifier:
            if "+" in s.version:
                variant = s.version.split("+", 1)[1].lower()
        clauses.setdefault(fw.name, [])
        clauses[fw.name] += [c.split("+")[0] for c in spec]
    for url in intake.indexes:
        m = _TORCH_INDEX.match(url)
        if m:
            variant = m.group(1)
    names = sorted(clauses, key=lambda n: (matrix.framework(n).builds_on is None, n))
    parts = [matrix.framework(n).package + ",".join(clauses[n]) for n in names]
    return parts, variant, origin


def choose(intake: Intake, matrix, hosts: list, python: str | None):
    """(stack, spec written, reasons): the spec of the team's framework requirements,
    resolved on every host (one per GPU); the first stack every host runs."""
    from ..resolve.spec import parse_spec
    from ..resolve.stack import resolve
    parts, variant, origin = framework_parts(intake, matrix, python)
    why = []
    if not parts:
        parts = ["torch"]
        why.append("the file names no framework in the matrix: the newest PyTorch stack "
                   "the target runs")
    options = [f"python={python}"] if python else []
    options += [f"variant={variant}"] if variant else []
    tries = [parts]
    base = [p for p in parts if matrix.framework(
        canonicalize_name(re.split(r"[<>=!~]", p)[0])).builds_on is None]
    if base and base != parts:
        tries.append(base)
    first_error = None
    for attempt in tries:
        spec = ",".join(attempt + options)
        try:
            stacks = [resolve(matrix, parse_spec(spec, matrix), h) for h in hosts]
        except EnvgenError as e:
            first_error = first_error or (e, spec)
            continue
        stack = _common(matrix, stacks, hosts)
        # written so that a plain `envgen build` (no --driver) resolves the same stack
        pinned = ",".join([*attempt, f"python={stack.python}", f"variant={stack.variant}"])
        try:
            from ..resolve.stack import host_from_flags
            again = resolve(matrix, parse_spec(pinned, matrix), host_from_flags(matrix))
            if again.replace(reasons=()) == stack.replace(reasons=()):
                spec = pinned
        except EnvgenError:
            pass
        if attempt is not parts:
            why.append(f"{', '.join(p for p in parts if p not in attempt)} resolved as a "
                       f"requirement over the stack (the matrix has no stack of all of them)")
        return stack, spec, why
    e, spec = first_error
    w = next(iter(origin.values()), None)
    if w is None:
        raise e
    raise type(e)(f"{w.text}: {e.message}" if w.text not in e.message else e.message,
                  file=w.file, line=w.line, hints=e.hints) from None


def _common(matrix, stacks, hosts):
    from ..resolve.spec import parse_spec
    from ..resolve.stack import resolve
    for s in stacks:
        try:
            for h in hosts:
                resolve(matrix, parse_spec(s.stack, matrix), h)
        except EnvgenError:
            continue
        return s if all(x.stack == s.stack for x in stacks) else resolve(
            matrix, parse_spec(s.stack, matrix), hosts[0])
    names = sorted({s.stack for s in stacks})
    raise InputError(f"the target GPUs need different stacks ({', '.join(names)}); write one "
                     f"envgen.yaml per GPU kind (init --from ... --gpu G)")


_NOT_YAML = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def q(value) -> str:
    """`value` as a YAML double-quoted scalar that reads back the same: JSON's quoting, but
    a character outside the Basic Multilingual Plane written as itself (JSON's surrogate
    pair escapes are no YAML), and what YAML would fold or refuse raw (NEL, U+2028, C1
    controls) escaped."""
    return _NOT_YAML.sub(lambda m: f"\\u{ord(m.group()):04x}",
                         json.dumps(value, ensure_ascii=False, sort_keys=True))


def _comment(text: str) -> str:
    """`text` for a YAML comment: what would end its line (or YAML refuses) shown as '?'."""
    return "".join(c if c.isprintable() and not _NOT_YAML.match(c) else "?" for c in text)


def text(intake: Intake, stack, spec: str, name: str, why: list[str], target: dict,
         smoke: list[str], archs: list[str] | None = None) -> str:
    def entries(ws):
        return "".join(f"  - {q(w.text)}   # {_comment(w.where)}\n" for w in ws) or "  []\n"
    reqs = [w for w in intake.requirements if not w.constraint]
    cons = [w for w in intake.requirements if w.constraint]
    extra = [u for u in intake.indexes if u and not _TORCH_INDEX.match(u)]
    lines = [
        f"# envgen.yaml written by `envgen init --from {_comment(intake.path)}` "
        f"({intake.kind}).",
        "# The team's requirements stay as written; envgen resolves them in one uv run with",
        "# the stack's framework and CUDA pins as constraints, the rest free, and hash-pins",
        "# every file. Edit the file it came from and run init --from again, or edit here.",
        f"stack: {q(spec)}   # resolves to {stack.stack}: {stack.framework_package} "
        f"{stack.version} ({stack.variant}), Python {stack.python}",
        f"name: {name}",
        f"from: {q(intake.path)}",
        "target: " + q(target),
        "why:",
        *(f"  - {q(r)}" for r in [*why, *stack.reasons, *intake.notes]),
        "requirements:" + ("\n" + entries(reqs).rstrip("\n") if reqs else " []"),
        "constraints:" + ("\n" + entries(cons).rstrip("\n") if cons else " []"),
        "indexes: " + q(extra),
        "pip: []",
        "apt: []",
        "copy: []",
        *(["# What the CUDA-kernel sdists are compiled for (TORCH_CUDA_ARCH_LIST): the "
           "target GPUs'.", "cuda_archs: " + json.dumps(archs)] if archs else []),
        "# An import of every top-level module the team's distributions install; replace it",
        "# with a step of the team's own training script.",
        ("smoke: " + q(smoke)) if smoke else "# smoke: [python, app/train.py]",
    ]
    return "\n".join(lines) + "\n"
