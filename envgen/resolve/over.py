"""Resolving a framework installed over another's stack (`builds_on` in the matrix):
Lightning, Transformers and Accelerate over PyTorch. The base stack is resolved as usual
(driver, GPU, Python, sources: every rule of resolve.py), inside the range of the base
package that every chosen release states; the add-ons' pins go on top. Nothing here names
a framework: the matrix says what builds on what."""
from __future__ import annotations

from contextvars import ContextVar

from packaging.specifiers import SpecifierSet

from ..core.errors import InputError, Unsatisfiable
from ..core.model import FrameworkRelease, Stack, join_licenses, platform_suffix
from ..matrix import Matrix
from .spec import Spec

# While a framework over another tries its candidate releases, a base that cannot be met is
# one rejected candidate among many: only its message is used, so the search for specs that
# would resolve instead (stack._nearest, which resolves again and again) is skipped. It ran
# for every candidate of every failing stack: render --all --driver 470.57.02 took 82 s.
_QUIET: ContextVar[bool] = ContextVar("envgen_quiet_base", default=False)


def hints_wanted() -> bool:
    return not _QUIET.get()


def _quietly(resolve_base, spec, host):
    token = _QUIET.set(True)
    try:
        return resolve_base(spec, host)
    finally:
        _QUIET.reset(token)


def lead_spec(m: Matrix, spec: Spec) -> Spec:
    """`torch==2.4,lightning` names the base first: the add-on leads, the base's clause
    joins the others."""
    fw = m.framework(spec.framework)
    if fw.builds_on or not spec.also:
        return spec
    lead = next((i for i, (n, _) in enumerate(spec.also)
                 if m.framework(n).builds_on == fw.name), None)
    if lead is None:
        names = ", ".join(n for n, _ in spec.also)
        raise InputError(f"spec {spec.text!r}: {names} cannot be installed over "
                         f"{fw.name} (the matrix says none of them builds on it)")
    name, specifier = spec.also[lead]
    rest = tuple(a for i, a in enumerate(spec.also) if i != lead)
    text = f"{name}{specifier}"   # what describe() shows first: the framework that leads
    return Spec(text=text, framework=name, specifier=specifier, variant=spec.variant,
                python=spec.python, base=spec.base,
                also=((fw.name, spec.specifier), *rest), written=spec.written)


def two_frameworks(m: Matrix, spec: Spec, other: str, resolve_one) -> Unsatisfiable:
    """`torch==2.4.1,jax`: two frameworks that each bring their own CUDA libraries. envgen
    builds one of them per image; the refusal says whether the two would even agree, by
    resolving each alone and naming the pins (and Pythons) where they differ."""
    first = m.framework(spec.framework)
    parts = [(first.name, spec.specifier), *((n, s) for n, s in spec.also if n == other)]
    stacks = []
    for name, specifier in parts:
        one = Spec(text=f"{name}{specifier}", framework=name, specifier=specifier,
                   python=spec.python, base=spec.base)
        try:
            stacks.append(resolve_one(one))
        except (InputError, Unsatisfiable) as e:
            return Unsatisfiable(f"spec {spec.text!r}: {one.describe()} does not resolve on "
                                 f"its own ({e.message})")
    a, b = stacks
    if a.cuda and b.cuda and a.cuda.split(".")[0] != b.cuda.split(".")[0]:
        # compare with the second's build for the first's CUDA major, where it has one
        major = a.cuda.split(".")[0]
        names = sorted({v.name for r in m.releases_of(b.framework) for v in r.variants
                        if v.cuda and v.cuda.split(".")[0] == major}, reverse=True)
        for variant in names:
            try:
                b = resolve_one(Spec(text=f"{b.framework}{parts[1][1]}", framework=b.framework,
                                     specifier=parts[1][1], variant=variant,
                                     python=spec.python, base=spec.base))
                break
            except (InputError, Unsatisfiable):
                continue
    pa, pb = dict(a.packages), dict(b.packages)
    clash = [f"{n}=={pa[n]} ({a.framework_package} {a.version}) vs {n}=={pb[n]} "
             f"({b.framework_package} {b.version})"
             for n in sorted(pa.keys() & pb.keys()) if pa[n] != pb[n]]
    if a.python != b.python:
        clash.insert(0, f"Python {a.python} ({a.stack}) vs {b.python} ({b.stack})")
    if a.cuda and b.cuda and a.cuda.split(".")[0] != b.cuda.split(".")[0]:
        clash.insert(0, f"CUDA {a.cuda} ({a.stack}) vs {b.cuda} ({b.stack})")
    why = ("the pins the matrix holds for them differ: " + "; ".join(clash[:4])
           + (f"; and {len(clash) - 4} more" if len(clash) > 4 else "")) if clash else \
        "the pins the matrix holds for them agree"
    return Unsatisfiable(f"spec {spec.text!r}: {a.framework_package} and {b.framework_package} "
                         f"each bring their own CUDA libraries, and envgen builds one such "
                         f"framework per image; {why}. Build them as two stacks",
                         hints=[a.stack, b.stack])


def no_release(m: Matrix, fw, spec: Spec) -> Unsatisfiable:
    """No release of `fw` matches the spec's versions: say which the matrix has."""
    known = m.releases_of(fw.name)
    span = f"{known[-1].version} to {known[0].version}" if known else "none"
    return Unsatisfiable(f"no {fw.package} release matches {spec.describe()} (the matrix "
                         f"has {span})",
                         hints=[f"{fw.package}=={known[0].version}"] if known else [])


def _newest(m: Matrix, name: str, specifier: SpecifierSet) -> list[FrameworkRelease]:
    return [r for r in m.releases_of(name) if specifier.contains(r.version, prereleases=True)]


def _pick_others(m, others, chosen) -> str | None:
    """Add the newest release of each other add-on that agrees with what is chosen so far
    (each one's ranges for the others, a common Python); a reason when none does."""
    for f, specifier in others:
        fits = None
        for rel in _newest(m, f.name, specifier):
            needs_ok = all(SpecifierSet(dict(c.requires).get(f.package, "")).contains(
                rel.version, prereleases=True) for c in chosen)
            wants_ok = all(SpecifierSet(dict(rel.requires).get(m.framework(c.framework)
                                                               .package, ""))
                           .contains(c.version, prereleases=True) for c in chosen)
            common = set(rel.pythons).intersection(*(c.pythons for c in chosen))
            if needs_ok and wants_ok and common:
                fits = rel
                break
        if fits is None:
            return (f"no {f.package} release matching {specifier or 'any version'} agrees "
                    f"with {', '.join(f'{c.framework} {c.version}' for c in chosen)}")
        chosen.append(fits)
    return None


def _too_old(chosen, base) -> str | None:
    """The first chosen release's reason that `base`'s Python patch release is too old."""
    return next(filter(None, (c.python_short(base) for c in chosen)), None)


def _newer_python(m, spec: Spec, host, resolve_base, base_spec: Spec, chosen, pythons):
    """The base stack on the first default base whose Python patch release the chosen
    releases' code accepts (python_floors), when the one resolve chose is too old for it:
    (stack, why), or (None, why not). Not when a Python or a base was asked for."""
    from ..core.record import replace
    if spec.python or host.python or spec.base:
        return None, ""
    for b in m.bases:
        if not b.default or b.kind == "framework" or b.python not in pythons or \
                _too_old(chosen, b):
            continue
        try:
            st = resolve_base(replace(base_spec, python=b.python), host)
        except Unsatisfiable:
            continue
        if not _too_old(chosen, st.base):
            return st, f"base {st.base.name} (Python {st.base.python_patch or st.python}) " \
                       f"instead"
    return None, "no default base with such a Python resolves"


def resolve_over(m: Matrix, spec: Spec, host, resolve_base) -> Stack:
    """The stack of a builds_on framework. `resolve_base(spec, host)` is resolve.resolve."""
    fw = m.framework(spec.framework)
    base = m.framework(fw.builds_on)
    base_clause = SpecifierSet()
    others = []
    for name, specifier in spec.also:
        f = m.framework(name)
        if f.name == base.name:
            base_clause &= specifier
        elif f.builds_on != base.name:
            raise InputError(f"spec {spec.text!r}: {fw.name} is installed over {base.name}, "
                             f"{f.name} is not; they cannot share one image")
        else:
            others.append((f, specifier))
    heads = _newest(m, fw.name, spec.specifier)
    if not heads:
        raise no_release(m, fw, spec)
    provided = dict(m.base(spec.base).provides) if spec.base and m.base(spec.base) else {}
    rejected: list[str] = []
    elsewhere = None   # the first stack found whose wheels come from an index, not PyPI
    for head in heads:
        chosen = [head]
        why = _pick_others(m, others, chosen)
        if why:
            rejected.append(why)
            continue
        clash = next((c for c in chosen if provided.get(m.framework(c.framework).package,
                                                        c.version).split("+")[0]
                      != c.version), None)
        if clash:
            pkg = m.framework(clash.framework).package
            rejected.append(f"base {spec.base} provides {pkg} {provided[pkg]}, not "
                            f"{clash.version}")
            continue
        needs = base_clause
        for c in chosen:   # as stated, and what its code needs beyond that (inferred)
            needs &= SpecifierSet(dict(c.requires).get(base.package, ""))
            needs &= SpecifierSet(c.base_need(base.package))
        pythons = set(head.pythons).intersection(*(c.pythons for c in chosen))
        python = spec.python or host.python
        if python and python not in pythons:
            rejected.append(f"{fw.package} {head.version} has no Python {python} "
                            f"(it admits {', '.join(sorted(pythons))})")
            continue
        base_spec = Spec(text=f"{base.package}{needs}", framework=base.name, specifier=needs,
                         variant=spec.variant, python=spec.python, base=spec.base)
        try:
            st = _quietly(resolve_base, base_spec, host)
        except Unsatisfiable as e:
            why = "; ".join(c.needs_why for c in chosen if c.base_need(base.package))
            rejected.append(f"{fw.package} {head.version} needs {base.package}{needs}"
                            f"{f' ({why})' if why else ''}: {e.message}")
            continue
        if st.python not in pythons:
            rejected.append(f"{fw.package} {head.version} needs Python "
                            f"{', '.join(sorted(pythons))}; the base stack has {st.python}")
            continue
        short = _too_old(chosen, st.base)
        if short:
            st, why = _newer_python(m, spec, host, resolve_base, base_spec, chosen, pythons)
            if st is None:
                rejected.append(f"{fw.package} {short}" + (f"; {why}" if why else ""))
                continue
            # the base's reason is this one, not a Python the user never asked for
            said = f"{fw.package} {short}: {why}"
            st = st.replace(reasons=tuple(
                said if r.startswith(f"base {st.base.name} provides the requested") else r
                for r in st.reasons))
        stack = _over(m, spec, fw, base, st, chosen, needs)
        # sources=auto prefers PyPI, as for the base itself: an older release whose base
        # stack PyPI serves beats a newer one that needs a per-variant index
        if stack.index_url is None or host.sources != "auto":
            return stack
        elsewhere = elsewhere or stack
    if elsewhere:
        return elsewhere
    raise Unsatisfiable(f"{spec.describe()} cannot be met: {rejected[0]}",
                        hints=_hints(m, spec, host, resolve_base))


def _hints(m, spec: Spec, host, resolve_base) -> list[str]:
    """Specs that do resolve, by dropping one constraint at a time."""
    from ..core.record import replace
    fw = m.framework(spec.framework)
    tries = [replace(spec, also=tuple(a for a in spec.also if a[0] != fw.builds_on)),
             replace(spec, variant=None), replace(spec, python=None),
             replace(spec, specifier=SpecifierSet())]
    out = []
    for s in tries:
        if s == spec:
            continue
        try:
            st = resolve_over(m, s, replace(host, python=None) if not s.python else host,
                              resolve_base)
        except (Unsatisfiable, InputError):
            continue
        text = (f"{fw.package}=={st.version},{st.builds_on_package}=="
                f"{dict(st.packages)[st.builds_on_package].split('+')[0]},variant={st.variant}")
        if text not in out:
            out.append(text)
    return out[:3]


def _over(m, spec, fw, base, st: Stack, chosen, needs) -> Stack:
    pins = dict(st.packages)
    added = []
    for c in chosen:
        pkg = m.framework(c.framework).package
        pins[pkg] = c.version
        added.append(pkg)
    # what the chosen releases need besides the base and each other, as they state it
    # (Transformers' Trainer needs Accelerate): the closure resolves it exactly
    # and what their code needs that their metadata does not state (inferred, with why)
    needed = []
    for c in chosen:
        at = c.needs_at(st.version)
        for name, req in (*c.requires, *at):
            if name != base.package and name not in added:
                pins.setdefault(name, req)   # a framework base may provide it already
                added.append(name)
        if at:
            over = f" over {base.package}{c.needs_over}" if c.needs_over else ""
            needed.append(f"{m.framework(c.framework).package} {c.version} needs "
                          f"{', '.join(n + s for n, s in at)}{over} ({c.needs_why})")
    reasons = [f"{fw.package} {chosen[0].version} is the newest release matching "
               f"{spec.describe()} that satisfies every constraint"]
    reasons += [f"{m.framework(c.framework).package} {c.version} goes with it (the newest "
                f"that agrees with every other pin)" for c in chosen[1:]]
    reasons.append(f"{base.package} {st.version} is the newest {base.name} release inside "
                   f"{base.package}{needs or ' (any version)'}, the range the chosen releases "
                   f"state, that fits the host")
    reasons += needed
    reasons += st.reasons[1:]
    return st.replace(
        stack=f"{fw.name}-{st.variant}{platform_suffix(st.platform)}", framework=fw.name,
        framework_package=fw.package,
        version=chosen[0].version, packages=tuple(pins.items()), smoke=fw.smoke,
        reasons=tuple(reasons), builds_on=base.name, builds_on_package=base.package,
        addons=tuple(added), licenses=_licenses(m, st, chosen, pins),
        **_source_builds(m, chosen))


def _source_builds(m, chosen) -> dict:
    """The distributions pip builds from their sdists for the chosen frameworks, their
    builds' variables, the extras of their packages that the image installs, and the base
    closure's pins their requirements exclude."""
    built = [m.framework(c.framework) for c in chosen
             if m.framework(c.framework).from_source is not None]
    env = {k: v for f in built for k, v in f.from_source}
    extras = {m.framework(c.framework).package: m.framework(c.framework).extra
              for c in chosen if m.framework(c.framework).extra}
    unpinned = sorted({n for c in chosen for n in m.framework(c.framework).unpin})
    return {"from_source": tuple(n for f in built for n in (f.source_packages or (f.package,))),
            "build_env": tuple(sorted(env.items())), "extras": tuple(sorted(extras.items())),
            "unpinned": tuple(unpinned)}


def _licenses(m, st: Stack, chosen, pins: dict) -> str:
    """The base stack's licences and each chosen release's ("" if one is unknown); a
    framework pinned by a range (Transformers' Accelerate) adds its licence when every
    release of it the matrix has inside that range states the same one."""
    if not st.licenses or any(not c.license for c in chosen):
        return ""
    ranged = []
    for f in m.frameworks:
        spec = pins.get(f.package, "")
        if spec and spec[:1] in "<>=!~" and f.name not in {c.framework for c in chosen}:
            inside = {r.license for r in m.releases_of(f.name)
                      if SpecifierSet(spec).contains(r.version, prereleases=True)}
            if len(inside) == 1:
                ranged += inside
    return join_licenses([st.licenses, *(c.license for c in chosen), *ranged])
