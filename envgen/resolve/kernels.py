"""A project's sdists that compile CUDA kernels against torch (flash-attn, mamba-ssm, a team's
own CUDAExtension): which they are, what uv needs to resolve them, and the hash-pinned files
the image's kernel-build stage installs to compile them.

The compiler comes from NVIDIA's PyPI wheels, pinned by NVIDIA's own cuda-toolkit
metapackage at the stack's CUDA release (cuda-toolkit[nvcc,crt,nvvm,cccl]==13.0.3 names
nvidia-cuda-nvcc 13.0.88, nvidia-nvvm 13.0.88, nvidia-cuda-crt 13.0.88 and nvidia-cuda-cccl
13.0.85). Only CUDA 13's wheels hold a whole compiler: those of CUDA 11 and 12 carry ptxas,
the crt headers and libnvvm but neither nvcc nor cicc (read from the wheels' file lists,
2026-12-05), so a stack of CUDA 12 or older cannot build such an sdist in its image."""
from __future__ import annotations

import io
import re
from pathlib import Path

from ..core.errors import InputError, shown
from ..core.model import Stack, canonical_name
from .sdists import members as _members
from .sdists import top_level as _top

# Distributions PyPI serves for Linux as an sdist alone whose build compiles CUDA kernels
# against torch (their setup.py imports torch and runs nvcc).
KNOWN = frozenset({"flash-attn", "mamba-ssm", "causal-conv1d", "apex", "xformers",
                   "flash-attn-3", "grouped-gemm"})

# What a torch extension's setup.py needs beside torch and the compiler: setuptools is in
# every image; ninja runs the compiles in parallel (torch falls back to one at a time
# without it), packaging, psutil and wheel are imported by flash-attn's and its peers'.
BUILD_TOOLS = ("ninja", "packaging", "psutil", "wheel", "setuptools")
# NVIDIA's compiler, split over four wheels of one release (the nvidia/cu13 tree)
COMPILER_EXTRAS = "nvcc,crt,nvvm,cccl"

# Where nvcc could come from, by the stack's CUDA major (see the module's docstring).
NVCC_ON_PYPI = {
    "11": "NVIDIA's CUDA 11 wheels on PyPI (nvidia-cuda-nvcc-cu11) carry ptxas but no nvcc",
    "12": "NVIDIA's CUDA 12 wheels on PyPI (nvidia-cuda-nvcc-cu12, 12.0 to 12.9) carry ptxas "
          "but no nvcc",
}

# Seconds one .cu file of a torch extension takes to compile for one compute capability,
# host pass included: an axpy kernel including torch/extension.h took 76.5 s for 9.0 in the
# kernel-build stage on this project's 2-core machine, the same kernel with ATen and
# torch/library.h alone 30.7 s (2026-12-05, docs/project.md). A rough basis for the build
# time envgen prints, the heavier of the two: the host pass is once per file, and
# flash-attn's files are far heavier than either.
SECONDS_PER_FILE_ARCH = 75
# The parallel compiles the stage runs (MAX_JOBS): each nvcc of a kernel takes 1-4 GB
MAX_JOBS = 2


TORCH_BUILD = re.compile(rb"torch\.utils\.cpp_extension|\bCUDAExtension\b|\bCUDA_HOME\b")


def builds_against_torch(path: Path) -> bool:
    """The archive's own setup.py (or pyproject.toml) builds a torch CUDA extension."""
    files = _members(path, lambda n: _top(n) and n.rsplit("/", 1)[-1] in (
        "setup.py", "pyproject.toml")) or {}
    return any(TORCH_BUILD.search(data) for data in files.values())


# folders of a vendored library's own tests and examples, which a package's build skips
# (flash-attn 2.6.3's sdist holds 826 .cu files, 669 of them under cutlass's test, examples
# and tools)
NOT_BUILT = frozenset({"test", "tests", "example", "examples", "tools", "benchmarks", "docs"})


def cu_files(path: Path) -> int:
    """How many CUDA sources (.cu) the archive holds outside test and example folders: what
    the build time grows with (0 when it cannot be read)."""
    from .sdists import names
    return sum(1 for n in names(path) or () if n.endswith(".cu")
               and not NOT_BUILT & set(n.split("/")[:-1]))


def requires_dist(path: Path) -> list[str] | None:
    """What the sdist requires, as uv is told instead of building it to ask (which it cannot
    do without torch in its build environment): its PKG-INFO's Requires-Dist lines; without
    a PKG-INFO (a git archive), its pyproject.toml's static [project] dependencies or its
    setup.py's literal install_requires, read, never run; None when none of them says."""
    files = _members(path, lambda n: _top(n) and n.rsplit("/", 1)[-1] in (
        "PKG-INFO", "pyproject.toml", "setup.py")) or {}

    def top(name):   # the archive's own file of that name, not a subfolder's
        found = sorted((k for k in files if k.rsplit("/", 1)[-1] == name),
                       key=lambda k: k.count("/"))
        return files[found[0]].decode("utf-8", "replace") if found else None
    text = top("PKG-INFO")
    if text is not None:
        from email.parser import Parser
        msg = Parser().parse(io.StringIO(text.split("\n\n", 1)[0] + "\n"))
        return [r.strip() for r in msg.get_all("Requires-Dist") or [] if r.strip()]
    return _pyproject_dependencies(top("pyproject.toml")) or _install_requires(top("setup.py"))


def _pyproject_dependencies(text: str | None) -> list[str] | None:
    try:
        import tomllib  # Python 3.11; on 3.10 setup.py is read alone
        project = tomllib.loads(text or "").get("project") or {}
    except (ImportError, ValueError, AttributeError, RecursionError):   # TOMLDecodeError too
        return None
    if not isinstance(project, dict):
        return None
    deps, dynamic = project.get("dependencies"), project.get("dynamic") or []
    if not isinstance(dynamic, list) or "dependencies" in dynamic or \
            not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        return None
    return deps


def _install_requires(text: str | None) -> list[str] | None:
    """setup(install_requires=[...]) when the list is a literal of strings."""
    import ast
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):   # too deep to parse
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "setup" or
                                           getattr(node.func, "attr", None) == "setup"):
            if any(kw.arg is None for kw in node.keywords):
                return None   # setup(**kw): what it requires is not written here
            for kw in node.keywords:
                if kw.arg == "install_requires":
                    try:
                        value = ast.literal_eval(kw.value)
                    except (ValueError, TypeError, SyntaxError, RecursionError):
                        return None
                    if isinstance(value, (list, tuple)) and all(isinstance(v, str)
                                                                for v in value):
                        return [v.strip() for v in value if v.strip()]
                    return None
            return []    # a setup() that names no install_requires requires nothing
    return None


def metadata_for(held: dict[str, tuple[str, Path]]) -> list[dict]:
    """uv's dependency-metadata for each held archive (name → (version, path)) that builds
    against torch and states its requirements in its PKG-INFO."""
    out = []
    for name, (version, path) in sorted(held.items()):
        if path.name.endswith(".whl") or not builds_against_torch(path):
            continue
        reqs = requires_dist(path)
        if reqs is not None:
            from packaging.requirements import InvalidRequirement, Requirement
            for r in reqs:   # the archive's own words reach uv's configuration
                try:
                    Requirement(r)
                except InvalidRequirement:
                    raise InputError(f"{name} {version} ({path.name}) states a requirement "
                                     f"that is not one: {shown(r, 80)}") from None
            out.append({"name": name, "version": version, "requires-dist": reqs})
    return out


def kernel_sdists(pins, held: dict[str, Path]) -> list[str]:
    """The names of the closure's sdists that compile CUDA kernels against torch: a known
    one (flash-attn...) or a held archive (git reference, URL, path) whose setup.py does."""
    out = []
    for p in pins:
        if not p.sdist:
            continue
        path = held.get(canonical_name(p.name))
        if canonical_name(p.name) in KNOWN or (path is not None and
                                               builds_against_torch(path)):
            out.append(p.name)
    return out


def cuda_major(stack: Stack) -> str:
    return str(stack.cuda or "").split(".")[0]


def refuse(stack: Stack, name: str, source: str) -> InputError:
    """A kernel sdist over a stack whose CUDA has no compiler on PyPI: one sentence."""
    major = cuda_major(stack)
    why = NVCC_ON_PYPI.get(major) if major else \
        f"{stack.stack} is a CPU stack, with no CUDA to compile for"
    e = InputError(f"{name} compiles CUDA kernels against torch at build time, and "
                   f"{why or f'CUDA {stack.cuda} has no compiler wheels envgen knows'}: "
                   f"choose a CUDA 13 stack (its compiler comes from NVIDIA's wheels), or "
                   f"give {name}'s prebuilt wheel for this torch, CUDA and Python as "
                   f"`{name} @ https://.../FILE.whl#sha256=...`", file=source or None)
    e.package = canonical_name(name)
    return e


def compiler_requirements(stack: Stack, pins) -> list[str]:
    """The compiler at the stack's CUDA release: NVIDIA's cuda-toolkit metapackage pins its
    parts; without one in the closure, each part at the CUDA runtime's own version."""
    have = {canonical_name(p.name): p.version for p in pins}
    if "cuda-toolkit" in have:
        # CCCL's headers the closure holds already stay as they are: torch 2.15 (cu132)
        # brings nvidia-cuda-cccl 13.3.5.0.6 while cuda-toolkit 13.2.2[cccl] asks for
        # 13.2.86.*, which no resolution can give both (the headers serve 13.x nvcc alike:
        # inferred from CCCL's support of the current and previous CUDA releases)
        extras = [e for e in COMPILER_EXTRAS.split(",")
                  if not (e == "cccl" and "nvidia-cuda-cccl" in have)]
        return [f"cuda-toolkit[{','.join(extras)}]=={have['cuda-toolkit']}"]
    runtime = have.get("nvidia-cuda-runtime")
    if runtime is None:
        return []
    return [f"nvidia-cuda-nvcc=={runtime}", f"nvidia-nvvm=={runtime}",
            f"nvidia-cuda-crt=={runtime}", "nvidia-cuda-cccl"]


def arch_list(stack: Stack) -> str:
    """TORCH_CUDA_ARCH_LIST: the target GPUs' compute capabilities (envgen.yaml's
    cuda_archs), else every one the framework's own build has, the last with PTX as the
    framework's build carries it (so a newer GPU JIT-compiles it)."""
    own = tuple(stack.project.cuda_archs) if stack.project is not None else ()
    if own:
        return ";".join(own)
    caps = list(stack.compute_capabilities)
    if caps and stack.ptx:
        caps[-1] += "+PTX"
    return ";".join(caps)


def estimate(files: int | None, archs: str, jobs: int = MAX_JOBS) -> str:
    """The expected build time, in words, from the CUDA sources and compute capabilities."""
    n = len([a for a in archs.split(";") if a])
    if not files:
        return ("its build time is not known beforehand (its CUDA sources were not read): "
                "list only the GPUs you run on in cuda_archs")
    seconds = -(-files // jobs) * n * SECONDS_PER_FILE_ARCH
    words = f"about {max(1, round(seconds / 60))} min" if seconds >= 90 else \
        f"about {seconds} s"
    return (f"expect {words} on {jobs} cores ({files} CUDA source(s) x {n} compute "
            f"capabilit{'y' if n == 1 else 'ies'})")
