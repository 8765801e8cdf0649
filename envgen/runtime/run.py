"""`envgen run` and `envgen shell`: the user's own command in a certified image, started the
way certification starts the payload (the same GPU access, shared memory, NCCL settings,
user, dropped capabilities and no-new-privileges), with the current folder mounted.

The command is handed to the docker CLI, which then owns the terminal and the signals (a
Ctrl-C reaches the command; `--rm` removes the container however it ends)."""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace

from ..core.errors import InputError
from . import gpu_access
from . import profile as run_profile
from .docker import CHILD_WAIT, Target

WORKSPACE = "/workspace"

# The container's PID 1, run by the image's python: it starts the command as its child and
# passes on the signals the docker CLI forwards (SIGTERM, SIGHUP; SIGINT without a terminal,
# where Ctrl-C reaches the command through the terminal itself). A command that is PID 1
# itself ignores SIGTERM and SIGINT unless it installs handlers, so `kill` of envgen run
# left its container running. No docker-init is needed (some daemons lack one).
PID1 = """
import os, signal, sys
argv = sys.argv[1:]
child = os.fork()
if child == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        sys.stderr.write(f"envgen run: {argv[0]}: {e.strerror}\\n")
        os._exit(127)
def forward(signum, _frame):
    try:
        os.kill(child, signum)
    except ProcessLookupError:
        pass
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, forward)
signal.signal(signal.SIGINT, signal.SIG_IGN if os.isatty(0) else forward)
""" + CHILD_WAIT


@dataclass(frozen=True)
class RunOptions:
    command: tuple[str, ...]
    mount: str | None          # the host folder mounted at /workspace, or None
    tty: bool
    network: bool              # False: --network none, as in certification
    as_me: bool                # run as the caller's uid:gid instead of the image's user
    env: tuple[tuple[str, str], ...] = ()
    refused: tuple[str, ...] = ()   # ulimits this host's daemon cannot set (run_profile.settle)


def check_mount(folder: str) -> str:
    """A host folder `-v` can name: absolute, and without the characters its syntax uses."""
    real = os.path.realpath(folder)
    if any(ch in real for ch in ":,\n\r\x00"):
        raise InputError(f"the folder {real[:80]!r} cannot be mounted (it holds ':' or ','); "
                         f"run from another folder or pass --no-mount")
    if not os.path.isdir(real):
        raise InputError(f"{real[:80]!r} is not a folder to mount")
    return real


def docker_argv(docker: str, target: Target, plan: gpu_access.GpuPlan,
                opts: RunOptions) -> list[str]:
    """The whole `docker run` command line. Every value is its own argument (no shell)."""
    # No --init: some daemons ship no docker-init (certification needs none either); the
    # command is PID 1 and gets the signals the docker CLI passes on.
    profile = run_profile.for_container(plan, target.user, target.env, network=opts.network)
    if opts.refused:
        profile = profile.without(opts.refused)
    if opts.as_me:
        profile = replace(profile, user=f"{os.getuid()}:{os.getgid()}",
                          env=(*profile.env, ("HOME", "/tmp")))
    profile = replace(profile, env=(*profile.env, *opts.env))
    # envgen execs the docker CLI, which keeps this process: a container whose docker CLI
    # was killed is an orphan the next envgen command removes (docker.reap)
    from .docker import CALL_LABEL, OWNER_LABEL, PIDNS_LABEL, owner, pid_namespace
    argv = [docker, "run", "--rm", *profile.docker_flags(), "--label", "io.envgen.run=1"]
    for key, value in ((OWNER_LABEL, owner()), (PIDNS_LABEL, pid_namespace()),
                       (CALL_LABEL, os.urandom(8).hex())):
        argv += ["--label", f"{key}={value}"]
    argv += ["-it"] if opts.tty else ["-i"]
    if opts.mount:
        argv += ["-v", f"{opts.mount}:{WORKSPACE}", "-w", WORKSPACE]
    return [*argv, target.image_id, "python", "-c", PID1, *opts.command]


def shown(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
