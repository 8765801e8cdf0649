"""This host: the NVIDIA driver and GPUs, the matrix's view of the driver, the Docker daemon
and its GPU plumbing, and which stacks can run here. Detection is injected so tests can
fake nvidia-smi and the daemon; `examine` itself decides without side effects."""
from __future__ import annotations

import glob
import os
import time

from .core.errors import EnvgenError
from .diff import cert_runs, host_verdict, resolve_all, verdict
from .matrix import Matrix
from .runtime import docker as engine
from .runtime import host
from .runtime.host import HostGpus

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
BINFMT = "/proc/sys/fs/binfmt_misc"
# platform.machine() -> the image platform such a host runs natively; the binfmt_misc
# handler (QEMU's, as Debian's qemu-user-static registers it) that runs the other one
NATIVE = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64",
          "arm64": "linux/arm64"}
EMULATORS = {"linux/arm64": "qemu-aarch64", "linux/amd64": "qemu-x86_64"}


def platform_facts(machine: str | None = None, binfmt: str = BINFMT) -> dict:
    """This host's machine (platform.machine()), the image platform it runs natively and
    those it runs through an enabled QEMU binfmt_misc handler."""
    import platform
    machine = machine or platform.machine()
    native = NATIVE.get(machine)
    emulated = []
    for plat, handler in EMULATORS.items():
        try:
            with open(os.path.join(binfmt, handler)) as f:
                enabled = f.readline().strip() == "enabled"
        except OSError:
            enabled = False
        if plat != native and enabled:
            emulated.append(plat)
    return {"machine": machine, "native": native, "emulated": emulated}


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


def certified_here(m: Matrix, cert_list: list[dict], gpus: HostGpus) -> dict[str, dict]:
    """stack name (NAME.STACK for a project's) -> the newest passing certificate in this
    host's store that speaks for this host: a run on no GPU (level cpu: any host with a
    Docker daemon runs it so) or a run on this host's GPU kinds under its driver's branch
    (certs.view.on_host). A GPU run wins over a CPU run."""
    from .certs import certificate
    from .certs.view import on_host, stack_name

    def gpu_of(name):
        g = m.gpu(name)
        return g.name if g else None
    out: dict[str, dict] = {}
    for c in sorted(cert_list, key=lambda c: str(c.get("created") or ""), reverse=True):
        if c.get("passed") and not certificate.where(c)["count"]:
            out.setdefault(stack_name(c), {"level": c.get("level") or "cpu",
                                           "created": c.get("created"),
                                           "image_id": c["image_id"], "where": "no GPU"})
    if gpus.driver and gpus.gpus:
        kinds = {gpu_of(g.name) for g in gpus.gpus} - {None}
        known = tuple(dict.fromkeys(m.gpu(g.name) for g in gpus.gpus))
        for row in on_host(cert_list, kinds, gpus.driver, gpu_of,
                           runs=lambda c: cert_runs(m, c, gpus.driver, known)):
            if row["passed"]:
                out[row["stack"]] = {"level": row["level"], "created": row["created"],
                                     "image_id": row["image_id"],
                                     "where": certificate.where_text(
                                         {"gpu": row["gpu"], "count": row["gpu_count"],
                                          "driver": row["driver"]})}
    return out


def examine(m: Matrix, gpus: HostGpus, docker: dict, today: str | None = None,
            stacks: dict | None = None, certified: dict | None = None,
            platform: dict | None = None) -> dict:
    """The doctor's report. `ok` is False (exit 3) without a GPU or a Docker daemon.
    `certified` (certified_here): what this host's store has certified here; each stack's
    row carries it, and `summary` leads with it."""
    today = today or time.strftime("%Y-%m-%d")
    problems, warnings = [], []
    if not gpus.gpus or gpus.error:
        problems.append(gpus.error or "nvidia-smi lists no GPU")
    if not docker.get("reachable"):
        problems.append(docker.get("error") or "no Docker daemon answers")
    elif gpus.gpus and not docker.get("nvidia_runtime") and not docker.get("cdi_specs"):
        warnings.append("Docker has no nvidia runtime and no CDI spec: envgen passes GPUs "
                        "as device nodes plus driver files (install the NVIDIA Container "
                        "Toolkit for --gpus)")
    if platform and platform.get("native") is None:
        warnings.append(f"this host's machine is {platform.get('machine')}: envgen builds "
                        f"linux/amd64 and linux/arm64 images, neither runs here natively")
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
    # a host runs a stack when every kind of GPU in it does (as diff --hosts judges it)
    kinds = list({(g.name, g.cc): (m.gpu(g.name), g) for g in gpus.gpus}.values())
    rows = {}
    for name, st in (resolve_all(m) if stacks is None else stacks).items():
        if isinstance(st, str):
            rows[name] = {"runs": False, "how": None, "why": st}
        elif st.cuda and (gpus.driver is None or not kinds):
            rows[name] = {"runs": False, "how": None,
                          "why": "no NVIDIA GPU or driver on this host"}
        elif not st.cuda:
            rows[name] = verdict(m, st, gpus.driver or "0")
        else:
            rows[name] = host_verdict([(g.name, verdict(m, st, gpus.driver, known, cc=g.cc))
                                       for known, g in kinds])
    certified = certified or {}
    for name, row in rows.items():
        row["certified"] = certified.get(name)
    for name in sorted(set(certified) - set(rows)):   # a project's image: NAME.STACK
        rows[name] = {"runs": certified[name]["level"] == "cuda", "how": None,
                      "why": "a project's image", "certified": certified[name]}
    return {"ok": not problems, "problems": problems, "warnings": warnings,
            **({"platform": platform} if platform is not None else {}),
            "driver": _driver_view(m, gpus.driver, today) if gpus.driver else None,
            "gpus": gpu_rows, "docker": docker, "stacks": rows,
            "runs": [n for n, r in rows.items() if r["runs"]],
            "certified": sorted(n for n, r in rows.items() if r["certified"]),
            "summary": summary(rows)}


def summary(rows: dict) -> str:
    """One sentence that leads with what can be done here."""
    cert = sorted(n for n, r in rows.items() if r.get("certified"))
    more = sorted(n for n, r in rows.items() if r["runs"] and not r.get("certified"))
    cannot = len(rows) - len(cert) - len(more)
    parts = []
    if cert:
        shown = ", ".join(f"{n} at level {rows[n]['certified']['level']}" for n in cert[:4])
        parts.append(f"{len(cert)} stack(s) certified here ({shown}"
                     f"{', ...' if len(cert) > 4 else ''})")
    else:
        parts.append("nothing certified here yet")
    parts.append(f"{len(more)} more can run here" + (f" ({', '.join(more[:4])}"
                                                     f"{', ...' if len(more) > 4 else ''})"
                                                     if more else ""))
    parts.append(f"{cannot} cannot")
    return "; ".join(parts)


def doctor(m: Matrix, detect=None, docker=None, today=None, cert_list=None) -> dict:
    """Detect (nvidia-smi, the daemon: both replaceable), read the store and examine."""
    gpus = (detect or host.detect)()
    if cert_list is None:
        from .certs import store
        cert_list = store.load_all()
    return examine(m, gpus, (docker or docker_facts)(), today,
                   certified=certified_here(m, cert_list, gpus), platform=platform_facts())
