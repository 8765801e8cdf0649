"""Certify a SIF: the same smoke payload `certify` runs in a Docker container, run with
`apptainer exec` in a contained, clean environment, the payload bound read-only from this
envgen. The certificate is keyed by the SIF's sha256 and says which isolation was used:
Apptainer has no daemon and, without `--net`, no network namespace of its own."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ..certs import certificate
from ..core import home as state
from ..core.errors import CheckFailed
from ..core.image import UID
from ..runtime import apptainer
from ..runtime.engine import ApptainerEngine
from ..runtime.host import HostGpus
from ..runtime.profile import NCCL_ENV
from ..runtime.sif import sha256_of
from ..smoke import SMOKE_DIR, payload_files
from .docker import _report, check_lines, gpu_indices, payload_argv

BOUND_PAYLOAD = "/opt/envgen-payload"   # where the payload is bound, read-only
PROFILE = "apptainer"


def exec_options(nv: bool, as_root: bool, gpus: list[int] | None) -> tuple[list[str], dict]:
    """`apptainer exec`'s options for a certification run, and what they isolate."""
    opts = ["--containall", "--cleanenv", "--no-home", "--no-privs", "--net",
            "--network", "none", "--pwd", "/tmp"]
    if as_root:   # root would run the payload as root: run it as the image's user instead
        opts += ["--security", f"uid:{UID},gid:{UID}"]
    env = dict(NCCL_ENV)
    if nv:
        opts.append("--nv")
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus or ())
    for key, value in sorted(env.items()):
        opts += ["--env", f"{key}={value}"]
    isolation = {
        "runtime": "apptainer",
        "options": list(opts),
        "network": "a network namespace of its own with loopback only (--net --network none)",
        "filesystem": "the SIF read-only; /tmp and /dev/shm private to the run (--containall);"
                      " no home folder, no host folder but the payload, bound read-only",
        "environment": "the image's own; nothing from the host's (--cleanenv)",
        "user": f"uid {UID} (--security uid:{UID})" if as_root else "the calling user",
        "capabilities": "none (--no-privs)" if as_root else "none (an unprivileged user)",
        "gpu": "--nv: the host's driver libraries and every /dev/nvidia* node"
               if nv else "none (no --nv)",
        "not_isolated": ["PID namespace is the host's unless apptainer.conf or --pid says "
                         "otherwise", "no memory or CPU limit (the batch system's job)",
                         "/dev/shm size is the host's tmpfs, not fixed as Docker's --shm-size"],
    }
    return opts, isolation


def _payload_copy(smoke: str, into: Path) -> str:
    """The payload and its siblings copied out of this envgen (a folder the run binds
    read-only); the sha256 of the payload file itself."""
    for name in payload_files(smoke):
        shutil.copyfile(SMOKE_DIR / name, into / name)
        (into / name).chmod(0o644)
    into.chmod(0o755)
    return sha256_of(into / f"{smoke}_smoke.py")


def certify_sif(path: str, host: HostGpus, gpus: str = "auto", timeout: int = 900,
                steps: int | None = None, progress=None) -> dict:
    engine = ApptainerEngine()
    target = engine.inspect(path)
    sif, digest, labels, st = Path(target.tags[0]), target.image_id, target.labels, target.stack
    indices = gpu_indices(gpus, host)
    engine_host = engine.host()
    as_root = os.geteuid() == 0
    opts, isolation = exec_options(bool(indices), as_root, indices)
    require = "cuda" if indices else "cpu"
    started = time.monotonic()
    with state.scratch("sif-payload") as tmp:
        payload_sha = _payload_copy(st.smoke, Path(tmp))
        os.chmod(tmp, 0o755)   # the image's user reads it (apptainer binds it as root)
        argv = payload_argv(st, f"{BOUND_PAYLOAD}/{st.smoke}_smoke.py", require, timeout,
                            steps)
        try:
            code, stdout, stderr = engine.run(
                str(sif), argv, timeout, options=opts, binds=((tmp, BOUND_PAYLOAD, "ro"),),
                on_stderr_line=check_lines(progress) if progress else None)
        except TimeoutError:
            raise CheckFailed(f"the smoke payload did not finish within {timeout} s (its "
                              f"processes were ended); raise --timeout or lower --steps") \
                from None
    report = _report(stdout)
    if report is None:
        raise CheckFailed(f"the smoke payload exited {code} under apptainer without a "
                          f"report: {apptainer.last_line(stderr)}")
    profile = certificate.profile_of(require, bool(host.gpus), steps, False)
    start = certificate.head(
        # The store keys certificates by image ID; a SIF's is its own sha256.
        image_id=digest, tags=[str(sif)],
        profile=f"{PROFILE}-{profile}" if profile else PROFILE,
        params={"gpus": gpus, "steps": steps, "multi_gpu": False, "timeout": timeout},
        stack=st, payload={"path": f"{BOUND_PAYLOAD}/{st.smoke}_smoke.py",
                           "sha256": payload_sha, "bound": "read-only, from this envgen"})
    return certificate.finish(
        start, report=report, code=code, started=started,
        host={"driver": host.driver,
              "gpus": [g.__dict__ for g in host.gpus if not indices or g.index in indices],
              "gpu_access": "apptainer --nv" if indices else "none", **engine_host},
        sif={"path": str(sif), "sha256": digest, "size_bytes": sif.stat().st_size,
             "from_image_id": labels.get("io.envgen.image.id"),
             "closure_sha256": labels.get("io.envgen.closure.sha256")},
        isolation=isolation)
