"""Resolving a framework installed over another's stack (`builds_on` in the matrix):
Lightning, Transformers and Accelerate over PyTorch. The base stack is resolved as usual
(driver, GPU, Python, sources: every rule of resolve.py), inside the range of the base
package that every chosen release states; the add-ons' pins go on top. Nothing here names
a framework: the matrix says what builds on what."""
from __future__ import annotations

from contextvars import ContextVar

from packaging.specifiers import SpecifierSet

from ..core.errors import InputError, Unsatisfiable
from ..core.model import DEFAULT_PLATFORM, FrameworkRelease, Stack, join_licenses, platform_suffix
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
                 if m.framework(n).goes_over(fw.name)), None)
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


def cpu_beside(m: Matrix, spec: Spec, other: str, resolve_one) -> Stack:
    """`jax==0.4.35,tensorflow-cpu==2.17.0`: one framework named as its CPU build beside
    another. A CPU build brings no CUDA libraries, so the two share one image: the other is
    resolved as usual (its CUDA, the host, the base), the CPU one for the same Python and
    base, and its pins go beside the other's. Pins both give differently are refused, naming
    both."""
    from ..core.record import replace
    named = dict([(spec.framework, spec.specifier), *spec.also])
    cpu_name = spec.variant_from[0]
    main_name = other if cpu_name == spec.framework else spec.framework
    rest = tuple((n, s) for n, s in spec.also if n not in (cpu_name, main_name))
    if rest:
        raise InputError(f"spec {spec.text!r}: {', '.join(n for n, _ in rest)} cannot be "
                         f"installed beside {m.framework(main_name).package} and a CPU build "
                         f"of {m.framework(cpu_name).package} in one image")
    main_spec = Spec(text=f"{m.framework(main_name).package}{named[main_name]}",
                     framework=main_name, specifier=named[main_name], python=spec.python,
                     base=spec.base, platform=spec.platform)
    main = resolve_one(main_spec)
    cpu_fw = m.framework(cpu_name)
    cpu_spec = Spec(text=f"{cpu_fw.package}{named[cpu_name]}", framework=cpu_name,
                    specifier=named[cpu_name], variant="cpu", python=main.python,
                    base=main.base.name, platform=spec.platform)
    try:
        cpu = resolve_one(cpu_spec)
    except Unsatisfiable as e:
        raise Unsatisfiable(f"spec {spec.text!r}: {main.framework_package} {main.version} "
                            f"resolves on Python {main.python} (base {main.base.name}), and "
                            f"the CPU build of {cpu_spec.describe()} does not: {e.message}",
                            hints=[main.stack]) from None
    pins, theirs = dict(main.packages), dict(cpu.packages)
    clash = [f"{n}=={pins[n]} ({main.framework_package} {main.version}) vs {n}=={theirs[n]} "
             f"({cpu.framework_package} {cpu.version})"
             for n in sorted(pins.keys() & theirs.keys()) if pins[n] != theirs[n]]
    if clash:
        raise Unsatisfiable(f"spec {spec.text!r}: {main.framework_package} {main.version} and "
                            f"the CPU build of {cpu.framework_package} {cpu.version} pin "
                            f"different releases: {'; '.join(clash[:4])}",
                            hints=[main.stack, cpu.stack])
    added = [n for n in theirs if n not in pins]
    pins.update(theirs)
    lead = dict(cpu.packages)
    installed = next(iter(lead))   # the variant's own distribution (tensorflow-cpu)
    reasons = [*main.reasons,
               f"{installed} {cpu.version} goes beside it "
               f"({', '.join(f'{n}=={theirs[n]}' for n in added)}): a CPU build brings no "
               f"CUDA libraries, so it cannot disagree with {main.framework_package}'s"]
    return replace(main, packages=tuple(pins.items()), reasons=tuple(reasons),
                   companions=tuple(dict.fromkeys((*main.companions, *cpu.companions))),
                   licenses=join_licenses([main.licenses, cpu.licenses])
                   if main.licenses and cpu.licenses else "")


def no_release(m: Matrix, fw, spec: Spec) -> Unsatisfiable:
    """No release of `fw` matches the spec's versions: say which the matrix has."""
    known = m.releases_of(fw.name)
    span = f"{known[-1].version} to {known[0].version}" if known else "none"
    return Unsatisfiable(f"no {fw.package} release matches {spec.describe()} (the matrix "
                         f"has {span})",
                         hints=[f"{fw.package}=={known[0].version}"] if known else [])


def _newest(m: Matrix, name: str, specifier: SpecifierSet,
            base: str | None = None) -> list[FrameworkRelease]:
    """The releases of `name` inside `specifier` (that go over `base`, where given), newest
    first."""
    fw = m.framework(name)
    return [r for r in m.releases_of(name) if specifier.contains(r.version, prereleases=True)
            and (base is None or fw.goes_over(base, r.version))]


def _base_of(m: Matrix, fw, spec: Spec):
    """The framework `fw` is installed over: its builds_on one, unless the spec names
    another it also goes over (`keras,torch==2.4.1`), or an add-on of one (`keras,flax`)."""
    for name, _ in spec.also:
        f = m.framework(name)
        for base in (f.name, f.builds_on):
            if base and base != fw.builds_on and base in fw.also_over:
                return m.framework(base)
    return m.framework(fw.builds_on)


def _base_left(m, base, clause: SpecifierSet, chosen) -> bool:
    """Whether a release of the base framework is inside `clause` and every range the
    chosen releases state for it."""
    for c in chosen:
        clause &= SpecifierSet(dict(c.requires).get(base.package, ""))
        clause &= SpecifierSet(c.base_need(base.package))
    return any(clause.contains(r.version, prereleases=True) for r in m.releases_of(base.name))


def _pick_others(m, others, chosen, base, clause: SpecifierSet) -> str | None:
    """Add the newest release of each other add-on that agrees with what is chosen so far
    (each one's ranges for the others, a common Python, a base release inside every range
    and the spec's `clause`); a reason when none does."""
    for f, specifier in others:
        fits = None
        for rel in _newest(m, f.name, specifier, base.name):
            if not _base_left(m, base, clause, [*chosen, rel]):
                continue
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
    base = _base_of(m, fw, spec)
    base_clause = SpecifierSet()
    others = []
    for name, specifier in spec.also:
        f = m.framework(name)
        if f.name == base.name:
            base_clause &= specifier
        elif not f.goes_over(base.name):
            raise InputError(f"spec {spec.text!r}: {fw.name} is installed over {base.name}, "
                             f"{f.name} is not; they cannot share one image")
        else:
            others.append((f, specifier))
    heads = _newest(m, fw.name, spec.specifier, base.name)
    if not heads and _newest(m, fw.name, spec.specifier):
        raise Unsatisfiable(f"{spec.describe()} cannot be met: no {fw.package} release "
                            f"matching it runs over {base.name} ({fw.package} "
                            f"{fw.also_over_releases} does; older releases run over "
                            f"{fw.builds_on} alone)",
                            hints=[f"{fw.package}=={r.version},{base.package}"
                                   for r in _newest(m, fw.name, SpecifierSet(), base.name)[:1]])
    if not heads:
        raise no_release(m, fw, spec)
    provided = dict(m.base(spec.base).provides) if spec.base and m.base(spec.base) else {}
    rejected: list[str] = []
    elsewhere = None   # the first stack found whose wheels come from an index, not PyPI
    for head in heads:
        chosen = [head]
        why = _pick_others(m, others, chosen, base, base_clause)
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
    if spec.variant != "cpu" and (host.driver or host.gpu is not None or host.cc):
        # the CPU build, for someone who wants it: no driver to run, no GPU to serve
        tries.append(replace(spec, variant="cpu"))
    out = []
    for s in tries:
        if s == spec:
            continue
        on = replace(host, python=None) if not s.python else host
        if s.variant == "cpu":
            on = replace(on, driver=None)
        try:
            st = _quietly(lambda s_, h_: resolve_over(m, s_, h_, resolve_base), s, on)
        except (Unsatisfiable, InputError):
            continue
        text = (f"{fw.package}=={st.version},{st.builds_on_package}=="
                f"{_base_version(st)},variant={st.variant}")
        if st.platform != DEFAULT_PLATFORM:
            text += f",platform={st.platform}"
        if text not in out:
            out.append(text)
    return out[:3]


def _base_version(st: Stack) -> str:
    """The release of the base framework a stack over it pins: its own distribution's pin,
    or its variant's (tensorflow-cpu for TensorFlow's cpu build)."""
    pins = dict(st.packages)
    name = st.builds_on_package
    pin = pins.get(name) or next(v for n, v in pins.items() if n.startswith(name + "-"))
    return pin.split("+")[0]


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
            other = m.framework(name)
            if other is not None and not other.builds_on:
                continue   # a base's range (Keras 3's tensorflow one) limits that base alone
            if name not in added:
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
    reasons += [f"{n}={v} is set in the image's environment: {m.framework(c.framework).package}"
                f" {c.version} runs over {base.package} there" for c in chosen
                for n, v in _env(m, [c], base)]
    reasons += st.reasons[1:]
    return st.replace(
        stack=f"{fw.name}-{st.variant}{platform_suffix(st.platform)}", framework=fw.name,
        framework_package=fw.package,
        version=chosen[0].version, packages=tuple(pins.items()),
        # over another framework than its own builds_on one, its payload over that one's
        # (keras_torch: Keras's own fit beside torch_smoke's checks)
        smoke=fw.smoke if base.name == fw.builds_on else f"{fw.smoke}_{base.smoke}",
        reasons=tuple(reasons), builds_on=base.name, builds_on_package=base.package,
        addons=tuple(added), licenses=_licenses(m, st, chosen, pins),
        env=_env(m, chosen, base), **_source_builds(m, chosen))


def _env(m, chosen, base) -> tuple:
    """The variables the chosen frameworks set in the image, for the base they are installed
    over (Keras 3 runs over the framework KERAS_BACKEND names)."""
    env = {}
    for c in chosen:
        f = m.framework(c.framework)
        value = dict(f.env_values).get(base.name)
        if f.env_variable and value:
            env[f.env_variable] = value
    return tuple(sorted(env.items()))


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
