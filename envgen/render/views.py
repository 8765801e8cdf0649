"""Views: everything a template shows, computed here so templates decide nothing."""
from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from ..core import provenance
from ..core.image import PAYLOAD_DIR, UID
from ..core.model import (
    APP_DIR,
    LOCAL_BASE_PACKAGES,
    BaseImage,
    Closure,
    Pin,
    Stack,
    canonical_name,
    requirement,  # noqa: F401 (the CLI prints pins with it)
)
from ..smoke import payload_files
from . import cache
from .env import environment, template_dir, token

PIP_CACHE = "/root/.cache/pip"
# The files a hash-pinned step installs, kept in the cache mount by name: `pip download
# --dest` reuses a file there whose sha256 is the pin's (and fetches it again if not), then
# `pip install --no-index --find-links` installs from them; the download skips pip's HTTP
# cache (no second copy of each wheel in the build cache). That cache keeps only
# what the index lets it cache, and a package proxy that sends no cache headers made each
# add-on layer of a bake download the same wheels again (docs/benchmarks.md).
WHEEL_DIR = f"{PIP_CACHE}/files"
# Mount points of the install steps. They exist before the first mount (made in the user
# step), so BuildKit never creates and removes a stub for them and no layer records one.
REQ_MOUNT = f"{PAYLOAD_DIR}/req"
SRC_MOUNT = f"{PAYLOAD_DIR}/src"
TOOLS_MOUNT = f"{PAYLOAD_DIR}/tools"   # a builder stage's requirements of its build tools
UV_MOUNT = f"{PAYLOAD_DIR}/uv"   # where an install step mounts the installer (uv, below)
# Stamps every file a step wrote with SOURCE_DATE_EPOCH (the closure's time), skipping the
# kernel's and BuildKit's mounts: the layer's tar then depends only on its inputs. The
# engine's own `rewrite-timestamp` needs BuildKit 0.13; this works on every BuildKit.
STAMP = ("find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /etc/resolv.conf "
         f"-o -path /etc/hosts -o -path /etc/hostname -o -path {PIP_CACHE} -o -path "
         f"{REQ_MOUNT} -o -path {SRC_MOUNT} -o -path {UV_MOUNT} \\) -prune -o -newermt "
         "\"@$SOURCE_DATE_EPOCH\" "
         "-exec touch --no-dereference --date=\"@$SOURCE_DATE_EPOCH\" {} +")
# Bytecode for the files a pip step installed (those newer than its "$marker"), compiled at
# build: the image's user cannot write .pyc into the venv, so without it every container start
# compiles each module it imports again (`import torch`: docs/benchmarks.md). checked-hash
# .pyc carry the source's hash instead of its time, and with a fixed hash seed each of
# COMPILE_JOBS processes compiles its fixed share of the sorted list (every COMPILE_JOBS-th
# file, whatever the machine's cores), in order, so two builds still give bit-identical
# layers while the cores work together (torch's 5,241 files took 191 s in one process on
# this loaded machine; docs/benchmarks.md). No more shares run at once than the machine has
# cores (xargs -P "$(nproc)"): a share's bytes do not depend on when it runs, and eight
# processes on two cores cost up to 20 % more CPU than two (docs/benchmarks.md). -f:
# a .pyc that Python wrote by itself meanwhile (setuptools' .pth imports _distutils_hack at
# every start) records the source's time, and is replaced. A file
# that does not compile (a Python 2 leftover in some wheels) is left without, as pip leaves it.
# -cnewer (the inode's change time, which no installer sets back): uv copies files out of
# its cache, and a copy may keep the time the file had there, before the marker.
# An empty share is skipped: compileall given an empty list compiles all of sys.path.
# No pipe: the lists go through files beside the marker, so a failing find, sort or share
# fails the step (sh has no pipefail; hadolint DL4006) while compileall reads the same list.
COMPILE_JOBS = 8
COMPILE = ("find \"$(python -c 'import sys; print(sys.prefix)')\" -name '*.py' -cnewer "
           "\"$marker\" > \"$marker.files\" && LC_ALL=C sort -o \"$marker.files\" "
           f"\"$marker.files\" && split -n r/{COMPILE_JOBS} -d -a 1 \"$marker.files\" "
           "\"$marker.part\" && printf '%s\\n' \"$marker.part\"? > \"$marker.shares\" "
           "&& xargs -P \"$(nproc)\" -n 1 -a \"$marker.shares\" sh -c 'if [ -s \"$1\" ]; then "
           "PYTHONHASHSEED=0 python -m compileall -f -qq --invalidation-mode checked-hash "
           "-i \"$1\" || echo \"some files did not compile\"; fi' compile "
           "&& rm -f \"$marker.files\" \"$marker.shares\" \"$marker.part\"?")
COMPILE_AT_BUILD = True   # the pip steps compile bytecode (False renders them without)
CONTEXT_IGNORE = ("base/", "*.tar", ".envgen-render-*")
# The venv is made without pip: the locked pip and setuptools are installed into it by the
# distribution's own pip wheel, run from the wheel file, so no step deletes a file a lower
# layer holds. (A deletion is a whiteout in the layer, stamped with the time of the build.)
PIP = "pip"
DEBIAN_PIP_WHEEL = '"$(set -- /usr/share/python-wheels/pip-*.whl; echo "$1")/pip"'
BOOTSTRAP_PIP = f"python {DEBIAN_PIP_WHEEL}"
# The installer of the hash-pinned binary layers: uv, pinned here by the sha256 PyPI's simple
# index (https://pypi.org/simple/uv/) lists for its Linux wheels (uploaded 2026-11-17); pip
# takes the one for the build's platform and checks it against these. A throw-away stage
# unpacks it; each install step mounts it, so no layer holds it. uv fetches a layer's wheels
# in parallel and unpacks them while they arrive, where pip fetches one at a time and then
# unpacks in Python (docs/benchmarks.md has both, measured).
UV_VERSION = "0.13.9"
UV_HASHES = (
    # uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
    "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19",
    # uv-0.13.9-py3-none-manylinux_2_28_aarch64.whl
    "ecb6028d79dc96fbeafffe5c8af62a7099487ebc05a701e76714eebcffd06375",
    # uv-0.13.9-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl
    "5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe",
)
# From PyPI, the stage fetches the wheel pip would pick on the bases' glibc (2.36 and up)
# itself, by its files.pythonhosted.org address on the same index page, checks its sha256
# and writes bin/uv (fetch_uv.py): 0.5 s where pip run from Debian's wheel took 2.1 s, on
# the path every cold build waits on (docs/benchmarks.md). A team's mirror (index_url),
# whose addresses envgen cannot know, keeps pip and the hashes above.
UV_WHEELS = (
    ("x86_64", UV_HASHES[0],
     "https://files.pythonhosted.org/packages/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080"
     "a8babf9c67c6b75fc4c3f/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
    ("aarch64", UV_HASHES[1],
     "https://files.pythonhosted.org/packages/fe/2f/51a5de367c602592c018a42a23d57fba5f2689f"
     "e6c3bf025dcf043b39c61/uv-0.13.9-py3-none-manylinux_2_28_aarch64.whl"),
)
UV_FETCHER = Path(__file__).with_name("fetch_uv.py")
UV_DIR = "0-uv"             # install/0-uv/requirements.txt: the installer's one pin
UV_STAGE = "/opt/uv"        # where the throw-away stage unpacks it
# uv unpacks into a cache of the step's own, on the layer's file system, and links the files
# into the venv from there; the cache goes at the end of the step, so no layer holds it and
# each file is written once. (A cache on the cache mount would be another file system: uv
# copies from there, 82 s more for pytorch-cu121's 4.9 GB here; docs/benchmarks.md.) Stacks
# of one CUDA line share their CUDA and framework layers, so a bake fetches those once.
UV = (f"{UV_MOUNT}/bin/uv pip install --no-config --no-progress --python /opt/venv/bin/python "
      f"--cache-dir \"$marker.uv\" --link-mode hardlink")
# The small layers (packaging tools, companions, a framework over another, a project's own)
# differ between the stacks of a line but share many wheels (tqdm, pyyaml, packaging...):
# their uv cache lies on the cache mount, so a bake fetches each of those once too, and
# copying a few MB from there costs nothing worth measuring.
UV_SHARED = (f"{UV_MOUNT}/bin/uv pip install --no-config --no-progress "
             f"--python /opt/venv/bin/python --cache-dir {PIP_CACHE}/uv --link-mode copy")
UV_OWN_CACHE = ("2-cuda", "3-framework")   # gigabytes: hardlinked from the layer's own cache
# uv locks the environment it installs into with an empty file it makes writable by all
# (mode 0666): removed in the same step, so no layer holds a world-writable file
VENV_LOCK = "/opt/venv/.lock"


def _layer_of(pin: Pin, stack: Stack, base_pins: set[str]) -> int:
    """Cache-friendly order: tools, CUDA libraries, the framework (with what it needs),
    the companions, then what a stack built over another adds; a layer changes only when
    its own pins do, so such a stack shares every lower layer with its base stack."""
    if canonical_name(pin.name) in {canonical_name(n) for n in stack.from_source}:
        return 5   # built by pip from its sdist, over everything it imports while building
    if stack.builds_on and pin.requirement not in base_pins:
        return 4
    if pin.name in ("pip", "setuptools", "wheel"):
        return 0
    if pin.name.startswith("nvidia-") or pin.name in ("cuda-toolkit", "triton") or \
            pin.name.startswith("cuda-"):
        return 1
    if pin.name in stack.companions:
        return 3
    return 2


LAYER_TITLES = ("packaging tools", "CUDA libraries", "framework", "companions",
                "frameworks over the base", "built from source", "project packages")
LAYER_DIRS = ("1-tools", "2-cuda", "3-framework", "4-companions", "5-over", "6-source",
              "7-project")
PROJECT_DIR = LAYER_DIRS[-1]
# a project's sdists, built into wheels in a stage of their own (only the wheels enter)
PROJECT_BUILD_DIR = "7-project-build"
BUILD_TOOLS = ("gcc", "g++", "python3-dev", "python3-venv")
PURE_BUILD_TOOLS = ("python3-venv",)   # pure-Python sdists: pip's venv, no compiler
BUILDER_PIP = "/opt/build/bin/pip"      # the builder stage's venv, made after its apt step
# what the project's sdists build with (their [build-system] requires, hash-pinned in the
# closure): installed by the builder stage into a folder of its own, which the builds
# without isolation read through PYTHONPATH; in no layer of the image
PROJECT_BUILD_TOOLS_DIR = "7-project-build-tools"
PROJECT_BUILD_TOOLS = "/opt/build-tools"
# A local Debian base has python3-venv (LOCAL_BASE_PACKAGES), and with it Debian's pip wheel:
# pip run from that wheel builds pure-Python sdists (PEP 517, over the pinned backends in
# PROJECT_BUILD_TOOLS) with no apt step and no venv, 5 s less of a branch that shares the
# cores with the CUDA and framework steps (docs/benchmarks.md).
BASE_PIP = f"python3 {DEBIAN_PIP_WHEEL}"   # the bare base has no `python`, only python3
ARCHIVE_MOUNT = "/opt/envgen/archives"
# a project's sdists that compile CUDA kernels against torch, built in the stage
# kernel-build over the image's own layers, with the hash-pinned compiler and tools of
# install/7-kernel-tools (in no layer of the image)
KERNEL_DIR = "7-project-kernels"
KERNEL_TOOLS_DIR = "7-kernel-tools"
KERNEL_WHEELS = "/opt/kernel-wheels"
KERNEL_APT = ("gcc", "g++", "python3-dev")
CUDA_HOME = "/opt/cuda"
# A CUDA home from NVIDIA's wheels (their nvidia/cu13 tree in the venv): nvcc, cicc and the
# headers linked where torch's cpp_extension looks (bin, nvvm, include, lib64, targets).
CUDA_HOME_SETUP = (
    "tree=$(python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "
    "\"cu13\"))') "
    f"&& case $(uname -m) in aarch64) t=sbsa-linux ;; *) t=$(uname -m)-linux ;; esac "
    f"&& mkdir -p {CUDA_HOME}/lib64 {CUDA_HOME}/include {CUDA_HOME}/targets/$t "
    f"&& cp -rs \"$tree/bin\" \"$tree/nvvm\" {CUDA_HOME}/ "
    f"&& cp -rs \"$tree/include/.\" {CUDA_HOME}/include/ "
    f"&& ln -s \"$tree/lib/libcudart.so.13\" {CUDA_HOME}/lib64/libcudart.so "
    f"&& ln -s ../../include {CUDA_HOME}/targets/$t/include "
    f"&& ln -s ../../lib64 {CUDA_HOME}/targets/$t/lib "
    f"&& {CUDA_HOME}/bin/nvcc --version")


def uses_uv(stack: Stack) -> bool:
    """uv installs into the venv envgen makes, from PyPI or a team's mirror of it. A
    framework base keeps its own pip; so does a stack from PyTorch's per-variant index,
    which serves what torch needs and not uv (inferred: that index is not reachable here)."""
    return stack.base.kind != "framework" and \
        not (stack.index_url or "").startswith("https://download.pytorch.org/")


def uv_requirements(stack: Stack) -> str:
    """install/0-uv/requirements.txt: the installer, pinned by hash, from the stack's index."""
    hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in UV_HASHES)
    index = f"--index-url {token(stack.index_url)}\n" if stack.index_url else ""
    return (f"# The installer envgen's install steps run (mounted, in no layer); its hashes "
            f"from https://pypi.org/simple/uv/.\n{index}uv=={UV_VERSION}{hashes}\n")


def uv_fetched(stack: Stack) -> bool:
    """The uv stage fetches uv by its PyPI address (fetch_uv.py) rather than through pip."""
    return uses_uv(stack) and not stack.index_url


def uv_wheels() -> str:
    """install/0-uv/wheels.txt: fetch_uv.py's one wheel a machine."""
    return (f"# uv {UV_VERSION} for fetch_uv.py, one wheel a machine: machine sha256 url "
            f"(from https://pypi.org/simple/uv/)\n"
            + "".join(f"{m} {sha} {url}\n" for m, sha, url in UV_WHEELS))


def install_layers(stack: Stack, closure: Closure) -> list[dict]:
    provided = {n.lower() for n, _ in stack.base.provides}
    full, full_stack = closure, stack
    if stack.project is not None:   # the plain stack's pins layer as in the plain image
        from ..resolve.closure import closure_for
        stack, closure = stack.plain(), closure_for(stack.plain(), resolve=False)[0]
    own = {p.requirement for p in closure.pins}
    base_pins = set(closure.inputs.get("constraints") or ()) if stack.builds_on else set()
    groups: list[list[Pin]] = [[] for _ in LAYER_TITLES]
    for pin in full.pins:
        if pin.name.lower() in provided:
            continue
        groups[_layer_of(pin, stack, base_pins) if pin.requirement in own
               else len(LAYER_DIRS) - 1].append(pin)
    layers = []
    own_files = _file_names(full_stack)
    from ..resolve.project_closure import project_sdists
    sdists = project_sdists(groups[-1], full_stack, full.kernels)
    compiled = {canonical_name(n) for n in full.kernels}
    kernels = [p for p in groups[-1] if p.sdist and canonical_name(p.name) in compiled]
    groups[-1] = [p for p in groups[-1] if p not in sdists and p not in kernels]
    for i, pins in enumerate(groups):
        if not pins:
            continue
        unhashed = [p for p in pins if not p.sha256]
        bootstrap = i == 0 and stack.base.kind != "framework"
        source = LAYER_DIRS[i] == "6-source"
        layers.append({"title": LAYER_TITLES[i], "dir": LAYER_DIRS[i], "pins": pins,
                       "pip": BOOTSTRAP_PIP if bootstrap else PIP,
                       # uv installs wheels checked by hash into envgen's own venv; pip
                       # keeps what uv would do differently (sdists built over torch,
                       # unhashed pins, a framework base's own environment)
                       "uv": uses_uv(stack) and not unhashed and not source,
                       "uv_shared": LAYER_DIRS[i] not in UV_OWN_CACHE,
                       # a source build sees the layers below (torch) and reads these
                       "build_env": list(stack.build_env) if source else [],
                       "binary": (["--no-build-isolation", *(f"--no-binary={p.name}"
                                                             for p in pins)]
                                  if source else []),
                       "count": len(pins), "hashed": not unhashed,
                       "unhashed": [(p.requirement, p.note) for p in unhashed],
                       # wheels a project names by URL or path lie beside its
                       # requirements.txt (build/context.py puts them there)
                       "wheels_beside": LAYER_DIRS[i] == PROJECT_DIR and any(
                           canonical_name(p.name) in own_files for p in pins)})
    if sdists:
        layers.append(_stage_layer(
            "project packages built from their sdists", PROJECT_BUILD_DIR, sdists, built=True,
            # no native source in any of them: the stage needs no compiler
            pure={canonical_name(p.name) for p in sdists} <= {
                canonical_name(n) for n in full.pure_sdists}))
    if sdists and full.sdist_build:
        layers.append(_stage_layer("the project-build stage's build backends",
                                   PROJECT_BUILD_TOOLS_DIR, list(full.sdist_build)))
    if kernels:
        layers.append(_stage_layer("project packages that compile CUDA kernels", KERNEL_DIR,
                                   kernels, built=True))
        layers.append(_stage_layer("the kernel-build stage's compiler and tools",
                                   KERNEL_TOOLS_DIR, list(full.build_pins)))
    return layers


def _stage_layer(title: str, folder: str, pins: list[Pin], **extra) -> dict:
    """The requirements of a builder stage (sdists it builds, or the tools it builds them
    with): installed by pip in that stage, in no step of the image's own."""
    return {"title": title, "dir": folder, "pins": pins, "pip": PIP, "build_env": [],
            "binary": [], "count": len(pins), "hashed": all(p.sha256 for p in pins),
            "unhashed": [(p.requirement, p.note) for p in pins if not p.sha256],
            "uv": False, **extra}


def _file_names(stack: Stack) -> set[str]:
    """The names a project's requirements give by URL or path (a wheel rides in the
    context beside the project layer's requirements.txt, an sdist in project-archives/)."""
    if stack.project is None:
        return set()
    from ..resolve.project import file_requirements
    return {name for name, _url, _sha in file_requirements(stack.project)}


def image_labels(stack: Stack, base_ref: str, closure: Closure | None = None
                 ) -> list[tuple[str, str]]:
    labels = [
        ("org.opencontainers.image.title", f"envgen {stack.stack}"),
        ("org.opencontainers.image.description",
         f"{stack.framework_package} {stack.version} ({stack.variant}) on Python "
         f"{stack.python}, {stack.base.name}"),
        ("org.opencontainers.image.version", f"{stack.version}-{stack.variant}"),
        ("org.opencontainers.image.base.name", base_ref.partition("@")[0]),
    ]
    if stack.licenses:   # the frameworks' and CUDA libraries', as their METADATA states
        labels.append(("org.opencontainers.image.licenses", stack.licenses))
    # Only what is known: a made-up source or a build-time clock would describe nothing
    # (and the latter would make every rebuild a different image).
    digest = base_ref.partition("@")[2] or stack.base.digest
    if digest:
        labels.append(("org.opencontainers.image.base.digest", digest))
    if closure is not None:   # the closure's time, which every file in the image carries too
        labels.append(("org.opencontainers.image.created", closure.created))
    source, revision = provenance.current()
    if source:
        labels += [("org.opencontainers.image.source", source),
                   ("org.opencontainers.image.url", source)]
    if revision:
        labels.append(("org.opencontainers.image.revision", revision))
    labels += [("io.envgen.version", __version__),
               ("io.envgen.matrix.sha256", stack.matrix_sha256)]
    if closure is not None:
        labels.append(("io.envgen.closure.sha256", closure.key))
    labels.append(("io.envgen.stack", json.dumps(stack.to_json(), sort_keys=True,
                                                 separators=(",", ":"))))
    return labels


def dockerfile_view(stack: Stack, closure: Closure, base_ref: str | None = None,
                    buildkit: bool = True, layers: list[dict] | None = None) -> dict:
    """The Dockerfile's values; `layers`: install_layers' answer, when the caller has it."""
    base = stack.base
    ref = base_ref or base.reference
    env = [("NVIDIA_VISIBLE_DEVICES", "all"),
           ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")]
    if stack.require_cuda:
        env.append(("NVIDIA_REQUIRE_CUDA", stack.require_cuda))
    # A base with NVIDIA's forward-compatibility libraries (cuda_compat) keeps its own
    # LD_LIBRARY_PATH: the Container Toolkit mounts /usr/local/cuda/compat's libcuda only
    # where it is newer than the host's driver. Put first on the path, it would be loaded on
    # a newer driver too, and CUDA stops there with error 803 (system driver mismatch).
    # what the frameworks in it read at run time (KERAS_BACKEND), set after the install
    # steps: those then match, cache hit for cache hit, the stack they are installed over
    run_env = list(stack.env)
    payload = f"{stack.smoke}_smoke.py"
    payloads = list(payload_files(stack.smoke)) or [payload]
    apt_snapshot = (base.kind == "registry" and bool(base.snapshot) and bool(base.suite))
    layers = install_layers(stack, closure) if layers is None else layers
    return {
        "envgen_version": __version__,
        "stack": stack,
        "closure": closure,
        "base_ref": ref,
        "base_pinned": "@sha256:" in ref or base.kind == "local",
        "local_base": base.kind == "local",
        "install_python": base.kind == "registry",
        "apt_snapshot": apt_snapshot,
        "apt_source": (f"deb http://snapshot.ubuntu.com/ubuntu/{base.snapshot} {base.suite} "
                       f"main universe") if apt_snapshot else "",
        "make_venv": base.kind != "framework",
        # A framework base's own files are newer than any epoch we could choose: stamping
        # them would copy the whole base into the layer, so such builds are not bit-exact.
        "stamp": STAMP if base.kind != "framework" else "true",
        "compile": COMPILE if COMPILE_AT_BUILD else "",
        "reproducible": base.kind != "framework",
        "epoch": closure.epoch,
        "uid": UID,
        "index_url": stack.index_url,
        "layers": project_steps(stack, layers),
        "project": stack.project,
        "project_build": _project_build(stack, layers),
        # the image's own stage is named when the kernel-build stage starts from it
        "kernel_build": any(x["dir"] == KERNEL_DIR for x in layers),
        "env": env, "run_env": run_env,
        "labels": image_labels(stack, ref, closure),
        "payload_dir": PAYLOAD_DIR,
        "pip_cache": PIP_CACHE, "wheel_dir": WHEEL_DIR,
        # the throw-away stage that unpacks uv, when a step installs with it
        "uv_stage": buildkit and any(x["uv"] for x in layers),
        "uv": UV, "uv_shared": UV_SHARED, "uv_version": UV_VERSION, "uv_dir": UV_DIR,
        "uv_target": UV_STAGE,
        "uv_fetch": f"python3 {REQ_MOUNT}/{UV_FETCHER.name} {REQ_MOUNT}/wheels.txt {UV_STAGE}"
        if uv_fetched(stack) else "",
        "uv_mount": UV_MOUNT, "venv_lock": VENV_LOCK,
        "bootstrap_pip": BOOTSTRAP_PIP if base.kind != "framework" else PIP,
        "req_mount": REQ_MOUNT,
        "src_mount": SRC_MOUNT,
        "tools_mount": TOOLS_MOUNT,
        "payload": payload,
        "copied": [*payloads, "stack.json", "requirements.txt", "closure.json"],
        "command": ["python", f"{PAYLOAD_DIR}/{payload}"],
        "buildkit": buildkit,
    }


def apptainer_view(stack: Stack, closure: Closure, base_ref: str | None = None,
                   docker: dict | None = None) -> dict:
    """The Apptainer definition: the Dockerfile's base, pip layers, payload and labels
    (from `docker`, the Dockerfile's view, when the caller has made it)."""
    d = docker or dockerfile_view(stack, closure, base_ref)
    pip = [x for x in d["layers"] if x["pip_step"]]
    files = [*(f"install/{x['dir']}/requirements.txt" for x in pip), *d["copied"]]
    env = [("VIRTUAL_ENV", "/opt/venv"),
           ("PYTHONUNBUFFERED", "1"), ("PIP_DISABLE_PIP_VERSION_CHECK", "1"), *d["env"],
           *d["run_env"]]
    return {**d, "layers": pip, "files": files, "stage": SRC_MOUNT, "env": env,
            "bootstrap": "docker-daemon" if stack.base.kind == "local" else "docker",
            "unhashed": any(x["unhashed"] for x in pip),
            "project_extras": len(pip) != len(d["layers"])}


APT_LIST = "/tmp/envgen-apt.list"
APT_LOG = "/tmp/envgen-apt-log"


def _step(kind: str, values: dict) -> dict:
    """One install step; the template tests its kind by flag (templates compare nothing)."""
    return {"pip_step": kind == "pip", "apt_step": kind == "apt",
            "files_step": kind == "files", "built_step": kind == "built",
            "kernel_step": kind == "kernel", **values}


def _apt(base) -> dict:
    """How an apt step reads the base's own archive snapshot."""
    mirror_arg = base.kind == "local" and bool(base.snapshot)
    source = (f"http://snapshot.ubuntu.com/ubuntu/{base.snapshot}"
              if base.kind == "registry" and base.snapshot and base.suite else None)
    opts = [f"Dir::Log={APT_LOG}", "Acquire::Check-Valid-Until=false"]
    if mirror_arg or source:
        opts += [f"Dir::Etc::SourceList={APT_LIST}", "Dir::Etc::SourceParts=/nonexistent"]
    return {"mirror_arg": mirror_arg, "source": source, "snapshot": bool(mirror_arg or source),
            "mirror_default": f"https://snapshot.debian.org/archive/debian/"
                              f"{base.snapshot}" if mirror_arg else "",
            "suite": base.suite or "", "list": APT_LIST, "log": APT_LOG,
            "components": "main universe" if source else "main", "opts": opts}


def reads_debian_mirror(stack: Stack, closure: Closure) -> bool:
    """Whether a rendered step declares ENVGEN_DEBIAN_MIRROR: a project's apt step, or a
    builder stage that runs apt (native sdists, CUDA kernels), on a local base with a
    snapshot. The same views the Dockerfile is rendered from decide, so `envgen build` asks
    for a mirror exactly when a step reads one."""
    if stack.project is None or not _apt(stack.base)["mirror_arg"]:
        return False
    layers = install_layers(stack, closure)
    build = _project_build(stack, layers)
    return bool(stack.project.apt or (build and build["tools"]) or
                _kernel_build(stack, layers))


def _project_build(stack: Stack, layers: list[dict]) -> dict | None:
    """The builder stage of a project's sdists: Debian's compiler and Python headers from
    the base's snapshot (pure-Python sdists on a local base: none, and the base's own pip),
    `pip wheel` of each sdist checked against its sha256."""
    built = next((x for x in layers if x["dir"] == PROJECT_BUILD_DIR), None)
    if built is None or stack.project is None:
        return None
    from ..resolve.held import held_sdist
    pure = bool(built.get("pure"))
    bare = pure and stack.base.kind == "local"   # python3-venv is in LOCAL_BASE_PACKAGES
    return {**_apt(stack.base), "dir": PROJECT_BUILD_DIR, "count": built["count"],
            "tools": [] if bare else list(PURE_BUILD_TOOLS if pure else BUILD_TOOLS),
            "pip": BASE_PIP if bare else BUILDER_PIP,
            "wheels": "/opt/wheels",
            # the sdists by name: `--no-binary=:all:` reached the isolated build environment
            # too, and pip built setuptools there from its own sdist (10 of the stage's 12 s)
            "no_binary": ",".join(sorted(canonical_name(p.name) for p in built["pins"])),
            # the backends, pinned by hash (None: a closure from before they were pinned,
            # whose builds take them from the index in pip's isolated environment)
            "tools_dir": PROJECT_BUILD_TOOLS_DIR if any(
                x["dir"] == PROJECT_BUILD_TOOLS_DIR for x in layers) else None,
            "tools_target": PROJECT_BUILD_TOOLS,
            # git references' archives (`git archive`) and sdists named by URL or path, in
            # project-archives/ of the context
            "archives": any(held_sdist(p) for p in built["pins"]),
            "archive_dir": ARCHIVE_MOUNT}


def _kernel_build(stack: Stack, layers: list[dict]) -> dict | None:
    """The stage that compiles a project's CUDA-kernel sdists: over the image's own layers
    (torch as the image has it), Debian's compiler and Python headers from the base's
    snapshot, NVIDIA's compiler wheels as a CUDA home, TORCH_CUDA_ARCH_LIST from the target
    GPUs; `pip wheel --no-build-isolation` of each sdist, checked against its sha256."""
    built = next((x for x in layers if x["dir"] == KERNEL_DIR), None)
    if built is None or stack.project is None:
        return None
    from ..resolve.held import held_sdist
    from ..resolve.kernels import MAX_JOBS, arch_list
    return {**_apt(stack.base), "dir": KERNEL_DIR, "tools_dir": KERNEL_TOOLS_DIR,
            "count": built["count"], "names": [p.name for p in built["pins"]],
            "apt_tools": list(KERNEL_APT), "wheels": KERNEL_WHEELS,
            "cuda_home": CUDA_HOME, "cuda_home_setup": CUDA_HOME_SETUP,
            "archs": arch_list(stack), "jobs": MAX_JOBS,
            "archives": any(held_sdist(p) for p in built["pins"]),
            "archive_dir": ARCHIVE_MOUNT}


def project_steps(stack: Stack, layers: list[dict]) -> list[dict]:
    """The install steps in order: the stack's pip layers, then a project's apt packages,
    its own pip layer, its files. Apt reads a sources list of its own and logs outside the
    image, so the layer holds the packages and dpkg's state, not a mirror's name or a
    clock. A local Debian base's packages come from its snapshot, or from the mirror
    `envgen build` passes as ENVGEN_DEBIAN_MIRROR (one serving that snapshot)."""
    layer = stack.project
    steps = [_step("pip", x) for x in layers
             if x["dir"] not in (PROJECT_DIR, PROJECT_BUILD_DIR, PROJECT_BUILD_TOOLS_DIR,
                                 KERNEL_DIR, KERNEL_TOOLS_DIR)]
    if layer is None:
        return steps
    kernel = _kernel_build(stack, layers)
    if kernel is not None:   # a stage over the stack's layers, before the project's own
        steps.append(_step("kernel", kernel))
    if layer.apt:
        steps.append(_step("apt", _apt(stack.base)))
    steps += [_step("pip", x) for x in layers if x["dir"] == PROJECT_DIR]
    steps += [_step("built", {**x, "stage": "project-build", "wheels": "/opt/wheels"})
              for x in layers if x["dir"] == PROJECT_BUILD_DIR]
    steps += [_step("built", {**x, "stage": "kernel-build", "wheels": KERNEL_WHEELS})
              for x in layers if x["dir"] == KERNEL_DIR]
    if layer.files:
        steps.append(_step("files", {"app_dir": APP_DIR}))
    return steps


def requirements_view(stack: Stack, closure: Closure, pins: list[Pin] | None = None,
                      title: str = "", layer: dict | None = None) -> dict:
    chosen = closure.pins if pins is None else pins
    return {"stack": stack, "closure": closure, "title": title,
            "binary": (layer or {}).get("binary", []),
            "build_env": (layer or {}).get("build_env", []),
            # the whole closure in one pip run cannot build these: they need torch installed
            "built_later": [n for n in stack.from_source   # those this closure holds
                            if canonical_name(n) in {canonical_name(p.name)
                                                        for p in chosen}]
            if layer is None else [],
            "source_dir": LAYER_DIRS[5],
            "index_url": stack.index_url,
            # a team's own indexes, where its packages come from (each file checked by hash)
            "extra_index_urls": list(stack.project.indexes) if stack.project is not None and (
                layer is None or layer.get("dir") in (
                    PROJECT_DIR, PROJECT_BUILD_DIR, PROJECT_BUILD_TOOLS_DIR, KERNEL_DIR,
                    KERNEL_TOOLS_DIR)) else [],
            "pins": [{"requirement": p.requirement, "sha256": p.sha256, "file": p.file,
                      "note": p.note} for p in chosen],
            "hashed": all(p.sha256 for p in chosen),
            "provided": sorted(stack.base.provides)}


# conda-forge's name where it differs from the wheel's (conda-forge ships torch as pytorch)
CONDA_NAMES = {"torch": "pytorch"}


def conda_view(stack: Stack) -> dict:
    """The conda-forge form: the framework at the base of the stack with a CUDA or CPU
    build, then its companions and what is installed over it, by version."""
    pins = {n: v.split("+")[0] for n, v in stack.packages}
    lead = stack.builds_on_package or stack.framework_package
    over = [(CONDA_NAMES.get(n, n), pins[n]) for n in stack.addons
            if n in pins and pins[n][:1].isdigit()]
    return {"stack": stack, "name": f"envgen-{stack.stack}",
            "conda_package": CONDA_NAMES.get(lead, lead),
            "framework_version": pins.get(lead, stack.version),
            "build": "cuda*" if stack.cuda else "cpu*",
            "companions": [(n, pins[n]) for n, _ in stack.packages
                           if n in stack.companions] + over}


def base_view(base: BaseImage) -> dict:
    """The recipe of a local base: mmdebstrap from the pinned snapshot, then docker import
    under the tag the Dockerfile's FROM names."""
    return {"base": base, "tag": base.local_tag, "packages": ",".join(LOCAL_BASE_PACKAGES),
            "epoch": base.snapshot_epoch or 0,
            "snapshot_mirror": f"https://snapshot.debian.org/archive/debian/{base.snapshot}",
            # No apt lists or caches in the image; an /etc/hosts of its own, so BuildKit
            # never creates (and later removes) one under a build step.
            "hooks": ['rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*',
                      'printf "127.0.0.1 localhost\\n::1 localhost ip6-localhost\\n" '
                      '> "$1/etc/hosts"'],
            # another architecture (arm64): mmdebstrap runs its scripts through QEMU
            "arch": base.arch, "platform": f"linux/{base.arch}" if base.arch else "",
            "labels": [f"LABEL io.envgen.base={base.name}",
                       f"LABEL io.envgen.base.suite={base.suite}",
                       f"LABEL io.envgen.base.snapshot={base.snapshot}",
                       'CMD ["/bin/bash"]']}


def render_base_script(base: BaseImage) -> str:
    return environment().get_template("build-base.sh.j2").render(**base_view(base))


def render_texts(stack: Stack, closure: Closure, base_ref: str | None = None,
                 buildkit: bool = True) -> dict[str, str]:
    """Every output file's text for a stack, by its path inside the build context."""
    req = "requirements.txt.j2"
    layers = install_layers(stack, closure)   # once: the Dockerfile's steps and their files
    docker = dockerfile_view(stack, closure, base_ref, buildkit, layers)
    jobs = {
        "Dockerfile": ("Dockerfile.j2", docker),
        "requirements.txt": (req, requirements_view(stack, closure)),
        "environment.yml": ("environment.yml.j2", conda_view(stack)),
        "apptainer.def": ("apptainer.def.j2", apptainer_view(stack, closure, base_ref, docker)),
    }
    for layer in layers:
        jobs[f"install/{layer['dir']}/requirements.txt"] = (
            req, requirements_view(stack, closure, layer["pins"], layer["title"], layer))
    texts_extra = {}
    if uses_uv(stack):
        texts_extra[f"install/{UV_DIR}/requirements.txt"] = uv_requirements(stack)
    if uv_fetched(stack):
        texts_extra[f"install/{UV_DIR}/wheels.txt"] = uv_wheels()
        texts_extra[f"install/{UV_DIR}/{UV_FETCHER.name}"] = UV_FETCHER.read_text()
    if stack.base.kind == "local":
        jobs["base/build-base.sh"] = ("build-base.sh.j2", base_view(stack.base))
    rendered = cache.render(jobs, template_dir(), environment)
    texts = {
        "Dockerfile": rendered["Dockerfile"],
        ".dockerignore": "".join(f"{p}\n" for p in CONTEXT_IGNORE),
        "requirements.txt": rendered["requirements.txt"],
        "environment.yml": rendered["environment.yml"],
        "apptainer.def": rendered["apptainer.def"],
        "stack.json": json.dumps(stack.to_json(), indent=2, sort_keys=True) + "\n",
        "closure.json": json.dumps(closure.to_json(), indent=1) + "\n",
    }
    texts.update((k, v) for k, v in rendered.items() if k not in texts)
    texts.update(texts_extra)
    _check_line_lengths(stack, texts["Dockerfile"])
    return texts


MAX_DOCKERFILE_LINE = 65535   # BuildKit's and the classic builder's parser refuse a longer one


def _check_line_lengths(stack: Stack, text: str) -> None:
    """A Dockerfile no builder can read is refused here, naming what made it long: the
    stack label carries a project's copied files (about 160 bytes each) and its smoke
    command."""
    n = max((len(line.encode()) for line in text.splitlines()), default=0)
    if n <= MAX_DOCKERFILE_LINE:
        return
    from ..core.errors import InputError
    p = stack.project
    why = (f"; its stack label carries each of the project's {len(p.files)} copied files and "
           f"its smoke command: copy fewer files (a folder packed into one archive)"
           if p is not None else "")
    raise InputError(f"the Dockerfile of {stack.stack} would have a line of {n:,} bytes, over "
                     f"the {MAX_DOCKERFILE_LINE:,} a Dockerfile line may hold{why}",
                     file=(p.source or None) if p is not None else None)
