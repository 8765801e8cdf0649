"""The engine seam: what envgen asks of a container engine, whatever engine it is. Inspect
an image (the Stack its label carries, what its bits are), run a command in it under a
time limit with a run profile, tag it, remove it, and say what the engine is for a
certificate's `host`. Docker (a daemon, through runtime/docker.py) and Apptainer (no
daemon: a SIF file, through runtime/apptainer.py and sif.py) stand behind it; a Podman or
enroot engine is one more class here (docs/architecture.md). Builds stay with BuildKit
(build/buildkit.py): of these engines only Docker builds, through its CLI."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Protocol

from ..core.errors import InputError
from ..matrix.wire import stack_from_labels
from .docker import Target, inspect_target, remove_image, run_to_end


class Engine(Protocol):
    name: str

    def inspect(self, ref: str) -> Target:
        """The image `ref` names, with its Stack (checked), tags, env, user and content."""

    def run(self, image: str, argv: list[str], timeout: float, *, profile=None,
            on_stderr_line: Callable[[str], None] | None = None, **engine_options
            ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `argv` in `image`; TimeoutError past `timeout` s,
        with nothing left running."""

    def tag(self, image_id: str, tag: str) -> None:
        """Name the image `tag`."""

    def remove(self, ref: str) -> None:
        """Remove what `ref` names (nothing when it is gone already)."""

    def host(self) -> dict:
        """What a certificate's `host` records of this engine."""


class DockerEngine:
    """A Docker daemon through the SDK client `c` (runtime/docker.client())."""
    name = "docker"

    def __init__(self, client):
        self.client = client
        self._info = None

    def inspect(self, ref: str) -> Target:
        return inspect_target(self.client, ref)

    def run(self, image, argv, timeout, *, profile=None, on_stderr_line=None,
            before_start=None, labels=None, **create_kwargs):
        """run_to_end: the profile's docker flags, labels, `before_start(container)`."""
        kwargs = {**(profile.docker_kwargs() if profile is not None else {}), **create_kwargs}
        return run_to_end(self.client, image, list(argv), timeout, before_start=before_start,
                          labels=labels, on_stderr_line=on_stderr_line, **kwargs)

    def tag(self, image_id: str, tag: str) -> None:
        from ..core.errors import EnvironmentMissing
        from ..core.image import split_tag
        repo, name = split_tag(tag)
        if not self.client.images.get(image_id).tag(repo, name):
            raise EnvironmentMissing(f"the Docker daemon did not tag {image_id[:19]} as {tag}")

    def remove(self, ref: str) -> None:
        remove_image(self.client, ref)

    def info(self) -> dict:
        if self._info is None:
            self._info = self.client.info()
        return self._info

    def host(self) -> dict:
        info = self.info()
        return {"docker": info.get("ServerVersion"), "runtime": info.get("DefaultRuntime"),
                "kernel": info.get("KernelVersion")}


class ApptainerEngine:
    """Apptainer over SIF files: an image is a file, its ID the file's sha256."""
    name = "apptainer"

    def inspect(self, ref: str) -> Target:
        from . import apptainer
        from .sif import sha256_of
        sif = apptainer.check_sif(Path(ref))
        labels = apptainer.labels(sif)
        digest = f"sha256:{sha256_of(sif)}"
        # a SIF's bits are the file: its content is its digest
        return Target(digest, (str(sif),), stack_from_labels(labels, str(ref)), {}, "",
                      dict(labels), (), digest)

    def run(self, image, argv, timeout, *, profile=None, on_stderr_line=None, options=(),
            binds=()):
        """`apptainer exec OPTIONS --bind HOST:INSIDE[:ro]... IMAGE ARGV`; `binds` are
        (host folder, folder inside, mode) triples, shown to a wrapper too."""
        from . import apptainer
        bind_args = [a for h, inside, mode in binds
                     for a in ("--bind", f"{h}:{inside}{':' + mode if mode else ''}")]
        shown = (str(Path(image).parent), *(h for h, _, _ in binds))
        return apptainer.run(["exec", *options, *bind_args, str(image), *argv], timeout,
                             binds=shown, on_stderr_line=on_stderr_line)

    def tag(self, image_id: str, tag: str) -> None:
        raise InputError("a SIF has no tags: its file's path names it")

    def remove(self, ref: str) -> None:
        raise InputError(f"envgen does not delete SIF files ({ref}); remove it yourself")

    def host(self) -> dict:
        from . import apptainer
        return {"apptainer": apptainer.version(), "docker": None, "runtime": "apptainer",
                "kernel": os.uname().release}


def is_sif(ref: str) -> bool:
    """Whether `ref` names a SIF file rather than an image on a daemon."""
    return bool(ref) and (ref.lower().endswith(".sif") or os.path.isfile(ref))


def engine_for(ref: str, client=None) -> Engine:
    """The engine that runs `ref`: Apptainer for a SIF file, else Docker (`client`, or a
    new one that has answered a ping)."""
    if is_sif(ref):
        return ApptainerEngine()
    if client is None:
        from .docker import client as new_client
        client = new_client()
    return DockerEngine(client)
