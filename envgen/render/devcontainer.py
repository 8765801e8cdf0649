"""A devcontainer.json (containers.dev) for one stack: the image envgen built, pushed or
pinned in a lock, started the way certification starts it on a GPU host, as the image's own
user. Rendered with json.dumps, so every value is quoted correctly."""
from __future__ import annotations

import json

from ..core.errors import InputError, shown
from ..core.image import default_tag, parse_repository, parse_tagged, split_tag
from ..core.model import Stack
from ..runtime.profile import NCCL_ENV, Profile  # certification's own, so the two cannot drift

# templates/Dockerfile.j2 ends with `USER envgen` (UID 10001): the image's non-root user.
REMOTE_USER = "envgen"


def pushed_reference(stack: Stack, registry: str) -> str:
    """Where `envgen lock STACK --push REGISTRY` puts the image: REGISTRY/KEY:TAG, KEY the
    lock's name of the stack (NAME.STACK for a project's image)."""
    if "${{" in registry:
        raise InputError(f"the registry {shown(registry)} carries a GitHub expression, which "
                         f"nothing expands in a devcontainer.json; name the repository")
    repository = parse_repository(registry)
    reference = f"{repository}/{stack.key}:{split_tag(default_tag(stack))[1]}"
    parse_tagged(reference)   # the joined name can pass the length limit
    return reference


def from_lock(lock: dict, name: str, lock_file: str) -> tuple[Stack, str]:
    """The locked stack called `name` and its image pinned by digest, from a lock that
    lockfile.read_lock has checked; InputError when the lock lacks either."""
    entry = lock["stacks"].get(name)
    if entry is None:
        have = ", ".join(sorted(lock["stacks"])) or "none"
        raise InputError(f"the lock has no stack {shown(name)} (it has: {have})",
                         file=lock_file)
    pinned = entry["image"].get("pinned")
    if pinned is None:
        raise InputError(f"stack {shown(name)} is not pinned by digest in the lock; lock it "
                         f"with `envgen lock {name} --push REPOSITORY`", file=lock_file)
    return Stack.from_json(entry["stack"]), pinned


def _joined(flags: list[str]) -> list[str]:
    """`--shm-size 8g` as `--shm-size=8g`: one runArgs entry per flag."""
    return [f"{a}={b}" for a, b in zip(flags[::2], flags[1::2], strict=True)]


def devcontainer(stack: Stack, image: str) -> str:
    """devcontainer.json for `image`, which holds `stack`. A GPU stack asks for a GPU with
    hostRequirements.gpu, which makes the Dev Containers CLI add `--gpus all` (the NVIDIA
    Container Toolkit form certification uses) where Docker has the nvidia runtime; runArgs
    repeat no --gpus, since two device requests would inject the GPUs twice. The image's
    CMD is the certification payload, so the container runs the CLI's idle command."""
    gpu = stack.cuda is not None
    what = f"CUDA {stack.cuda}" if gpu else "CPU"
    doc = {
        "name": f"envgen {stack.stack}: {stack.framework_package} {stack.version}, {what}",
        "image": image,
        "hostRequirements": {"gpu": True if gpu else "optional"},
        "runArgs": _joined(Profile().habit_flags()),
        **({"containerEnv": dict(NCCL_ENV)} if gpu else {}),
        "remoteUser": REMOTE_USER,
        "overrideCommand": True,
    }
    return json.dumps(doc, indent=2) + "\n"
