"""Matrix files → validated domain objects, every problem collected with its file:line."""
from __future__ import annotations

import hashlib
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..core.errors import MatrixError
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
    Variant,
    WheelSource,
)
from .table import Matrix

BUNDLED = Path(__file__).resolve().parent.parent / "data" / "matrices"


def bundled_path() -> Path:
    """The matrix shipped inside the package (a copy of the repository's matrices/)."""
    repo = Path(__file__).resolve().parents[2] / "matrices"
    return repo if repo.is_dir() else BUNDLED


def matrix_files(path: Path) -> list[Path]:
    """The matrix files of a folder (or the one file). A symbolic link inside a folder is
    refused rather than followed: it could point anywhere (/etc/shadow), and an error
    quoting its target would print what it points at."""
    if path.is_dir():
        links = sorted(p for p in path.glob("*.yaml") if p.is_symlink())
        if links:
            raise MatrixError([MatrixError(message="is a symbolic link; matrix files must be "
                                                   "regular files inside the folder",
                                           file=str(p)) for p in links])
        # FIFOs and devices too: reading refuses them with the file's name
        files = sorted(p for p in path.glob("*.yaml") if not p.is_dir())
        if not files:
            raise MatrixError(message="no *.yaml files in this folder", file=str(path))
        return files
    if path.is_file():
        return [path]
    if path.exists():   # a device, a FIFO, a socket: /dev/null is no empty matrix
        raise MatrixError(message="is neither a regular file nor a folder; a matrix is a "
                                  "YAML file or a folder of them", file=str(path))
    raise MatrixError(message="no such matrix file or folder", file=str(path))


def load_matrix(path: str | Path | None = None) -> Matrix:
    """Load and validate a matrix file or folder (the bundled one by default)."""
    from . import cache
    root = Path(path) if path else bundled_path()
    files = matrix_files(root)
    key = cache.key_of(files)
    cached = cache.get(key)
    if cached is not None:
        return cached
    from .schema import SECTIONS, validate  # not needed for a cached matrix: lazily
    from .yamlfile import load_file
    digest = hashlib.sha256()
    problems: list[MatrixError] = []
    entries: dict[str, list] = {s: [] for s in SECTIONS}
    for f in files:
        name = str(f)
        try:
            doc = load_file(f, name)
        except MatrixError as e:
            problems.append(e)
            continue
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
        if doc is not None and not isinstance(doc, dict):
            problems.append(MatrixError(message="a matrix file must be a mapping of sections",
                                        file=name, line=1))
            continue
        schema_problems = validate(doc, name)
        problems += schema_problems
        if schema_problems:
            continue
        for section, items in doc.items():
            for item, line in zip(items, items.lines):
                entries[section].append((item, name, line))
    if problems:
        raise MatrixError(problems)
    matrix = _build(entries, digest.hexdigest(), problems)
    if not problems:
        _cross_check(matrix, problems)
    if problems:
        raise MatrixError(problems)
    cache.put(key, matrix)
    return matrix


def _from_source(raw) -> tuple[tuple[str, str], ...] | None:
    """A framework's source build: its variables, sorted (None: it installs from wheels)."""
    return None if raw is None else tuple(sorted((raw.get("env") or {}).items()))


def _t(x) -> tuple:
    return tuple(x or ())


def _last_branch(raw) -> dict:
    return {k: raw.get(k, "") for k in ("last_branch", "last_branch_source", "last_branch_why")}


def _build(entries, sha, problems) -> Matrix:
    def loc(raw, f, line):
        return {"source": raw["source"], "file": f, "line": line,
                "confidence": raw.get("confidence", "stated"), "why": raw.get("why", "")}

    m = Matrix(sha256=sha)
    for raw, f, ln in entries["drivers"]:
        m.drivers.append(DriverBranch(**loc(raw, f, ln), branch=raw["branch"],
                                      first=raw["first"], latest=raw["latest"],
                                      lts=raw.get("lts", False), eol=raw.get("eol")))
    for raw, f, ln in entries["cuda_majors"]:
        m.cuda_majors.append(CudaMajor(**loc(raw, f, ln), major=raw["major"],
                                       minimum_driver=raw["minimum_driver"]))
    for raw, f, ln in entries["cuda"]:
        m.cuda.append(CudaRelease(**loc(raw, f, ln), version=raw["version"],
                                  toolkit_driver=raw["toolkit_driver"],
                                  runtime=raw.get("runtime", ""),
                                  compute_capabilities=_t(raw.get("compute_capabilities")),
                                  released=raw.get("released")))
    for raw, f, ln in entries["forward_compat"]:
        m.forward_compat.append(ForwardCompat(**loc(raw, f, ln), cuda=raw["cuda"],
                                              branches=_t(raw["branches"]),
                                              gpu_classes=_t(raw.get("gpu_classes",
                                                                     ["datacenter"]))))
    for raw, f, ln in entries["gpus"]:
        m.gpus.append(Gpu(**loc(raw, f, ln), name=raw["name"], aliases=_t(raw.get("aliases")),
                          cc=raw["cc"], arch=raw.get("arch", ""), gpu_class=raw["class"],
                          brand=raw.get("brand", ""), min_driver=raw.get("min_driver", ""),
                          min_driver_source=raw.get("min_driver_source", ""),
                          platform=raw.get("platform", ""),
                          platform_source=raw.get("platform_source", ""),
                          **_last_branch(raw)))
    for raw, f, ln in entries["gpu_architectures"]:
        m.architectures.append(GpuArchitecture(**loc(raw, f, ln), arch=raw["arch"],
                                               min_driver=raw["min_driver"],
                                               **_last_branch(raw)))
    for raw, f, ln in entries["libraries"]:
        m.libraries.append(Library(**loc(raw, f, ln), name=raw["name"],
                                   version=raw["version"], cuda=raw["cuda"],
                                   min_cc=raw.get("min_cc")))
    for raw, f, ln in entries["frameworks"]:
        m.frameworks.append(Framework(**loc(raw, f, ln), name=raw["name"],
                                      package=raw["package"],
                                      companions=_t(raw.get("companions")),
                                      smoke=raw.get("smoke", raw["package"]),
                                      builds_on=raw.get("builds_on"),
                                      from_source=_from_source(raw.get("from_source")),
                                      source_packages=_t((raw.get("from_source") or {})
                                                         .get("packages")),
                                      extra=(raw.get("extra") or {}).get("name", ""),
                                      unpin=_t((raw.get("unpin") or {}).get("packages")),
                                      also_over=_t((raw.get("also_over") or {})
                                                   .get("frameworks")),
                                      also_over_releases=(raw.get("also_over") or {})
                                      .get("releases", ""),
                                      env_variable=(raw.get("env") or {}).get("variable", ""),
                                      env_values=tuple(sorted(((raw.get("env") or {})
                                                               .get("values") or {}).items()))))
    for raw, f, ln in entries["framework_releases"]:
        variants = tuple(
            Variant(name=v["name"], cuda=v.get("cuda"), cudnn=v.get("cudnn"),
                    nccl=v.get("nccl"), compute_capabilities=_t(v.get("compute_capabilities")),
                    ptx=v.get("ptx"), sources=_t(v["sources"]),
                    packages=tuple(sorted((v.get("packages") or {}).items())),
                    license=v.get("license", ""), package=v.get("package", ""),
                    inferred_why=(v.get("why") or "no source states it")
                    if v.get("confidence") == "inferred" else "")
            for v in raw.get("variants") or ())
        m.releases.append(FrameworkRelease(
            **loc(raw, f, ln), framework=raw["framework"], version=raw["version"],
            released=raw.get("released"), pythons=_t(raw["pythons"]),
            companions=tuple(sorted((raw.get("companions") or {}).items())),
            pypi_variant=raw.get("pypi_variant"), variants=variants,
            requires=tuple(sorted((raw.get("requires") or {}).items())),
            requires_python=raw.get("requires_python"), license=raw.get("license", ""),
            python_floors=_t(raw.get("python_floors")),
            python_floors_why=raw.get("python_floors_why", ""),
            needs=tuple(sorted((raw.get("needs") or {}).items())),
            needs_why=raw.get("needs_why", ""), needs_over=raw.get("needs_over", ""),
            companion_licenses=tuple(sorted((raw.get("companion_licenses") or {})
                                            .items())),
            refused_variants=tuple(sorted((raw.get("refused_variants") or {}).items()))))
    for raw, f, ln in entries["wheel_sources"]:
        m.wheel_sources.append(WheelSource(**loc(raw, f, ln), name=raw["name"],
                                           kind=raw["kind"], url=raw["url"]))
    for raw, f, ln in entries["bases"]:
        m.bases.append(BaseImage(
            **loc(raw, f, ln), name=raw["name"], kind=raw["kind"], image=raw["image"],
            digest=raw.get("digest"), suite=raw.get("suite"), snapshot=raw.get("snapshot"),
            python=raw["python"], os=raw.get("os", ""), glibc=raw.get("glibc", ""),
            cuda=raw.get("cuda"),
            cuda_compat=raw.get("cuda_compat", False),
            provides=tuple(sorted((raw.get("provides") or {}).items())),
            python_patch=raw.get("python_patch"), default=raw.get("default", False)))
    for raw, f, ln in entries["platforms"]:
        m.platforms.append(Platform(**loc(raw, f, ln), name=raw["name"],
                                    machine=raw["machine"], debian=raw["debian"],
                                    wheel_tag=raw["wheel_tag"], uv=raw["uv"]))
    for raw, f, ln in entries["platform_wheels"]:
        m.platform_wheels.append(PlatformWheel(
            **loc(raw, f, ln), package=raw["package"], version=raw["version"],
            platform=raw["platform"], variant=raw["variant"], pythons=_t(raw["pythons"]),
            packages=tuple(sorted((raw.get("packages") or {}).items())),
            compute_capabilities=_t(raw["compute_capabilities"])
            if "compute_capabilities" in raw else None, ptx=raw.get("ptx")))
    return m


def _problem(problems, obj, message):
    problems.append(MatrixError(message=message, file=obj.file, line=obj.line))


def _unique(problems, items, key, what):
    seen = {}
    for it in items:
        k = key(it)
        if k in seen:
            _problem(problems, it, f"duplicate {what} {k!r} (also at {seen[k].file}:"
                                   f"{seen[k].line})")
        else:
            seen[k] = it


def _requires_check(m: Matrix, r, problems: list) -> None:
    """A release's requires and needs are version specifiers, and needs and python_floors
    say why; a release of a builds_on framework names the base framework's package it needs
    and carries no variants (they are the base's); any other release has variants."""
    fw = m.framework(r.framework)
    where = f"{r.framework} {r.version}"
    for field, pins in (("requires", r.requires), ("needs", r.needs)):
        for name, spec in pins:
            try:
                SpecifierSet(spec)
            except InvalidSpecifier:
                _problem(problems, r, f"{where}: {field} {name}{spec!r}, not a version "
                                      f"specifier")
    if r.needs_over:
        try:
            SpecifierSet(r.needs_over)
        except InvalidSpecifier:
            _problem(problems, r, f"{where}: needs_over {r.needs_over!r}, not a version "
                                  f"specifier")
        if not r.needs:
            _problem(problems, r, f"{where}: needs_over without needs")
    for field, why in (("needs", r.needs_why), ("python_floors", r.python_floors_why)):
        if getattr(r, field) and not why:
            _problem(problems, r, f"{where}: {field} without {field}_why (what needs them, "
                                  f"and its source)")
    if fw.builds_on:
        base = m.framework(fw.builds_on)
        if r.variants:
            _problem(problems, r, f"{where}: builds on {fw.builds_on}, so its variants are "
                                  f"the base's; list none")
        if base and base.package not in dict(r.requires) and not r.base_need(base.package):
            _problem(problems, r, f"{where}: neither requires nor needs gives a "
                                  f"{base.package} range")
    elif not r.variants:
        _problem(problems, r, f"{where}: no variants")


def _platform_wheels_check(m: Matrix, problems: list) -> None:
    """A platform wheel row is on a platform the matrix lists, of a framework's package,
    and (of a release the matrix holds) one of that release's variants."""
    platforms = {p.name for p in m.platforms}
    for w in m.platform_wheels:
        where = f"platform wheel {w.package} {w.version} {w.platform}"
        if platforms and w.platform not in platforms:
            _problem(problems, w, f"{where}: {w.platform} is not one of the platforms "
                                  f"({', '.join(sorted(platforms))})")
        fws = [f for f in m.frameworks if f.package == w.package and not f.builds_on]
        if not fws:
            _problem(problems, w, f"{where}: {w.package} is not the package of a framework "
                                  f"with stacks of its own in the matrix")
            continue
        rel = next((r for f in fws for r in m.releases
                    if r.framework == f.name and r.version == w.version), None)
        # a row of a release the matrix does not hold is never read (a matrix cut down
        # with --matrix keeps its platforms.yaml whole): only a variant is checked
        if rel is not None and w.variant not in {v.name for v in rel.variants}:
            _problem(problems, w, f"{where}: variant {w.variant} is not one of "
                                  f"{w.package} {w.version}'s variants "
                                  f"({', '.join(v.name for v in rel.variants)})")


def _cross_check(m: Matrix, problems: list) -> None:
    """References between sections, and values the schema cannot judge."""
    _unique(problems, m.drivers, lambda d: d.branch, "driver branch")
    _unique(problems, m.cuda_majors, lambda c: c.major, "CUDA major")
    _unique(problems, m.cuda, lambda c: c.version, "CUDA release")
    _unique(problems, m.forward_compat, lambda f: f.cuda, "forward_compat")
    _unique(problems, m.gpus, lambda g: g.name.lower(), "GPU")
    _unique(problems, m.architectures, lambda a: a.arch, "GPU architecture")
    _unique(problems, m.libraries, lambda lib: (lib.name, lib.version), "library")
    _unique(problems, m.frameworks, lambda f: f.name, "framework")
    _unique(problems, m.platform_wheels, lambda w: (w.package, w.version, w.platform,
                                                    w.variant), "platform wheel")
    _unique(problems, m.releases, lambda r: (r.framework, r.version), "framework release")
    _unique(problems, m.wheel_sources, lambda s: s.name, "wheel source")
    _unique(problems, m.bases, lambda b: b.name, "base")
    for d in m.drivers:
        if not (d.first.startswith(d.branch + ".") and d.latest.startswith(d.branch + ".")):
            _problem(problems, d, f"driver branch {d.branch}: first/latest are not in it")
        elif V(d.latest) < V(d.first):
            _problem(problems, d, f"driver branch {d.branch}: latest {d.latest} is older "
                                  f"than first {d.first}")
    # a first driver past the last branch would leave no driver that knows the GPU
    firsts = [(a, a.arch, a.min_driver) for a in m.architectures]
    firsts += [(g, g.name, (m.gpu_min_driver(g) or ("",))[0]) for g in m.gpus]
    for row, name, first in firsts:
        if row.last_branch and first and int(first.split(".")[0]) > int(row.last_branch):
            _problem(problems, row, f"{name}: first driver {first} is past its last branch "
                                    f"R{row.last_branch}")
    majors = {c.major for c in m.cuda_majors}
    for c in m.cuda:
        if c.major not in majors:
            _problem(problems, c, f"CUDA {c.version}: no cuda_majors entry for {c.major}")
    branches = {d.branch for d in m.drivers}
    for fc in m.forward_compat:
        for b in fc.branches:
            if b not in branches:
                _problem(problems, fc, f"forward_compat {fc.cuda}: unknown driver branch {b}")
    for lib in m.libraries:
        try:
            SpecifierSet(lib.cuda)
        except InvalidSpecifier:
            _problem(problems, lib, f"{lib.name} {lib.version}: bad CUDA specifier "
                                    f"{lib.cuda!r}")
    sources = {s.name for s in m.wheel_sources}
    frameworks = {f.name for f in m.frameworks}
    cudas = {c.version for c in m.cuda}
    libs = {(lib.name, lib.version) for lib in m.libraries}
    for f in m.frameworks:
        base = m.framework(f.builds_on) if f.builds_on else None
        if f.builds_on and (base is None or base.builds_on or base is f):
            _problem(problems, f, f"framework {f.name}: builds_on {f.builds_on!r} is not a "
                                  f"framework with stacks of its own")
        for name in f.also_over:
            other = m.framework(name)
            if other is None or other.builds_on or other is f or not f.builds_on:
                _problem(problems, f, f"framework {f.name}: also_over {name!r} is not a "
                                      f"framework with stacks of its own")
    for r in m.releases:
        if r.framework not in frameworks:
            _problem(problems, r, f"{r.framework} {r.version}: unknown framework "
                                  f"{r.framework!r}")
            continue
        _requires_check(m, r, problems)
        lines = [f.rsplit(".", 1)[0] for f in r.python_floors]
        if len(set(lines)) != len(lines) or not set(lines) <= set(r.pythons):
            _problem(problems, r, f"{r.framework} {r.version}: python_floors must name each "
                                  f"of its Python lines at most once")
        try:
            V(r.version)
        except InvalidVersion:
            _problem(problems, r, f"{r.framework}: bad version {r.version!r}")
        names = [v.name for v in r.variants]
        if len(set(names)) != len(names):
            _problem(problems, r, f"{r.framework} {r.version}: a variant is listed twice")
        strays = [n for n, _ in r.companion_licenses if n not in dict(r.companions)]
        if strays:
            _problem(problems, r, f"{r.framework} {r.version}: companion_licenses names "
                                  f"{', '.join(strays)}, not among its companions")
        if r.pypi_variant and r.pypi_variant not in names:
            _problem(problems, r, f"{r.framework} {r.version}: pypi_variant "
                                  f"{r.pypi_variant} is not one of its variants")
        for v in r.variants:
            where = f"{r.framework} {r.version} {v.name}"
            for s in v.sources:
                if s not in sources:
                    _problem(problems, r, f"{where}: unknown wheel source {s!r}")
            if v.name == "cpu":
                if v.cuda:
                    _problem(problems, r, f"{where}: a cpu variant has no CUDA")
                continue
            if v.cuda not in cudas:
                _problem(problems, r, f"{where}: unknown CUDA release {v.cuda!r}")
            elif v.name not in ("cu" + "".join(v.cuda.split(".")[:2]),   # cu121: CUDA 12.1
                                "cuda" + v.cuda.split(".")[0]):           # cuda12: any 12.x
                _problem(problems, r, f"{where}: variant name does not match CUDA {v.cuda}")
            else:
                can = set(m.cuda_release(v.cuda).compute_capabilities)
                extra = [cc for cc in (*v.compute_capabilities, *([v.ptx] if v.ptx else []))
                         if can and cc not in can]
                if extra:
                    _problem(problems, r, f"{where}: CUDA {v.cuda} cannot build for compute "
                                          f"capability {', '.join(extra)}")
            for lib_name in ("cudnn", "nccl"):
                ver = getattr(v, lib_name)
                if ver and (lib_name, ver) not in libs:
                    _problem(problems, r, f"{where}: unknown {lib_name} version {ver!r}")
                elif ver and v.cuda in cudas:
                    lib = m.library(lib_name, ver)
                    try:
                        spec = SpecifierSet(lib.cuda)
                    except InvalidSpecifier:
                        continue   # reported once, on the library itself
                    if ".".join(v.cuda.split(".")[:2]) not in spec:
                        _problem(problems, r, f"{where}: {lib_name} {ver} does not support "
                                              f"CUDA {v.cuda}")
                    floor = lib.min_cc
                    older = [cc for cc in v.compute_capabilities
                             if floor and Version(cc) < Version(floor)]
                    if older:
                        _problem(problems, r, f"{where}: {lib_name} {ver} supports compute "
                                              f"capability {floor} and newer, not "
                                              f"{', '.join(older)}")
    _platform_wheels_check(m, problems)
    for b in m.bases:
        for pkg, ver in b.provides:
            rel = next((r for r in m.releases if m.framework(r.framework).package == pkg
                        and r.version == ver.split("+")[0]), None) \
                if pkg in {f.package for f in m.frameworks} else None
            if pkg in {f.package for f in m.frameworks} and rel is None:
                _problem(problems, b, f"base {b.name}: provides {pkg} {ver}, which is not a "
                                      f"release in the matrix")
        if b.kind == "local" and not b.suite:
            _problem(problems, b, f"base {b.name}: a local base needs a Debian suite")
        if b.python_patch and b.python_patch.rsplit(".", 1)[0] != b.python:
            _problem(problems, b, f"base {b.name}: python_patch {b.python_patch} is not a "
                                  f"release of Python {b.python}")
