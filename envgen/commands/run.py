"""`envgen run IMAGE|SPEC -- CMD...` and `envgen shell IMAGE|SPEC`."""
from __future__ import annotations

import errno
import os
import re
import shutil
import sys

from ..certify.run import gpu_indices, preflight
from ..core.errors import EnvgenError, EnvironmentMissing, InputError
from ..core.errors import shown as quoted
from ..runtime import docker as engine
from ..runtime import gpu_access, host
from ..runtime.docker import inspect_target
from ..runtime.run import RunOptions, check_mount, docker_argv, shown
from ._common import close_progress, load_matrix_for, progress_for, ref_or_spec
from .certify import _target

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")   # ASCII: what every shell takes


def _env(pairs) -> tuple[tuple[str, str], ...]:
    out = []
    for pair in pairs or ():
        key, eq, value = pair.partition("=")
        if not eq or not ENV_NAME.fullmatch(key):
            raise InputError(f"--env {pair[:60]!r} must be NAME=VALUE with a NAME of letters, "
                             f"digits and '_'")
        out.append((key, value))
    return tuple(out)


def _split(args, argv: list[str]) -> tuple[str | None, list[str]]:
    """(IMAGE|SPEC, command): `envgen run -- CMD` names no image (the project file's stack
    is used), though argparse takes CMD's first word for IMAGE|SPEC."""
    command = list(args.cmd or [])
    if args.target is not None and "--" in argv:
        cut = argv.index("--")
        if args.target in argv[cut + 1:] and args.target not in argv[:cut]:
            return None, [args.target, *command]
    return args.target, command


def _refused_ulimits(c, target, plan) -> tuple[str, ...]:
    """The run profile's ulimits this daemon cannot set, found by starting the image once
    with them (a second or so); the command then starts without those, and says so."""
    from ..runtime import profile as run_profile
    from ..runtime.docker import run_to_end
    profile = run_profile.for_container(plan, target.user, target.env)
    profile, _ = run_profile.settle(profile, lambda p: run_to_end(
        c, target.image_id, ["python", "-c", "pass"], 60, labels={"io.envgen.run": "1"},
        **p.docker_kwargs()))
    fix = run_profile.refusal_fix(profile)
    if fix and run_profile.tell_once(run_profile.daemon_id(c), fix):
        print(f"warning: {fix}", file=sys.stderr)
    return profile.refused


def run(args) -> int:
    target_text, command = _split(args, sys.argv[1:])
    if command[:1] == ["--"]:
        command = command[1:]
    if args.shell:
        command = command or ["bash"]
    elif not command:
        raise InputError("no command to run: envgen run IMAGE|SPEC -- COMMAND [ARG...]")
    gpu_access.check_gpus(args.gpus)
    env = _env(args.env)
    mount = None if args.no_mount else check_mount(os.getcwd())
    docker = shutil.which("docker")
    if docker is None:
        raise EnvironmentMissing("the docker command is not on PATH (envgen run hands the "
                                 "terminal to it)")
    m = load_matrix_for(args)
    as_ref, as_spec = ref_or_spec(args, m, target_text)
    c = engine.client()
    target = inspect_target(c, _target(c, as_ref, as_spec))
    hg = host.detect()
    indices = gpu_indices(args.gpus, hg)
    for note in preflight(target, hg, indices, m):
        progress_for(args)(note)
    plan = gpu_access.plan(indices, args.gpu_access, c.info())
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    refused = _refused_ulimits(c, target, plan)
    argv = docker_argv(docker, target, plan, RunOptions(
        command=tuple(command), mount=mount, tty=tty, network=not args.no_network,
        as_me=args.as_me, env=env, refused=refused))
    if args.dry_run:
        print(shown(argv))
        return 0
    progress_for(args)(f"{target.stack.stack} ({target.image_id[7:19]}), GPUs "
                       f"{plan.describe()}: {shown(command)}")
    close_progress()   # a live view would leave the terminal to docker half-drawn
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(docker, argv)   # the docker CLI owns the terminal and the signals from here
    except OSError as e:
        raise _not_started(docker, argv, e) from None
    return 0   # not reached


def _not_started(docker: str, argv: list[str], e: OSError) -> EnvgenError:
    """Why the docker CLI did not start: a command line longer than the system takes is the
    input (exit 2); a docker that cannot run here is the environment (exit 3)."""
    if e.errno == errno.E2BIG:
        size = sum(len(os.fsencode(a)) + 1 for a in argv)
        return InputError(f"the docker command line ({size} bytes) is longer than this system "
                          f"takes; pass fewer or shorter -e values and arguments")
    return EnvironmentMissing(f"the docker command {quoted(docker)} cannot be started: "
                              f"{e.strerror or e}; install a working docker client")
