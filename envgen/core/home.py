"""Where envgen keeps its own files: certificates, build logs, rendered contexts."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path


def home() -> Path:
    """Always an absolute path: a relative ENVGEN_HOME is taken from the folder the command
    started in (envgen runs some tools in other folders), and a relative XDG_DATA_HOME is
    ignored, as the XDG base directory specification says."""
    if os.environ.get("ENVGEN_HOME"):
        return Path(os.environ["ENVGEN_HOME"]).absolute()
    data = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data):
        data = str(Path.home() / ".local" / "share")
    return Path(data) / "envgen"


def certs_dir() -> Path:
    return home() / "certs"


def logs_dir() -> Path:
    return home() / "logs"


def contexts_dir() -> Path:
    return home() / "contexts"


def scratch_dir() -> Path:
    return home() / "tmp"


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists in this PID namespace (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead(name: str, host: str) -> bool:
    """Whether a scratch folder `PREFIX.HOST.PID.RANDOM` belongs to a gone process here."""
    parts = name.split(".")
    return (len(parts) >= 4 and parts[-3] == host and parts[-2].isdigit()
            and not pid_alive(int(parts[-2])))


@contextlib.contextmanager
def scratch(prefix: str):
    """A private scratch folder under ENVGEN_HOME (not /tmp), removed on exit; folders
    that a killed envgen left behind (SIGKILL runs no cleanup) are removed first."""
    import secrets
    import shutil
    import socket
    root = scratch_dir()
    root.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().replace(".", "_")
    for old in root.iterdir():
        if _dead(old.name, host):
            shutil.rmtree(old, ignore_errors=True)
    path = root / f"{prefix}.{host}.{os.getpid()}.{secrets.token_hex(4)}"
    path.mkdir(mode=0o700)
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
