"""doctor leads with what can be done here: what this host's store certified here and at
which level (a pytorch-cu121 certified at level cpu right after `make demo` is not a bare
`no ... no NVIDIA GPU`), a project's image under its project name, and `--image`'s verdict
on the first line, not under the stack rows."""
from __future__ import annotations

import json

import pytest
from certificates import made
from test_doctor import DOCKER_OK, H200_580, RTX4090_535

from envgen import doctor as dr
from envgen.cli import main
from envgen.matrix import load_matrix
from envgen.runtime import host
from envgen.runtime.host import HostGpus

NO_GPU = HostGpus(None, (), "nvidia-smi not found: no NVIDIA driver on this host")
CPU_CERT = made(image_id="sha256:" + "94" * 32, stack={"stack": "pytorch-cu121"}, gpus=[],
                created="2026-12-03T10:00:00Z", tags=["envgen/pytorch-cu121:2.4.1"])


@pytest.fixture(scope="module")
def m():
    return load_matrix()


@pytest.fixture
def store(monkeypatch, tmp_path):
    from envgen.certs import store as certs
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    monkeypatch.setattr(dr, "docker_facts", lambda: DOCKER_OK)
    return certs


def test_a_stack_certified_at_level_cpu_here_says_so_on_a_host_without_a_gpu(m, store,
                                                                             monkeypatch,
                                                                             capsys):
    store.save(CPU_CERT)
    monkeypatch.setattr(host, "detect", lambda: NO_GPU)
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["doctor"]) == 3
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("here:") and "1 stack(s) certified here (pytorch-cu121 at level " \
                                         "cpu)" in first
    row = next(ln for ln in out.splitlines() if ln.startswith("pytorch-cu121 "))
    assert "level cpu, 2026-12-03" in row and "no NVIDIA GPU" in row
    assert len(out.splitlines()) < 40     # 55 stacks that cannot run: grouped, not 55 rows
    assert main(["doctor", "--json"]) == 3
    r = json.loads(capsys.readouterr().out)
    assert r["stacks"]["pytorch-cu121"]["certified"]["level"] == "cpu"
    assert r["certified"] == ["pytorch-cu121"] and r["summary"].startswith("1 stack(s)")


def test_a_gpu_certificate_speaks_for_a_host_of_its_gpu_and_branch_only(m):
    cert = made(image_id="sha256:" + "ab" * 32, stack={"stack": "pytorch-cu128"},
                created="2026-12-03T10:00:00Z")          # the H200 on 580.159.04
    h200 = dr.certified_here(m, [cert], host.parse_query(H200_580))
    assert h200["pytorch-cu128"]["level"] == "cuda"
    assert "H200" in h200["pytorch-cu128"]["where"]
    assert dr.certified_here(m, [cert], host.parse_query(RTX4090_535)) == {}
    assert dr.certified_here(m, [made(stack={"stack": "pytorch-cu128"}, passed=False)],
                             host.parse_query(H200_580)) == {}


def test_a_projects_certificate_is_shown_under_its_project_name(m):
    st = {"stack": "pytorch-cu121", "project": {"name": "trainer"}}
    cert = made(image_id="sha256:" + "cd" * 32, stack=st, gpus=[])
    r = dr.examine(m, NO_GPU, DOCKER_OK, certified=dr.certified_here(m, [cert], NO_GPU))
    assert r["stacks"]["trainer.pytorch-cu121"]["certified"]["level"] == "cpu"
    assert r["stacks"]["pytorch-cu121"]["certified"] is None


def test_doctor_image_leads_with_its_verdict(m, store, monkeypatch, capsys):
    store.save(CPU_CERT)
    monkeypatch.setattr(host, "detect", lambda: host.parse_query(H200_580))
    assert main(["doctor", "--image", "envgen/pytorch-cu121:2.4.1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("image:   envgen/pytorch-cu121:2.4.1 (949494949494)") and \
        lines[0].endswith("passed")
    assert lines[2].startswith("here:")


MIXED = ("0, NVIDIA H100 80GB HBM3, GPU-0a, 9.0, 81559, 0, 0, 535.274.02\n"
         "1, Tesla V100-SXM2-32GB, GPU-1b, 7.0, 32768, 0, 0, 535.274.02\n")


def test_a_host_of_two_gpu_kinds_runs_only_what_both_run(m):
    """doctor judged every stack on GPU 0 alone: with an H100 and a V100 it said stacks with
    no sm_70 kernels run here, which diff --hosts (every kind of GPU) denied."""
    r = dr.examine(m, host.parse_query(MIXED), DOCKER_OK, today="2026-11-30")
    h100 = dr.examine(m, host.parse_query(MIXED.splitlines()[0] + "\n"), DOCKER_OK,
                      today="2026-11-30")
    only_h100 = set(h100["runs"]) - set(r["runs"])
    assert only_h100, "some stack runs on the H100 and not on the V100"
    name = sorted(only_h100)[0]
    assert r["stacks"][name]["why"].startswith("Tesla V100"), r["stacks"][name]
    from envgen.diff import _host_verdict
    st = dr.resolve_all(m)[name]
    assert not _host_verdict(m, st, "535.274.02", (m.gpu("H100"), m.gpu("V100")))["runs"]


def test_a_pass_on_a_newer_release_of_the_branch_does_not_speak_for_a_too_old_one(m):
    """A pytorch-cu121 pass on an RTX 4090 under 525.147.05 is not 'certified here' on
    525.60.11, which is older than CUDA 12's 525.60.13 and runs no CUDA 12 at all."""
    from envgen.diff import resolve_all
    st = resolve_all(m)["pytorch-cu121"]
    cert = made(image_id="sha256:" + "4a" * 32, stack=st.to_json(),
                gpus=["NVIDIA GeForce RTX 4090"], driver="525.147.05", level="cuda")
    newer = "0, NVIDIA GeForce RTX 4090, GPU-9f, 8.9, 24564, 300, 3, 525.147.05\n"
    older = newer.replace("525.147.05", "525.60.11")
    assert "pytorch-cu121" in dr.certified_here(m, [cert], host.parse_query(newer))
    assert dr.certified_here(m, [cert], host.parse_query(older)) == {}
