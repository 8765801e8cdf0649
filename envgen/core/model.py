"""Domain objects: frozen, side-effect free. Only the matrix loader builds them from raw data."""
from __future__ import annotations

import re
from functools import lru_cache

from packaging.version import Version

from . import record
from .record import dataclass, field

# A driver version as a user or nvidia-smi writes it (535, 535.104, 535.104.05), and a
# compute capability (9.0): what every reader of either checks it against.
DRIVER_RE = re.compile(r"[0-9]{3}(\.[0-9]{1,3}){0,2}")
CC_RE = re.compile(r"[0-9]{1,2}\.[0-9]")


@lru_cache(maxsize=4096)
def V(text: str) -> Version:
    """A comparable version for driver, CUDA and package versions ("535.104.05" works too)."""
    return Version(text)


_UTC_FORMS = {   # the two forms envgen writes, read without time.strptime (10 ms a start)
    "%Y%m%dT%H%M%SZ": re.compile(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z", re.ASCII),
    "%Y-%m-%dT%H:%M:%SZ": re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z",
                                     re.ASCII),
}


def utc_seconds(text: str, fmt: str) -> int:
    """A UTC time written as `fmt`, in seconds since 1970 (a SOURCE_DATE_EPOCH); ValueError
    when it is not one, as time.strptime raises."""
    import calendar
    m = _UTC_FORMS[fmt].fullmatch(text) if fmt in _UTC_FORMS else None
    if m is None:
        import time
        return calendar.timegm(time.strptime(text, fmt))
    y, mo, d, h, mi, sec = (int(x) for x in m.groups())
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1] and h < 24
            and mi < 60 and sec <= 61):
        raise ValueError(f"time data {text!r} is not a valid UTC time")
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))


def _license_terms(expr: str) -> list[str]:
    """The terms an SPDX expression ANDs together: 'A AND (B OR C)' -> ['A', '(B OR C)']."""
    expr = expr.strip()
    while expr.startswith("(") and expr.endswith(")"):   # drop parentheses around it all
        depth = 0
        for i, ch in enumerate(expr):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and i < len(expr) - 1:
                break
        else:
            expr = expr[1:-1].strip()
            continue
        break
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and expr.startswith(" AND ", i):
            parts.append(expr[start:i])
            start = i + len(" AND ")
    parts.append(expr[start:])
    if len(parts) > 1:
        return [t for part in parts for t in _license_terms(part)]
    return [f"({expr})" if " OR " in expr else expr]


def join_licenses(expressions) -> str:
    """One SPDX expression for everything an image holds: every AND term of each, once,
    sorted (a term with OR in parentheses); "" for none."""
    return " AND ".join(sorted({t for e in expressions if e for t in _license_terms(e)}))


_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """A distribution's PEP 503 name, as packaging.utils.canonicalize_name gives it; that
    module imports packaging.tags (logging, platform, subprocess) at every command's start."""
    return _SEPARATORS.sub("-", name).lower()


def major_minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2])


@dataclass(frozen=True)
class Located:
    """Where a fact came from: the file and line of its matrix entry, and its cited source."""

    source: str
    file: str = field(default="", compare=False, repr=False)
    line: int = field(default=0, compare=False, repr=False)
    # "inferred" when no source states the fact; `why` says how it was derived.
    confidence: str = field(default="stated", compare=False, repr=False)
    why: str = field(default="", compare=False, repr=False)

    @property
    def inferred(self) -> bool:
        return self.confidence == "inferred"


@dataclass(frozen=True)
class DriverBranch(Located):
    branch: str = ""
    first: str = ""
    latest: str = ""
    lts: bool = False
    eol: str | None = None

    def contains(self, driver: str) -> bool:
        return driver.split(".")[0] == self.branch


@dataclass(frozen=True)
class CudaMajor(Located):
    major: int = 0
    minimum_driver: str = ""


@dataclass(frozen=True)
class CudaRelease(Located):
    version: str = ""
    toolkit_driver: str = ""
    runtime: str = ""
    compute_capabilities: tuple[str, ...] = ()
    released: str | None = None

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def short(self) -> str:
        """major.minor, as `torch.version.cuda` and NVIDIA_REQUIRE_CUDA spell it."""
        return major_minor(self.version)


@dataclass(frozen=True)
class ForwardCompat(Located):
    cuda: str = ""
    branches: tuple[str, ...] = ()
    gpu_classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gpu(Located):
    name: str = ""
    aliases: tuple[str, ...] = ()
    cc: str = ""
    arch: str = ""
    gpu_class: str = ""
    brand: str = ""
    min_driver: str = ""          # the first driver that supports this product, when its
    min_driver_source: str = ""   # architecture's first driver is not (from its own source)
    last_branch: str = ""         # the last driver branch that supports it, when not its
    last_branch_source: str = ""  # architecture's (from its own source)
    last_branch_why: str = ""     # set when that last branch is inferred: how
    platform: str = ""            # the host's platform where the GPU fixes it (Grace:
    platform_source: str = ""     # linux/arm64), with its own source


@dataclass(frozen=True)
class GpuArchitecture(Located):
    """The first driver release that supports an architecture's GPUs: an older driver does
    not know the GPU, whatever CUDA the image carries."""

    arch: str = ""
    min_driver: str = ""
    last_branch: str = ""         # the last driver branch that supports the architecture
    last_branch_source: str = ""  # NVIDIA's notice that says so
    last_branch_why: str = ""     # set when that last branch is inferred: how


@dataclass(frozen=True)
class Library(Located):
    name: str = ""
    version: str = ""
    cuda: str = ""
    min_cc: str | None = None   # the oldest compute capability it supports, where stated


@dataclass(frozen=True)
class Framework(Located):
    name: str = ""
    package: str = ""
    companions: tuple[str, ...] = ()
    smoke: str = ""
    builds_on: str | None = None    # installed over that framework's stack
    # pip builds its package from the source distribution (no wheel for Linux on the
    # index), without build isolation, after the layers below it; env: the build's variables
    from_source: tuple[tuple[str, str], ...] | None = None
    # the distributions pip builds from sdists, where they are not (only) its own package:
    # dependencies PyPI serves as sdists alone (NeMo's antlr4-python3-runtime)
    source_packages: tuple[str, ...] = ()
    # the extra of its package the image installs (`asr`: nemo-toolkit[asr]), "" for none
    extra: str = ""
    # pins of the base stack's closure that its own requirements exclude (NeMo's
    # lightning<=2.4.0 needs fsspec<2026.0): its closure resolves them anew
    unpin: tuple[str, ...] = ()
    # the frameworks it may also be installed over, for its releases inside
    # also_over_releases (Keras 3 over jax or pytorch)
    also_over: tuple[str, ...] = ()
    also_over_releases: str = ""
    # a variable its stacks' images set, and its value per base framework (Keras:
    # KERAS_BACKEND=jax over jax); "" for none
    env_variable: str = ""
    env_values: tuple[tuple[str, str], ...] = ()

    def goes_over(self, base: str, version: str | None = None) -> bool:
        """Whether it is installed over the framework `base` (its release `version`, where
        given: also_over holds for the releases inside also_over_releases alone)."""
        if base == self.builds_on:
            return True
        if base not in self.also_over:
            return False
        if version is None or not self.also_over_releases:
            return True
        from packaging.specifiers import SpecifierSet
        return SpecifierSet(self.also_over_releases).contains(version, prereleases=True)


@dataclass(frozen=True)
class Variant:
    name: str
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    compute_capabilities: tuple[str, ...]
    ptx: str | None
    sources: tuple[str, ...]
    packages: tuple[tuple[str, str], ...] = ()
    license: str = ""     # the CUDA libraries' SPDX expression ("" when not known)
    # why its facts are inferred (no source states them), or "" when they are stated
    inferred_why: str = field(default="", compare=False)
    # the distribution that installs the framework in this variant ("": the framework's)
    package: str = ""


@dataclass(frozen=True)
class FrameworkRelease(Located):
    framework: str = ""
    version: str = ""
    released: str | None = None
    pythons: tuple[str, ...] = ()
    companions: tuple[tuple[str, str], ...] = ()
    pypi_variant: str | None = None
    variants: tuple[Variant, ...] = ()
    requires: tuple[tuple[str, str], ...] = ()   # name -> specifier (builds_on frameworks)
    requires_python: str | None = None
    python_floors: tuple[str, ...] = ()          # e.g. ("3.11.4",): 3.11 from its .4 on
    python_floors_why: str = ""
    needs: tuple[tuple[str, str], ...] = ()      # name -> specifier its code needs (inferred)
    needs_why: str = ""
    needs_over: str = ""                         # only over these base versions (a specifier)
    license: str = ""                            # SPDX, from the wheel's METADATA
    companion_licenses: tuple[tuple[str, str], ...] = ()   # those known, name -> SPDX
    refused_variants: tuple[tuple[str, str], ...] = ()     # variant -> why it is not served

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)

    def needs_at(self, base_version: str) -> tuple[tuple[str, str], ...]:
        """Its needs over base release `base_version` (a needs_over range may rule them out:
        DeepSpeed needs a setuptools with pkg_resources only over a torch whose
        cpp_extension imports it)."""
        if not self.needs_over:
            return self.needs
        from packaging.specifiers import SpecifierSet
        local = base_version.split("+")[0]
        return self.needs if SpecifierSet(self.needs_over).contains(local, True) else ()

    def base_need(self, package: str) -> str:
        """The range of the base framework's `package` its code needs whatever the base's
        version ("" when none): a need that holds only over some base versions (needs_over)
        cannot narrow the base."""
        return "" if self.needs_over else dict(self.needs).get(package, "")

    def python_short(self, base: "BaseImage") -> str | None:
        """Why `base`'s Python is too old a patch release for this release's code (its
        python_floors), or None when it is not, or when the matrix does not say which
        patch release the base has."""
        floor = next((f for f in self.python_floors
                      if f.rsplit(".", 1)[0] == base.python), None)
        if floor is None or not base.python_patch or V(base.python_patch) >= V(floor):
            return None
        return (f"{self.version} needs Python {floor} or later on the {base.python} line "
                f"({self.python_floors_why}); base {base.name} has {base.python_patch}")


@dataclass(frozen=True)
class WheelSource(Located):
    name: str = ""
    kind: str = ""
    url: str = ""


# What a local Debian base holds, and the version of its recipe (templates/build-base.sh.j2):
# a change to either names a new base.
LOCAL_BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "passwd")
LOCAL_BASE_RECIPE = 2


@dataclass(frozen=True)
class BaseImage(Located):
    name: str = ""
    kind: str = ""
    image: str = ""
    digest: str | None = None
    suite: str | None = None
    snapshot: str | None = None
    python: str = ""
    os: str = ""
    glibc: str = ""
    cuda: str | None = None
    cuda_compat: bool = False
    provides: tuple[tuple[str, str], ...] = ()
    python_patch: str | None = None   # the matrix's alone: not in a stack's label or lock
    default: bool = False
    arch: str = ""   # Debian's architecture when not amd64 (arm64): the base made for it

    @property
    def local_tag(self) -> str:
        """A local base's tag, named by everything that makes it (suite, snapshot, packages,
        recipe), so a cached base is found without asking the network."""
        import hashlib
        import json
        key = json.dumps({"suite": self.suite, "snapshot": self.snapshot,
                          "packages": LOCAL_BASE_PACKAGES, "variant": "minbase",
                          "recipe": LOCAL_BASE_RECIPE,
                          **({"arch": self.arch, "into": "buildkit"} if self.arch else {})},
                         sort_keys=True)
        name = f"{self.name}-{self.arch}" if self.arch else self.name
        return f"{self.image}:{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    @property
    def snapshot_epoch(self) -> int | None:
        """The snapshot as seconds since 1970 (SOURCE_DATE_EPOCH for the base's files)."""
        return utc_seconds(self.snapshot, "%Y%m%dT%H%M%SZ") if self.snapshot else None

    @property
    def platform(self) -> str:
        """The wheel platform pip inside this base accepts, newest manylinux first."""
        machine = "aarch64" if self.arch == "arm64" else "x86_64"
        return f"manylinux_{self.glibc.replace('.', '_')}_{machine}" if self.glibc else \
            f"manylinux_2_17_{machine}"

    @property
    def reference(self) -> str:
        """What a Dockerfile's FROM names: the image, pinned by digest when known."""
        if self.digest and "@" not in self.image:
            return f"{self.image}@{self.digest}"
        if self.kind == "local" and ":" not in self.image:
            return self.local_tag
        return self.image

    def to_json(self) -> dict:
        return {"name": self.name, "image": self.image, "kind": self.kind,
                "digest": self.digest, "suite": self.suite, "snapshot": self.snapshot,
                "python": self.python, "os": self.os, "glibc": self.glibc, "cuda": self.cuda,
                "cuda_compat": self.cuda_compat, "provides": dict(self.provides),
                **({"arch": self.arch} if self.arch else {})}


DEFAULT_PLATFORM = "linux/amd64"
PLATFORMS = ("linux/amd64", "linux/arm64")


def platform_suffix(platform: str) -> str:
    """What a stack name carries for its platform: nothing for linux/amd64 (every name
    from before the platform axis stays), `-arm64` for linux/arm64."""
    return "" if platform == DEFAULT_PLATFORM else "-" + platform.split("/")[-1]


@dataclass(frozen=True)
class Platform(Located):
    """An OCI platform envgen builds for: how pip, uv, Debian and QEMU name it."""

    name: str = ""                # linux/arm64
    machine: str = ""             # platform.machine() on such a host: aarch64
    debian: str = ""              # Debian's architecture: arm64
    wheel_tag: str = ""           # the manylinux tag envgen resolves for: manylinux_2_28_aarch64
    uv: str = ""                  # uv's --python-platform: aarch64-manylinux_2_28


@dataclass(frozen=True)
class PlatformWheel(Located):
    """What PyPI serves of one framework release for one platform: the CPython lines it
    has wheels for and the variant those wheels are (the CUDA one, or cpu), with the CUDA
    library pins its METADATA requires on that platform."""

    package: str = ""
    version: str = ""
    platform: str = ""
    variant: str = ""
    pythons: tuple[str, ...] = ()
    packages: tuple[tuple[str, str], ...] = ()
    # the GPUs this platform's wheel has code for, where the row states them (torch's
    # aarch64 CUDA wheels are built for fewer than its x86_64 ones); None: the variant's
    compute_capabilities: tuple[str, ...] | None = None
    ptx: str | None = None


def stack_key(stack: str, project: str | None) -> str:
    """The name a lock and the certificate store know a stack by: a project's image is not
    the plain stack's."""
    return f"{project}.{stack}" if project else stack


APP_DIR = "/home/envgen/app"   # a project's copied files (owned by root, read-only)


@dataclass(frozen=True)
class ProjectLayer:
    """What a project file (envgen.yaml) adds over a stack: its own exact pip pins (also
    in Stack.packages), apt packages, files (source, destination, sha256, mode) and a
    smoke command of its own."""

    name: str
    pip: tuple[tuple[str, str], ...] = ()
    apt: tuple[str, ...] = ()
    files: tuple[tuple[str, str, str, int], ...] = ()
    smoke: tuple[str, ...] = ()
    # the folder the files are read from (not part of the stack: a label or lock has "",
    # and the files are then looked for in the current folder, by their sha256)
    root: str = field(default="", compare=False)
    # where each pip pin is written (the project file and {name: line}), for a message
    source: str = field(default="", compare=False)
    pip_lines: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    # `init --from`: the team's requirements and constraints as written, and the extra
    # indexes its file names; resolved into `pip` (the exact pins) by resolve/project.py
    requirements: tuple[str, ...] = field(default=(), compare=False)
    constraints: tuple[str, ...] = field(default=(), compare=False)
    indexes: tuple[str, ...] = field(default=(), compare=False)
    # the compute capabilities a CUDA-kernel sdist is compiled for (TORCH_CUDA_ARCH_LIST):
    # the target GPUs' (init --from writes them); empty: every one the framework's build has
    cuda_archs: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {"name": self.name, "pip": dict(self.pip), "apt": list(self.apt),
               "files": [{"src": s, "dest": d, "sha256": h, "mode": oct(m)[2:]}
                         for s, d, h, m in self.files],
               "smoke": list(self.smoke)}
        if self.cuda_archs:
            out["cuda_archs"] = list(self.cuda_archs)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "ProjectLayer":
        return cls(name=data["name"], pip=tuple(sorted(data.get("pip", {}).items())),
                   apt=tuple(data.get("apt", ())),
                   files=tuple((f["src"], f["dest"], f["sha256"], int(f["mode"], 8))
                               for f in data.get("files", ())),
                   smoke=tuple(data.get("smoke", ())),
                   cuda_archs=tuple(data.get("cuda_archs", ())))


@dataclass(frozen=True)
class Stack:
    """One fully pinned environment, with the reasons for every choice."""

    stack: str
    framework: str
    framework_package: str
    version: str
    variant: str
    python: str
    cuda: str | None
    cuda_release: str | None
    cudnn: str | None
    nccl: str | None
    packages: tuple[tuple[str, str], ...]
    base: BaseImage
    wheel_source: str
    index_url: str | None
    driver_minimum: str | None
    driver_toolkit: str | None
    require_cuda: str | None
    compute_capabilities: tuple[str, ...]
    ptx: str | None
    forward_compat: bool
    smoke: str
    reasons: tuple[str, ...]
    matrix_sha256: str
    companions: tuple[str, ...] = ()
    # A framework installed over another's stack (Lightning over PyTorch): the base
    # framework's name, and the distributions installed over the base stack.
    builds_on: str | None = None
    builds_on_package: str | None = None
    addons: tuple[str, ...] = ()
    # distributions pip builds from their sdists (DeepSpeed), and the build's variables
    from_source: tuple[str, ...] = ()
    build_env: tuple[tuple[str, str], ...] = ()
    # (package, extra) the closure resolves with (`nemo-toolkit[asr]==3.0.0`)
    extras: tuple[tuple[str, str], ...] = ()
    # base-closure pins the closure does not hold (the add-ons' `unpin`)
    unpinned: tuple[str, ...] = ()
    # variables the image's environment sets for the frameworks in it (KERAS_BACKEND)
    env: tuple[tuple[str, str], ...] = ()
    # SPDX expression of what the image installs: the frameworks', the companions' where
    # known, the CUDA libraries'; "" when a framework's or the CUDA libraries' is unknown
    licenses: str = ""
    # what the project file of the folder it was built from adds (None: a plain stack)
    project: ProjectLayer | None = None
    # the OCI platform the image is built for; absent from the JSON form when linux/amd64,
    # so every amd64 label, lock and certificate written before it reads the same
    platform: str = "linux/amd64"

    @property
    def key(self) -> str:
        return stack_key(self.stack, self.project.name if self.project else None)

    def plain(self) -> "Stack":
        """The stack without its project layer: the image the project's is built over."""
        if self.project is None:
            return self
        own = {n for n, _ in self.project.pip}
        packages = tuple((n, v) for n, v in self.packages if canonical_name(n) not in own)
        mine = f"project {self.project.name}:"
        reasons = tuple(r for r in self.reasons if not r.startswith(mine))
        return self.replace(project=None, packages=packages, reasons=reasons)

    def base_stack(self) -> "Stack":
        """The stack this one is installed over (its packages without the add-ons): its
        closure constrains this one's, so the two images share every lower layer."""
        packages = tuple((n, v) for n, v in self.packages if n not in self.addons)
        package = self.builds_on_package or ""
        return self.replace(stack=f"{self.builds_on}-{self.variant}"
                                  f"{platform_suffix(self.platform)}",
                            framework=self.builds_on, framework_package=package,
                            version=dict(packages).get(package, "").split("+")[0],
                            packages=packages, builds_on=None, builds_on_package=None,
                            addons=(), licenses="",   # the base's own are not kept
                            from_source=(), build_env=(), extras=(), unpinned=(), env=())

    def as_variant(self) -> Variant:
        """The build facts the kernel check needs (compat.kernels_for takes a Variant)."""
        return Variant(name=self.variant, cuda=self.cuda, cudnn=self.cudnn, nccl=self.nccl,
                       compute_capabilities=self.compute_capabilities, ptx=self.ptx,
                       sources=(self.wheel_source,))

    @property
    def pip_packages(self) -> dict[str, str]:
        """What pip installs: the base may already provide the framework."""
        provided = dict(self.base.provides)
        return {n: v for n, v in self.packages if n not in provided}

    def to_json(self) -> dict:
        """The one serialiser behind --json, the io.envgen.stack label and the lock."""
        return {
            "stack": self.stack,
            "framework": {"name": self.framework, "package": self.framework_package,
                          "version": self.version, "variant": self.variant,
                          "companions": list(self.companions),
                          **({"builds_on": {"name": self.builds_on,
                                            "package": self.builds_on_package},
                              "addons": list(self.addons)} if self.builds_on else {})},
            "packages": dict(self.packages),
            "python": self.python,
            "cuda": self.cuda,
            "cuda_release": self.cuda_release,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "base": self.base.to_json(),
            "wheel_source": self.wheel_source,
            "index_url": self.index_url,
            "driver": {"minimum": self.driver_minimum, "toolkit": self.driver_toolkit},
            "require_cuda": self.require_cuda,
            "compute_capabilities": list(self.compute_capabilities),
            "ptx": self.ptx,
            "forward_compat": self.forward_compat,
            "smoke": self.smoke,
            "reasons": list(self.reasons),
            "matrix_sha256": self.matrix_sha256,
            "licenses": self.licenses,
            **({"from_source": {"packages": list(self.from_source),
                                "env": dict(self.build_env)}} if self.from_source else {}),
            **({"extras": dict(self.extras)} if self.extras else {}),
            **({"unpinned": list(self.unpinned)} if self.unpinned else {}),
            **({"env": dict(self.env)} if self.env else {}),
            **({"project": self.project.to_json()} if self.project else {}),
            **({"platform": self.platform} if self.platform != DEFAULT_PLATFORM else {}),
        }

    @classmethod
    def from_json(cls, data: dict) -> "Stack":
        b = data["base"]
        base = BaseImage(source="label", name=b["name"], kind=b["kind"], image=b["image"],
                         digest=b.get("digest"), suite=b.get("suite"),
                         snapshot=b.get("snapshot"), python=b.get("python", ""),
                         os=b.get("os", ""), glibc=b.get("glibc", ""), cuda=b.get("cuda"),
                         cuda_compat=bool(b.get("cuda_compat")),
                         provides=tuple(sorted((b.get("provides") or {}).items())),
                         arch=b.get("arch") or "")
        fw = data["framework"]
        return cls(stack=data["stack"], framework=fw["name"], framework_package=fw["package"],
                   version=fw["version"], variant=fw["variant"], python=data["python"],
                   cuda=data.get("cuda"), cuda_release=data.get("cuda_release"),
                   cudnn=data.get("cudnn"), nccl=data.get("nccl"),
                   packages=tuple(data["packages"].items()), base=base,
                   wheel_source=data["wheel_source"], index_url=data.get("index_url"),
                   driver_minimum=data["driver"]["minimum"],
                   driver_toolkit=data["driver"]["toolkit"],
                   require_cuda=data.get("require_cuda"),
                   compute_capabilities=tuple(data.get("compute_capabilities", ())),
                   ptx=data.get("ptx"), forward_compat=bool(data.get("forward_compat")),
                   smoke=data.get("smoke", ""), reasons=tuple(data.get("reasons", ())),
                   matrix_sha256=data.get("matrix_sha256", ""),
                   companions=tuple(fw.get("companions", ())),
                   builds_on=(fw.get("builds_on") or {}).get("name"),
                   builds_on_package=(fw.get("builds_on") or {}).get("package"),
                   addons=tuple(fw.get("addons", ())),
                   licenses=data.get("licenses", ""),   # locks written before it lack it
                   from_source=tuple((data.get("from_source") or {}).get("packages", ())),
                   build_env=tuple(sorted(((data.get("from_source") or {}).get("env")
                                           or {}).items())),
                   extras=tuple(sorted((data.get("extras") or {}).items())),
                   unpinned=tuple(data.get("unpinned") or ()),
                   env=tuple(sorted((data.get("env") or {}).items())),
                   project=ProjectLayer.from_json(data["project"]) if data.get("project")
                   else None,
                   platform=data.get("platform") or DEFAULT_PLATFORM)

    def replace(self, **changes) -> "Stack":
        return record.replace(self, **changes)


def requirement(name: str, version: str, extra: str = "") -> str:
    """`name==1.2` for an exact pin; `name==13.0.96.*` or a range as the wheel states it;
    `name[extra]==1.2` with an extra."""
    name = f"{name}[{extra}]" if extra else name
    return f"{name}{version}" if version[:1] in "<>=!~" else f"{name}=={version}"


CLOSURE_VERSION = 1


@dataclass(frozen=True)
class Pin:
    """One distribution of a closure: the exact file pip installs and its sha256, or the
    reason there is no hash (an index that publishes none)."""

    name: str
    version: str
    file: str | None = None
    sha256: str | None = None
    note: str | None = None

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def sdist(self) -> bool:
        """pip builds this pin from its source archive: its file is not a wheel."""
        return bool(self.file) and not self.file.endswith(".whl")

    def to_json(self) -> dict:
        out = {"name": self.name, "version": self.version, "file": self.file,
               "hashes": [f"sha256:{self.sha256}"] if self.sha256 else []}
        if self.note:
            out["hash_note"] = self.note
        return out


# What a closure records of a project's builder stages beside its pins (Closure.to_json
# writes each only when present): a lock keeps them beside the closure's key, and a rebuild
# from the lock hands them back to parse_closure.
CLOSURE_PROJECT_KEYS = ("kernel_build", "pure_sdists", "sdist_build")


@dataclass(frozen=True)
class Closure:
    """Every distribution an image's environment holds, resolved once for one set of inputs
    (requirements, Python, platform, index) and keyed by their sha256."""

    key: str
    inputs: dict = field(hash=False, compare=False)
    pins: tuple[Pin, ...] = ()
    resolver: str = ""
    created: str = ""           # UTC, 2026-12-01T09:40:00Z
    stack: str = ""
    # a project's sdists that compile CUDA kernels against torch (built in the kernel-build
    # stage over the image's own layers), and the files that stage installs to build them
    # (NVIDIA's compiler wheels, ninja...): hash-pinned, in no layer of the image
    kernels: tuple[str, ...] = ()
    build_pins: tuple[Pin, ...] = ()
    # a project's sdists that hold no native source: their builder stage needs no compiler
    pure_sdists: tuple[str, ...] = ()
    # what the builder stage installs to build a project's sdists (their [build-system]
    # requires, resolved together): hash-pinned wheels, in no layer of the image. Empty for
    # a closure written before envgen pinned them: pip's isolated environment then takes
    # them from the index (the Dockerfile says so).
    sdist_build: tuple[Pin, ...] = ()

    @property
    def epoch(self) -> int:
        return utc_seconds(self.created, "%Y-%m-%dT%H:%M:%SZ")

    def to_json(self) -> dict:
        out = {"closure_version": CLOSURE_VERSION, "stack": self.stack, "key": self.key,
               "inputs": self.inputs, "resolver": self.resolver, "created": self.created,
               "packages": [p.to_json() for p in self.pins]}
        if self.kernels:
            out["kernel_build"] = {"sdists": list(self.kernels),
                                   "packages": [p.to_json() for p in self.build_pins]}
        if self.pure_sdists:
            out["pure_sdists"] = list(self.pure_sdists)
        if self.sdist_build:
            out["sdist_build"] = {"packages": [p.to_json() for p in self.sdist_build]}
        return out
