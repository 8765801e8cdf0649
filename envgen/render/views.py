"""Views: everything a template shows, computed here so templates decide nothing."""
from __future__ import annotations

import json

from .. import __version__
from ..model import Stack
from .env import environment

UID = 10001  # not 1000: vendor bases (Ubuntu 24.04) already use it
PAYLOAD_DIR = "/opt/envgen"
FILES = ("Dockerfile", "requirements.txt", "environment.yml", "stack.json")


def requirement(name: str, version: str) -> str:
    """`name==1.2` for an exact pin; `name==13.0.96.*` or a range as the wheel states it."""
    return f"{name}{version}" if version[:1] in "<>=!~" else f"{name}=={version}"


def _split(stack: Stack) -> tuple[list, list, list]:
    """pip pins in cache-friendly layers: CUDA libraries, the framework, the companions."""
    pins = stack.pip_packages
    fw = stack.framework_package
    cuda = sorted(requirement(n, v) for n, v in pins.items()
                  if n.startswith("nvidia-") or n in ("cuda-toolkit", "triton"))
    framework = [requirement(fw, pins[fw])] if fw in pins else []
    extras = sorted(requirement(n, v) for n, v in pins.items()
                    if requirement(n, v) not in cuda and n != fw)
    return cuda, framework, extras


def image_labels(stack: Stack, base_ref: str) -> list[tuple[str, str]]:
    return [
        ("org.opencontainers.image.title", f"envgen {stack.stack}"),
        ("org.opencontainers.image.description",
         f"{stack.framework_package} {stack.version} ({stack.variant}) on Python "
         f"{stack.python}, {stack.base.name}"),
        ("org.opencontainers.image.version", f"{stack.version}-{stack.variant}"),
        ("org.opencontainers.image.base.name", base_ref),
        ("org.opencontainers.image.vendor", "envgen"),
        ("org.opencontainers.image.source", "https://github.com/envgen/envgen"),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
        ("io.envgen.version", __version__),
        ("io.envgen.matrix.sha256", stack.matrix_sha256),
        ("io.envgen.stack", json.dumps(stack.to_json(), sort_keys=True,
                                       separators=(",", ":"))),
    ]


def dockerfile_view(stack: Stack, base_ref: str | None = None,
                    buildkit: bool = True) -> dict:
    cuda, framework, extras = _split(stack)
    base = stack.base
    ref = base_ref or base.reference
    env = [("NVIDIA_VISIBLE_DEVICES", "all"),
           ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")]
    if stack.require_cuda:
        env.append(("NVIDIA_REQUIRE_CUDA", stack.require_cuda))
    if base.cuda_compat:
        env.append(("LD_LIBRARY_PATH", "/usr/local/cuda/compat:/usr/local/nvidia/lib64"))
    return {
        "envgen_version": __version__,
        "stack": stack,
        "base_ref": ref,
        "base_pinned": "@sha256:" in ref or base.kind == "local",
        "install_python": base.kind == "registry",
        "make_venv": base.kind != "framework",
        "uid": UID,
        "index_url": stack.index_url,
        "layers": [(name, pins) for name, pins in
                   (("CUDA libraries", cuda), ("framework", framework),
                    ("companions", extras)) if pins],
        "env": env,
        "labels": image_labels(stack, ref),
        "payload_dir": PAYLOAD_DIR,
        "payload": f"{stack.smoke}_smoke.py",
        "command": ["python", f"{PAYLOAD_DIR}/{stack.smoke}_smoke.py"],
        "buildkit": buildkit,
    }


def requirements_view(stack: Stack) -> dict:
    cuda, framework, extras = _split(stack)
    return {"stack": stack, "index_url": stack.index_url,
            "pins": cuda + framework + extras,
            "provided": sorted(stack.base.provides)}


def conda_view(stack: Stack) -> dict:
    fw_pin = dict(stack.packages).get(stack.framework_package, stack.version).split("+")[0]
    return {"stack": stack, "name": f"envgen-{stack.stack}",
            "conda_package": "pytorch" if stack.framework_package == "torch"
            else stack.framework_package,
            "framework_version": fw_pin,
            "build": "cuda*" if stack.cuda else "cpu*",
            "companions": [(n, v.split("+")[0]) for n, v in stack.packages
                           if n in stack.companions]}


def render_texts(stack: Stack, base_ref: str | None = None,
                 buildkit: bool = True) -> dict[str, str]:
    """Every output file's text for a stack."""
    env = environment()
    return {
        "Dockerfile": env.get_template("Dockerfile.j2").render(
            **dockerfile_view(stack, base_ref, buildkit)),
        "requirements.txt": env.get_template("requirements.txt.j2").render(
            **requirements_view(stack)),
        "environment.yml": env.get_template("environment.yml.j2").render(**conda_view(stack)),
        "stack.json": json.dumps(stack.to_json(), indent=2, sort_keys=True) + "\n",
    }
