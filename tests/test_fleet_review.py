"""The fleet review's defects, each held by a test: a Slurm task's GPUs are the job's own
(named to the Docker daemon by UUID), a small file cannot ask for unbounded tasks, each
target's job array counts from 0, `gpus:` agrees with the level, and Slurm's time forms
are read as Slurm reads them (no YAML 1.1 base-60 numbers)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from services import envgen
from test_certify_unit import FakeClient, FakeContainer, FakeImage, _report, _stack, certify
from test_fleet import GOOD, fleet_of, passing_result, problems

from envgen.core.errors import EnvironmentMissing, InputError, MatrixError
from envgen.fleet import kubernetes, slurm, spec, state, task
from envgen.runtime import gpu_access, host
from envgen.runtime.apptainer import exec_options

# nvidia-smi on an 8-GPU node: in a job without ConstrainDevices it lists every GPU ...
EIGHT = host.parse_query("\n".join(
    f"{i}, NVIDIA H100 80GB HBM3, GPU-{i:08d}-aaaa, 9.0, 81559, 0, 0, 550.54.15"
    for i in range(8)))
# ... and with ConstrainDevices only the job's (the node's GPU 5), numbered from 0
ONE = host.parse_query("0, NVIDIA H100 80GB HBM3, GPU-00000005-aaaa, 9.0, 81559, 0, 0, "
                       "550.54.15")
SLURM_GPU_5 = {"SLURM_JOB_GPUS": "5", "CUDA_VISIBLE_DEVICES": "5"}


def device_ids(gpus, mode="toolkit"):
    return gpu_access.plan(gpus, mode, {}).run_kwargs["device_requests"][0]["DeviceIDs"]


# ---- 1. a task's GPUs are the job's ----------------------------------------------------------

def test_all_in_a_job_without_constrain_devices_is_the_jobs_gpu_by_uuid():
    gpus = gpu_access.parse_gpus("all", EIGHT, SLURM_GPU_5)
    assert gpus == [5] and device_ids(gpus) == ["GPU-00000005-aaaa"]
    assert device_ids(gpus, "cdi") == ["nvidia.com/gpu=GPU-00000005-aaaa"]


@pytest.mark.parametrize("env", [{"SLURM_JOB_GPUS": "5", "CUDA_VISIBLE_DEVICES": "0"},
                                 SLURM_GPU_5, {"SLURM_JOB_GPUS": "5"}])
def test_all_in_a_job_with_constrain_devices_is_the_nodes_gpu_not_its_gpu_0(env):
    """The job's nvidia-smi calls its GPU 0; to the daemon, outside the job's cgroup, 0 is
    the node's GPU 0 (maybe another user's): the daemon is given the UUID."""
    gpus = gpu_access.parse_gpus("all", ONE, env)
    assert gpus == [0] and device_ids(gpus) == ["GPU-00000005-aaaa"]


@pytest.mark.parametrize("env, want", [
    ({}, list(range(8))),
    ({"CUDA_VISIBLE_DEVICES": "GPU-00000003"}, [3]),     # a UUID's unique prefix, as CUDA
    ({"CUDA_VISIBLE_DEVICES": "6,2"}, [2, 6]),
    ({"SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "1,4"}, [1]),
    ({"SLURM_JOB_GPUS": "1,4"}, [1, 4]),
    ({"CUDA_VISIBLE_DEVICES": "4,-1,5"}, [4])])           # CUDA stops at the first non-GPU
def test_all_means_the_gpus_the_environment_leaves(env, want):
    gpus = gpu_access.parse_gpus("all", EIGHT, env)
    assert gpus == want
    assert device_ids(gpus) == [f"GPU-{i:08d}-aaaa" for i in want]


@pytest.mark.parametrize("value, env, words", [
    ("all", {"CUDA_VISIBLE_DEVICES": ""}, "leaves this process none of the 8"),
    ("all", {"CUDA_VISIBLE_DEVICES": "-1"}, "leaves this process none"),
    ("all", {"CUDA_VISIBLE_DEVICES": "GPU-ffff"}, "names GPU 'GPU-ffff', which nvidia-smi"),
    ("all", {"CUDA_VISIBLE_DEVICES": "9"}, "names GPU '9'"),
    ("0", SLURM_GPU_5, "GPU 0 is not one CUDA_VISIBLE_DEVICES='5' leaves")])
def test_a_gpu_the_job_was_not_given_is_exit_3(value, env, words):
    with pytest.raises(EnvironmentMissing, match=words):
        gpu_access.parse_gpus(value, EIGHT, env)


def test_auto_with_no_gpu_left_is_the_cpu():
    assert gpu_access.parse_gpus("auto", EIGHT, {"CUDA_VISIBLE_DEVICES": ""}) == []


def test_certify_hands_the_daemon_the_jobs_gpu_and_its_certificate_names_it(monkeypatch):
    """Through certify as `envgen certify --gpus all` runs it in a Slurm task (the host's
    listing read by nvidia-smi, faked here), on a node without ConstrainDevices."""
    from envgen.matrix import load_matrix
    matrix = load_matrix()
    monkeypatch.setattr(host, "detect", lambda: EIGHT)
    for key, value in SLURM_GPU_5.items():
        monkeypatch.setenv(key, value)
    st = _stack(matrix, "pytorch-cu121")
    c = FakeClient(FakeImage(st, {"NVIDIA_REQUIRE_CUDA": st.require_cuda}),
                   FakeContainer(_report("cuda")), runtimes=("nvidia",))
    cert = certify(c, "x", EIGHT, gpus="all", matrix=matrix)
    assert c.create_kwargs["device_requests"][0]["DeviceIDs"] == ["GPU-00000005-aaaa"]
    assert [(g["index"], g["uuid"]) for g in cert["host"]["gpus"]] == [
        (5, "GPU-00000005-aaaa")]


def test_apptainer_keeps_the_jobs_allocation_through_cleanenv():
    """--cleanenv drops Slurm's CUDA_VISIBLE_DEVICES; the one certify sets is the job's GPU,
    by its UUID, with or without ConstrainDevices."""
    for listing in (EIGHT, ONE):
        opts, _ = exec_options(True, False, gpu_access.parse_gpus("all", listing, SLURM_GPU_5))
        assert "CUDA_VISIBLE_DEVICES=GPU-00000005-aaaa" in opts


def test_device_nodes_are_the_gpus_minor_numbers_not_the_jobs_indices(tmp_path, monkeypatch):
    page = tmp_path / "0000:9a:00.0"
    page.mkdir()
    (page / "information").write_text("Model: NVIDIA H100\nGPU UUID: GPU-00000005-aaaa\n"
                                      "Device Minor: 5\n")
    monkeypatch.setattr(gpu_access, "PROC_GPUS", str(tmp_path))
    monkeypatch.setattr(gpu_access.os.path, "exists", lambda p: p != "/dev/nvidia5")
    with pytest.raises(EnvironmentMissing, match="/dev/nvidia5 is missing"):
        gpu_access.plan(gpu_access.parse_gpus("all", ONE, {}), "devices", {})


# ---- 2. stacks x targets is bounded ----------------------------------------------------------

def _many(stacks: int, targets: int) -> str:
    return ("stacks:\n" + "".join(f"  - {{spec: jax-cpu, image: 'team/jax:{i}'}}\n"
                                  for i in range(stacks))
            + "targets:\n" + "".join(f"  - {{name: n{i}, partition: p, level: cpu}}\n"
                                     for i in range(targets)))


def test_a_small_file_cannot_ask_for_unbounded_tasks(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text(_many(2000, 200))   # 80 KB: 400,000 tasks
    resolved = []
    with pytest.raises(InputError) as e:
        spec.parse(spec.load_text(p.read_text(), str(p)), str(p), None,
                   lambda *a: resolved.append(a))
    assert e.value.line == 1 and "400000 tasks, more than the 10000" in e.value.message
    assert resolved == []   # refused before anything was built
    r = envgen("fleet", str(p), "--slurm", "-o", str(tmp_path / "run"), "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["line"] == 1, r.stdout + r.stderr
    assert not (tmp_path / "run").exists()


def test_the_most_tasks_a_file_may_make_fit_the_state_files_collect_reads():
    worst = {"index": spec.MAX_TASKS, "array_index": slurm.MAX_ARRAY, "name": "e" * 63,
             "spec": "s" * 200, "image": "i" * 300, "sif": "/" + "f" * 400 + ".sif",
             "stack": "s" * 80, "target": "t" * 32, "partition": "p" * 64, "gpus": 64,
             "gpu": "g" * 40, "multi_gpu": True, "time": "24:00:00", "level": "cuda",
             "steps": 1_000_000, "certify_timeout": 86400, "engine": "apptainer",
             "script": "slurm/" + "t" * 32 + ".sbatch"}
    size = len(json.dumps({"tasks": [worst]}, indent=2))
    assert spec.MAX_TASKS * size < state.MAX_STATE
    assert spec.MAX_TASKS <= slurm.TASKS_SCHEMA["properties"]["tasks"]["maxItems"]


# ---- 3. each target's job array counts from 0 ------------------------------------------------

def test_each_targets_array_counts_from_0_and_maps_back_to_its_tasks(tmp_path, monkeypatch):
    f = fleet_of(tmp_path, _many(40, 30))
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    assert "#SBATCH --array=0-39\n" in (run / "slurm/n29.sbatch").read_text()
    tasks = json.loads((run / "tasks.json").read_text())["tasks"]
    last = task.find(tasks, 39, "n29")   # what the script's task runs for array task 39
    assert last["index"] == 1199 and last["target"] == "n29"
    slurm.record(run, [{"script": "slurm/n29.sbatch", "job_id": "7", "indices":
                        list(range(1160, 1200))}])
    (run / "results/1199-7.json").write_text(json.dumps(passing_result(
        run, 1199, image_tags=["team/jax:39"])))
    monkeypatch.setattr(slurm, "scheduler_states", lambda jobs: (
        {("7", i): "FAILED" if i == 3 else "COMPLETED" for i in range(40)}, "sacct"))
    rows = {r["index"]: r for r in slurm.verdicts(run, f)[0]}
    assert rows[1199]["verdict"] == "passed" and rows[1199]["log"].endswith("/7_39.out")
    assert rows[1163]["verdict"] == "failed" and rows[1164]["verdict"] == "failed"
    sent = []
    monkeypatch.setattr(slurm, "sbatch", lambda s, ids=None: sent.append((s, ids)) or "8")
    again = slurm.resubmit_failed(run, f)
    n29 = next(a for a in again if a["script"] == "slurm/n29.sbatch")
    assert 1163 in n29["indices"] and 1199 not in n29["indices"]   # jobs.json: task indices
    ids = next(i for s, i in sent if s.endswith("n29.sbatch"))
    assert max(ids) <= 39 and 3 in ids and 39 not in ids          # sbatch: array IDs


def test_a_target_whose_array_would_pass_1000_tasks_is_refused_before_sinfo(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text(_many(1001, 1))
    r = envgen("fleet", str(p), "--slurm", "-o", str(tmp_path / "run"), "--submit",
               "--json", env={"PATH": "/nonexistent"})   # no sinfo: exit 2 comes first
    assert r.returncode == 2, r.stdout + r.stderr
    err = json.loads(r.stdout)
    assert err["line"] == 1002 and "MaxArraySize" in err["message"]
    assert not (tmp_path / "run").exists()


# ---- 4. gpus agrees with the level -------------------------------------------------------------

def test_a_cpu_target_reserving_gpus_is_refused_at_its_line(tmp_path):
    text = "stacks: [jax-cpu]\ntargets:\n  - name: c\n    level: cpu\n    gpus: 8\n"
    assert any(p.startswith("5: ") and "gpus: 8 would reserve GPUs" in p
               for p in problems(tmp_path, text))


def test_a_cuda_target_of_several_gpus_certifies_them_together(tmp_path, monkeypatch):
    f = fleet_of(tmp_path, GOOD)   # h100: gpus 2
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    tasks = json.loads((run / "tasks.json").read_text())["tasks"]
    assert "--multi-gpu" in task.argv(tasks[0], "py")
    assert "--multi-gpu" not in task.argv(tasks[2], "py")   # the cpu target
    images = {t.stack.image or f"x/{t.resolved.stack}": ("sha256:" + "c" * 64, [], [])
              for t in f.tasks()}
    monkeypatch.setattr("envgen.core.image.default_tag", lambda st: f"x/{st.stack}")
    doc = kubernetes.manifest(f.tasks()[0], images)
    env = {e["name"]: e.get("value") for e in doc["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    base = json.loads(env["CERTIFY_TEMPLATE"])
    assert "--multi-gpu" in base["command"] and base["params"]["multi_gpu"] is True


@pytest.mark.parametrize("change, words", [
    (lambda c: c["host"].update(gpus=c["host"]["gpus"][:1]), "ran on 1 GPU(s), not on"),
    (lambda c: c["report"].update(checks=c["report"]["checks"][:-1]), "no multi-GPU check"),
    (lambda c: c["report"]["checks"][-1].update(skipped=True), "no multi-GPU check")])
def test_collect_wants_the_multi_gpu_run_a_several_gpu_target_asks_for(tmp_path, monkeypatch,
                                                                      change, words):
    f = fleet_of(tmp_path, GOOD)
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    slurm.record(run, [{"script": "slurm/h100.sbatch", "job_id": "101", "indices": [0, 1]}])
    cert = passing_result(run, 0)
    change(cert)
    (run / "results/0-101.json").write_text(json.dumps(cert))
    monkeypatch.setattr(slurm, "scheduler_states", lambda jobs: (
        {("101", i): "COMPLETED" for i in range(2)}, "sacct"))
    row = slurm.verdicts(run, f)[0][0]
    assert row["verdict"] == "failed" and words in row["why"], row


def test_the_apptainer_engine_refuses_a_multi_gpu_target_at_its_gpus_line(tmp_path):
    text = GOOD.replace("stacks: [pytorch-cu121, jax-cuda12]",
                        "stacks:\n  - {spec: jax-cuda12, sif: /shared/jax.sif}")
    with pytest.raises(InputError) as e:
        slurm.write(fleet_of(tmp_path, text), tmp_path / "run", engine="apptainer")
    assert e.value.line == 7 and "not on a SIF" in e.value.message


# ---- 5. Slurm's time forms, as written -------------------------------------------------------

@pytest.mark.parametrize("written, seconds, slurm_time", [
    ("1:30", 90, "0:01:30"), ("1:30:00", 5400, "1:30:00"), ("90", 5400, "1:30:00"),
    ("'90'", 5400, "1:30:00"), ("0-2", 7200, "2:00:00"), ("0-1:30", 5400, "1:30:00"),
    ("0-1:30:15", 5415, "1:30:15"), ("1-0", 86400, "24:00:00"), ("1h30m", 5400, "1:30:00")])
def test_slurm_time_forms_unquoted_mean_what_sbatch_reads(tmp_path, written, seconds,
                                                          slurm_time):
    f = fleet_of(tmp_path, f"stacks: [jax-cpu]\ntargets:\n  - name: c\n    level: cpu\n"
                           f"    time: {written}\n")
    assert (f.targets[0].seconds, f.targets[0].slurm_time) == (seconds, slurm_time)


@pytest.mark.parametrize("written", ["25:00:00", "2:75", "0-24", "1:30:00:00", "1-1:61"])
def test_a_time_out_of_range_is_refused_as_written(tmp_path, written):
    with pytest.raises(MatrixError) as e:
        fleet_of(tmp_path, f"stacks: [jax-cpu]\ntargets:\n  - name: c\n    level: cpu\n"
                           f"    time: {written}\n")
    assert e.value.line == 5 and f"time {written!r} is not a duration" in str(e.value)
