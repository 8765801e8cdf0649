"""How GPUs reach a container: the NVIDIA Container Toolkit (--gpus), CDI device names, or
explicit device nodes plus the driver's files bound read-only (what a CDI spec does)."""
from __future__ import annotations

import glob
import os
import platform
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


class Gpu(int):
    """A GPU as this process numbers it (nvidia-smi's index, which certify, the engines and
    the run profile pass around as an int) that also carries its UUID: the Docker daemon
    runs outside a batch job's cgroup and numbers every GPU of the host, so it is given the
    UUID, never the job's index."""

    uuid: str

    def __new__(cls, index: int, uuid: str = "") -> Gpu:
        gpu = super().__new__(cls, index)
        gpu.uuid = uuid
        return gpu


# What may restrict a process's GPUs, first found wins: what CUDA in the process would
# see, else the GPUs Slurm allocated to the step or the job (the node's indices).
VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


_GPU_NAME = re.compile(r"[0-9]{1,4}|(?:GPU|MIG)-[0-9A-Za-z/-]{1,80}")


def _entries(value: str) -> list[str]:
    """The GPUs a CUDA_VISIBLE_DEVICES-like value names, up to the first entry that names
    none (-1, NoDevFiles, an empty one), where CUDA stops reading it."""
    out = []
    for entry in (e.strip() for e in value.split(",")):
        if not _GPU_NAME.fullmatch(entry):
            break
        out.append(entry)
    return out


def _named(entry: str, gpus):
    """The listed GPU an entry names (an index, or a UUID or its unique prefix, as CUDA
    reads it); None when no listed GPU is that one."""
    if entry.isdigit():
        return next((g for g in gpus if g.index == int(entry)), None)
    found = [g for g in gpus if g.uuid.startswith(entry)]
    return found[0] if len(found) == 1 else None


def visible(gpus, env) -> tuple[list, str | None]:
    """The GPUs of nvidia-smi's listing `gpus` this process may use, and the variable of
    VISIBLE_VARS that says so (None: every listed GPU). In a job whose cgroup holds only its
    GPUs, nvidia-smi lists those from 0 while Slurm may name them as the node numbers them:
    indices that are not all listed, as many as nvidia-smi lists, are the listed GPUs."""
    name = next((v for v in VISIBLE_VARS if env.get(v) is not None), None)
    if name is None:
        return list(gpus), None
    entries = _entries(env[name])
    found = {e: _named(e, gpus) for e in entries}
    missing = [e for e, g in found.items() if g is None]
    if missing and all(e.isdigit() for e in entries) and len(found) == len(gpus):
        return list(gpus), name
    if missing:
        raise EnvironmentMissing(f"{name}={shown(env[name], 60)} names GPU "
                                 f"{shown(missing[0], 44)}, which nvidia-smi does not list "
                                 f"here ({len(gpus)} listed)")
    return sorted({g.index: g for g in found.values()}.values(), key=lambda g: g.index), name


def _listing(available):
    """nvidia-smi's GPUs: `available` itself when it is the listing (HostGpus); for a count,
    this host's listing read again when it has that many GPUs (their UUIDs), else GPUs
    known by index only."""
    from . import host
    if not isinstance(available, int):
        return tuple(available.gpus)
    found = host.detect().gpus
    if len(found) == available:
        return found
    return tuple(host.HostGpu(i, "", "", "", 0, 0, 0) for i in range(available))


def parse_gpus(value: str, available, env=None) -> list[Gpu] | None:
    """`all`, `none`, `auto` or `0,1` → the GPUs (None for none) of `available`, the host's
    nvidia-smi listing (HostGpus) or its count. `all` and `auto` are the GPUs the
    environment leaves this process (visible()); a list names nvidia-smi's indices, each of
    them among those. A GPU this host (or job) does not have is EnvironmentMissing (exit 3):
    the flag is fine, the host lacks it."""
    check_gpus(value)
    if value == "none":
        return None
    env = os.environ if env is None else env
    gpus = _listing(available)
    usable, name = visible(gpus, env)
    if value in ("all", "auto"):
        if value == "all" and gpus and not usable:
            raise EnvironmentMissing(f"--gpus all: {name}={shown(env[name], 60)} leaves this "
                                     f"process none of the {len(gpus)} GPU(s) nvidia-smi lists")
        return [Gpu(g.index, g.uuid) for g in usable]
    idx = sorted({int(x) for x in value.split(",")})
    bad = [i for i in idx if i >= len(gpus)]
    if bad:
        raise EnvironmentMissing(f"--gpus {value}: no GPU {bad[0]} on this host "
                                 f"({len(gpus)} visible)")
    by_index = {g.index: g for g in usable}
    outside = [i for i in idx if i not in by_index]
    if outside:
        raise EnvironmentMissing(f"--gpus {value}: GPU {outside[0]} is not one "
                                 f"{name}={shown(env[name], 60)} leaves this process")
    return [Gpu(i, by_index[i].uuid) for i in idx]


def detect_mode(docker_info: dict) -> str:
    runtimes = docker_info.get("Runtimes") or {}
    if "nvidia" in runtimes:
        return "toolkit"
    if docker_info.get("CDISpecDirs") and any(
            glob.glob(os.path.join(d, "*nvidia*")) for d in docker_info["CDISpecDirs"]):
        return "cdi"
    return "devices"


# how `ldconfig -p` marks a library of the machine's own kind (64-bit, not a 32-bit copy)
_LDCONFIG_ARCH = {"x86_64": "x86-64", "aarch64": "AArch64"}


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
                and _LDCONFIG_ARCH.get(platform.machine(), "x86-64") in line \
                and os.path.exists(path):
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


def device_id(gpu: int) -> str:
    """What the daemon is given for a GPU: its UUID when known, else its index."""
    return getattr(gpu, "uuid", "") or str(int(gpu))


PROC_GPUS = "/proc/driver/nvidia/gpus"   # the driver's own page per GPU


def _minor(gpu: int) -> int:
    """The number of a GPU's /dev/nvidiaN node: its minor number, which the driver's page
    for the GPU of that UUID gives (a job's index is not the node's); else its index."""
    uuid = getattr(gpu, "uuid", "")
    for page in sorted(glob.glob(os.path.join(PROC_GPUS, "*", "information"))) if uuid else ():
        try:
            with open(page) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        minor = fields.get("Device Minor", "").strip()
        if fields.get("GPU UUID", "").strip() == uuid and minor.isdigit():
            return int(minor)
    return int(gpu)


def plan(indices: list[int] | None, mode: str, docker_info: dict) -> GpuPlan:
    """How the container gets the GPUs `indices` (parse_gpus's): each named to the daemon
    by its UUID when known (device_id), since the daemon numbers the whole host's GPUs."""
    if not indices:
        return GpuPlan("none")
    if mode == "auto":
        mode = detect_mode(docker_info)
    if mode == "toolkit":
        import docker
        req = docker.types.DeviceRequest(device_ids=[device_id(i) for i in indices],
                                         capabilities=[["gpu", "compute", "utility"]])
        return GpuPlan("toolkit", indices, {"device_requests": [req]})
    if mode == "cdi":
        import docker
        req = docker.types.DeviceRequest(driver="cdi", device_ids=[
            f"nvidia.com/gpu={device_id(i)}" for i in indices])
        return GpuPlan("cdi", indices, {"device_requests": [req]})
    nodes = [f"/dev/nvidia{_minor(i)}" for i in indices] + [
        n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                    "/dev/nvidia-modeset") if os.path.exists(n)]
    missing = [n for n in nodes if not os.path.exists(n)]
    if missing:
        raise EnvironmentMissing(f"GPU device node {missing[0]} is missing on this host")
    volumes, env = _driver_binds()
    return GpuPlan("devices", indices, {"devices": [f"{n}:{n}:rwm" for n in nodes],
                                        "volumes": volumes, "environment": env})
