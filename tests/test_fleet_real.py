"""Fleet certification for real: a single-node Slurm cluster on this machine (munged,
slurmctld, slurmd from Debian's slurm-wlm, started by the fixture and stopped after) runs
the job arrays `envgen fleet --slurm` writes: jax-cpu certified at level cpu through
Docker, a task that fails (its image is not there) and one killed at a one-minute time
limit; `--resubmit-failed` sends only those two indices back. And a Kubernetes Job's
container, as the manifest says it, run with Docker (there is no cluster here)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import services
import yaml
from services import SMALL_TAG, docker, envgen

pytestmark = pytest.mark.docker
TAG = SMALL_TAG
FLEET = f"""\
stacks:
  - {{spec: jax-cpu, image: "{TAG}"}}
  - {{spec: jax-cpu, image: "envgen-test/fleet-never-built:none"}}
targets:
  - name: cpu
    partition: cpu
    level: cpu
    time: 10m
  - name: tiny
    partition: short
    level: cpu
    time: 1m
    steps: 1000000
"""


@pytest.fixture(scope="module")
def jax_cpu(built_small):
    """jax-cpu built once for the session (conftest `built_small`: the smallest stack)."""
    return built_small


@pytest.fixture(scope="module")
def cluster():
    with services.slurm_cluster() as s:
        yield s


def test_a_job_array_certifies_and_reports_fails_and_timeouts(jax_cpu, cluster, home,
                                                              tmp_path):
    # the tasks find envgen as a user's shell does: its venv's bin on PATH (sbatch passes
    # the submitting environment on); the scripts name no path of this machine
    import sys
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = {**cluster.env, "ENVGEN_HOME": home, "PATH": path}
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    run = tmp_path / "run"
    started = time.monotonic()
    r = envgen("fleet", str(fleet), "--slurm", "-o", str(run), "--submit", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    script = (run / "slurm/cpu.sbatch").read_text()
    assert str(tmp_path) not in script and sys.executable not in script
    jobs = json.loads(r.stdout)["submitted"]
    assert [j["indices"] for j in jobs] == [[0, 1], [2, 3]]
    while time.monotonic() - started < 240:
        time.sleep(5)
        r = envgen("fleet", str(fleet), "--slurm", "--collect", str(run), "--json", env=env)
        out = json.loads(r.stdout)
        if not out["counts"]["running"] and not out["counts"]["missing"]:
            break
    verdicts = {t["index"]: t["verdict"] for t in out["tasks"]}
    assert verdicts == {0: "passed", 1: "failed", 2: "timed out", 3: "failed"}, out
    assert r.returncode == 1 and out["state_from"] == "scontrol"   # no slurmdbd: no sacct
    # the passing certificate: in the store, in its result file and as its log's line
    (stored,) = out["stored"]
    cert = json.loads(Path(stored).read_text())
    assert cert["passed"] and cert["level"] == "cpu" and cert["image_id"] == jax_cpu["image_id"]
    log = Path(out["tasks"][0]["log"]).read_text()
    (line,) = [x for x in log.splitlines() if x.startswith("envgen-certificate: ")]
    (body,) = (run / f"results/0-{jobs[0]['job_id']}.json").read_text().splitlines()
    assert json.loads(line.removeprefix("envgen-certificate: ")) == json.loads(body)
    assert "TIME LIMIT" in Path(out["tasks"][2]["log"]).read_text()
    # a forged pass: the job really completed, but its result file (on the shared file
    # system, written by the job) now claims a pass its own checks and exit code refute
    result = run / f"results/0-{jobs[0]['job_id']}.json"
    forged = json.loads(body)
    forged["report"]["checks"][0]["passed"] = False
    forged["exit_code"], forged["created"] = 1, time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                             time.gmtime())
    before = sorted(Path(home, "certs").rglob("*.json"))
    result.write_text(json.dumps(forged) + "\n")
    r = envgen("fleet", str(fleet), "--slurm", "--collect", str(run), "--json", env=env)
    row = json.loads(r.stdout)["tasks"][0]
    assert r.returncode == 1 and row["state"] == "COMPLETED" and row["verdict"] == "failed"
    assert "claims a pass but its check" in row["why"]
    assert sorted(Path(home, "certs").rglob("*.json")) == before   # nothing of it stored
    result.write_text(body + "\n")
    # the timed-out task's container goes with it (Slurm marks TIMEOUT as it signals)
    for _ in range(60):
        ps = docker("ps", "-aq", "--filter", "label=io.envgen.certify", "--filter",
                    f"ancestor={TAG}")
        if not ps.stdout.strip():
            break
        time.sleep(0.5)
    assert ps.stdout.strip() == ""
    r = envgen("fleet", str(fleet), "--slurm", "--resubmit-failed", str(run), "--json",
               env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    again = json.loads(r.stdout)["resubmitted"]
    assert [(j["script"], j["indices"]) for j in again] == [
        ("slurm/cpu.sbatch", [1]), ("slurm/tiny.sbatch", [2, 3])]
    full = {**os.environ, **cluster.env}
    ids = {t["index"]: t["array_index"]   # each target's array counts from 0
           for t in json.loads((run / "tasks.json").read_text())["tasks"]}
    for j in again:   # only those tasks went back (by their array IDs); stop them
        q = subprocess.run(["squeue", "-h", "-r", "-j", j["job_id"], "-o", "%K"],
                           capture_output=True, text=True, env=full)
        assert sorted(int(x) for x in q.stdout.split()) == [ids[i] for i in j["indices"]], q
        subprocess.run(["scancel", j["job_id"]], env=full, check=True)
    time.sleep(2)
    out = json.loads(envgen("fleet", str(fleet), "--slurm", "--collect", str(run), "--json",
                            env=env).stdout)
    assert [t["verdict"] for t in out["tasks"]] == ["passed", "cancelled", "cancelled",
                                                    "cancelled"], out


def test_an_unknown_partition_and_a_stopped_controller(cluster, tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("stacks: [jax-cpu]\ntargets:\n  - name: a\n    partition: nosuch\n"
                     "    level: cpu\n")
    r = envgen("fleet", str(fleet), "--slurm", "-o", str(tmp_path / "run"), "--submit",
               env=cluster.env)
    assert r.returncode == 2 and "fleet.yaml:4" in r.stderr and "cpu, short" in r.stderr, \
        r.stderr
    conf = cluster.root / "down.conf"   # a controller nobody listens for
    text = Path(cluster.env["SLURM_CONF"]).read_text()
    port = services.free_port()
    import re
    conf.write_text(re.sub(r"SlurmctldPort=\d+", f"SlurmctldPort={port}", text))
    fleet.write_text("stacks: [jax-cpu]\ntargets:\n  - name: a\n    partition: cpu\n"
                     "    level: cpu\n")
    t0 = time.monotonic()
    r = envgen("fleet", str(fleet), "--slurm", "-o", str(tmp_path / "run"), "--submit",
               env={"SLURM_CONF": str(conf)}, timeout=200)
    assert r.returncode == 3 and "does not answer" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and time.monotonic() - t0 < 150


def test_a_kubernetes_jobs_container_certifies_as_its_manifest_says(jax_cpu, tmp_path):
    """No cluster: the container of the manifest, run by Docker with what the pod spec asks
    (its user, a read-only root, /tmp and /dev/shm as emptyDirs, no capabilities, no
    privilege escalation, its command and environment), must print a passing certificate."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f'stacks:\n  - {{spec: jax-cpu, image: "{TAG}"}}\ntargets:\n'
                     f'  - name: cpu\n    level: cpu\n    time: 10m\n')
    r = envgen("fleet", str(fleet), "--kubernetes", "-o", str(tmp_path / "k8s"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (m,) = json.loads(r.stdout)["manifests"]
    job = yaml.safe_load(Path(m["path"]).read_text())
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c["securityContext"]
    argv = ["docker", "run", "--rm", "--network", "none",
            "--user", f"{sc['runAsUser']}:{sc['runAsGroup']}", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--shm-size", "8g", "--tmpfs", "/tmp"]
    if sc.get("readOnlyRootFilesystem"):
        argv.append("--read-only")
    for e in c["env"]:
        if "value" in e:
            argv += ["-e", f"{e['name']}={e['value']}"]
    argv += ["-e", "CERTIFY_NODE=docker", "--entrypoint", c["command"][0], c["image"],
             *c["command"][1:]]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    lines = [x for x in r.stdout.splitlines() if x.startswith("envgen-certificate: ")]
    assert r.returncode == 0 and len(lines) == 1, r.stdout[-2000:] + r.stderr[-2000:]
    cert = json.loads(lines[0].removeprefix("envgen-certificate: "))
    assert cert["passed"] and cert["level"] == "cpu" and cert["image_id"] == jax_cpu["image_id"]
    assert cert["payload"]["sha256"] and cert["stack"]["stack"] == "jax-cpu"
    assert cert["host"]["node"] == "docker"
