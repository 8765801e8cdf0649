"""Apptainer, the container runtime of HPC sites (no daemon): the only module that runs it.
`apptainer` on PATH, or the program ENVGEN_APPTAINER names (tools/apptainer.sh on a host
whose distribution has none). Every call is bounded in time and its process group is ended
on every exit path, Ctrl-C included."""
from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import threading
from pathlib import Path

from ..core.errors import EnvironmentMissing, InputError, shown

SIF_MAGIC = b"SIF_MAGIC"   # at offset 32, after the launch script line (the SIF spec)
BINDS_ENV = "ENVGEN_APPTAINER_BINDS"   # folders a wrapper must show inside (one a line)


def command() -> list[str]:
    named = os.environ.get("ENVGEN_APPTAINER")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise EnvironmentMissing(f"ENVGEN_APPTAINER={named!r} is not an executable file")
        return [os.path.abspath(named)]
    found = shutil.which("apptainer")
    if not found:
        raise EnvironmentMissing("apptainer is not installed (not on PATH): install it, or "
                                 "set ENVGEN_APPTAINER to a program that runs it "
                                 "(tools/apptainer.sh on Debian 12)")
    return [found]


def _end(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def run(args: list[str], timeout: float, binds: tuple[str, ...] = (), cwd: str | None = None,
        on_stderr_line=None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `apptainer ARGS`; TimeoutError past `timeout` s."""
    from .docker import die_with_parent
    env = dict(os.environ)
    if binds:
        env[BINDS_ENV] = "\n".join(binds)
    program = command()
    try:
        proc = subprocess.Popen([*program, *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", cwd=cwd, env=env, start_new_session=True,
                                preexec_fn=die_with_parent)
    except OSError as e:   # not a program this system can start (no #! line, a lost interpreter)
        raise EnvironmentMissing(f"apptainer ({shown(program[0])}) cannot be started: "
                                 f"{e.strerror or e}; install it, or set ENVGEN_APPTAINER to a "
                                 f"program that runs it") from None
    out: list[str] = []
    err: list[str] = []

    def pump(stream, into, each=None):
        for line in stream:
            into.append(line)
            if each:
                each(line)
    readers = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err, on_stderr_line),
                                daemon=True)]
    for t in readers:
        t.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _end(proc)
        raise TimeoutError(f"apptainer {args[0]} did not finish within {timeout:.0f} s") \
            from None
    finally:
        _end(proc)
        for t in readers:
            t.join(5)
    return proc.returncode, "".join(out), "".join(err)


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " ".join(lines[-1].split())[:300] if lines else "no output"


def version() -> str:
    try:
        code, out, err = run(["--version"], 60)
    except TimeoutError:
        raise EnvironmentMissing("apptainer --version did not answer within 60 s") from None
    if code != 0:
        raise EnvironmentMissing(f"apptainer --version failed: {last_line(err or out)}")
    return out.strip().removeprefix("apptainer version ").strip()


def check_sif(path: Path) -> Path:
    """`path` as an absolute path when it is a regular file that starts as a SIF does;
    else InputError naming it."""
    p = Path(os.path.abspath(path))
    try:
        if not p.is_file():
            raise InputError(f"{path}: no such SIF file" if not p.exists() else
                             f"{path}: not a regular file")
        with open(p, "rb") as f:
            head = f.read(128)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    if head[32:41] != SIF_MAGIC:
        raise InputError(f"{path}: not a SIF file (no SIF header)")
    # The global header's data offset and size (little-endian int64s at 112 and 120):
    # a file shorter than their sum lost its end.
    end = sum(struct.unpack("<2q", head[112:128])) if len(head) == 128 else None
    if end is None or size < end:
        raise InputError(f"{path}: a truncated SIF ({size} bytes of the "
                         f"{end if end is not None else 'more than 128'} its header names)")
    return p


def labels(sif: Path, timeout: float = 120) -> dict:
    """The labels a SIF carries (a Docker image's labels come along into it)."""
    try:
        code, out, err = run(["inspect", "--json", "--labels", str(sif)], timeout,
                             binds=(str(sif.parent),))
    except TimeoutError:
        raise InputError(f"{sif}: apptainer inspect took longer than {timeout:.0f} s") \
            from None
    if code != 0:
        raise InputError(f"{sif}: apptainer cannot read it ({last_line(err or out)}); a "
                         f"truncated or damaged SIF?")
    try:
        found = json.loads(out)["data"]["attributes"]["labels"]
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{sif}: apptainer inspect printed no labels") from None
    return found if isinstance(found, dict) else {}


BOUND_PAYLOAD = "/opt/envgen-payload"   # where a certification binds the payload, read-only


def bind_arg(host: str, inside: str, mode: str = "",
             fix: str = "move it to a path without them") -> str:
    """`--bind`'s value HOST:INSIDE[:MODE]. Apptainer splits it at ',' (one bind from the
    next) and ':' (source, destination, options) and reads no escape: a folder whose path
    holds either is refused (InputError, exit 2), `fix` saying what to change."""
    for path in (host, inside):
        bad = next((c for c in ",:" if c in path), None)
        if bad:
            raise InputError(f"apptainer cannot bind the folder {shown(path, 200)}: its "
                             f"--bind reads the {bad!r} in the path as a separator; {fix}")
    return f"{host}:{inside}{':' + mode if mode else ''}"


def visible_devices(gpus) -> dict:
    """The environment that makes CUDA in the container use exactly `gpus` (parse_gpus's):
    their UUIDs when every one is known, else nvidia-smi's indices, read in nvidia-smi's
    order (PCI bus), not CUDA's default (fastest first), which may name another GPU on a
    node of mixed models."""
    from .gpu_access import device_id
    known = all(getattr(g, "uuid", "") for g in gpus)
    ids = [device_id(g) if known else str(int(g)) for g in gpus]
    return {"CUDA_VISIBLE_DEVICES": ",".join(ids), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def exec_options(nv: bool, as_root: bool, gpus: list[int] | None) -> tuple[list[str], dict]:
    """`apptainer exec`'s options for a certification run, and what they isolate."""
    from ..core.image import UID
    from .profile import NCCL_ENV
    opts = ["--containall", "--cleanenv", "--no-home", "--no-privs", "--net",
            "--network", "none", "--pwd", "/tmp"]
    if as_root:   # root would run the payload as root: run it as the image's user instead
        opts += ["--security", f"uid:{UID},gid:{UID}"]
    env = dict(NCCL_ENV)
    if nv:
        opts.append("--nv")
        env.update(visible_devices(gpus or ()))
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
