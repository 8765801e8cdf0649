"""Parse what a user asks for: a stack name (`pytorch-cu121`) or a requirement spec, read as
a requirement line (`torch==2.3.1`, `torch>=2.4,python=3.11`, `pytorch-cu124,base=debian-trixie`,
`transformers>=4.41.2,<=4.45.2,accelerate>=0.30.1,<=0.34.2`, `jax[cuda12]`,
`torch==2.1.2+cu121`).

Commas separate requirements, options and the clauses of one range: a part that starts
with an operator continues the requirement before it, one that starts with a name begins
the next, `KEY=VALUE` (one `=`) is an option. Names follow PEP 508 (and are compared in
their canonical form), versions PEP 440 through packaging's SpecifierSet; an extra or a
local version names the variant. packaging's Requirement is not used: it imports markers
and packaging.tags (subprocess, platform), which `envgen resolve` must start without
(tests/test_import_budget.py); a spec has no markers or URLs to read anyway."""
from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from ..core.errors import InputError, Unsatisfiable, shown
from ..core.model import V
from ..core.record import dataclass, field
from ..matrix import Matrix

OPTIONS = {"python": r"^3\.[0-9]{1,2}$", "variant": r"^(cu[0-9]{3}|cuda[0-9]{2}|cpu)$",
           "base": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
           "platform": r"^linux/(amd64|arm64)$"}
# a stack name with its platform's suffix (`pytorch-cpu-arm64`): the stack on linux/arm64
_ARM64_STACK = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*?-(?:cu[0-9]{3}|cuda[0-9]{2}|cpu))-arm64$")
# a stack name: a framework and a variant (`pytorch-cu121`, `jax-cuda12`, `tensorflow-cpu`)
_STACK = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*?)-(cu[0-9]{3}|cuda[0-9]{2}|cpu)$")
# PEP 508: a name, extras in brackets, then the version clauses (or nothing)
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_REQ = re.compile(rf"^({_NAME.pattern})\s*(?:\[([^\]]*)\])?\s*(.*)$")
_OPTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*=(?!=)\s*(.*)$")
_OPERATORS = "<>=!~"


@dataclass(frozen=True)
class Spec:
    text: str
    framework: str
    specifier: SpecifierSet
    variant: str | None = None
    python: str | None = None
    base: str | None = None
    platform: str | None = None   # linux/amd64 or linux/arm64 (platform=, or a -arm64 name)
    # other frameworks in the same image, each (framework name, specifier): the base a
    # builds_on framework runs on (`lightning,torch==2.7.1`) or another add-on
    # (`transformers,accelerate`)
    also: tuple[tuple[str, SpecifierSet], ...] = ()
    # the parts of the spec as the user wrote them, for messages and reasons; () for a
    # spec made inside envgen
    written: tuple[str, ...] = field(default=(), compare=False)
    # the frameworks whose own requirement names the variant (`tensorflow-cpu`,
    # `jax[cuda12]`), where no variant= option names it for the whole spec
    variant_from: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.written:
            return " ".join(self.written)
        if self.variant or not str(self.specifier):
            parts = [self.framework + (f"-{self.variant}" if self.variant else "")]
            if str(self.specifier):
                parts.append(str(self.specifier))
        else:
            named = _REQ.match(self.text)
            parts = [(named.group(1) if named else self.framework) + str(self.specifier)]
        parts += [f"{name}{spec}" for name, spec in self.also]
        if self.python:
            parts.append(f"python={self.python}")
        if self.base:
            parts.append(f"base={self.base}")
        if self.platform:
            parts.append(f"platform={self.platform}")
        return " ".join(parts)


@dataclass
class _Req:
    """One requirement as it is read: its text as written and its parts."""

    written: str
    name: str
    extras: str | None
    clauses: list
    start: int = 0   # where it starts in the spec's text


def canonical(name: str) -> str:
    """PEP 503's normal form of a distribution name (`Nemo_Toolkit` → `nemo-toolkit`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_spec(text: str, matrix: Matrix) -> Spec:
    """A Spec, or an InputError naming what is wrong with the text (Unsatisfiable, with the
    nearest releases, for versions the matrix does not hold)."""
    if not text or len(text) > 200 or any(c.isspace() and c != " " for c in text):
        raise InputError(f"spec {shown(text)} is empty, too long or holds control characters")
    if ";" in text or "@" in text:
        raise InputError(f"spec {shown(text)}: environment markers (;) and URLs (@) are not "
                         f"part of a spec; name the Python with python=X.Y")
    options: dict[str, str] = {}
    reqs: list[_Req] = []
    written: list[_Req | str] = []   # the parts as written, in their order
    for token, start, end in _split(text):
        if token[:1] in _OPERATORS:
            if not reqs:
                raise InputError(f"spec {shown(text)}: the version clause {token!r} comes "
                                 f"before any name; write it after the framework it limits")
            q = reqs[-1]
            q.clauses.append(token)
            # as written: the text from its name to this clause, when nothing came between
            q.written = text[q.start:end] if written[-1] is q else f"{q.written},{token}"
        elif a := _ARM64_STACK.match(token):
            _option(text, matrix, "platform", "linux/arm64", options)
            reqs.append(_Req(token, a.group(1), None, [], start))
            written.append(reqs[-1])
        elif o := _OPTION.match(token):
            _option(text, matrix, o.group(1), o.group(2), options)
            _once(text, o.group(1), written)
            written.append(token)
        elif (r := _REQ.match(token)) and r.group(3)[:1] in ("", *_OPERATORS):
            reqs.append(_Req(token, r.group(1), r.group(2), [r.group(3)] if r.group(3) else [],
                             start))
            written.append(reqs[-1])
        else:
            raise InputError(f"spec {shown(text)}: cannot read {shown(token, 40)} (expected a "
                             f"name, a version clause, or one of "
                             f"{', '.join(f'{k}=...' for k in OPTIONS)})")
    if not reqs:
        raise InputError(f"spec {shown(text)} names no framework")
    variants: list[str] = []   # every variant the text names, each way it names one
    parts, named_by = [], []
    for q in reqs:
        before = len(variants)
        parts.append(_read(text, matrix, q, variants))
        if len(variants) > before:
            named_by.append(parts[-1][0])
    read = _merge(text, matrix, reqs, parts)
    if "variant" in options:
        named_by = []
        variants.append(options["variant"])
    if len(set(variants)) > 1:
        raise InputError(f"spec {shown(text)}: names two variants ({variants[0]} and "
                         f"{next(v for v in variants if v != variants[0])}); keep one")
    (name, specifier), *also = read
    return Spec(text=text, framework=name, specifier=specifier,
                variant=variants[0] if variants else None, python=options.get("python"),
                base=options.get("base"), platform=options.get("platform"), also=tuple(also),
                written=tuple(w if isinstance(w, str) else w.written for w in written),
                variant_from=tuple(dict.fromkeys(named_by)))


def _merge(text: str, matrix: Matrix, reqs: list, read: list) -> list:
    """A framework and its companion named together (`torch==2.1.2,torchvision==0.16.2`)
    are one requirement of the framework: both ranges hold. Releases neither names in
    common are refused naming both pins; the same name twice is a usage error."""
    merged: dict[str, tuple] = {}
    for q, (name, specifier) in zip(reqs, read):
        if name not in merged:
            merged[name] = (q, specifier)
            continue
        first, held = merged[name]
        if canonical(first.name) == canonical(q.name):
            raise InputError(f"spec {shown(text)}: names a framework twice; give its "
                             f"versions in one clause")
        both = held & specifier
        if not any(both.contains(r.version, prereleases=True)
                   for r in matrix.releases_of(name)):
            raise Unsatisfiable(f"spec {shown(text)}: {shown(first.written, 60)} and "
                                f"{shown(q.written, 60)} pin no {name} release in common")
        merged[name] = (first, both)
    return [(name, specifier) for name, (_q, specifier) in merged.items()]


def _split(text: str) -> list[tuple[str, int, int]]:
    """The parts between commas, outside brackets (`jax[cuda12,cpu]` is one part), each
    stripped, with where it starts and ends in the text."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text + ","):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0 or i == len(text):
            part = text[start:i]
            if not part.strip():
                raise InputError(f"spec {shown(text)} has an empty part between commas")
            lead = len(part) - len(part.lstrip())
            parts.append((part.strip(), start + lead, start + lead + len(part.strip())))
            start = i + 1
    return parts


def _option(text: str, matrix: Matrix, key: str, value: str, options: dict) -> None:
    if key not in OPTIONS:
        if matrix.framework(canonical(key)):
            raise InputError(f"spec {shown(text)}: {shown(f'{key}={value}', 40)} is not a "
                             f"requirement; write {key}=={value}")
        raise InputError(f"spec {shown(text)}: unknown option {shown(key, 30)} (known: "
                         f"{', '.join(OPTIONS)})")
    if not re.fullmatch(OPTIONS[key], value):
        raise InputError(f"spec {shown(text)}: {key}={value!r} is not a valid {key}")
    if key in options and options[key] != value:
        raise InputError(f"spec {shown(text)}: {key} is given twice ({options[key]} and "
                         f"{value}); keep one")
    options[key] = value


def _once(text: str, key: str, written: list) -> None:
    """An option may be written once (docs/contract.md), its value the same or not."""
    if any(isinstance(w, str) and _OPTION.match(w).group(1) == key for w in written):
        raise InputError(f"spec {shown(text)}: {key} is given twice; keep one")


def _read(text: str, matrix: Matrix, q: _Req, variants: list) -> tuple[str, SpecifierSet]:
    """(framework name, specifier) of one requirement; the variants its name, extras or
    local version name go to `variants`."""
    fw = matrix.framework(canonical(q.name))
    if fw is None and (s := _STACK.match(q.name)) and matrix.framework(canonical(s.group(1))):
        if q.extras is not None:
            raise InputError(f"spec {shown(text)}: {shown(q.written, 40)} names a stack and "
                             f"an extra; write {s.group(1)}[{s.group(2)}] or {q.name}")
        fw = matrix.framework(canonical(s.group(1)))
        variants.append(s.group(2))
    if fw is None and (owner := _owner(matrix, canonical(q.name))):
        return _companion(text, matrix, owner, canonical(q.name), q)
    if fw is None:
        raise _unknown(text, matrix, q.name)
    known = variants_of(matrix, fw)
    for extra in (canonical(e.strip()) for e in (q.extras or "").split(",") if e.strip()):
        if not _NAME.fullmatch(extra):
            raise InputError(f"spec {shown(text)}: cannot read the extras of "
                             f"{shown(q.written, 40)}")
        if extra == fw.extra:
            continue   # the extra the image installs anyway (nemo-toolkit[asr])
        if extra not in known:
            raise InputError(f"spec {shown(text)}: the extra [{extra}] names "
                             f"no {fw.package} variant in the matrix (it has "
                             f"{', '.join(sorted(known)) or 'none'}); envgen reads an extra as "
                             f"the variant to build")
        variants.append(extra)
    try:
        specifier = SpecifierSet(",".join(q.clauses))
    except InvalidSpecifier:
        raise _not_a_version(text, matrix, fw, q) from None
    specifier = _local(text, fw, q, specifier, known, variants)
    _released(text, matrix, fw, q, specifier)
    return fw.name, specifier


def variants_of(matrix: Matrix, fw) -> set[str]:
    """The variants a framework is built in: its own, or those of the one it builds on."""
    name = fw.builds_on or fw.name
    return {v.name for r in matrix.releases_of(name) for v in r.variants}


def _local(text, fw, q: _Req, specifier: SpecifierSet, known, variants) -> SpecifierSet:
    """`==2.1.2+cu121`: the release 2.1.2 of the variant cu121 (a local version is how the
    per-variant indexes name their builds)."""
    if not any("+" in s.version for s in specifier):
        return specifier
    kept = []
    for s in specifier:
        if "+" not in s.version or s.operator not in ("==", "==="):
            kept.append(str(s))
            continue
        public, local = s.version.split("+", 1)
        local = local.lower()   # PEP 440 reads it so; SpecifierSet allows [a-z0-9.] only
        if local not in known:
            raise InputError(f"spec {shown(text)}: the local version +{local} "
                             f"names no {fw.package} variant in the matrix (it has "
                             f"{', '.join(sorted(known)) or 'none'})")
        variants.append(local)
        kept.append(f"{s.operator}{public}")
    return SpecifierSet(",".join(kept))


def _released(text, matrix: Matrix, fw, q: _Req, specifier: SpecifierSet) -> None:
    """Unsatisfiable when no release the matrix holds matches: one sentence with the
    nearest releases there are."""
    releases = [r.version for r in matrix.releases_of(fw.name)]
    if not releases or any(specifier.contains(v, prereleases=True) for v in releases):
        return
    near, label = nearest(releases, [s.version for s in specifier if s.operator != "!="])
    pins = list(specifier)
    exact = len(pins) == 1 and pins[0].operator in ("==", "===") and "*" not in pins[0].version
    where = "" if q.written == text else f"spec {shown(text)}: "
    span = f"the matrix has {releases[-1]} to {releases[0]}"
    if exact and _is_pre(pins[0].version):
        what = f"{q.written} is a pre-release; the matrix holds final releases " \
               f"({releases[-1]} to {releases[0]})"
    elif exact:
        what = f"{q.written} is not a release in the matrix ({span})"
    else:
        what = f"no {fw.package} release in the matrix matches {q.written} ({span})"
    raise Unsatisfiable(f"{where}{what}; {label}: {', '.join(near)}",
                        hints=[f"{fw.package}=={v}" for v in near])


def _is_pre(version: str) -> bool:
    try:
        return V(version).is_prerelease
    except InvalidVersion:
        return False


def nearest(releases: list[str], targets: list[str]) -> tuple[list[str], str]:
    """(the releases just below and just above each target version, oldest first,
    "nearest"), or (the newest three, "newest") when no target is a version."""
    ordered = sorted(releases, key=V)
    out: set[str] = set()
    for t in targets:
        try:
            at = V(V(t.rstrip(".*")).public)   # `==2.4.*` is near 2.4, `==2.1.2+cu121` 2.1.2
        except InvalidVersion:
            continue
        below = [v for v in ordered if V(v) <= at]
        above = [v for v in ordered if V(v) >= at]
        out.update(below[-1:] + above[:1])
    if out:
        return sorted(out, key=V)[-4:], "nearest"
    return ordered[-3:][::-1], "newest"


def _not_a_version(text, matrix: Matrix, fw, q: _Req) -> Unsatisfiable:
    releases = [r.version for r in matrix.releases_of(fw.name)]
    where = "" if q.written == text else f"spec {shown(text)}: "
    near, label = nearest(releases, [])
    newest = f"; {label}: {', '.join(near)}" if near else ""
    return Unsatisfiable(f"{where}{shown(q.written, 60)[1:-1]} is not a PEP 440 version "
                         f"specifier (like {fw.package}==1.2.3 or {fw.package}>=1.2,<2)"
                         f"{newest}", hints=[f"{fw.package}=={v}" for v in near])


def _unknown(text: str, matrix: Matrix, name: str) -> InputError:
    """A name that is no framework, with the nearest names that are."""
    from difflib import get_close_matches  # only on this error: not at start-up
    known = sorted({f.name for f in matrix.frameworks} | {f.package for f in matrix.frameworks})
    if name in OPTIONS:
        return InputError(f"spec {shown(text)}: {name} is an option; write {name}=VALUE")
    close = get_close_matches(canonical(name), known, n=3, cutoff=0.6)
    close += [k for k in known if k in canonical(name) or canonical(name) in k]
    spans, seen = [], set()
    for k in close:   # one name per framework (pytorch and torch are one), two at most
        fw = matrix.framework(k)
        if fw.name in seen or len(seen) == 2:
            continue
        seen.add(fw.name)
        rs = matrix.releases_of(fw.name)
        spans.append(f"{k} ({rs[-1].version} to {rs[0].version})" if rs else k)
    hint = f"; nearest: {', '.join(spans)}" if spans else ""
    return InputError(f"spec {shown(text)}: unknown framework {shown(name, 40)}{hint} "
                      f"(known: {', '.join(known)})")


def _owner(matrix: Matrix, name: str):
    """The framework whose releases pin `name` as a companion (torchvision: pytorch)."""
    return next((f for f in matrix.frameworks if name in f.companions), None)


def _companion(text, matrix: Matrix, fw, name: str, q: _Req) -> tuple[str, SpecifierSet]:
    """`torchvision==0.16.2`: the releases of the framework that pins that companion, as a
    range of the framework's own versions (a companion's versions rise with its
    framework's). Unsatisfiable, with the companion's nearest versions, when none does."""
    if q.extras:
        raise InputError(f"spec {shown(text)}: {shown(q.written, 40)}: {name} is installed "
                         f"with {fw.package}; name the variant on {fw.package}")
    try:
        wanted = SpecifierSet(",".join(q.clauses))
    except InvalidSpecifier:
        raise _not_a_version(text, matrix, fw, q) from None
    pinned = {r.version: dict(r.companions).get(name) for r in matrix.releases_of(fw.name)}
    hits = sorted((v for v, c in pinned.items() if c and wanted.contains(c, True)), key=V)
    if not hits:
        versions = sorted({c for c in pinned.values() if c}, key=V)
        near, label = nearest(versions, [s.version for s in wanted if s.operator != "!="])
        where = "" if q.written == text else f"spec {shown(text)}: "
        raise Unsatisfiable(f"{where}no {fw.package} release in the matrix comes with "
                            f"{q.written} (it pins {name} {versions[0]} to {versions[-1]}); "
                            f"{label}: {', '.join(near)}",
                            hints=[f"{name}=={v}" for v in near])
    between = [v for v in pinned if V(hits[0]) <= V(v) <= V(hits[-1])]
    clauses = [f">={hits[0]}", f"<={hits[-1]}", *(f"!={v}" for v in between if v not in hits)]
    return fw.name, SpecifierSet(",".join(clauses))
