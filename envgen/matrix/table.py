"""The loaded matrix: lists of domain objects and the lookups the decisions need."""
from __future__ import annotations

from ..core.model import (
    BaseImage,
    CudaMajor,
    CudaRelease,
    DriverBranch,
    ForwardCompat,
    Framework,
    FrameworkRelease,
    Gpu,
    GpuArchitecture,
    Library,
    Platform,
    PlatformWheel,
    V,
    WheelSource,
)
from ..core.record import dataclass, field


@dataclass
class Matrix:
    sha256: str
    drivers: list[DriverBranch] = field(default_factory=list)
    cuda_majors: list[CudaMajor] = field(default_factory=list)
    cuda: list[CudaRelease] = field(default_factory=list)
    forward_compat: list[ForwardCompat] = field(default_factory=list)
    gpus: list[Gpu] = field(default_factory=list)
    architectures: list[GpuArchitecture] = field(default_factory=list)
    libraries: list[Library] = field(default_factory=list)
    frameworks: list[Framework] = field(default_factory=list)
    releases: list[FrameworkRelease] = field(default_factory=list)
    wheel_sources: list[WheelSource] = field(default_factory=list)
    bases: list[BaseImage] = field(default_factory=list)
    platforms: list[Platform] = field(default_factory=list)
    platform_wheels: list[PlatformWheel] = field(default_factory=list)

    def cuda_major(self, major: int) -> CudaMajor | None:
        return next((c for c in self.cuda_majors if c.major == major), None)

    def cuda_release(self, version: str) -> CudaRelease | None:
        return next((c for c in self.cuda if c.version == version), None)

    def library(self, name: str, version: str) -> Library | None:
        return next((x for x in self.libraries if x.name == name and x.version == version),
                    None)

    def framework(self, name: str) -> Framework | None:
        return next((f for f in self.frameworks if f.name == name or f.package == name), None)

    def releases_of(self, framework: str) -> list[FrameworkRelease]:
        return sorted((r for r in self.releases if r.framework == framework),
                      key=lambda r: V(r.version), reverse=True)

    def wheel_source(self, name: str) -> WheelSource | None:
        return next((s for s in self.wheel_sources if s.name == name), None)

    def base(self, name: str) -> BaseImage | None:
        return next((b for b in self.bases if b.name == name), None)

    def driver_branch(self, driver: str) -> DriverBranch | None:
        return next((d for d in self.drivers if d.contains(driver)), None)

    def driver_branch_of(self, branch: str) -> DriverBranch | None:
        """The `drivers` row of branch `branch` ("580"), if the matrix has it."""
        return next((d for d in self.drivers if d.branch == branch), None)

    def gpu(self, name: str) -> Gpu | None:
        """Find a GPU by short name or nvidia-smi name, ignoring case and 'NVIDIA ' prefixes."""
        def norm(s: str) -> str:
            s = s.lower().strip()
            for prefix in ("nvidia ", "geforce ", "tesla "):
                s = s.removeprefix(prefix)
            return s.replace("-", " ")
        want = norm(name)
        for g in self.gpus:
            if want in {norm(g.name), *(norm(a) for a in g.aliases)}:
                return g
        return None

    def gpu_min_driver(self, gpu: Gpu) -> tuple[str, str, bool] | None:
        """(first driver that supports `gpu`, its source, inferred?) or None if unknown:
        the product's own row when it has one, else its architecture's."""
        if gpu.min_driver:
            return gpu.min_driver, gpu.min_driver_source or gpu.source, gpu.inferred
        arch = next((a for a in self.architectures if a.arch == gpu.arch), None)
        return (arch.min_driver, arch.source, arch.inferred) if arch else None

    def gpu_last_branch(self, gpu: Gpu) -> tuple[str, str, str] | None:
        """(last driver branch that supports `gpu`, its source, why it is inferred or "")
        or None when none is announced: the product's own row, else its architecture's."""
        if gpu.last_branch:
            return gpu.last_branch, gpu.last_branch_source, gpu.last_branch_why
        arch = next((a for a in self.architectures if a.arch == gpu.arch), None)
        if arch and arch.last_branch:
            return arch.last_branch, arch.last_branch_source, arch.last_branch_why
        return None

    def newest_driver_cuda(self, driver: str) -> CudaRelease | None:
        """The newest CUDA release whose toolkit driver this driver satisfies."""
        ok = [c for c in self.cuda if V(c.toolkit_driver) <= V(driver)]
        return max(ok, key=lambda c: V(c.version), default=None)

    def stack_names(self) -> list[str]:
        """Every `FRAMEWORK-VARIANT` stack: a framework's own variants, and for one built
        over another, the variants the base publishes on PyPI."""
        names = set()
        pypi = {}   # framework -> (variant, version) of each release PyPI serves
        for r in self.releases:
            for v in r.variants:
                names.add(f"{r.framework}-{v.name}")
            if r.pypi_variant:
                pypi.setdefault(r.framework, set()).add((r.pypi_variant, r.version))
        for f in self.frameworks:
            if not f.builds_on:
                continue
            base = self.framework(f.builds_on).package
            from packaging.specifiers import SpecifierSet  # only where a name is listed
            # as stated, and what its code needs beyond that (NeMo 2.6.0 states no torch range)
            ranges = [SpecifierSet(dict(r.requires).get(base, "")) & SpecifierSet(r.base_need(base))
                      for r in self.releases if r.framework == f.name]
            # a variant only where one of its releases admits a base release of that variant
            names.update(f"{f.name}-{v}" for v, version in pypi.get(f.builds_on, ())
                         if any(s.contains(version, prereleases=True) for s in ranges))
        return sorted(names)
