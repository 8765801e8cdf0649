"""The line `envgen render` prints to build what it wrote: the base's recipe first when the
base is a local Debian one, then BuildKit with the stack's platform. The folder is given as
the shell and docker read it: a path that starts with "-" (`-o -`) goes as `./-`, which
neither takes for an option nor docker for a context on stdin."""
from __future__ import annotations

import shlex
from pathlib import Path

from ..core.model import DEFAULT_PLATFORM


def folder_arg(out: Path | str) -> str:
    """`out` as one shell word that no command reads as an option or as stdin."""
    text = str(out)
    return shlex.quote(f"./{text}" if text.startswith("-") else text)


def build_command(st, out: Path | str) -> str:
    """The shell line that builds the context rendered for `st` into `out`."""
    build = "DOCKER_BUILDKIT=1 docker build" + (
        f" --platform {st.platform}" if st.platform != DEFAULT_PLATFORM else "")
    folder = f"./{out}" if str(out).startswith("-") else str(out)
    if st.base.kind == "local":
        return f"sh {shlex.quote(f'{folder}/base/build-base.sh')} && {build} " \
               f"{folder_arg(out)}"
    return f"{build} {folder_arg(out)}"
