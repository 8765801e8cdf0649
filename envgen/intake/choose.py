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


def framework_of(matrix, name: str):
    """(framework, variant) a distribution installs: the framework's own package (variant
    None), or the package of one of its variants (tensorflow-cpu: tensorflow, cpu)."""
    fw = matrix.framework(name)
    if fw is not None:
        return fw, None
    for r in matrix.releases:
        for v in r.variants:
            if v.package and canonicalize_name(v.package) == name:
                return matrix.framework(r.framework), v.name
    return None, None


def framework_files(intake: Intake, matrix) -> Intake:
    """A framework named by its wheel's path or URL (`./wheels/torch-2.1.2+cu118-...whl`,
    download.pytorch.org's file) is the framework's release and variant its file name says:
    the line becomes `torch==2.1.2+cu118`, which the stack installs from its own index, and
    a note says so. The file is not read (a framework wheel is gigabytes)."""
    import urllib.parse

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    from ..core import record
    out, notes = [], []
    for w in intake.requirements:
        req = Requirement(w.text) if w.kind in ("path", "url") else None
        name = urllib.parse.unquote(urllib.parse.urlsplit(req.url).path.rsplit("/", 1)[-1]) \
            if req is not None else ""
        try:
            dist, version, _b, _t = parse_wheel_filename(name) if name.endswith(".whl") \
                else (None, None, None, None)
        except InvalidWheelFilename:
            dist = None
        if dist is None or framework_of(matrix, canonicalize_name(dist))[0] is None:
            out.append(w)
            continue
        marker = f" ; {req.marker}" if req.marker else ""
        out.append(record.replace(w, text=f"{canonicalize_name(dist)}=={version}{marker}",
                                  kind="index"))
        notes.append(f"{w.where}: {name} is {dist} {version}: the stack's own {dist} "
                     f"{version} comes from its index in its place (the file is not read)")
    return record.replace(intake, requirements=tuple(out), notes=intake.notes + tuple(notes))


def framework_parts(intake: Intake, matrix, python: str | None):
    """(spec parts in resolver order, variant, the Wanted each framework comes from). The
    requirements choose the frameworks; a constraint (-c) only narrows one they chose (a
    lock's pins are what it installs, so they choose as requirements do)."""
    env = target_env(python or DEFAULT_PYTHON)
    clauses: dict[str, list[str]] = {}
    origin: dict[str, Wanted] = {}
    variant = intake.variant
    chooses = intake.kind == "uv.lock"
    ordered = sorted(intake.requirements, key=lambda w: w.constraint and not chooses)
    for w in ordered:
        if w.kind != "index":
            continue
        req = Requirement(w.text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        fw, built = framework_of(matrix, canonicalize_name(req.name))
        if fw is None or (w.constraint and not chooses and fw.name not in clauses):
            continue
        origin.setdefault(fw.name, w)
        variant = built or variant
        # an extra that names one of the framework's variants picks it (`jax[cpu]`,
        # `jax[cuda12]`: JAX's own install lines); other extras are the team's to install
        picked = sorted(canonicalize_name(e) for e in req.extras) if req.extras else []
        variant = next((e for e in picked if e in variants_of(matrix, fw)), variant)
        spec = [str(s) for s in req.specifier]
        for s in req.specifier:
            if "+" in s.version:
                variant = s.version.split("+", 1)[1].lower()
        have = clauses.setdefault(fw.name, [])
        have += [c for c in dict.fromkeys(c.split("+")[0] for c in spec) if c not in have]
    for url in intake.indexes:
        m = _TORCH_INDEX.match(url)
        if m:
            variant = m.group(1)
    names = sorted(clauses, key=lambda n: (matrix.framework(n).builds_on is None, n))
    parts = [matrix.framework(n).package + ",".join(clauses[n]) for n in names]
    return parts, variant, origin


def choose(intake: Intake, matrix, hosts: list, python: str | None):
    """(stack, spec written, reasons): the spec of the team's framework requirements,
    resolved on every host (one per GPU); the first stack every host runs, on a Python the
    project's requires-python admits."""
    parts, variant, origin = framework_parts(intake, matrix, python)
    why = []
    if not parts:
        parts = ["torch"]
        why.append("the file names no framework in the matrix: the newest PyTorch stack "
                   "the target runs")
    first_error = None
    for py in pythons(intake, python):
        options = [f"python={py}"] if py else []
        options += [f"variant={variant}"] if variant else []
        try:
            stack, spec, more = _resolved(matrix, parts, options, hosts)
        except EnvgenError as e:
            first_error = first_error or e
            continue
        if not admits(intake.requires_python, stack.python):
            continue
        if intake.requires_python and not python:
            why.append(f"Python {stack.python}: {intake.requires_python_at} requires-python "
                       f"{intake.requires_python} admits it")
        return stack, spec, why + more
    e = first_error
    if e is None or intake.requires_python and not python:
        detail = f": {e.message}" if e is not None else ""
        raise InputError(f"requires-python {intake.requires_python} admits no Python that "
                         f"{', '.join(parts)} is built for on this target{detail}",
                         file=intake.requires_python_at.rsplit(":", 1)[0],
                         line=int(intake.requires_python_at.rsplit(":", 1)[1]))
    w = next(iter(origin.values()), None)
    if w is None:
        raise e
    raise type(e)(f"{w.text}: {e.message}" if w.text not in e.message else e.message,
                  file=w.file, line=w.line, hints=e.hints) from None


def admits(requires: str, python: str) -> bool:
    """Whether a requires-python ("" for none) admits some release of Python X.Y."""
    from packaging.specifiers import SpecifierSet
    return not requires or any(SpecifierSet(requires).contains(f"{python}.{patch}")
                               for patch in range(40))


def pythons(intake: Intake, python: str | None) -> list:
    """The Pythons to try: the one asked for (refused where requires-python does not admit
    it), else the resolver's own choice first, then each admitted X.Y nearest the default,
    newer ones first."""
    if python and not admits(intake.requires_python, python):
        file, line = intake.requires_python_at.rsplit(":", 1)
        raise InputError(f"requires-python {intake.requires_python} does not admit Python "
                         f"{python} (--python or the file's python=)", file=file,
                         line=int(line))
    if python or not intake.requires_python:
        return [python]
    minor = int(DEFAULT_PYTHON.split(".")[1])
    order = sorted(range(8, 16), key=lambda m: (abs(m - minor) + (m < minor) * 0.5))
    return [None, *(f"3.{m}" for m in order if admits(intake.requires_python, f"3.{m}"))]


def _resolved(matrix, parts: list[str], options: list[str], hosts: list):
    """(stack, spec, reasons) of `parts` with `options` on every host: all of the
    frameworks, else the base ones with the rest over them; the first error otherwise."""
    from ..resolve.spec import parse_spec
    from ..resolve.stack import host_from_flags, resolve
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
            first_error = first_error or e
            continue
        stack = _common(matrix, stacks, hosts)
        # written so that a plain `envgen build` (no --driver) resolves the same stack
        pinned = ",".join([*attempt, f"python={stack.python}", f"variant={stack.variant}"])
        try:
            again = resolve(matrix, parse_spec(pinned, matrix), host_from_flags(matrix))
            if again.replace(reasons=()) == stack.replace(reasons=()):
                spec = pinned
        except EnvgenError:
            pass
        why = [] if attempt is parts else [
            f"{', '.join(p for p in parts if p not in attempt)} resolved as a requirement "
            f"over the stack (the matrix has no stack of all of them)"]
        return stack, spec, why
    raise first_error


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
