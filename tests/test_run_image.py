"""`envgen run` / `envgen shell` as docker command lines: the flags certification uses, GPU
access per mode, a safe mount, and refusals before any daemon call."""
from __future__ import annotations

import os

import pytest

from envgen.cli import main
from envgen.core.errors import InputError
from envgen.runtime.docker import Target
from envgen.runtime.gpu_access import GpuPlan
from envgen.runtime.profile import NCCL_ENV
from envgen.runtime.run import RunOptions, check_mount, docker_argv


def target(**kw):
    base = dict(image_id="sha256:" + "a" * 64, tags=(), stack=None,
                env={"LD_LIBRARY_PATH": "/opt/venv/lib"}, user="envgen", labels={},
                repo_digests=())
    return Target(**{**base, **kw})


def opts(**kw):
    base = dict(command=("python", "train.py", "--lr", "1e-3"), mount="/home/me/proj",
                tty=False, network=True, as_me=False)
    return RunOptions(**{**base, **kw})


def test_the_flags_certification_uses():
    argv = docker_argv("docker", target(), GpuPlan("none"), opts())
    assert argv[:3] == ["docker", "run", "--rm"]
    for pair in (["--shm-size", "8g"], ["--cap-drop", "ALL"],
                 ["--security-opt", "no-new-privileges"], ["--user", "envgen"],
                 ["-v", "/home/me/proj:/workspace"], ["-w", "/workspace"]):
        i = argv.index(pair[0], 3)
        assert argv[i:i + 2] == pair
    for key, value in NCCL_ENV.items():
        assert f"{key}={value}" in argv
    # the image's python runs a PID 1 that passes signals on to the user's command
    from envgen.runtime.run import PID1
    assert argv[-8:] == ["sha256:" + "a" * 64, "python", "-c", PID1,
                         "python", "train.py", "--lr", "1e-3"]
    assert "--network" not in argv and "-it" not in argv and "-i" in argv
    # labelled as envgen's own, so a container whose envgen was killed is reaped
    from envgen.runtime import docker as engine
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert f"{engine.OWNER_LABEL}={engine.owner()}" in labels
    assert any(x.startswith(f"{engine.CALL_LABEL}=") for x in labels)


def test_toolkit_cdi_and_device_nodes():
    argv = docker_argv("docker", target(), GpuPlan("toolkit", [0, 1]), opts())
    assert argv[argv.index("--gpus") + 1] == '"device=0,1","capabilities=compute,utility"'
    argv = docker_argv("docker", target(), GpuPlan("cdi", [1]), opts())
    assert argv[argv.index("--device") + 1] == "nvidia.com/gpu=1"
    plan = GpuPlan("devices", [0], {
        "devices": ["/dev/nvidia0:/dev/nvidia0:rwm"],
        "volumes": {"/usr/lib/libcuda.so.1": {"bind": "/usr/local/nvidia/lib64/libcuda.so.1",
                                              "mode": "ro"}},
        "environment": {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}})
    argv = docker_argv("docker", target(), plan, opts())
    assert "/dev/nvidia0:/dev/nvidia0:rwm" in argv
    assert "/usr/lib/libcuda.so.1:/usr/local/nvidia/lib64/libcuda.so.1:ro" in argv
    # the driver's folder goes in front of the image's own search path, as in certification
    assert "LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/venv/lib" in argv


def test_no_network_tty_and_as_me():
    argv = docker_argv("docker", target(user=""), GpuPlan("none"),
                       opts(network=False, tty=True, as_me=True, mount=None))
    assert argv[argv.index("--network") + 1] == "none" and "-it" in argv
    assert argv[argv.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}"
    assert "-v" not in argv and "-w" not in argv


def test_a_root_image_runs_as_nobody_as_certification_does():
    argv = docker_argv("docker", target(user="root"), GpuPlan("none"), opts())
    assert argv[argv.index("--user") + 1] == "65534:65534"


def test_a_command_is_never_a_shell_string():
    hostile = ("sh", "-c", "echo $(id); rm -rf /")
    argv = docker_argv("docker", target(), GpuPlan("none"), opts(command=hostile))
    assert argv[-3:] == list(hostile)   # passed as argv, never joined or interpreted


@pytest.mark.parametrize("name", ["a:b", "a,b", "a\nb"])
def test_a_folder_the_mount_syntax_cannot_name_is_refused(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    with pytest.raises(InputError, match="cannot be mounted"):
        check_mount(str(folder))


@pytest.mark.parametrize("argv,needle", [
    (["run", "pytorch-cu121"], "no command to run"),
    (["run", "--gpus", "banana", "pytorch-cu121", "--", "true"], "--gpus"),
    (["run", "-e", "1X=2", "pytorch-cu121", "--", "true"], "--env"),
    (["run", "-e", "X", "pytorch-cu121", "--", "true"], "--env"),
])
def test_bad_input_is_refused_before_any_daemon_call(monkeypatch, capsys, argv, needle):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "shell"])
def test_the_command_runs_as_the_invoking_user_by_default_so_it_can_write_the_mount(command):
    from envgen.cli import build_parser
    argv = [command, "pytorch-cu121"] + (["--", "python", "main.py"] if command == "run" else [])
    args = build_parser().parse_args(argv)
    argv = docker_argv("docker", target(), GpuPlan("none"), opts(as_me=args.as_me))
    assert argv[argv.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}"
    assert "HOME=/tmp" in argv   # a uid the image may not know still has a writable home


def test_as_image_user_opts_out_and_as_me_is_still_accepted(capsys):
    from envgen.cli import build_parser
    p = build_parser()
    assert p.parse_args(["run", "--as-image-user", "x", "--", "true"]).as_me is False
    assert p.parse_args(["run", "--as-me", "x", "--", "true"]).as_me is True
    assert main(["run", "--as-me", "--as-image-user", "x", "--", "true"]) == 2
    assert "not allowed with" in capsys.readouterr().err
