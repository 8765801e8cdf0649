"""The line `envgen render` prints to build what it wrote: the base's recipe first when the
base is a local Debian one, then BuildKit with the stack's platform. The folder is given as
the shell and docker read it: a path that starts with "-" (`-o -`) goes as `./-`, which
neither takes for an option nor docker for a context on stdin."""
from __future__ import annotations

import shlex
from pathlib import Path

from ..core.model import DEFAULT_PLATFORM


def _folder(out: Path | str) -> str:
    """`out` as a path no command reads as an option or as stdin (`-` is `./-`)."""
    text = str(out)
    return f"./{text}" if text.startswith("-") else text


def folder_arg(out: Path | str) -> str:
    """`out` as one shell word that no command reads as an option or as stdin."""
    return shlex.quote(_folder(out))


def build_command(st, out: Path | str) -> str:
    """The shell line that builds the context rendered for `st` into `out`."""
    build = "DOCKER_BUILDKIT=1 docker build" + (
        f" --platform {st.platform}" if st.platform != DEFAULT_PLATFORM else "")
    if st.base.kind == "local":
        return f"sh {shlex.quote(f'{_folder(out)}/base/build-base.sh')} && {build} " \
               f"{folder_arg(out)}"
    return f"{build} {folder_arg(out)}"
