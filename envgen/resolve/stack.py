"""Spec + host constraints → one fully pinned Stack with the reason for every choice, or
Unsatisfiable naming what failed and the nearest specs that would work."""
from __future__ import annotations

from ..core.errors import InputError, Unsatisfiable, shown
from ..core.model import (
    DEFAULT_PLATFORM,
    PLATFORMS,
    BaseImage,
    FrameworkRelease,
    Gpu,
    Stack,
    V,
    Variant,
    WheelSource,
    join_licenses,
    platform_suffix,
)
from ..core.record import dataclass
from ..core.record import replace as record_replace
from ..matrix import Matrix
from . import require_cuda
from .compat import FORWARD, MINOR, check_cc, check_driver, driver_runs, kernels_for
from .spec import Spec

POLICIES = ("auto", "pypi", "index")


@dataclass(frozen=True)
class Host:
    """What the user told us about the host that will run the image."""

    driver: str | None = None
    gpu: Gpu | None = None
    cc: str | None = None
    python: str | None = None
    sources: str = "auto"      # auto | pypi | index | a PyPI mirror URL
    platform: str | None = None   # linux/amd64 | linux/arm64 (None: amd64 unless a GPU says)


_HOSTNAME = (r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
             r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def mirror_problem(url: str) -> str | None:
    """Why `url` cannot be the PyPI mirror of --sources (None: it can): https (http only on
    this machine's loopback), a host name, a port that is one, a plain path, no login."""
    import re
    import urllib.parse

    from ..core.logins import has_login, refusal
    if has_login(url):
        return refusal("the mirror", url)
    if len(url) > 300 or not re.fullmatch(r"https?://[A-Za-z0-9._~:/%+\[\]-]+", url):
        return (f"{url[:80]!r} must be auto, pypi, index or the https URL of a PyPI mirror "
                f"(https://HOST/simple)")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:   # a bracket that holds no IPv6 address, or is never closed
        return f"the mirror {url[:80]!r} names no host name envgen can reach"
    host = parts.hostname or ""
    try:
        parts.port
    except ValueError:
        return f"the mirror {url[:80]!r} names a port that is none (1 to 65535)"
    if not (re.fullmatch(_HOSTNAME, host) or host == "::1"):
        return f"the mirror {url[:80]!r} names no host name envgen can reach"
    if parts.scheme == "http" and host not in LOOPBACK:
        return (f"the mirror {url[:80]!r} is plain http: envgen fetches wheels over https (http "
                f"only from this machine's loopback)")
    return None


def host_from_flags(matrix: Matrix, driver=None, gpu=None, cc=None, python=None,
                    sources=None, platform=None) -> Host:
    """Validate CLI flags into a Host (bad values are InputErrors)."""
    import re
    if driver is not None:
        check_driver(driver)
    g = None
    if gpu is not None:
        g = matrix.gpu(gpu)
        if g is None:
            raise InputError(f"--gpu {shown(gpu)} is not a GPU in the matrix (see `envgen "
                             f"matrix show gpus`)")
    if platform is not None and platform not in PLATFORMS:
        raise InputError(f"--platform {str(platform)[:40]!r} must be {' or '.join(PLATFORMS)}")
    if g is not None:
        platform = platform_for_gpu(g, platform, "--platform")
    if cc is not None:
        check_cc(cc)
    if g and cc and g.cc != cc:
        raise InputError(f"--gpu {g.name} has compute capability {g.cc}, not {cc}")
    if python is not None and not re.match(r"^3\.[0-9]{1,2}$", python):
        raise InputError(f"--python {python!r} is not a Python version like 3.11")
    sources = "auto" if sources is None else sources
    if sources not in POLICIES:
        why = mirror_problem(sources)
        if why is not None:
            raise InputError(f"--sources: {why}")
    return Host(driver=driver, gpu=g, cc=cc or (g.cc if g else None), python=python,
                sources=sources, platform=platform)


def platform_for_gpu(g: Gpu, platform: str | None, how: str) -> str | None:
    """The platform a GPU's hosts run: a Jetson module is refused (L4T), a Grace part means
    linux/arm64 and refuses another asked for with `how` (--platform or platform=)."""
    if g.gpu_class == "jetson":
        raise InputError(f"--gpu {g.name} is a Jetson module, which runs NVIDIA's L4T "
                         f"(JetPack) with its own CUDA, cuDNN and framework builds rather "
                         f"than the desktop driver and PyPI wheels envgen pins; use NVIDIA's "
                         f"L4T containers (nvcr.io/nvidia/l4t-jetpack, l4t-pytorch) or "
                         f"JetPack's wheels for Jetson")
    if g.platform and platform and platform != g.platform:
        raise InputError(f"--gpu {g.name} comes only in hosts with NVIDIA's Grace Arm CPU, "
                         f"which run {g.platform} images ({g.platform_source}), so "
                         f"{how}{'' if how.endswith('=') else ' '}{platform} would build "
                         f"an image it cannot run; drop it or ask "
                         f"for {g.platform}")
    return platform or g.platform or None


def _platform_of(spec: Spec, host: Host) -> str:
    """The platform a spec resolves for: platform= in the spec, else --platform or the
    GPU's, else linux/amd64."""
    if spec.platform and host.platform and spec.platform != host.platform:
        if host.gpu is not None and host.gpu.platform:
            platform_for_gpu(host.gpu, spec.platform, "platform=")
        raise InputError(f"spec {spec.text!r} asks for platform {spec.platform} but "
                         f"--platform says {host.platform}")
    if spec.platform and host.gpu is not None:
        platform_for_gpu(host.gpu, spec.platform, "platform=")
    return spec.platform or host.platform or DEFAULT_PLATFORM


def _platform_wheels(m: Matrix, package: str, version: str, platform: str) -> list:
    """The platform_wheels rows of one release on one platform: one for torch (its wheel
    is one variant), one per variant for JAX (jaxlib is CPU, the plugins add CUDA)."""
    return [w for w in m.platform_wheels if w.package == package
            and w.version == version and w.platform == platform]


def _platform_row(m: Matrix, package: str, version: str, platform: str, variant: str):
    """The platform_wheels row of one variant of a release on a platform, or None."""
    return next((w for w in _platform_wheels(m, package, version, platform)
                 if w.variant == variant), None)


def _on_platform(m: Matrix, fw, r: FrameworkRelease, v: Variant, host: Host):
    """(release, variant) as PyPI serves them for a platform other than linux/amd64 (its
    Pythons, its nvidia-* pins), or a str saying why that variant has no wheel there."""
    rows = _platform_wheels(m, fw.package, r.version, host.platform)
    w = next((x for x in rows if x.variant == v.name), None)
    if not rows:
        known = any(x.package == fw.package for x in m.platform_wheels)
        return (f"PyPI has no {host.platform} wheel of {fw.package} {r.version}" if known
                else f"the matrix holds no {host.platform} wheels of {fw.package} "
                     f"(matrices/platforms.yaml)")
    if w is None:
        builds = " and ".join(x.variant for x in rows)
        said = f" ({rows[0].source})" if len(rows) == 1 else ""
        return f"PyPI serves {fw.package} {r.version} for {host.platform} only as its " \
               f"{builds} build{'' if len(rows) == 1 else 's'}, not {v.name}{said}"
    if host.sources == "index":
        return f"the per-variant indexes' {host.platform} wheels are not in the matrix; " \
               f"PyPI's is the {w.variant} build (sources=pypi)"
    # the row is of the framework's own wheels: what installs there is that distribution
    # (TensorFlow's cpu variant is tensorflow-cpu on x86_64, which has no aarch64 wheel)
    archs = {} if w.compute_capabilities is None else {   # that wheel's own GPU code
        "compute_capabilities": w.compute_capabilities, "ptx": w.ptx}
    return (record_replace(r, pythons=w.pythons),
            record_replace(v, packages=w.packages, sources=("pypi",), package="", **archs))


def _gpu_named(host: Host) -> bool:
    """Whether the user named the GPU the image is for (--gpu or --cc)."""
    return host.gpu is not None or host.cc is not None


def _gpu_unused(fw, r: FrameworkRelease, host: Host) -> str:
    """Why the cpu build of a release with no GPU build is not the answer for a named GPU."""
    gpu = f"the {host.gpu.name}" if host.gpu is not None else \
        f"a GPU of compute capability {host.cc}"
    refused = dict(r.refused_variants)
    why = next((refused[n] for n in sorted(refused) if n != "cpu"), "")
    return (f"the matrix holds no GPU build of {fw.package} {r.version}"
            + (f" ({why})" if why else "")
            + f", and its cpu build would leave {gpu} unused; name variant=cpu to take it")


@dataclass
class _Candidate:
    release: FrameworkRelease
    variant: Variant
    source: WheelSource
    index_url: str | None
    tier: int
    reasons: list


def _sources_for(m: Matrix, r: FrameworkRelease, v: Variant, policy: str):
    """(WheelSource, index_url, tier, reason) options for this variant under the policy."""
    on_pypi = "pypi" in v.sources   # torch: its one PyPI variant; JAX: every variant
    index = next((m.wheel_source(s) for s in v.sources
                  if m.wheel_source(s) and m.wheel_source(s).kind == "index"), None)
    if policy.startswith("http"):
        if on_pypi:
            return (m.wheel_source("pypi"), policy, 0,
                    f"wheels come from the PyPI mirror {policy} (--sources)")
        return None
    if on_pypi and policy in ("auto", "pypi"):
        return (m.wheel_source("pypi"), None, 0,
                f"PyPI's {r.version} wheel is the {v.name} build"
                + (", and PyPI is preferred (sources=auto)" if policy == "auto" else
                   " (sources=pypi)"))
    if index and policy in ("auto", "index"):
        why = (f"PyPI has no {v.name} build of {r.version}, so its wheels come from "
               f"{index.url} (sources=auto)" if policy == "auto" else
               f"wheels come from the per-variant index {index.url} (sources=index)")
        return (index, index.url, 1, why)
    return None


def _choose_base(m: Matrix, spec: Spec, r: FrameworkRelease, host: Host, package: str,
                 needs_compat: str | None) -> tuple[BaseImage | None, str]:
    python = spec.python or host.python
    if spec.base:
        b = m.base(spec.base)
        if b is None:
            raise InputError(f"spec {spec.text!r}: unknown base {spec.base!r} (known: "
                             f"{', '.join(x.name for x in m.bases)})")
        provided = dict(b.provides).get(package)
        if provided and provided.split("+")[0] != r.version:
            return None, f"base {b.name} provides {package} {provided}, not {r.version}"
        if b.python not in r.pythons:
            return None, f"base {b.name} has Python {b.python}, which {r.version} has no " \
                         f"wheels for"
        if python and b.python != python:
            return None, f"base {b.name} has Python {b.python}, not {python}"
        if short := r.python_short(b):
            return None, f"{package} {short}"
        return b, f"base {b.name} was asked for"
    pool = [b for b in m.bases if b.kind != "framework" and b.python in r.pythons
            and (python is None or b.python == python) and not r.python_short(b)]
    if host.platform not in (None, DEFAULT_PLATFORM):
        pool = [b for b in pool if b.kind == "local"]   # the others are amd64 images
        made = sorted({b.python for b in m.bases if b.kind == "local"}, key=V)
        if python and python not in made:
            return None, f"no base is made for {host.platform} with Python {python} (its " \
                         f"local Debian bases have Python {', '.join(made)})"
    if needs_compat:
        pool = [b for b in pool if b.cuda_compat and b.cuda and V(b.cuda) >= V(needs_compat)]
        if not pool:
            return None, f"no base image ships cuda-compat {needs_compat}" \
                         + (f" with Python {python}" if python else "")
        b = min(pool, key=lambda b: V(b.cuda))
        return b, f"base {b.name} ({b.image}) carries cuda-compat {b.cuda} for forward " \
                  f"compatibility"
    defaults = [b for b in pool if b.default] or [b for b in pool if not b.cuda]
    if not defaults:
        want = f"Python {python}" if python else "a Python"
        return None, f"no base offers {want} that {r.version} has wheels for " \
                     f"({', '.join(r.pythons)})"
    b = defaults[0]
    why = f"base {b.name} is the first default base whose Python ({b.python}) " \
          f"{r.version} supports"
    if python:
        why = f"base {b.name} provides the requested Python {python}"
    return b, why


def _platform_base(base: BaseImage, why: str, platform: str) -> tuple[BaseImage | None, str]:
    """The base made for `platform`: a local Debian base (mmdebstrap --architectures);
    a registry or framework base is pinned by its amd64 digest."""
    if base.kind != "local":
        return None, f"base {base.name} is a registry image pinned for linux/amd64; only " \
                     f"local Debian bases are made for {platform}"
    arch = platform.split("/")[-1]
    return record_replace(base, arch=arch), f"{why}, made for {platform} ({arch})"


def _packages(m: Matrix, r: FrameworkRelease, v: Variant, cand: _Candidate,
              base: BaseImage) -> dict:
    fw = m.framework(r.framework)
    provided = dict(base.provides)
    if fw.package in provided:
        # The base's vendor chose the framework build and its CUDA libraries.
        return provided
    local = f"+{v.name}" if cand.tier == 1 and v.name != r.pypi_variant else ""
    pins = {v.package or fw.package: r.version + local}
    for name, ver in r.companions:
        pins[name] = ver + local
    pins.update(dict(v.packages))
    for name, req in r.needs:   # what its code needs that its metadata does not state
        pins.setdefault(name, req)
    return pins


def resolve(m: Matrix, spec: Spec, host: Host = Host()) -> Stack:
    if spec.python and host.python and spec.python != host.python:
        raise InputError(f"spec {spec.text!r} asks for Python {spec.python} but --python says "
                         f"{host.python}")
    from .over import cpu_beside, lead_spec, no_release, resolve_over, two_frameworks
    if spec.also and not m.framework(spec.framework).builds_on:
        for name, _ in spec.also:
            if not m.framework(name).builds_on:   # two frameworks, each with CUDA of its own
                if "cpu" == spec.variant and len(spec.variant_from) == 1 and \
                        spec.variant_from[0] in (spec.framework, name):
                    # unless one is named as its CPU build, which brings no CUDA libraries
                    return cpu_beside(m, spec, name, lambda s, h=host: resolve(m, s, h))
                raise two_frameworks(m, spec, name, lambda s: resolve(m, s, host))
    host = record_replace(host, platform=_platform_of(spec, host))
    spec = lead_spec(m, spec)
    fw = m.framework(spec.framework)
    if fw.builds_on:
        return resolve_over(m, spec, host, lambda s, h: resolve(m, s, h))
    if spec.also:
        raise InputError(f"spec {spec.text!r}: {fw.name} takes no other framework in the "
                         f"same spec")
    releases = [r for r in m.releases_of(fw.name)
                if spec.specifier.contains(r.version, prereleases=True)]
    if not releases:
        raise no_release(m, fw, spec)
    rejected: list[tuple[FrameworkRelease, Variant, str]] = []
    # variants the platform's wheel is not (its release is another build there): the
    # refusal names these only when no variant got further
    off_platform: list[tuple[FrameworkRelease, Variant, str]] = []
    found: list[tuple[_Candidate, BaseImage, str | None]] = []
    # every matching release is built for the CPU alone (TensorFlow before its and-cuda
    # extra): that build is the one asked for
    cpu_only = all(v.name == "cpu" for r in releases for v in r.variants)
    # or, on another platform, PyPI serves none of them there as a GPU build (TensorFlow's
    # aarch64 wheels): for a host that named no GPU, that cpu build is the one there is
    platform_cpu = False
    if host.platform != DEFAULT_PLATFORM and not cpu_only and not _gpu_named(host) \
            and not spec.variant:
        platform_cpu = cpu_only = not any(
            w.variant != "cpu" for r in releases
            for w in _platform_wheels(m, fw.package, r.version, host.platform))
    for r in releases:
        for v in r.variants:
            if spec.variant and v.name != spec.variant:
                continue
            if not spec.variant and v.name == "cpu" and not cpu_only:
                continue
            if not spec.variant and v.name == "cpu" and _gpu_named(host):
                # a GPU was named: a CPU-only image would leave it unused without a word
                rejected.append((r, v, _gpu_unused(fw, r, host)))
                continue
            if host.platform != DEFAULT_PLATFORM:
                there = _on_platform(m, fw, r, v, host)
                if isinstance(there, str):
                    served = _platform_row(m, fw.package, r.version, host.platform, v.name)
                    (rejected if served else off_platform).append((r, v, there))
                    continue
                r, v = there
            src = _sources_for(m, r, v, host.sources)
            if src is None:
                rejected.append((r, v, f"{r.version} {v.name} is not available from "
                                       f"sources={host.sources}"))
                continue
            cand = _Candidate(r, v, src[0], src[1], src[2], [src[3]])
            if platform_cpu:
                cand.reasons.append(f"PyPI serves no GPU build of {fw.package} for "
                                    f"{host.platform}: its cpu build")
            cuda = m.cuda_release(v.cuda) if v.cuda else None
            how = None
            if cuda and host.driver:
                verdict = driver_runs(m, cuda, host.driver, host.gpu)
                if not verdict.ok:
                    rejected.append((r, v, verdict.why))
                    continue
                how = verdict.how
                cand.reasons.append(verdict.why)
            if host.cc and cuda:
                k = kernels_for(v, host.cc, how)
                if not k.ok:
                    rejected.append((r, v, k.why))
                    continue
                cand.reasons.append(k.why)
            needs_compat = cuda.short if how == FORWARD else None
            base, base_why = _choose_base(m, spec, r, host, fw.package, needs_compat)
            if base is not None and host.platform != DEFAULT_PLATFORM:
                base, base_why = _platform_base(base, base_why, host.platform)
            if base is None:
                rejected.append((r, v, base_why))
                continue
            cand.reasons.append(base_why)
            found.append((cand, base, how))
    if not found:
        raise _unsatisfiable(m, spec, host, rejected or off_platform)
    # Preference, most important first: PyPI before an index (sources=auto), the newest
    # release, native before minor-version before forward compatibility, the newest CUDA.
    found.sort(key=lambda f: V(f[0].variant.cuda or "0"), reverse=True)
    found.sort(key=lambda f: {None: 0, "native": 0, MINOR: 1}.get(f[2], 2))
    found.sort(key=lambda f: V(f[0].release.version), reverse=True)
    found.sort(key=lambda f: f[0].tier)
    cand, base, how = found[0]
    return _stack(m, spec, host, cand, base, how)


def _vendor_libraries(m, v, base, cuda):
    """On a base that provides the framework, the CUDA libraries in the image are its
    vendor's, not the variant's pins: the versions the base lists for the variant's
    nvidia-* packages, else unknown (None: certification reads what loads, compares
    nothing). (cuda release, cuDNN, NCCL)."""
    provided = dict(base.provides)

    def of(prefix):
        name = next((n for n, _ in v.packages if n.startswith(prefix)), None)
        return provided.get(name) if name else None
    runtime = of("nvidia-cuda-runtime")
    # the CUDA releases that ship that cudart: the first (oldest) is the one it was made for
    vendor = next((c for c in m.cuda if runtime and c.runtime == runtime.split("+")[0]), None)
    return vendor or cuda, of("nvidia-cudnn"), of("nvidia-nccl")


def _stack(m, spec, host, cand, base, how) -> Stack:
    r, v = cand.release, cand.variant
    fw = m.framework(r.framework)
    cuda = m.cuda_release(v.cuda) if v.cuda else None
    cudnn, nccl = v.cudnn, v.nccl
    if dict(base.provides).get(fw.package) and v.packages:
        cuda, cudnn, nccl = _vendor_libraries(m, v, base, cuda)
    reasons = [f"{fw.package} {r.version} is the newest release matching "
               f"{spec.describe()} that satisfies every constraint", *cand.reasons]
    fc_branches, fc_classes = (), ()
    if cuda and base.cuda_compat:
        fc = next((f for f in m.forward_compat if f.cuda == cuda.short), None)
        if fc:
            fc_branches, fc_classes = fc.branches, fc.gpu_classes
    req = require_cuda.make(cuda.major, fc_branches, fc_classes) if cuda else None
    if cuda:
        floor = m.cuda_major(cuda.major)
        reasons.append(f"CUDA {cuda.version} runs on drivers from {floor.minimum_driver} "
                       f"(minor-version compatibility) and natively from "
                       f"{cuda.toolkit_driver}")
    if dict(base.provides).get(fw.package):
        reasons.append(f"the base {base.name} provides {fw.package} "
                       f"{dict(base.provides)[fw.package]}; nothing is installed over it")
    if r.needs and fw.package not in dict(base.provides):
        reasons.append(f"{fw.package} {r.version} needs "
                       f"{', '.join(n + spec for n, spec in r.needs)} ({r.needs_why})")
    if v.inferred_why:
        reasons.append(f"the {v.name} variant of {fw.package} {r.version} rests on inferred "
                       f"facts: {v.inferred_why}")
    if v.name != "cpu" and host.driver is None:
        reasons.append("no --driver given: the stack was not checked against a host driver")
    platform = host.platform or DEFAULT_PLATFORM
    if platform != DEFAULT_PLATFORM:
        why = f"the GPU {host.gpu.name} comes only in {platform} hosts (Grace)" \
            if host.gpu is not None and host.gpu.platform else f"{platform} was asked for"
        reasons.append(f"built for {platform}: {why}")
        w = _platform_row(m, fw.package, r.version, platform, v.name)
        if w is not None:
            reasons.append(f"PyPI's {platform} wheel of {fw.package} {r.version} is its "
                           f"{w.variant} build, for Python {', '.join(w.pythons)} ({w.source})")
    return Stack(
        stack=f"{fw.name}-{v.name}{platform_suffix(platform)}", framework=fw.name,
        framework_package=fw.package,
        version=r.version, variant=v.name, python=base.python,
        cuda=cuda.short if cuda else None, cuda_release=cuda.version if cuda else None,
        cudnn=cudnn, nccl=nccl, packages=tuple(_packages(m, r, v, cand, base).items()),
        base=base, wheel_source=cand.source.name, index_url=cand.index_url,
        driver_minimum=m.cuda_major(cuda.major).minimum_driver if cuda else None,
        driver_toolkit=cuda.toolkit_driver if cuda else None, require_cuda=req,
        compute_capabilities=v.compute_capabilities, ptx=v.ptx,
        forward_compat=how == FORWARD, smoke=fw.smoke, reasons=tuple(reasons),
        matrix_sha256=m.sha256, companions=fw.companions, licenses=_licenses(r, v),
        platform=platform)


def _licenses(r: FrameworkRelease, v: Variant) -> str:
    """The release's licence, its companions' where known and, for a CUDA variant, the CUDA
    libraries'; "" when the release's or the CUDA libraries' is unknown: a list without
    them would understate what the image holds."""
    if not r.license or (v.cuda and not v.license):
        return ""
    return join_licenses([r.license, *dict(r.companion_licenses).values(),
                          v.license if v.cuda else ""])


def _unsatisfiable(m, spec, host, rejected) -> Unsatisfiable:
    fw = m.framework(spec.framework)
    if not rejected:
        names = sorted({v.name for r in m.releases_of(fw.name) for v in r.variants})
        suffix = platform_suffix(host.platform or DEFAULT_PLATFORM)
        if suffix:   # the variants the platform has, under its names (jax-cuda13-arm64)
            names = sorted({w.variant for w in m.platform_wheels if w.package == fw.package
                            and w.platform == host.platform})
        # the matrix may say why those releases have no such build (refused_variants)
        why = next((dict(r.refused_variants)[spec.variant] for r in m.releases_of(fw.name)
                    if spec.specifier.contains(r.version, prereleases=True)
                    and spec.variant in dict(r.refused_variants)), "")
        return Unsatisfiable(f"no {fw.package} release in the matrix has a {spec.variant} "
                             f"build matching {spec.describe()}" + (f": {why}" if why else ""),
                             hints=[f"{fw.name}-{n}{suffix}" for n in names][:5])
    r, v, why = rejected[0]
    from .over import hints_wanted
    hints = _nearest(m, spec, host) if hints_wanted() else []
    return Unsatisfiable(f"{spec.describe()} cannot be met: {fw.package} {r.version} "
                         f"{v.name}: {why}", hints=hints)


def _nearest(m: Matrix, spec: Spec, host: Host) -> list[str]:
    """Specs that would resolve, by relaxing one thing at a time."""
    from ..core.record import replace as dc_replace
    tries: list[tuple[Spec, Host]] = []
    fw = m.framework(spec.framework)
    if host.sources != "index":
        tries.append((spec, dc_replace(host, sources="index")))
    if spec.variant:
        plain = Spec(text=fw.package, framework=fw.name, specifier=spec.specifier,
                     python=spec.python, base=spec.base)
        tries.append((plain, host))
    if str(spec.specifier):
        any_version = Spec(text=f"{fw.name}", framework=fw.name,
                           specifier=type(spec.specifier)(""), variant=spec.variant,
                           python=spec.python, base=spec.base)
        tries.append((any_version, host))
    if spec.python or host.python:
        tries.append((dc_replace(spec, python=None), dc_replace(host, python=None)))
    last = m.gpu_last_branch(host.gpu) if host.gpu and host.driver else None
    branch = m.driver_branch_of(last[0]) if last else None
    if branch and int(host.driver.split(".")[0]) > int(branch.branch):
        # the GPU's last branch, at its newest release, may still run a CUDA build
        tries.append((spec, dc_replace(host, driver=branch.latest)))
    if host.platform not in (None, DEFAULT_PLATFORM) and spec.variant:
        # the platform's wheel of those releases is another variant: the CPU build, or the
        # newest release whose wheel there is a CUDA build
        if spec.variant != "cpu":
            tries.append((dc_replace(spec, variant="cpu"), host))
        tries.append((dc_replace(spec, variant=None, specifier=type(spec.specifier)("")),
                      host))
    if (host.driver or _gpu_named(host)) and spec.variant != "cpu":
        # a driver no CUDA build runs on still runs the CPU build, and so does a GPU no
        # CUDA build serves, for someone who wants it (variant=cpu: no recursion)
        tries.append((dc_replace(spec, variant="cpu"), dc_replace(host, driver=None)))
    from .over import _quietly
    out = []
    for s, h in tries:
        try:   # the hints of a try that fails are never shown: not searched for
            st = _quietly(lambda s_, h_: resolve(m, s_, h_), s, h)
        except (Unsatisfiable, InputError):
            continue
        text = f"{fw.package}=={st.version},variant={st.variant}"
        if s.python or h.python or spec.python or host.python:
            text += f",python={st.python}"   # the Python asked for, or the one that works
        if st.platform != DEFAULT_PLATFORM:
            text += f",platform={st.platform}"
        if h.sources != host.sources:
            text += f" --sources {h.sources}"
        if h.driver and h.driver != host.driver:
            text += f" --driver {h.driver}"
        if text not in out:
            out.append(text)
    return out[:3]
