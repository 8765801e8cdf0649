"""One task of a fleet run, inside the scheduler's job: `python -m envgen.fleet.task DIR
INDEX`, or `DIR --target NAME` (the task of target NAME whose array ID is
$SLURM_ARRAY_TASK_ID: each target's job array counts from 0). Runs `envgen certify` on the
task's stack (every value from DIR/tasks.json, passed as argv: no shell sees it), writes
the certificate as one compact JSON line to DIR/results/INDEX-JOB.json (INDEX: the task's
index in tasks.json) and prints it in the log as `envgen-certificate: {...}`; exits with
certify's exit code."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

LINE_PREFIX = "envgen-certificate: "
ENGINES = ("docker", "apptainer")   # apptainer: `envgen certify FILE.sif` (no daemon)


def certificate_line(cert: dict) -> str:
    """The one line `envgen certs import` reads from a log."""
    return LINE_PREFIX + json.dumps(cert, separators=(",", ":"), sort_keys=True)


def result_name(index: int, job: str | None = None) -> str:
    """INDEX-JOB.json: the array job in the name, so that a result an earlier submission
    left is never read as this one's."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID", "") if job is None else job
    return f"{index}-{job or 'nojob'}.json"


def argv(task: dict, python: str = sys.executable) -> list[str]:
    """The certify command of a task, as an argument list."""
    engine = task.get("engine", "docker")
    if engine not in ENGINES:
        raise SystemExit(f"envgen fleet task: engine {engine!r} is not supported here")
    cmd = [python, "-m", "envgen", "certify", "--json",
           "--gpus", "none" if task["level"] == "cpu" else "all",
           "--timeout", str(task["certify_timeout"])]
    if task.get("steps"):
        cmd += ["--steps", str(task["steps"])]
    if task.get("multi_gpu"):   # a CUDA target of several GPUs certifies them together
        cmd.append("--multi-gpu")
    if engine == "apptainer":
        if not task.get("sif"):
            raise SystemExit(f"envgen fleet task: task {task['index']} has no sif to certify")
        return [*cmd, "--", task["sif"]]
    return [*cmd, "--", task["image"] or task["spec"]]


def find(tasks: list[dict], index: int, target: str | None = None) -> dict | None:
    """Task `index` of the fleet, or with `target` the task of that target's job array
    whose array ID is `index` (a folder written before arrays counted from 0 has none)."""
    if target is None:
        return next((t for t in tasks if t["index"] == index), None)
    return next((t for t in tasks if t["target"] == target
                 and t.get("array_index", t["index"]) == index), None)


def run(folder: Path, index: int, target: str | None = None) -> int:
    tasks = json.loads((folder / "tasks.json").read_text())["tasks"]
    task = find(tasks, index, target)
    if task is None:
        which = f"array task {index} of target {target}" if target else f"task {index}"
        print(f"envgen fleet task: no {which} in {folder}/tasks.json", file=sys.stderr)
        return 2
    index = task["index"]
    print(f"envgen fleet task {index}: {task['spec']} on {task['target']} "
          f"(level {task['level']})", file=sys.stderr, flush=True)
    proc = subprocess.Popen(argv(task), stdout=subprocess.PIPE, text=True)

    def forward(signum, _frame):   # the scheduler's SIGTERM: certify cleans up, then we end
        proc.send_signal(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    out, _ = proc.communicate()
    code = proc.returncode
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    results = folder / "results"
    results.mkdir(exist_ok=True)
    if isinstance(doc, dict) and "image_id" in doc:
        doc.pop("_path", None)
        doc.pop("schema_version", None)
        line = certificate_line(doc)
        tmp = results / f".{index}.json.tmp"
        tmp.write_text(line[len(LINE_PREFIX):] + "\n")
        os.replace(tmp, results / result_name(index))
        print(line, flush=True)
    elif isinstance(doc, dict):
        print(f"envgen fleet task {index}: certify exited {code}: {doc.get('message')}",
              file=sys.stderr)
    else:
        print(f"envgen fleet task {index}: certify exited {code} without a certificate",
              file=sys.stderr)
    return code if code >= 0 else 128 - code


def main(args: list[str]) -> int:
    folder, target = Path(args[0]), None
    if args[1:2] == ["--target"] and len(args) == 3:
        target, args = args[2], args[:1]
    index = args[1] if len(args) > 1 else os.environ.get("SLURM_ARRAY_TASK_ID", "")
    if not index.isdigit():
        print("envgen fleet task: no task index (argument or SLURM_ARRAY_TASK_ID)",
              file=sys.stderr)
        return 2
    return run(folder, int(index), target)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
