"""Certification logic (certify/run.py) on the Docker engine, with the daemon and the GPU
faked. The real paths run in test_docker_real.py (CPU, CI) and bench/gpu/run.sh (GPU,
recorded in docs/certification.md); the same function over Apptainer and a fake engine in
test_certify_engines.py."""
from __future__ import annotations

import json

import fakes
import pytest
from fakes import FakeContainer  # noqa: F401  (test_run_profile takes it from here)

from envgen.certify import run
from envgen.core.errors import CheckFailed, EnvironmentMissing, InputError
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve
from envgen.runtime import gpu_access
from envgen.runtime.engine import DockerEngine
from envgen.runtime.host import HostGpus, parse_query

H200_SMI = "0, NVIDIA H200, GPU-1, 9.0, 143771, 0, 0, 580.159.04\n" \
           "1, NVIDIA H200, GPU-2, 9.0, 143771, 0, 0, 580.159.04\n"
OLD_SMI = "0, NVIDIA GeForce RTX 4090, GPU-1, 8.9, 24564, 0, 0, 535.104.05\n"


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


def certify(client, ref, host, **kw):
    """The one certification function on the Docker engine of daemon `client`."""
    return run.certify(DockerEngine(client), ref, host, **kw)


def _stack(matrix, text):
    return resolve(matrix, parse_spec(text, matrix), Host())


def FakeImage(stack, env=None, user="envgen"):
    """The image a certification inspects: the stack's label, its env and user."""
    labels = {"io.envgen.stack": json.dumps(stack.to_json())} if stack else {}
    return fakes.FakeImage("sha256:" + "ab" * 32, ["envgen/test:1"], labels, env=env,
                           user=user)


def FakeClient(image, container, runtimes=("runc",)):
    """A daemon whose every reference names `image` (none: no image at all), and whose
    every container is `container`."""
    c = fakes.FakeDocker(container=container, runtimes=runtimes, any_ref=image)
    c.container = container
    return c


def _report(level="cpu", passed=True):
    return {"level": level, "passed": passed, "checks": [{"name": "train", "passed": passed}],
            "versions": {}, "device": {}, "metrics": {}}


def test_cpu_certificate_records_image_stack_payload_hash_and_host(matrix):
    st = _stack(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(st, {"NVIDIA_REQUIRE_CUDA": st.require_cuda}),
                   FakeContainer(_report()))
    cert = certify(c, "envgen/test:1", HostGpus(None, ()), gpus="auto", matrix=matrix)
    assert cert["passed"] and cert["level"] == "cpu"
    assert cert["image_id"].startswith("sha256:")
    assert cert["stack"]["stack"] == "pytorch-cu121"
    assert len(cert["payload"]["sha256"]) == 64
    kw = c.create_kwargs
    assert kw["network_mode"] == "none" and kw["user"] == "envgen"
    assert kw["cap_drop"] == ["ALL"] and "--require" in kw["command"]
    assert kw["command"][kw["command"].index("--require") + 1] == "cpu"
    assert c.container.removed


def test_gpu_requested_on_a_host_without_gpus_is_exit_3(matrix):
    st = _stack(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(st), FakeContainer(_report()))
    with pytest.raises(EnvironmentMissing) as e:
        certify(c, "x", HostGpus(None, (), "nvidia-smi not found"), gpus="all", matrix=matrix)
    assert e.value.exit_code == 3


def test_toolkit_host_gets_a_device_request_and_require_cuda_level(matrix):
    st = _stack(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(st, {"NVIDIA_REQUIRE_CUDA": st.require_cuda}),
                   FakeContainer(_report("cuda")), runtimes=("runc", "nvidia"))
    cert = certify(c, "x", parse_query(H200_SMI), gpus="0", matrix=matrix)
    req = c.create_kwargs["device_requests"][0]
    # the daemon is told the GPU's UUID, not the index nvidia-smi gave it here (the daemon
    # sits outside a Slurm job's cgroup, where GPU 0 may be another job's)
    assert req["DeviceIDs"] == [parse_query(H200_SMI).gpus[0].uuid]
    assert cert["host"]["gpu_access"] == "toolkit"
    assert c.create_kwargs["command"][c.create_kwargs["command"].index("--require") + 1] \
        == "cuda"


def test_cdi_mode_names_cdi_devices():
    plan = gpu_access.plan([0, 1], "cdi", {})
    assert plan.run_kwargs["device_requests"][0]["DeviceIDs"] == ["nvidia.com/gpu=0",
                                                                  "nvidia.com/gpu=1"]


def test_old_driver_is_refused_before_the_container_starts(matrix):
    st = _stack(matrix, "pytorch-cu130")
    c = FakeClient(FakeImage(st, {"NVIDIA_REQUIRE_CUDA": st.require_cuda}),
                   FakeContainer(_report("cuda")), runtimes=("nvidia",))
    with pytest.raises(CheckFailed, match="cuda>=13.0"):
        certify(c, "x", parse_query(OLD_SMI), gpus="all", matrix=matrix)
    assert not c.container.started


def test_gpu_without_kernels_in_the_wheel_is_refused(matrix):
    st = _stack(matrix, "torch==2.6.0")          # cu124: no sm_120 kernels
    smi = "0, NVIDIA GeForce RTX 5090, GPU-1, 12.0, 32607, 0, 0, 580.95.05\n"
    c = FakeClient(FakeImage(st, {"NVIDIA_REQUIRE_CUDA": st.require_cuda}),
                   FakeContainer(_report("cuda")), runtimes=("nvidia",))
    with pytest.raises(CheckFailed, match="no kernel image"):
        certify(c, "x", parse_query(smi), gpus="all", matrix=matrix)


def test_failed_report_gives_a_failed_certificate(matrix):
    st = _stack(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(st), FakeContainer(_report(passed=False), exit_code=1))
    cert = certify(c, "x", HostGpus(None, ()), gpus="none", matrix=matrix)
    assert cert["passed"] is False and cert["exit_code"] == 1


def test_hanging_payload_is_killed_and_removed(matrix):
    st = _stack(matrix, "pytorch-cu121")
    ct = FakeContainer(None, hang=True)
    with pytest.raises(CheckFailed, match="did not finish"):
        certify(FakeClient(FakeImage(st), ct), "x", HostGpus(None, ()), gpus="none",
                timeout=5, matrix=matrix)
    assert ct.killed and ct.removed


def test_image_without_payload_is_a_clear_error_and_removed(matrix):
    st = _stack(matrix, "pytorch-cu121")
    ct = FakeContainer(_report(), payload=None)
    with pytest.raises(CheckFailed, match="no smoke payload"):
        certify(FakeClient(FakeImage(st), ct), "x", HostGpus(None, ()), gpus="none",
                matrix=matrix)
    assert ct.removed and not ct.started


def test_image_not_built_by_envgen_is_bad_input(matrix):
    with pytest.raises(InputError, match="io.envgen.stack"):
        certify(FakeClient(FakeImage(None), FakeContainer(_report())), "x",
                HostGpus(None, ()), gpus="none", matrix=matrix)


@pytest.mark.parametrize("hostile", [
    lambda d: d.update(packages=["torch==2.4.1"]),          # a list where a mapping goes
    lambda d: d["base"].update(suite="--setup-hook=id"),    # an option smuggled as a value
    lambda d: d.update(stack="../../etc"),                  # a path as a stack name
    lambda d: d.update(python=3.11),                        # a number where a string goes
])
def test_an_image_label_is_validated_like_a_lock(matrix, hostile):
    st = _stack(matrix, "pytorch-cu121")
    img = FakeImage(st)
    data = st.to_json()
    hostile(data)
    img.attrs["Config"]["Labels"]["io.envgen.stack"] = json.dumps(data)
    ct = FakeContainer(_report())
    with pytest.raises(InputError, match="io.envgen.stack label is not a stack envgen wrote"):
        certify(FakeClient(img, ct), "x", HostGpus(None, ()), gpus="none", matrix=matrix)
    assert not ct.started


def test_root_image_runs_as_nobody(matrix):
    st = _stack(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(st, user=""), FakeContainer(_report()))
    certify(c, "x", HostGpus(None, ()), gpus="none", matrix=matrix)
    assert c.create_kwargs["user"] == "65534:65534"


def test_interrupt_still_removes_the_container(matrix):
    st = _stack(matrix, "pytorch-cu121")

    class Interrupted(FakeContainer):
        def wait(self, timeout=None):
            raise KeyboardInterrupt

    ct = Interrupted(_report())
    with pytest.raises(KeyboardInterrupt):
        certify(FakeClient(FakeImage(st), ct), "x", HostGpus(None, ()), gpus="none",
                matrix=matrix)
    assert ct.removed


def test_gpu_list_out_of_range_is_exit_3():
    with pytest.raises(EnvironmentMissing):
        gpu_access.parse_gpus("0,3", 2)
    with pytest.raises(InputError):
        gpu_access.parse_gpus("zero", 2)
    assert gpu_access.parse_gpus("none", 2) is None
    assert gpu_access.parse_gpus("all", 2) == [0, 1]


def test_the_report_is_the_last_line_with_checks_and_holds_no_nan():
    """A line an atexit hook prints after the report is not taken for it; NaN and
    Infinity become null (the store reads strict JSON, and a report holding them was
    stored unreadable); a line nested too deep is passed over, not a crash."""
    import json

    from envgen.certify.run import _report
    good = {"passed": True, "checks": [{"name": "train", "passed": True}]}
    out = "\n".join(["log line", json.dumps(good), '{"event": "shutdown"}',
                     "{" + '"a":{' * 5000 + "}" * 5001])
    assert _report(out) == good
    got = _report('{"passed": true, "checks": [], "metrics": {"loss": NaN, "big": 1e999, '
                  '"ok": 1.5, "neg": -Infinity}}')
    assert got["metrics"] == {"loss": None, "big": None, "ok": 1.5, "neg": None}
    json.dumps(got, allow_nan=False)
    assert _report('{"event": "shutdown"}') is None and _report("") is None


@pytest.mark.parametrize("kind", ["file", "symlink", "junk"])
def test_the_payload_is_hashed_only_as_a_regular_file(kind):
    """A link where the payload goes (its target is not in the archive docker returns) is
    no payload, said as such; it was an internal error (exit 4)."""
    import hashlib
    import io
    import tarfile
    import types

    from envgen.runtime.engine import _payload_sha256
    buf = io.BytesIO()
    if kind == "junk":
        buf.write(b"not a tar")
    else:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("torch_smoke.py")
            if kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, "real.py"
                tar.addfile(info)
            else:
                info.size = 5
                tar.addfile(info, io.BytesIO(b"print"))
    ct = types.SimpleNamespace(get_archive=lambda path: ([buf.getvalue()], {}))
    got = _payload_sha256(ct, "/opt/envgen/torch_smoke.py")
    assert got == (hashlib.sha256(b"print").hexdigest() if kind == "file" else None)
