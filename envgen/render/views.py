"""Views: everything a template shows, computed here so templates decide nothing."""
from __future__ import annotations

import json

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
from .env import environment, template_dir

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
# Stamps every file a step wrote with SOURCE_DATE_EPOCH (the closure's time), skipping the
# kernel's and BuildKit's mounts: the layer's tar then depends only on its inputs. The
# engine's own `rewrite-timestamp` needs BuildKit 0.13; this works on every BuildKit.
STAMP = ("find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /etc/resolv.conf "
         f"-o -path /etc/hosts -o -path /etc/hostname -o -path {PIP_CACHE} -o -path "
         f"{REQ_MOUNT} -o -path {SRC_MOUNT} \\) -prune -o -newermt \"@$SOURCE_DATE_EPOCH\" "
         "-exec touch --no-dereference --date=\"@$SOURCE_DATE_EPOCH\" {} +")
# Bytecode for the files a pip step installed (those newer than its "$marker"), compiled at
# build: the image's user cannot write .pyc into the venv, so without it every container start
# compiles each module it imports again (`import torch`: docs/benchmarks.md). checked-hash
# .pyc carry the source's hash instead of its time, and one process compiles the files in
# sorted order with a fixed hash seed, so two builds still give bit-identical layers. -f:
# a .pyc that Python wrote by itself meanwhile (setuptools' .pth imports _distutils_hack at
# every start) records the source's time, and is replaced. A file
# that does not compile (a Python 2 leftover in some wheels) is left without, as pip leaves it.
# No pipe: the list goes through a file beside the marker, so a failing find or sort fails
# the step (sh has no pipefail; hadolint DL4006) while compileall reads the same sorted list.
COMPILE = ("find \"$(python -c 'import sys; print(sys.prefix)')\" -name '*.py' -newer "
           "\"$marker\" > \"$marker.files\" && LC_ALL=C sort -o \"$marker.files\" "
           "\"$marker.files\" && { PYTHONHASHSEED=0 python -m compileall -f -qq "
           "--invalidation-mode checked-hash -i \"$marker.files\" "
           "|| echo 'some files did not compile'; } && rm -f \"$marker.files\"")
COMPILE_AT_BUILD = True   # the pip steps compile bytecode (False renders them without)
CONTEXT_IGNORE = ("base/", "*.tar", ".envgen-render-*")
# The venv is made without pip: the locked pip and setuptools are installed into it by the
# distribution's own pip wheel, run from the wheel file, so no step deletes a file a lower
# layer holds. (A deletion is a whiteout in the layer, stamped with the time of the build.)
PIP = "pip"
BOOTSTRAP_PIP = ('python "$(set -- /usr/share/python-wheels/pip-*.whl; '
                 'echo "$1")/pip"')


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


def install_layers(stack: Stack, closure: Closure) -> list[dict]:
    provided = {n.lower() for n, _ in stack.base.provides}
    full = closure
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
    for i, pins in enumerate(groups):
        if not pins:
            continue
        unhashed = [p for p in pins if not p.sha256]
        bootstrap = i == 0 and stack.base.kind != "framework"
        source = LAYER_DIRS[i] == "6-source"
        layers.append({"title": LAYER_TITLES[i], "dir": LAYER_DIRS[i], "pins": pins,
                       "pip": BOOTSTRAP_PIP if bootstrap else PIP,
                       # a source build sees the layers below (torch) and reads these
                       "build_env": list(stack.build_env) if source else [],
                       "binary": (["--no-build-isolation", *(f"--no-binary={p.name}"
                                                             for p in pins)]
                                  if source else []),
                       "count": len(pins), "hashed": not unhashed,
                       "unhashed": [(p.requirement, p.note) for p in unhashed]})
    return layers


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
                    buildkit: bool = True) -> dict:
    base = stack.base
    ref = base_ref or base.reference
    env = [("NVIDIA_VISIBLE_DEVICES", "all"),
           ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")]
    if stack.require_cuda:
        env.append(("NVIDIA_REQUIRE_CUDA", stack.require_cuda))
    if base.cuda_compat:
        env.append(("LD_LIBRARY_PATH", "/usr/local/cuda/compat:/usr/local/nvidia/lib64"))
    payload = f"{stack.smoke}_smoke.py"
    payloads = list(payload_files(stack.smoke)) or [payload]
    apt_snapshot = (base.kind == "registry" and bool(base.snapshot) and bool(base.suite))
    layers = install_layers(stack, closure)
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
        "env": env,
        "labels": image_labels(stack, ref, closure),
        "payload_dir": PAYLOAD_DIR,
        "pip_cache": PIP_CACHE, "wheel_dir": WHEEL_DIR,
        "req_mount": REQ_MOUNT,
        "src_mount": SRC_MOUNT,
        "payload": payload,
        "copied": [*payloads, "stack.json", "requirements.txt", "closure.json"],
        "command": ["python", f"{PAYLOAD_DIR}/{payload}"],
        "buildkit": buildkit,
    }


def apptainer_view(stack: Stack, closure: Closure, base_ref: str | None = None) -> dict:
    """The Apptainer definition: the Dockerfile's base, pip layers, payload and labels."""
    d = dockerfile_view(stack, closure, base_ref)
    pip = [x for x in d["layers"] if x["pip_step"]]
    files = [*(f"install/{x['dir']}/requirements.txt" for x in pip), *d["copied"]]
    env = [("VIRTUAL_ENV", "/opt/venv"),
           ("PYTHONUNBUFFERED", "1"), ("PIP_DISABLE_PIP_VERSION_CHECK", "1"), *d["env"]]
    return {**d, "layers": pip, "files": files, "stage": SRC_MOUNT, "env": env,
            "bootstrap": "docker-daemon" if stack.base.kind == "local" else "docker",
            "unhashed": any(x["unhashed"] for x in pip),
            "project_extras": len(pip) != len(d["layers"])}


APT_LIST = "/tmp/envgen-apt.list"
APT_LOG = "/tmp/envgen-apt-log"


def _step(kind: str, values: dict) -> dict:
    """One install step; the template tests its kind by flag (templates compare nothing)."""
    return {"pip_step": kind == "pip", "apt_step": kind == "apt",
            "files_step": kind == "files", **values}


def project_steps(stack: Stack, layers: list[dict]) -> list[dict]:
    """The install steps in order: the stack's pip layers, then a project's apt packages,
    its own pip layer, its files. Apt reads a sources list of its own and logs outside the
    image, so the layer holds the packages and dpkg's state, not a mirror's name or a
    clock. A local Debian base's packages come from its snapshot, or from the mirror
    `envgen build` passes as ENVGEN_DEBIAN_MIRROR (one serving that snapshot)."""
    layer = stack.project
    steps = [_step("pip", x) for x in layers if x["dir"] != PROJECT_DIR]
    if layer is None:
        return steps
    base = stack.base
    if layer.apt:
        mirror_arg = base.kind == "local" and bool(base.snapshot)
        source = (f"http://snapshot.ubuntu.com/ubuntu/{base.snapshot}"
                  if base.kind == "registry" and base.snapshot and base.suite else None)
        opts = [f"Dir::Log={APT_LOG}", "Acquire::Check-Valid-Until=false"]
        if mirror_arg or source:
            opts += [f"Dir::Etc::SourceList={APT_LIST}", "Dir::Etc::SourceParts=/nonexistent"]
        steps.append(_step("apt", {"mirror_arg": mirror_arg, "source": source,
                      "snapshot": bool(mirror_arg or source),
                      "mirror_default": f"https://snapshot.debian.org/archive/debian/"
                                        f"{base.snapshot}" if mirror_arg else "",
                      "suite": base.suite or "", "list": APT_LIST, "log": APT_LOG,
                      "components": "main universe" if source else "main", "opts": opts}))
    steps += [_step("pip", x) for x in layers if x["dir"] == PROJECT_DIR]
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
    jobs = {
        "Dockerfile": ("Dockerfile.j2", dockerfile_view(stack, closure, base_ref, buildkit)),
        "requirements.txt": (req, requirements_view(stack, closure)),
        "environment.yml": ("environment.yml.j2", conda_view(stack)),
        "apptainer.def": ("apptainer.def.j2", apptainer_view(stack, closure, base_ref)),
    }
    for layer in install_layers(stack, closure):
        jobs[f"install/{layer['dir']}/requirements.txt"] = (
            req, requirements_view(stack, closure, layer["pins"], layer["title"], layer))
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
    return texts
