"""conda's environment.yml: its `pip:` section as requirements, and conda's own packages
mapped to the PyPI wheels that carry them, each mapping said: pytorch → torch (the CUDA
libraries come as nvidia-* wheels with it), pytorch-cuda / cudatoolkit / conda-forge's
cuda-version X.Y → the cuXY variant, cpuonly → the cpu variant, cudnn → the nvidia-cudnn
wheel the framework pins, python=X.Y → the image's Python. Any other conda package is taken
under the same name on PyPI, said in a note and marked (`Wanted.origin`): init refuses one
PyPI has no wheel of, rather than build an sdist whose name came only from conda."""
from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name

from ..core import record
from ..core.errors import InputError
from .line import parse
from .model import Intake, bad, no_login, show

# conda name → PyPI name (None: carried by the framework's wheels, dropped)
RENAMED = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch",
           "tensorflow-gpu": "tensorflow", "jaxlib": "jaxlib", "pytorch-lightning":
           "pytorch-lightning", "pyyaml": "pyyaml", "py-opencv": "opencv-python-headless"}
CARRIED = {"cudnn", "nccl", "cuda-nvcc", "cuda-runtime", "cuda-libraries", "mkl", "blas",
           "libblas", "cuda", "pip", "setuptools", "wheel", "libstdcxx-ng",
           "libgcc-ng", "openssl", "ca-certificates", "ld_impl_linux-64", "_libgcc_mutex",
           "_openmp_mutex", "libffi", "ncurses", "readline", "sqlite", "tk", "xz", "zlib",
           "bzip2", "tzdata"}
# the packages that name the CUDA line of the framework's build: pytorch's channel's
# pytorch-cuda, the older cudatoolkit, and conda-forge's selector cuda-version
CUDA_LINE = ("pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-version")
_SPEC = re.compile(r"^(?:[A-Za-z0-9_.-]+::)?([A-Za-z0-9_.-]+)\s*(?:([=<>!~]{1,2})\s*([^\s=]+))?"
                   r"(?:=[^\s]*)?$")


class _Env:
    def __init__(self, file: str):
        self.file = file
        self.reqs: list = []
        self.notes: list[str] = []
        self.as_is: list[str] = []
        self.python: str | None = None
        self.variant: tuple[str, str] | None = None   # (cuXY or cpu, the line naming it)


def read_environment(path: Path) -> Intake:
    from ..matrix.yamlfile import LDict, LList, load_file
    file = str(path)
    try:
        doc = load_file(path, file)
    except InputError as e:
        raise bad(f"is not a conda environment file: {e.message}", file, e.line) from None
    if not isinstance(doc, LDict) or not isinstance(doc.get("dependencies"), list):
        raise bad("is not a conda environment file: it has no 'dependencies' list", file,
                  getattr(doc, "line", None))
    deps = doc["dependencies"]
    lines = deps.lines if isinstance(deps, LList) else []
    env = _Env(file)
    for i, item in enumerate(deps):
        n = lines[i] if i < len(lines) else doc.lines.get("dependencies")
        if isinstance(item, dict):
            _pip(item, env, n)
        elif isinstance(item, str):
            _conda(item, env, n)
        else:
            raise bad(f"{show(item)} is not a conda package spec", file, n)
    if not env.reqs and env.python is None:
        raise bad("is not a conda environment file envgen can use: no packages", file)
    if env.as_is:
        env.notes.append(f"{file}: conda package(s) taken from PyPI under the same name (a "
                         f"conda package need not be the PyPI one of its name; one PyPI has "
                         f"no wheel of is refused, never built from an sdist): "
                         f"{', '.join(env.as_is)}")
    return Intake(path=file, kind="conda environment", requirements=tuple(env.reqs),
                  python=env.python, variant=env.variant[0] if env.variant else None,
                  notes=tuple(env.notes))


def _pip(item: dict, env: _Env, n: int) -> None:
    """The `- pip: [...]` section: requirement lines, a login or an option refused at its
    line without echoing a secret."""
    from ..matrix.yamlfile import LList
    pips = item.get("pip")
    if set(item) != {"pip"} or not isinstance(pips, list):
        raise bad(f"{show(item)} is neither a conda package nor a pip: list", env.file, n)
    plines = pips.lines if isinstance(pips, LList) else []
    for j, p in enumerate(pips):
        pn = plines[j] if j < len(plines) else n
        if not isinstance(p, str):
            raise bad(f"pip entry {show(p)} is not a requirement", env.file, pn)
        no_login(p, env.file, pn)
        if p.startswith("-"):
            raise bad(f"pip entry {show(p)}: options in environment.yml's pip "
                      f"section are not read; put them in a requirements file", env.file, pn)
        env.reqs.append(parse(p, env.file, pn))


def _conda(item: str, env: _Env, n: int) -> None:
    """One conda package spec: the Python, the CUDA line or the cpu build, a package the
    image carries, or a PyPI requirement (renamed, or under the same name)."""
    file = env.file
    no_login(item, file, n)
    spec = item.strip()
    parts = spec.split()
    if len(parts) in (2, 3) and parts[1][:1].isdigit():   # conda's "NAME VERSION [BUILD]"
        spec = f"{parts[0]}={parts[1]}"
    m = _SPEC.match(spec.replace(" ", ""))
    if not m:
        raise bad(f"{show(item)} is not a conda package spec (NAME, NAME=VERSION, "
                  f"NAME>=VERSION)", file, n)
    name, op, version = m.group(1).lower(), m.group(2), m.group(3)
    if op == "=":   # conda's NAME=1.2 is 1.2.*; NAME=1.26.* and NAME=1.2.3 as written
        op, version = "==", version if version.endswith("*") or version.count(".") >= 2 \
            else version + ".*"
    clause = f"{op}{version}" if op and version else ""
    if name == "python":
        if version:
            env.python = ".".join(version.split(".")[:2])
            if not re.fullmatch(r"3\.[0-9]{1,2}", env.python):
                raise bad(f"{show(item.strip())}: envgen needs the Python as X.Y "
                          f"(python=3.11), which names the image's Python", file, n)
            env.notes.append(f"{file}:{n}: python {version} → the image's Python {env.python}")
        return
    if name in CUDA_LINE:
        if version:
            mm = version.rstrip(".*").split(".")
            if len(mm) < 2 or not all(re.fullmatch(r"[0-9]{1,2}", x) for x in mm[:2]):
                raise bad(f"{show(item.strip())}: envgen needs the CUDA version as "
                          f"X.Y ({name}=12.1), which names the framework's variant",
                          file, n)
            _variant(env, f"cu{mm[0]}{mm[1]}", item, n)
            env.notes.append(f"{file}:{n}: {name} {version} → the cu{mm[0]}{mm[1]} wheels of "
                             f"the framework (CUDA comes as nvidia-* wheels, not from conda)")
        else:
            env.notes.append(f"{file}:{n}: {name} names no CUDA version: the stack's own")
        return
    if name == "cpuonly":   # pytorch's channel: the CPU build of pytorch
        _variant(env, "cpu", item, n)
        env.notes.append(f"{file}:{n}: cpuonly → the cpu build of the framework")
        return
    if name in CARRIED:
        env.notes.append(f"{file}:{n}: {name} is carried by the image (the framework's "
                         f"wheels or Debian), not installed from conda")
        return
    pypi = RENAMED.get(name)
    if pypi is not None and pypi != name:
        env.notes.append(f"{file}:{n}: conda's {name} → PyPI's {pypi}")
    w = parse(f"{canonicalize_name(pypi or name)}{clause}", file, n)
    if pypi is None:
        env.as_is.append(name)
        w = record.replace(w, origin="conda")
    env.reqs.append(w)


def _variant(env: _Env, variant: str, item: str, n: int) -> None:
    """The framework build the file names; two that differ are refused, naming both."""
    if env.variant is not None and env.variant[0] != variant:
        raise bad(f"{show(item.strip())} names the {variant} build, and line "
                  f"{env.variant[1]} the {env.variant[0]} build; keep one", env.file, n)
    env.variant = (variant, str(n))
