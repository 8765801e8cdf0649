"""envgen doctor: fake nvidia-smi output and a fake daemon; one run against the real daemon."""
import json
import os

import pytest
from fakes import FakeDocker

from envgen import doctor as dr
from envgen.cli import main
from envgen.core.errors import EnvironmentMissing
from envgen.matrix import load_matrix
from envgen.runtime import host
from envgen.runtime.host import HostGpus

H200_580 = ("0, NVIDIA H200, GPU-0a1b, 9.0, 143771, 0, 0, 580.95.05\n"
            "1, NVIDIA H200, GPU-2c3d, 9.0, 143771, 52000, 97, 580.95.05\n")
RTX4090_535 = "0, NVIDIA GeForce RTX 4090, GPU-9f, 8.9, 24564, 300, 3, 535.274.02\n"
DOCKER_OK = {"reachable": True, "error": None, "version": "27.3.1", "runtimes": ["nvidia",
             "runc"], "default_runtime": "runc", "nvidia_runtime": True,
             "cdi_spec_dirs": [], "cdi_specs": []}
DOCKER_DOWN = {"reachable": False, "error": "no Docker daemon answers", "cdi_specs": []}


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def FakeClient(info):
    """A daemon that answers `docker info` with `info` (tests/fakes.py)."""
    return FakeDocker(info=info)


def test_h200_on_r580_runs_cu132_and_reports_the_busy_gpu(m):
    r = dr.examine(m, host.parse_query(H200_580), DOCKER_OK, today="2026-11-30")
    assert r["ok"] and r["problems"] == []
    assert r["driver"]["branch"] == "R580" and r["driver"]["lts"] is True
    assert r["driver"]["cuda"].startswith("13.0")
    assert [g["busy"] for g in r["gpus"]] == [False, True]
    assert r["gpus"][0]["matrix_name"] == "H200" and r["gpus"][0]["cc"] == "9.0"
    assert r["stacks"]["pytorch-cu132"]["runs"]
    # torch 1.13 cu116 has no sm_90 kernels
    assert not r["stacks"]["pytorch-cu116"]["runs"]
    assert "no kernels for compute capability 9.0" in r["stacks"]["pytorch-cu116"]["why"]


def test_rtx4090_on_r535_cannot_run_cu130_and_says_the_branch_is_past_eol(m):
    r = dr.examine(m, host.parse_query(RTX4090_535), DOCKER_OK, today="2026-11-30")
    assert r["driver"]["branch"] == "R535" and r["driver"]["past_eol"] is True
    assert not r["stacks"]["pytorch-cu130"]["runs"]
    assert r["stacks"]["pytorch-cu126"]["how"] == "minor-version compatibility"
    assert "pytorch-cu121" in r["runs"]


def test_no_gpu_is_not_ok_but_still_reports_docker_and_the_cpu_stack(m):
    r = dr.examine(m, HostGpus(None, (), "nvidia-smi not found: no NVIDIA driver"), DOCKER_OK)
    assert not r["ok"] and "nvidia-smi not found" in r["problems"][0]
    assert r["driver"] is None and r["docker"]["version"] == "27.3.1"
    assert r["stacks"]["pytorch-cpu"]["runs"]
    assert not r["stacks"]["pytorch-cu121"]["runs"]


def test_no_docker_daemon_is_not_ok(m):
    r = dr.examine(m, host.parse_query(H200_580), DOCKER_DOWN)
    assert not r["ok"] and "no Docker daemon" in r["problems"][0]


def test_gpu_without_nvidia_runtime_or_cdi_is_a_warning_not_a_failure(m):
    docker = DOCKER_OK | {"runtimes": ["runc"], "nvidia_runtime": False}
    r = dr.examine(m, host.parse_query(H200_580), docker)
    assert r["ok"] and "device nodes" in r["warnings"][0]


def test_gpu_unknown_to_the_matrix_is_checked_by_its_compute_capability(m):
    text = "0, NVIDIA Future GPU, GPU-1, 9.0, 80000, 0, 0, 580.95.05\n"
    r = dr.examine(m, host.parse_query(text), DOCKER_OK)
    assert r["gpus"][0]["matrix_name"] is None
    assert r["stacks"]["pytorch-cu132"]["runs"]
    assert not r["stacks"]["pytorch-cu116"]["runs"]


def test_docker_facts_reads_runtimes_and_cdi_specs(tmp_path):
    (tmp_path / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    info = {"ServerVersion": "27.3.1", "Runtimes": {"runc": {}, "nvidia": {}},
            "DefaultRuntime": "runc", "CDISpecDirs": [str(tmp_path)]}
    f = dr.docker_facts(client=lambda: FakeClient(info), cdi_dirs=(str(tmp_path),))
    assert f["reachable"] and f["nvidia_runtime"] and f["runtimes"] == ["nvidia", "runc"]
    assert f["cdi_specs"] == [str(tmp_path / "nvidia.yaml")]


def test_docker_facts_without_a_daemon_says_why():
    def no_daemon():
        raise EnvironmentMissing("no Docker daemon answers (FileNotFoundError)")
    f = dr.docker_facts(client=no_daemon, cdi_dirs=())
    assert f == {"reachable": False, "error": "no Docker daemon answers (FileNotFoundError)",
                 "cdi_specs": []}


def test_cli_doctor_exits_3_without_a_gpu_and_still_prints_the_report(monkeypatch, capsys):
    monkeypatch.setattr(host, "detect", lambda: HostGpus(None, (), "nvidia-smi not found"))
    monkeypatch.setattr(dr, "docker_facts", lambda: DOCKER_OK)
    assert main(["doctor"]) == 3
    out = capsys.readouterr().out
    assert "driver:  none" in out and "docker:  27.3.1" in out and "pytorch-cpu" in out
    assert "problem: nvidia-smi not found" in out


def test_cli_doctor_json_on_a_fake_h200_host_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(host, "detect", lambda: host.parse_query(H200_580))
    monkeypatch.setattr(dr, "docker_facts", lambda: DOCKER_OK)
    assert main(["doctor", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["ok"] and r["gpus"][1]["busy"] and r["stacks"]["pytorch-cu128"]["runs"]


def _daemon_answers() -> bool:
    if not os.path.exists("/var/run/docker.sock"):
        return False
    try:
        from envgen.runtime import docker as engine
        engine.client()
        return True
    except Exception:
        return False


@pytest.mark.docker
@pytest.mark.skipif(not _daemon_answers(), reason="no Docker daemon answers")
def test_doctor_sees_the_real_docker_daemon(m):
    r = dr.doctor(m)
    assert r["docker"]["reachable"] and r["docker"]["version"]
    assert isinstance(r["docker"]["runtimes"], list)


def test_cli_doctor_image_says_what_its_certificate_says_to_change(monkeypatch, capsys,
                                                                   tmp_path):
    from envgen.certs import store as certs
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    monkeypatch.setattr(host, "detect", lambda: host.parse_query(H200_580))
    monkeypatch.setattr(dr, "docker_facts", lambda: DOCKER_OK)
    fix = "shared memory 64 MB: add --ipc=host or --shm-size=8g"
    from certificates import made
    certs.save(made(image_id="sha256:" + "ab" * 32, passed=False, stack={"stack": "pytorch-cu121"},
                    created="2026-12-02T01:00:00Z", tags=["team/torch:1"],
                    checks=[{"name": "dataloader", "passed": False, "detail": "d", "fix": fix}]))
    assert main(["doctor", "--image", "team/torch:1"]) == 0
    out = capsys.readouterr().out
    assert f"  change: dataloader: {fix}" in out and "abababababab" in out
    assert main(["doctor", "--image", "abab", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["image"]["advice"] == [f"dataloader: {fix}"]
    assert main(["doctor", "--image", "nobody/none:1"]) == 2   # no certificate: one sentence
    assert "no certificate for 'nobody/none:1'" in capsys.readouterr().err


@pytest.mark.parametrize("row, words", [
    ("0, NVIDIA H100 80GB HBM3, GPU-0a, [N/A], 81559, 0, 0, 535.274.02\n", None),
    ("0, NVIDIA H100 80GB HBM3, GPU-0a, 9.0, 81559, 0, 0, [N/A]\n",
     "nvidia-smi gave the driver version '[N/A]', which is not one"),
    ("0, Some Future GPU, GPU-0a, [Not Supported], 1, 0, 0, 580.95.05\n", None)])
def test_a_field_nvidia_smi_cannot_give_is_not_taken_for_a_value(m, row, words):
    """[N/A] as a compute capability or a driver ended doctor with an internal error."""
    r = dr.examine(m, host.parse_query(row), DOCKER_OK, today="2026-11-30")
    if words:
        assert words in r["problems"] and not r["ok"]
        assert not r["stacks"]["pytorch-cu121"]["runs"]
    else:
        assert r["gpus"][0]["cc"] == ""
