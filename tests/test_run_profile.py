"""The run profile: one description of how a training container starts (shared memory,
ulimits, NCCL, GPUs, user), the same for certification, `envgen run`, the devcontainer and
`envgen profile`'s docker, Compose and Kubernetes forms."""
import json
import shlex

import pytest
import yaml

from envgen.cli import main
from envgen.render import devcontainer
from envgen.runtime import profile as run_profile
from envgen.runtime.docker import Target
from envgen.runtime.gpu_access import GpuPlan
from envgen.runtime.run import RunOptions, docker_argv

HABITS = ["--shm-size", "8g", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]


def target():
    return Target("sha256:" + "a" * 64, ("envgen/x:1",), None, {}, "envgen", {}, ())


def test_every_way_a_container_starts_carries_the_same_shm_and_ulimits():
    p = run_profile.Profile()
    assert p.habit_flags() == HABITS
    kw = p.docker_kwargs()    # certification's docker-py arguments
    assert kw["shm_size"] == "8g" and kw["network_mode"] == "none"
    assert [(u.name, u.soft, u.hard) for u in kw["ulimits"]] == [("memlock", -1, -1),
                                                                 ("stack", 67108864, 67108864)]
    argv = docker_argv("docker", target(), GpuPlan("none"),
                       RunOptions(("true",), None, False, True, False))
    joined = " ".join(argv)
    assert " ".join(HABITS) in joined                       # envgen run
    dc = json.loads(devcontainer.devcontainer(_stack("pytorch-cu121"), "x/y:1"))
    assert dc["runArgs"] == [f"{a}={b}" for a, b in zip(HABITS[::2], HABITS[1::2])]


def _stack(name):
    from envgen.matrix import load_matrix
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import Host, resolve
    m = load_matrix()
    return resolve(m, parse_spec(name, m), Host())


def test_the_profile_records_what_a_certificate_keeps():
    plan = GpuPlan("devices", [0], {"devices": ["/dev/nvidia0:/dev/nvidia0:rwm"],
                                    "environment": {"PATH": "/usr/local/nvidia/bin"}})
    p = run_profile.for_container(plan, "root", {"PATH": "/opt/venv/bin"})
    j = p.to_json()
    assert j["shm_size"] == "8g" and j["ulimits"]["memlock"] == {"soft": -1, "hard": -1}
    assert j["gpu_access"] == "devices" and j["gpus"] == [0] and j["user"] == "65534:65534"
    assert j["environment"]["PATH"] == "/usr/local/nvidia/bin:/opt/venv/bin"
    assert j["environment"]["NCCL_NVLS_ENABLE"] == "0" and j["network"] == "none"
    assert p.docker_kwargs()["devices"] == ["/dev/nvidia0:/dev/nvidia0:rwm"]


def test_certification_starts_the_payload_with_the_ulimits_and_records_the_profile(matrix):
    from test_certify_unit import FakeClient, FakeContainer, FakeImage, _report, certify
    from test_certify_unit import _stack as st

    from envgen.runtime.host import HostGpus
    s = st(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(s, {"NVIDIA_REQUIRE_CUDA": s.require_cuda}),
                   FakeContainer(_report()))
    cert = certify(c, "envgen/test:1", HostGpus(None, ()), gpus="auto", matrix=matrix,
                   measure="full")
    kw = c.create_kwargs
    assert [u.name for u in kw["ulimits"]] == ["memlock", "stack"] and kw["shm_size"] == "8g"
    assert cert["run_profile"] == run_profile.for_container(GpuPlan("none"), "envgen",
                                                            {}).to_json()
    assert kw["command"][-2:] == ["--measure", "full"]
    assert cert["profile"] == "full" and cert["params"]["measure"] == "full"


@pytest.fixture
def matrix():
    from envgen.matrix import load_matrix
    return load_matrix()


def out(capsys, *argv):
    code = main(list(argv))
    o = capsys.readouterr()
    assert code == 0, o.err
    return o.out


def test_envgen_profile_docker_is_one_pasteable_line(capsys):
    line = out(capsys, "profile", "pytorch-cu121")
    words = shlex.split(line)
    assert words[:3] == ["docker", "run", "--rm"] and words[3:9] == HABITS
    assert words[words.index("--gpus") + 1] == "all" and words[words.index("--user") + 1] == \
        "envgen"
    assert words[-1] == "envgen/pytorch-cu121:2.4.1-py3.11-debian-bookworm"
    assert "--network" not in words     # a training job reaches its data; certification has none


def test_envgen_profile_compose_and_kubernetes(capsys):
    svc = yaml.safe_load(out(capsys, "profile", "pytorch-cu121", "--format", "compose",
                             "--gpus", "0,1"))["services"]["pytorch-cu121"]
    assert svc["shm_size"] == "8g" and svc["ulimits"] == {"memlock": -1, "stack": 67108864}
    dev = svc["deploy"]["resources"]["reservations"]["devices"][0]
    assert dev == {"driver": "nvidia", "device_ids": ["0", "1"],
                   "capabilities": ["gpu", "compute", "utility"]}
    text = out(capsys, "profile", "pytorch-cu121", "--format", "kubernetes")
    assert text.startswith("# a pod spec cannot set ulimits (memlock=-1, stack=67108864)")
    pod = yaml.safe_load(text)["spec"]
    (ctr,) = pod["containers"]
    assert ctr["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert ctr["securityContext"]["runAsUser"] == 10001
    assert ctr["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                            "sizeLimit": "8Gi"}}]


def test_envgen_profile_of_a_cpu_stack_has_no_gpu_and_json_is_the_profile(capsys):
    assert "--gpus" not in out(capsys, "profile", "jax-cpu")
    doc = json.loads(out(capsys, "profile", "pytorch-cu121", "--gpus", "none", "--json"))
    assert doc["schema_version"] == 1 and doc["run_profile"]["gpu_access"] == "none"
    assert doc["run_profile"]["shm_size"] == "8g" and doc["text"].startswith("docker run")


@pytest.mark.parametrize("argv", [
    ["profile", "pytorch-cu121", "--gpus", "0;reboot"],
    ["profile", "pytorch-cu121", "--format", "helm"],
    ["profile", "no-such-stack-$(reboot)"],
])
def test_envgen_profile_hostile_input_is_exit_2(capsys, argv, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3


def test_a_daemon_that_cannot_set_an_rlimit_gets_the_profile_without_it_noted():
    err = ("HTTP 500: OCI runtime create failed: runc create failed: error setting rlimits "
           "for ready process: error setting rlimit type 8: operation not permitted")
    tried = []

    def start(p):
        tried.append([n for n, _, _ in p.ulimits])
        if any(n == "memlock" for n, _, _ in p.ulimits):
            raise RuntimeError(err)
        return "ran"
    p, result = run_profile.settle(run_profile.Profile(), start)
    assert result == "ran" and tried == [["memlock", "stack"], ["stack"]]
    assert p.refused == ("memlock",) and p.to_json()["ulimits_refused"] == ["memlock"]
    assert "memlock" not in p.to_json()["ulimits"]
    assert "--ulimit memlock=-1" in run_profile.refusal_fix(p)
    assert run_profile.refusal_fix(run_profile.Profile()) is None
    from envgen.certs import diagnose
    assert diagnose.advice({"run_profile": p.to_json()})[0].startswith(
        "run profile: this host's Docker daemon could not set --ulimit memlock=-1")


def test_other_errors_are_not_retried():
    def start(p):
        raise RuntimeError("no such image")
    with pytest.raises(RuntimeError, match="no such image"):
        run_profile.settle(run_profile.Profile(), start)
    # an rlimit error that names no type: every ulimit goes
    assert run_profile.refused_by("error setting rlimit", run_profile.Profile()) == {
        "memlock", "stack"}


def _gpus(*uuids):
    from envgen.runtime.gpu_access import Gpu
    return tuple(Gpu(i, u) for i, u in enumerate(uuids))


@pytest.mark.parametrize("mode", ["toolkit", "cdi"])
def test_the_docker_cli_forms_name_a_jobs_gpus_by_uuid_as_certification_does(mode):
    """Inside a Slurm job the job's GPU 0 may be the node's GPU 2: the daemon numbers the
    node's GPUs, so `envgen run` and Compose hand it the UUID, never the job's index."""
    p = run_profile.Profile(gpu_mode=mode, gpus=_gpus("GPU-node2", "GPU-node3"))
    flags = " ".join(p.gpu_flags())
    assert "GPU-node2" in flags and "GPU-node3" in flags
    assert "=0" not in flags and "device=0" not in flags
    dev = p.compose("x/y:1", "s")["services"]["s"]["deploy"]["resources"]["reservations"]
    ids = dev["devices"][0]["device_ids"]
    assert all("GPU-node" in i for i in ids) and len(ids) == 2
    # a GPU given by index alone (envgen profile, for another host) stays an index
    assert "device=0,1" in " ".join(run_profile.Profile(gpu_mode="toolkit",
                                                        gpus=(0, 1)).gpu_flags())


def test_a_container_given_no_gpu_gets_none_from_a_runtime_that_gives_all_by_default():
    """Every image says NVIDIA_VISIBLE_DEVICES=all; where NVIDIA's runtime is the default
    (GPU Operator nodes, many DGX hosts), a container given no GPU would get them all."""
    none = run_profile.Profile()
    argv = none.docker_flags()
    assert argv[argv.index("NVIDIA_VISIBLE_DEVICES=void") - 1] == "-e"
    assert none.docker_kwargs()["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    pod = none.kubernetes("x/y:1", "s")["spec"]["containers"][0]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in pod["env"]
    some = run_profile.Profile(gpu_mode="toolkit", gpus=(0,))
    assert "NVIDIA_VISIBLE_DEVICES" not in some.environment()
    every = run_profile.Profile(gpu_mode="toolkit", all_gpus=True)
    assert "NVIDIA_VISIBLE_DEVICES" not in every.environment()


def test_compose_cdi_devices_carry_the_capabilities_the_compose_specification_requires():
    for gpus in ({"gpus": (0, 1)}, {"all_gpus": True}):
        p = run_profile.Profile(gpu_mode="cdi", **gpus)
        dev = p.compose("x/y:1", "s")["services"]["s"]["deploy"]["resources"][
            "reservations"]["devices"][0]
        assert dev["driver"] == "cdi" and dev["capabilities"] == ["gpu"]


@pytest.mark.parametrize("user,uid,gid,noted", [
    ("envgen", 10001, 10001, False), ("envgen:envgen", 10001, 10001, False),
    ("1000:1000", 1000, 1000, False), ("1000", 1000, None, False),
    ("trainer", 65534, 65534, True), ("trainer:staff", 65534, 65534, True)])
def test_a_pod_always_runs_as_a_number_the_kubelet_can_check(user, uid, gid, noted):
    """runAsNonRoot with an image user that is a name leaves the pod in
    CreateContainerConfigError: the pod gets a uid, the image's own where it is known."""
    p = run_profile.Profile(user=run_profile.user_for(user))
    sec = p.kubernetes("x/y:1", "s")["spec"]["containers"][0]["securityContext"]
    assert sec["runAsNonRoot"] is True and sec["runAsUser"] == uid
    assert sec.get("runAsGroup") == gid
    assert any("runAsUser" in n for n in p.notes("kubernetes")) == noted


@pytest.mark.parametrize("name,want", [
    ("pytorch-cu121", "pytorch-cu121"), ("transformers-4.44.2-cu121", "transformers-4-44-2-cu121"),
    ("PyTorch_CU121+local", "pytorch-cu121-local"), ("a" * 64, "a" * 63),
    ("-x-", "x"), ("+++", "envgen")])
def test_container_and_service_names_are_rfc_1123_labels(name, want):
    import re
    assert run_profile.pod_name(name) == want
    p = run_profile.Profile()
    assert p.kubernetes("x/y:1", name)["spec"]["containers"][0]["name"] == want
    assert list(p.compose("x/y:1", name)["services"]) == [want]
    assert re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", want)


def test_device_nodes_find_the_drivers_libraries_on_an_arm64_host(monkeypatch):
    """`ldconfig -p` marks an aarch64 library "AArch64", not "x86-64": on a Grace host the
    device-node mode must still find libcuda, or it refuses a host that has it."""
    from types import SimpleNamespace

    from envgen.runtime import gpu_access
    listing = ("\tlibcuda.so.1 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libcuda.so.1\n"
               "\tlibnvidia-ml.so.1 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/"
               "libnvidia-ml.so.1\n")
    monkeypatch.setattr(gpu_access.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(gpu_access.os.path, "isdir", lambda p: False)
    monkeypatch.setattr(gpu_access.os.path, "exists", lambda p: "nvidia-smi" not in p)
    monkeypatch.setattr(gpu_access.subprocess, "run",
                        lambda *a, **k: SimpleNamespace(stdout=listing))
    volumes, env = gpu_access._driver_binds()
    assert any(v["bind"].endswith("/libcuda.so.1") for v in volumes.values())
    assert env["LD_LIBRARY_PATH"].endswith("/lib64")
