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

from ..core.errors import EnvgenError, InputError, named, shown

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


USAGE = "python -m envgen.fleet.task DIR [INDEX | --target NAME]"


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def problems(task: dict) -> list[str]:
    """What a task of tasks.json lacks of the values its certify command takes (whole
    numbers: a schema's integer would take 90.0)."""
    from .spec import LEVELS
    engine = task.get("engine", "docker")
    found = []
    if engine not in ENGINES:
        found.append(f"engine {shown(engine)} is not one of {', '.join(ENGINES)}")
    if task.get("level") not in LEVELS:
        found.append(f"level {shown(task.get('level'))} is not one of {', '.join(LEVELS)}")
    if not _whole(task.get("certify_timeout")):
        found.append("it has no certify_timeout (a whole number of seconds)")
    if task.get("steps") is not None and not _whole(task["steps"]):
        found.append(f"steps {shown(task['steps'])} is not a whole number")
    if engine == "apptainer" and not task.get("sif"):
        found.append("it has no sif to certify")
    return found


def argv(task: dict, python: str = sys.executable) -> list[str]:
    """The certify command of a task (one problems() passes), as an argument list."""
    engine = task.get("engine", "docker")
    cmd = [python, "-m", "envgen", "certify", "--json",
           "--gpus", "none" if task["level"] == "cpu" else "all",
           "--timeout", str(task["certify_timeout"])]
    if task.get("steps"):
        cmd += ["--steps", str(task["steps"])]
    if task.get("multi_gpu"):   # a CUDA target of several GPUs certifies them together
        cmd.append("--multi-gpu")
    if engine == "apptainer":
        return [*cmd, "--", task["sif"]]
    return [*cmd, "--", task["image"] or task["spec"]]


def find(tasks: list[dict], index: int, target: str | None = None) -> dict | None:
    """Task `index` of the fleet, or with `target` the task of that target's job array
    whose array ID is `index` (a folder written before arrays counted from 0 has none)."""
    if target is None:
        return next((t for t in tasks if t["index"] == index), None)
    return next((t for t in tasks if t["target"] == target
                 and t.get("array_index", t["index"]) == index), None)


def _read_tasks(folder: Path) -> list[dict]:
    """DIR/tasks.json's tasks, read as --collect reads them (state.read_json): InputError
    (exit 2) naming the folder or the file when it is not what `envgen fleet` wrote."""
    from .state import TASKS_SCHEMA, read_json
    if not folder.is_dir():
        raise InputError(f"{named(str(folder))} is not a folder: give the folder `envgen "
                         f"fleet FILE --slurm -o DIR` wrote")
    doc = read_json(folder / "tasks.json", None, TASKS_SCHEMA)
    if doc is None:
        raise InputError(f"{named(str(folder))} holds no tasks.json: write it with `envgen "
                         f"fleet FILE --slurm -o DIR`")
    return doc["tasks"]


def load(folder: Path, index: int, target: str | None = None) -> dict:
    """The task to run, from DIR/tasks.json (_read_tasks), holding what argv() reads;
    InputError (exit 2) naming the file otherwise."""
    path = folder / "tasks.json"
    task = find(_read_tasks(folder), index, target)
    if task is None:
        which = f"array task {index} of target {target}" if target else f"task {index}"
        raise InputError(f"no {which} in it", file=str(path))
    found = problems(task)
    if found:
        more = f" (and {len(found) - 1} more problem(s))" if len(found) > 1 else ""
        raise InputError(f"not envgen's fleet state: task {task['index']}: {found[0]}{more}",
                         file=str(path))
    return task


def run(folder: Path, index: int, target: str | None = None) -> int:
    try:
        task = load(folder, index, target)
    except EnvgenError as e:
        print(f"envgen fleet task: {e}", file=sys.stderr)
        return e.exit_code
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
    if not args or not args[0] or len(args) > 3 or (len(args) == 3 and args[1] != "--target"):
        print(f"envgen fleet task: usage: {USAGE} (INDEX: else SLURM_ARRAY_TASK_ID)",
              file=sys.stderr)
        return 2
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
