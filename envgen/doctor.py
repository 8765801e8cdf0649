"""This host: the NVIDIA driver and GPUs, the matrix's view of the driver, the Docker daemon
and its GPU plumbing, and which stacks can run here. Detection is injected so tests can
fake nvidia-smi and the daemon; `examine` itself decides without side effects."""
from __future__ import annotations

import glob
import os
import time

from .core.errors import EnvgenError
from .diff import resolve_all, verdict
from .matrix import Matrix
from .runtime import docker as engine
from .runtime import host
from .runtime.host import HostGpus

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


def docker_facts(client=engine.client, cdi_dirs=CDI_DIRS) -> dict:
    """What the Docker daemon says about itself; `reachable: False` with the error if none."""
    specs = sorted(p for d in cdi_dirs for p in glob.glob(os.path.join(d, "*"))
                   if p.endswith((".yaml", ".yml", ".json")))
    try:
        info = client().info()
    except EnvgenError as e:
        return {"reachable": False, "error": e.message, "cdi_specs": specs}
    except Exception as e:  # the SDK's APIError and requests' errors after a good ping
        return {"reachable": False, "error": f"docker info failed: {e}", "cdi_specs": specs}
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    return {"reachable": True, "error": None, "version": info.get("ServerVersion"),
            "runtimes": runtimes, "default_runtime": info.get("DefaultRuntime"),
            "nvidia_runtime": "nvidia" in runtimes,
            "cdi_spec_dirs": list(info.get("CDISpecDirs") or []), "cdi_specs": specs}


def _driver_view(m: Matrix, driver: str, today: str) -> dict:
    from .resolve.compat import driver_cuda
    br = m.driver_branch(driver)
    out = {"version": driver, "cuda": driver_cuda(m, driver), "branch": None, "lts": None,
           "eol": None, "past_eol": None, "latest_in_branch": None}
    if br:
        out |= {"branch": f"R{br.branch}", "lts": br.lts, "eol": br.eol,
                "past_eol": bool(br.eol and br.eol < today[:len(br.eol)]),
                "latest_in_branch": br.latest}
    return out


def examine(m: Matrix, gpus: HostGpus, docker: dict, today: str | None = None,
            stacks: dict | None = None) -> dict:
    """The doctor's report. `ok` is False (exit 3) without a GPU or a Docker daemon."""
    today = today or time.strftime("%Y-%m-%d")
    problems, warnings = [], []
    if not gpus.gpus:
        problems.append(gpus.error or "nvidia-smi lists no GPU")
    if not docker.get("reachable"):
        problems.append(docker.get("error") or "no Docker daemon answers")
    elif gpus.gpus and not docker.get("nvidia_runtime") and not docker.get("cdi_specs"):
        warnings.append("Docker has no nvidia runtime and no CDI spec: envgen passes GPUs "
                        "as device nodes plus driver files (install the NVIDIA Container "
                        "Toolkit for --gpus)")
    gpu_rows = []
    for g in gpus.gpus:
        known = m.gpu(g.name)
        gpu_rows.append({"index": g.index, "name": g.name, "matrix_name": known.name
                         if known else None, "cc": g.cc, "class": known.gpu_class
                         if known else None, "memory_mib": g.memory_total_mib,
                         "memory_used_mib": g.memory_used_mib, "busy": g.busy})
        if known and gpus.driver:
            from .resolve.compat import gpu_knows
            k = gpu_knows(m, known, gpus.driver)
            if not k.ok:
                problems.append(k.why)
    first = gpus.gpus[0] if gpus.gpus else None
    first_known = m.gpu(first.name) if first else None
    rows = {}
    for name, st in (resolve_all(m) if stacks is None else stacks).items():
        if isinstance(st, str):
            rows[name] = {"runs": False, "how": None, "why": st}
        elif st.cuda and (gpus.driver is None or first is None):
            rows[name] = {"runs": False, "how": None,
                          "why": "no NVIDIA GPU or driver on this host"}
        elif not st.cuda:
            rows[name] = verdict(m, st, gpus.driver or "0")
        else:
            rows[name] = verdict(m, st, gpus.driver, first_known, cc=first.cc)
    return {"ok": not problems, "problems": problems, "warnings": warnings,
            "driver": _driver_view(m, gpus.driver, today) if gpus.driver else None,
            "gpus": gpu_rows, "docker": docker, "stacks": rows,
            "runs": [n for n, r in rows.items() if r["runs"]]}


def doctor(m: Matrix, detect=None, docker=None, today=None) -> dict:
    """Detect (nvidia-smi, the daemon: both replaceable) and examine."""
    return examine(m, (detect or host.detect)(), (docker or docker_facts)(), today)
