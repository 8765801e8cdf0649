"""conda's environment.yml: its `pip:` section as requirements, and conda's own packages
mapped to the PyPI wheels that carry them, each mapping said: pytorch → torch (the CUDA
libraries come as nvidia-* wheels with it), pytorch-cuda / cudatoolkit X.Y → the cuXY
variant, cudnn → the nvidia-cudnn wheel the framework pins, python=X.Y → the image's
Python. Any other conda package is taken under the same name on PyPI (inferred)."""
from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name

from ..core.errors import InputError, shown
from .line import parse
from .model import Intake, bad

# conda name → PyPI name (None: carried by the framework's wheels, dropped)
RENAMED = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch",
           "tensorflow-gpu": "tensorflow", "jaxlib": "jaxlib", "pytorch-lightning":
           "pytorch-lightning", "pyyaml": "pyyaml", "py-opencv": "opencv-python-headless"}
CARRIED = {"cudnn", "nccl", "cuda-nvcc", "cuda-runtime", "cuda-libraries", "mkl", "blas",
           "libblas", "cuda", "cuda-version", "pip", "setuptools", "wheel", "libstdcxx-ng",
           "libgcc-ng", "openssl", "ca-certificates", "ld_impl_linux-64", "_libgcc_mutex",
           "_openmp_mutex", "libffi", "ncurses", "readline", "sqlite", "tk", "xz", "zlib",
           "bzip2", "tzdata"}
_SPEC = re.compile(r"^(?:[A-Za-z0-9_.-]+::)?([A-Za-z0-9_.-]+)\s*(?:([=<>!~]{1,2})\s*([^\s=]+))?"
                   r"(?:=[^\s]*)?$")


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
    reqs, notes = [], []
    python = variant = None
    for i, item in enumerate(deps):
        n = lines[i] if i < len(lines) else doc.lines.get("dependencies")
        if isinstance(item, dict):
            pips = item.get("pip")
            if set(item) != {"pip"} or not isinstance(pips, list):
                raise bad(f"{shown(item)} is neither a conda package nor a pip: list", file, n)
            plines = pips.lines if isinstance(pips, LList) else []
            for j, p in enumerate(pips):
                pn = plines[j] if j < len(plines) else n
                if not isinstance(p, str):
                    raise bad(f"pip entry {shown(p)} is not a requirement", file, pn)
                if p.startswith("-"):
                    raise bad(f"pip entry {shown(p)}: options in environment.yml's pip "
                              f"section are not read; put them in a requirements file", file, pn)
                reqs.append(parse(p, file, pn))
            continue
        if not isinstance(item, str):
            raise bad(f"{shown(item)} is not a conda package spec", file, n)
        spec = item.strip()
        parts = spec.split()
        if len(parts) in (2, 3) and parts[1][:1].isdigit():   # conda's "NAME VERSION [BUILD]"
            spec = f"{parts[0]}={parts[1]}"
        m = _SPEC.match(spec.replace(" ", ""))
        if not m:
            raise bad(f"{shown(item)} is not a conda package spec (NAME, NAME=VERSION, "
                      f"NAME>=VERSION)", file, n)
        name, op, version = m.group(1).lower(), m.group(2), m.group(3)
        if op == "=":   # conda's NAME=1.2 is 1.2.*; NAME=1.26.* and NAME=1.2.3 as written
            op, version = "==", version if version.endswith("*") or version.count(".") >= 2 \
                else version + ".*"
        clause = f"{op}{version}" if op and version else ""
        if name == "python":
            if version:
                python = ".".join(version.split(".")[:2])
                if not re.fullmatch(r"3\.[0-9]{1,2}", python):
                    raise bad(f"{shown(item.strip())}: envgen needs the Python as X.Y "
                              f"(python=3.11), which names the image's Python", file, n)
                notes.append(f"{file}:{n}: python {version} → the image's Python {python}")
            continue
        if name in ("pytorch-cuda", "cudatoolkit", "cuda-toolkit"):
            if version:
                mm = version.rstrip(".*").split(".")
                if len(mm) < 2 or not all(re.fullmatch(r"[0-9]{1,2}", x) for x in mm[:2]):
                    raise bad(f"{shown(item.strip())}: envgen needs the CUDA version as "
                              f"X.Y ({name}=12.1), which names the framework's variant",
                              file, n)
                variant = f"cu{mm[0]}{mm[1]}"
                notes.append(f"{file}:{n}: {name} {version} → the {variant} wheels of the "
                             f"framework (CUDA comes as nvidia-* wheels, not from conda)")
            continue
        if name in CARRIED:
            notes.append(f"{file}:{n}: {name} is carried by the image (the framework's wheels "
                         f"or Debian), not installed from conda")
            continue
        pypi = RENAMED.get(name, name)
        if pypi != name:
            notes.append(f"{file}:{n}: conda's {name} → PyPI's {pypi}")
        reqs.append(parse(f"{canonicalize_name(pypi)}{clause}", file, n))
    if not reqs and python is None:
        raise bad("is not a conda environment file envgen can use: no packages", file)
    return Intake(path=file, kind="conda environment", requirements=tuple(reqs),
                  python=python, variant=variant, notes=tuple(notes))
