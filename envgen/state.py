"""Where envgen keeps its own files: certificates, build logs, rendered contexts."""
from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    if os.environ.get("ENVGEN_HOME"):
        return Path(os.environ["ENVGEN_HOME"])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "envgen"


def certs_dir() -> Path:
    return home() / "certs"


def logs_dir() -> Path:
    return home() / "logs"


def contexts_dir() -> Path:
    return home() / "contexts"
