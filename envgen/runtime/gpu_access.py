"""How GPUs reach a container: the NVIDIA Container Toolkit (--gpus), CDI device names, or
explicit device nodes plus the driver's files bound read-only (what a CDI spec does)."""
from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass, field

from ..core.errors import EnvironmentMissing, InputError, shown

DRIVER_DIR = "/usr/local/nvidia"
DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
               "libnvidia-nvvm.so", "libcudadebugger.so", "libnvidia-gpucomp.so")


@dataclass
class GpuPlan:
    """Arguments for docker-py's containers.run that give the container its GPUs."""

    mode: str                          # toolkit | cdi | devices | none
    indices: list[int] = field(default_factory=list)
    run_kwargs: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.mode} ({','.join(map(str, self.indices)) or 'no GPU'})"


_GPU_LIST = re.compile(r"[0-9]{1,3}(?:,[0-9]{1,3})*")


def check_gpus(value: object) -> str:
    """`value` when it is all, none, auto or a list like 0,1; else InputError (exit 2)."""
    if not isinstance(value, str) or not (value in ("all", "none", "auto")
                                          or _GPU_LIST.fullmatch(value)):
        raise InputError(f"--gpus {shown(value, 44)} must be all, none, auto or a list of "
                         f"GPU indices like 0,1")
    return value


def parse_gpus(value: str, available: int) -> list[int] | None:
    """`all`, `none`, `auto` or `0,1` → indices (None for none). A GPU this host does not
    have is EnvironmentMissing (exit 3): the flag is fine, the host lacks it."""
    check_gpus(value)
    if value == "none":
        return None
    if value in ("all", "auto"):
        return list(range(available))
    idx = [int(x) for x in value.split(",")]
    bad = [i for i in idx if i >= available]
    if bad:
        raise EnvironmentMissing(f"--gpus {value}: no GPU {bad[0]} on this host "
                                 f"({available} visible)")
    return sorted(set(idx))


def detect_mode(docker_info: dict) -> str:
    runtimes = docker_info.get("Runtimes") or {}
    if "nvidia" in runtimes:
        return "toolkit"
    if docker_info.get("CDISpecDirs") and any(
            glob.glob(os.path.join(d, "*nvidia*")) for d in docker_info["CDISpecDirs"]):
        return "cdi"
    return "devices"


def _driver_binds() -> tuple[dict, dict]:
    """Volumes and env that put the host driver's user-space files into a container."""
    if os.path.isdir(DRIVER_DIR):
        return ({DRIVER_DIR: {"bind": DRIVER_DIR, "mode": "ro"}},
                {"LD_LIBRARY_PATH": f"{DRIVER_DIR}/lib64:{DRIVER_DIR}/lib",
                 "PATH": f"{DRIVER_DIR}/bin"})
    volumes = {}
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                               timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        cache = ""
    for line in cache.splitlines():
        path = line.rsplit("=>", 1)[-1].strip()
        if any(os.path.basename(path).startswith(lib) for lib in DRIVER_LIBS) \
                and "x86-64" in line and os.path.exists(path):
            real = os.path.realpath(path)
            volumes[real] = {"bind": f"{DRIVER_DIR}/lib64/{os.path.basename(path)}",
                             "mode": "ro"}
    for exe in ("nvidia-smi",):
        for d in os.environ.get("PATH", "").split(":"):
            if os.path.exists(os.path.join(d, exe)):
                volumes[os.path.join(d, exe)] = {"bind": f"{DRIVER_DIR}/bin/{exe}",
                                                 "mode": "ro"}
                break
    if not any("libcuda.so" in k for k in volumes):
        raise EnvironmentMissing("cannot find the driver's libcuda.so to give the container; "
                                 "install the NVIDIA Container Toolkit or use --gpus none")
    return volumes, {"LD_LIBRARY_PATH": f"{DRIVER_DIR}/lib64", "PATH": f"{DRIVER_DIR}/bin"}


def plan(indices: list[int] | None, mode: str, docker_info: dict) -> GpuPlan:
    if not indices:
        return GpuPlan("none")
    if mode == "auto":
        mode = detect_mode(docker_info)
    if mode == "toolkit":
        import docker
        req = docker.types.DeviceRequest(device_ids=[str(i) for i in indices],
                                         capabilities=[["gpu", "compute", "utility"]])
        return GpuPlan("toolkit", indices, {"device_requests": [req]})
    if mode == "cdi":
        import docker
        req = docker.types.DeviceRequest(driver="cdi", device_ids=[
            f"nvidia.com/gpu={i}" for i in indices])
        return GpuPlan("cdi", indices, {"device_requests": [req]})
    nodes = [f"/dev/nvidia{i}" for i in indices] + [
        n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                    "/dev/nvidia-modeset") if os.path.exists(n)]
    missing = [n for n in nodes if not os.path.exists(n)]
    if missing:
        raise EnvironmentMissing(f"GPU device node {missing[0]} is missing on this host")
    volumes, env = _driver_binds()
    return GpuPlan("devices", indices, {"devices": [f"{n}:{n}:rwm" for n in nodes],
                                        "volumes": volumes, "environment": env})
