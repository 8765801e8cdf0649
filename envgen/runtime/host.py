"""What this host has: the NVIDIA driver and GPUs (nvidia-smi), read once per call."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

QUERY = "index,name,uuid,compute_cap,memory.total,memory.used,utilization.gpu,driver_version"


@dataclass(frozen=True)
class HostGpu:
    index: int
    name: str
    uuid: str
    cc: str
    memory_total_mib: int
    memory_used_mib: int
    utilization: int

    @property
    def busy(self) -> bool:
        return self.utilization > 10 or self.memory_used_mib > 1024


@dataclass(frozen=True)
class HostGpus:
    driver: str | None
    gpus: tuple[HostGpu, ...]
    error: str | None = None

    def to_json(self) -> dict:
        return {"driver": self.driver, "error": self.error,
                "gpus": [g.__dict__ | {"busy": g.busy} for g in self.gpus]}


def _int(text: str) -> int:
    """A number nvidia-smi gave, 0 (unknown) where it is none: [N/A], nan, inf."""
    try:
        return int(float(text))
    except (ValueError, OverflowError):
        return 0


def parse_query(text: str) -> HostGpus:
    """nvidia-smi's CSV rows. A field it cannot give ([N/A], [Not Supported]) is not taken
    for a value: a compute capability that is not one is left empty (the matrix's GPU of
    that name gives it), a driver version that is not one is the host's error."""
    from ..core.model import CC_RE, DRIVER_RE
    gpus, driver = [], None
    for line in text.strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 8:
            continue
        gpus.append(HostGpu(index=_int(f[0]), name=f[1], uuid=f[2],
                            cc=f[3] if CC_RE.fullmatch(f[3]) else "",
                            memory_total_mib=_int(f[4]), memory_used_mib=_int(f[5]),
                            utilization=_int(f[6])))
        driver = f[7]
    if driver is not None and not DRIVER_RE.fullmatch(driver):
        return HostGpus(driver=None, gpus=tuple(gpus), error=(
            f"nvidia-smi gave the driver version {driver[:40]!r}, which is not one"))
    return HostGpus(driver=driver, gpus=tuple(gpus))


def detect(nvidia_smi: str | None = None) -> HostGpus:
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return HostGpus(None, (), "nvidia-smi not found: no NVIDIA driver on this host")
    try:
        r = subprocess.run([exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return HostGpus(None, (), f"nvidia-smi failed: {e}")
    if r.returncode != 0:
        return HostGpus(None, (), f"nvidia-smi failed: {(r.stderr or r.stdout).strip()[:200]}")
    return parse_query(r.stdout)
