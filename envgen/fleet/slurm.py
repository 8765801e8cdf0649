"""Slurm: one job array per target (partition, GPUs and time limit are per job), each task
running `python -m envgen.fleet.task DIR` (envgen certify through the engine). Submitting
with `sbatch --parsable`, reading state with `sacct` (or, where accounting is off,
`scontrol show job` and the tasks' own result files), resubmitting failed indices."""
from __future__ import annotations

import functools
import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from ..core.errors import CheckFailed, EnvironmentMissing, InputError, shown
from .spec import Fleet
from .state import JOBS_SCHEMA, TASKS_SCHEMA, read_json

# --python lands in the script: a plain path or command name only
SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]{1,1024}")
# How a task finds its interpreter on the node, at run time (nothing of the submitting
# machine is written into the script): --python when given; else the Python beside the
# `envgen` the node finds on PATH (its venv's, also through pipx's link); else python3. The
# folder is $SLURM_SUBMIT_DIR: sbatch is run from the folder holding tasks.json.
FIND_PYTHON = [
    'if [ -z "${envgen_py:-}" ] && command -v envgen >/dev/null 2>&1; then',
    '  bin=$(dirname "$(readlink -f "$(command -v envgen)")")',
    '  if [ -x "$bin/python" ]; then envgen_py=$bin/python; fi',
    'fi',
    'envgen_py=${envgen_py:-python3}',
    'cd "${SLURM_SUBMIT_DIR:?submit this script with sbatch}"',
    'if [ ! -f tasks.json ]; then',
    '  echo "envgen fleet: $SLURM_SUBMIT_DIR holds no tasks.json: submit from the run folder'
    ' (cd RUN && sbatch slurm/TARGET.sbatch) or with envgen fleet --submit" >&2',
    '  exit 2',
    'fi',
    'if ! "$envgen_py" -c "import envgen" 2>/dev/null; then',
    '  echo "envgen fleet: $envgen_py cannot import envgen on $(hostname): put envgen on PATH'
    ' or write the scripts with envgen fleet --python PATH" >&2',
    '  exit 3',
    'fi',
]
SUBMITTED = "jobs.json"
# A target's job array numbers its tasks from 0 (its task's index in tasks.json less the
# target's first), and Slurm's default MaxArraySize (1001) takes array indices up to 1000.
MAX_ARRAY = 1000
FAILED = {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
WAITING = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
           "REQUEUE_FED", "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}


def _safe_path(p: Path | str, what: str) -> str:
    text = str(p)
    if not SAFE_PATH.fullmatch(text) or text.startswith("-"):
        raise InputError(f"{what} {shown(text)} must be a plain path (letters, digits and "
                         f"_ . / + -) for a Slurm batch script")
    return text


def task_table(fleet: Fleet, engine: str) -> list[dict]:
    """Each task as tasks.json keeps it: `index` over the whole fleet (its result file and
    jobs.json name it), `array_index` its task ID in its target's job array (from 0)."""
    tasks = fleet.tasks()
    first = {}
    for t in tasks:
        first.setdefault(t.target.name, t.index)
    return [{"index": t.index, "array_index": t.index - first[t.target.name], "name": t.name,
             "spec": t.stack.spec, "image": t.stack.image, "sif": t.stack.sif,
             "stack": t.resolved.stack, "target": t.target.name,
             "partition": t.target.partition, "gpus": t.target.gpus, "gpu": t.target.gpu,
             "multi_gpu": t.target.multi_gpu,
             "time": t.target.slurm_time, "level": t.target.level, "steps": t.target.steps,
             "certify_timeout": min(86400, max(60, t.target.seconds + 60)), "engine": engine,
             "script": f"slurm/{t.target.name}.sbatch"} for t in tasks]


def array_index(task: dict) -> int:
    """The task's ID in its job array (a folder written before arrays began at 0 numbered
    them over the whole fleet)."""
    return task.get("array_index", task["index"])


def _refuse_other_submissions(out: Path, tasks: list[dict]) -> None:
    """A folder whose jobs.json records submissions of other tasks is not written over:
    --collect would credit those jobs' results to the new fleet's tasks."""
    if not (out / "jobs.json").exists():
        return
    try:
        before = json.loads((out / "tasks.json").read_text())["tasks"]
    except (OSError, ValueError, KeyError, TypeError):
        before = None
    keys = ("index", "stack", "target", "level", "image", "sif", "script")
    if before is None or [{k: t.get(k) for k in keys} for t in before] != \
            [{k: t.get(k) for k in keys} for t in tasks]:
        raise InputError(f"-o {out}: its jobs.json records submissions of other tasks, whose "
                         f"results --collect would credit to these; give a new folder, or "
                         f"remove {out / 'jobs.json'} first", file=str(out))


def check(fleet: Fleet, engine: str = "docker") -> None:
    """What Slurm (and the engine) cannot take, refused at its line before anything is
    written or asked of the cluster."""
    if engine == "apptainer":   # each task certifies a SIF on the shared file system
        bare = next((s for s in fleet.stacks if not s.sif), None)
        if bare is not None:
            raise InputError(f"stack {bare.spec!r} has no `sif:`; the apptainer engine "
                             f"certifies a SIF (make one with `envgen sif IMAGE -o FILE.sif`)",
                             file=fleet.path, line=bare.line)
        multi = next((t for t in fleet.targets if t.multi_gpu), None)
        if multi is not None:
            raise InputError(f"target {multi.name!r}: gpus: {multi.gpus} asks for the "
                             f"multi-GPU certification, which envgen certify runs on Docker "
                             f"images, not on a SIF (give it gpus: 1, or use --engine docker)",
                             file=fleet.path, line=multi.gpus_line or multi.line)
    missing = [t for t in fleet.targets if not t.partition]
    if missing:
        raise InputError(f"target {missing[0].name!r} has no `partition:` (Slurm needs one)",
                         file=fleet.path, line=missing[0].line)
    if len(fleet.stacks) > MAX_ARRAY:
        raise InputError(f"{len(fleet.stacks)} stacks make each target's job array "
                         f"{len(fleet.stacks)} tasks, more than the {MAX_ARRAY} one array may "
                         f"hold under Slurm's default MaxArraySize (1001); split the stacks "
                         f"over several fleet files",
                         file=fleet.path, line=fleet.stacks[MAX_ARRAY].line or None)


def write(fleet: Fleet, out: Path, engine: str = "docker", python: str | None = None) -> dict:
    """DIR/tasks.json and DIR/slurm/TARGET.sbatch, one job array per target, numbered from
    0. The scripts name no path of this machine: logs/ is relative to the folder sbatch
    runs in, the folder is $SLURM_SUBMIT_DIR, the interpreter `python` (a path or command
    on the nodes) or the one FIND_PYTHON finds there."""
    from ..core.files import write_atomic
    check(fleet, engine)
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise InputError("-o names a file; it takes the folder to write the job scripts in",
                         file=str(out))
    if python is not None:
        python = _safe_path(python, "--python")
    tasks = task_table(fleet, engine)
    _refuse_other_submissions(out, tasks)
    (out / "slurm").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    (out / "results").mkdir(exist_ok=True)
    for old in (out / "slurm").glob("*.sbatch"):   # a target no longer in the fleet
        if old.name not in {f"{t.name}.sbatch" for t in fleet.targets}:
            old.unlink()
    doc = {"fleet": str(fleet.path), "fleet_sha256": fleet.sha256, "scheduler": "slurm",
           "tasks": tasks}
    write_atomic(out / "tasks.json", json.dumps(doc, indent=2) + "\n")
    scripts = []
    for t in fleet.targets:
        count = sum(x["target"] == t.name for x in tasks)
        source = Path(fleet.path).name   # a file name may hold a newline: not in a script
        source = f"; written from {source}" if re.fullmatch(r"[\w.+-]{1,100}", source) else ""
        lines = ["#!/bin/bash",
                 f"# envgen fleet: certify {count} stack(s) on target {t.name} "
                 f"(level {t.level}){source}",
                 f"#SBATCH --job-name=envgen-{t.name}",
                 f"#SBATCH --partition={t.partition}",
                 f"#SBATCH --time={t.slurm_time}",
                 f"#SBATCH --array=0-{count - 1}",
                 "#SBATCH --output=logs/%A_%a.out",
                 "#SBATCH --ntasks=1"]
        if t.gpus:
            lines.append(f"#SBATCH --gres=gpu:{t.gpus}")
        lines += ["set -eu"] + ([f"envgen_py={shlex.quote(python)}"] if python else []) \
            + FIND_PYTHON + [f'exec "$envgen_py" -m envgen.fleet.task "$SLURM_SUBMIT_DIR" '
                             f'--target {t.name}', ""]
        path = out / "slurm" / f"{t.name}.sbatch"
        write_atomic(path, "\n".join(lines))
        path.chmod(0o755)
        scripts.append(str(path))
    return {"folder": str(out), "scripts": scripts, "tasks": tasks}


# ---- the scheduler ------------------------------------------------------------------------

def _slurm(argv: list[str], timeout: float = 60, soft: bool = False,
           cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a Slurm client; a missing client or a controller that does not answer is
    EnvironmentMissing (exit 3), in one sentence. `soft`: a failure is the caller's to
    judge (sacct without a slurmdbd that answers)."""
    if shutil.which(argv[0]) is None:
        raise EnvironmentMissing(f"{argv[0]} is not installed: this host is not a Slurm "
                                 f"client (Debian: apt-get install slurm-client)")
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise EnvironmentMissing(f"{argv[0]} did not answer within {timeout:.0f} s (is "
                                 f"slurmctld up?)") from None
    if r.returncode != 0 and not soft:
        err = " ".join(r.stderr.split())[:300]
        if re.search(r"contact slurm controller|Connection refused|Socket timed out|"
                     r"Unable to establish|communication", err, re.I):
            raise EnvironmentMissing(f"the Slurm controller does not answer ({argv[0]}: "
                                     f"{err})")
    return r


def partitions() -> set[str]:
    r = _slurm(["sinfo", "--noheader", "--format=%R"])
    if r.returncode != 0:
        raise EnvironmentMissing(f"sinfo failed: {' '.join(r.stderr.split())[:300]}")
    return {p.strip() for p in r.stdout.split()}


def check_partitions(fleet: Fleet) -> None:
    known = partitions()
    for t in fleet.targets:
        if t.partition not in known:
            raise InputError(f"target {t.name!r}: partition {t.partition!r} is not one this "
                             f"cluster has (sinfo lists {', '.join(sorted(known)) or 'none'})",
                             file=fleet.path, line=t.partition_line or t.line)


def sbatch(script: str, indices: list[int] | None = None) -> str:
    """Submit a script of the folder from the folder (its $SLURM_SUBMIT_DIR)."""
    argv = ["sbatch", "--parsable"]
    if indices is not None:
        argv.append("--array=" + ",".join(str(i) for i in indices))
    path = Path(script)
    r = _slurm([*argv, str(Path(path.parent.name) / path.name)], cwd=path.parent.parent)
    if r.returncode != 0:
        err = " ".join(r.stderr.split())[:300]
        if re.search(r"invalid|not available|not permitted|denied", err, re.I):
            raise InputError(f"sbatch refused {Path(script).name}: {err}")
        raise EnvironmentMissing(f"sbatch failed for {Path(script).name}: {err}")
    job = r.stdout.strip().split(";")[0]
    if not job.isdigit():
        raise EnvironmentMissing(f"sbatch --parsable printed {shown(r.stdout.strip())}, "
                                 f"not a job ID")
    return job


MAX_RESULT = 16 << 20   # a task's certificate (certs.MAX_BYTES)


def load_folder(folder: Path, fleet: Fleet) -> dict:
    if folder.exists() and not folder.is_dir():
        raise InputError("not a folder: --collect and --resubmit-failed take the folder "
                         "`envgen fleet FILE --slurm -o DIR` wrote", file=str(folder))
    doc = read_json(folder / "tasks.json", None, TASKS_SCHEMA)
    if doc is None:
        raise InputError(f"{folder} holds no tasks.json: write it first with `envgen fleet "
                         f"FILE --slurm -o {folder}`")
    if doc.get("fleet_sha256") != fleet.sha256:
        raise InputError(f"{folder} was written from another version of {fleet.path}; write "
                         f"it again with -o")
    return doc


def submissions(folder: Path) -> list[dict]:
    """What was submitted from the folder (jobs.json), checked before it is used."""
    return read_json(folder / SUBMITTED, {"submissions": []}, JOBS_SCHEMA)["submissions"]


def record(folder: Path, entries: list[dict]) -> None:
    from ..core.files import write_atomic
    doc = {"submissions": submissions(folder) + entries}
    write_atomic(folder / SUBMITTED, json.dumps(doc, indent=2) + "\n")


def submit(folder: Path, fleet: Fleet) -> list[dict]:
    doc = load_folder(folder, fleet)
    check_partitions(fleet)
    done = []
    for script in sorted({t["script"] for t in doc["tasks"]}):
        indices = [t["index"] for t in doc["tasks"] if t["script"] == script]
        job = sbatch(str(folder / script))
        done.append({"script": script, "job_id": job, "indices": indices,
                     "submitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        record(folder, [done[-1]])
    return done


# ---- state --------------------------------------------------------------------------------

def _indices(text: str) -> list[int]:
    """'4', '5-7', '[5-7,9%2]' -> the indices."""
    out = []
    for part in text.strip("[]").split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def parse_sacct(text: str) -> dict[tuple[str, int], str]:
    """`sacct -n -P -X --format=JobID,State,ExitCode` -> {(array job, index): STATE}."""
    out = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 2 or "_" not in fields[0]:
            continue
        job, _, idx = fields[0].partition("_")
        state = fields[1].split()[0] if fields[1].split() else ""
        for i in _indices(idx):
            out[(job, i)] = state
    return out


def parse_scontrol(text: str) -> dict[tuple[str, int], str]:
    """`scontrol -o show job ID` (one line per task) -> {(array job, index): STATE}."""
    out = {}
    for line in text.splitlines():
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "ArrayJobId" in kv and "JobState" in kv:
            for i in _indices(kv.get("ArrayTaskId", "")):
                out[(kv["ArrayJobId"], i)] = kv["JobState"]
    return out


def scheduler_states(jobs: list[str]) -> tuple[dict[tuple[str, int], str], str]:
    """The state of every task of these array jobs, and where it came from."""
    if not jobs:
        return {}, "none"
    r = _slurm(["sacct", "--noheader", "--parsable2", "--allocations",
                "--format=JobID,State,ExitCode", "--jobs=" + ",".join(jobs)], soft=True)
    if r.returncode == 0:
        return parse_sacct(r.stdout), "sacct"
    # accounting off or slurmdbd down: the controller's memory of recent jobs
    out: dict = {}
    for job in jobs:
        s = _slurm(["scontrol", "--oneliner", "show", "job", job], soft=True)
        if s.returncode == 0:
            out.update(parse_scontrol(s.stdout))
        elif not re.search(r"invalid job id", s.stderr, re.I):   # not merely forgotten
            err = " ".join(s.stderr.split())[:300] or f"exit {s.returncode}"
            raise EnvironmentMissing(f"neither sacct nor scontrol could say the state of job "
                                     f"{job} (scontrol: {err}); is this a Slurm client with "
                                     f"its controller up?")
    return out, "scontrol"


def _result(folder: Path, index: int, job_id: str | None) -> tuple[dict | None, str | None]:
    """(the certificate task `index` wrote under array job `job_id`, None) when its result
    file holds one; (None, why) when it holds something else; (None, None) when there is
    none. A file an earlier submission left is not this one's. The file comes from the job
    on a shared file system: read bounded, as a regular file only (a FIFO or a link to a
    device is refused, not waited on)."""
    from ..core.files import read_regular
    from .task import result_name
    if job_id is None:
        return None, None
    path = folder / "results" / result_name(index, job_id)
    try:
        c = json.loads(read_regular(path, MAX_RESULT, "result file"))
    except FileNotFoundError:
        return None, None
    except InputError as e:
        return None, e.message
    except OSError as e:
        return None, f"its result file cannot be read ({e.strerror or e})"
    except (ValueError, RecursionError):
        return None, "its result file is not a certificate's JSON"
    return (c, None) if isinstance(c, dict) else (None, "its result file is not a "
                                                        "certificate's JSON object")


@functools.lru_cache(maxsize=1)
def _matrix():
    """The bundled matrix, loaded once per collect (load_matrix hashes its files and
    envgen's code to find its cache: once per task was that much work per task)."""
    from ..matrix import load_matrix
    return load_matrix()


def _seconds(utc) -> float | None:
    """2026-12-01T12:00:00Z (a certificate's `created`, a submission's `submitted`) as
    seconds since the epoch; None when it is not one."""
    from ..core.model import utc_seconds
    try:
        return utc_seconds(f"{str(utc)[:19]}Z", "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def _judged(cert: dict, task: dict, submitted: str | None = None) -> str | None:
    """Why a task's result may not count (cert_trust's judgement of every door, the task's
    own stack and image, and a run no older than its submission), or None."""
    from ..certs.certificate import SKEW_S, intrinsic_problem, names_image
    why = intrinsic_problem(cert)
    if why:
        return why
    stack = cert["stack"]["stack"]
    if stack != task["stack"]:
        return f"its certificate is of stack {stack}, not of task {task['index']}'s {task['stack']}"
    named = task.get("sif") or task.get("image")
    if named and not names_image(cert, named):
        return (f"its certificate is of image {cert['image_id'][:19]} "
                f"({', '.join(cert.get('image_tags') or []) or 'no tags'}), not of task "
                f"{task['index']}'s {named}")
    made, sent = _seconds(cert.get("created")), _seconds(submitted)
    if made is not None and sent is not None and made < sent - SKEW_S:
        return (f"its certificate was made at {cert['created']}, before the job was "
                f"submitted at {submitted}: it is not this job's run")
    if task.get("level") and cert.get("level") != task["level"]:
        return (f"its certificate is at level {cert.get('level')}, not the task's "
                f"{task['level']}")
    want = task.get("gpu")
    if want and task.get("level") != "cpu":   # the target's GPU, as the matrix names it
        from ..certs.certificate import gpus_of
        m = _matrix()
        ran = {(m.gpu(n).name if m.gpu(n) is not None else n) for n in gpus_of(cert)}
        if ran != {want}:
            return (f"its certificate ran on {', '.join(sorted(ran)) or 'no GPU'}, not on "
                    f"the target's {want}")
    return _multi_gpu_problem(cert, task) if task.get("multi_gpu") else None


def _multi_gpu_problem(cert: dict, task: dict) -> str | None:
    """Why a multi-GPU task's certificate is not its run: fewer GPUs than the target's, or
    no multi-GPU check that ran and passed (a payload that skips it certifies one GPU)."""
    from ..certs.certificate import gpus_of
    ran, want = len(gpus_of(cert)), task.get("gpus") or 2
    if ran < want:
        return f"its certificate ran on {ran} GPU(s), not on the target's {want}"
    report = cert.get("report") if isinstance(cert.get("report"), dict) else {}
    checks = [c for c in report.get("checks") or [] if isinstance(c, dict)
              and str(c.get("name", "")).startswith("multi_gpu")]
    if not checks or any(c.get("passed") is not True or c.get("skipped") for c in checks):
        return (f"its certificate holds no multi-GPU check that ran and passed, which the "
                f"target's gpus: {want} asks for")
    return None


def _verdict(state: str | None, sub, cert: dict | None, why: str | None) -> tuple[str, str]:
    if sub is None:
        return "missing", "never submitted"
    if state == "TIMEOUT":
        return "timed out", ""
    if state and state.startswith("CANCELLED") or state == "PREEMPTED":
        return "cancelled", ""
    if state in FAILED:
        return "failed", why or ""
    if state in WAITING:
        return "running", ""
    if why:
        return "failed", f"refused: {why}"
    if state is None:
        # a result file alone is not proof: the file system is shared and the scheduler,
        # not the file, says the job ran and ended
        return "missing", (f"the scheduler has no state for job {sub['job_id']} (forgotten, "
                           f"or never run); enable accounting (sacct) or collect sooner"
                           + (" (its result file claims a pass)" if cert else ""))
    if state == "COMPLETED" and cert is not None:
        return ("passed", "") if cert["passed"] else ("failed", "its certificate failed")
    if state == "COMPLETED":
        return "failed", "ended 0 without a certificate"   # not a pass
    return "missing", f"slurm state {state}"


def verdicts(folder: Path, fleet: Fleet) -> tuple[list[dict], str]:
    """Each task's verdict: passed, failed, timed out, cancelled, running or missing, with
    why. A task counts as passed only when the scheduler says it completed and its result
    file holds a certificate that passes the judgement every certificate entering a store
    gets (cert_trust) and is of the task's own stack."""
    doc = load_folder(folder, fleet)
    latest: dict[int, dict] = {}
    for s in submissions(folder):
        for i in s["indices"]:
            latest[i] = s
    states, source = scheduler_states(sorted({s["job_id"] for s in latest.values()}))
    out = []
    for t in doc["tasks"]:
        sub = latest.get(t["index"])
        state = states.get((sub["job_id"], array_index(t))) if sub else None
        cert, why = _result(folder, t["index"], sub["job_id"] if sub else None)
        if cert is not None:
            why = _judged(cert, t, sub.get("submitted") if sub else None)
            cert = None if why else cert
        verdict, reason = _verdict(state, sub, cert, why)
        out.append({"index": t["index"], "stack": t["stack"], "spec": t["spec"],
                    "target": t["target"], "verdict": verdict, "why": reason or None,
                    "state": state, "job_id": sub["job_id"] if sub else None,
                    "log": (f"{folder}/logs/{sub['job_id']}_{array_index(t)}.out"
                            if sub else None),
                    "script": t["script"], "array_index": array_index(t)})
    return out, source


def store_passed(folder: Path, rows: list[dict]) -> list[str]:
    """Copy each passing certificate into the local store (certs.store, which judges it
    again). A store that fails (a full disk) is exit 3, naming what was stored."""
    from ..certs import store as certs
    stored = []
    sent = {s["job_id"]: s.get("submitted") for s in submissions(folder)}
    tasks = {t["index"]: t for t in
             read_json(folder / "tasks.json", {"tasks": []}, TASKS_SCHEMA)["tasks"]}
    for row in rows:
        if row["verdict"] != "passed":
            continue
        cert, _ = _result(folder, row["index"], row["job_id"])
        why = "its result file changed while collected" if cert is None else \
            _judged(cert, {**tasks.get(row["index"], {}), **row}, sent.get(row["job_id"]))
        if why:
            row["verdict"], row["why"] = "failed", f"refused: {why}"
            continue
        cert.pop("_path", None)
        try:
            row["certificate"] = str(certs.store(cert)[1])
        except CheckFailed as e:
            row["verdict"], row["why"] = "failed", f"refused: {e.message}"
            continue
        except OSError as e:
            raise EnvironmentMissing(
                f"the store could not take task {row['index']}'s certificate "
                f"({e.strerror or e}): {len(stored)} certificate(s) were stored before it, "
                f"it and the tasks after it were not; run the same --collect again",
                file=str(certs.state.certs_dir()), output={"stored": stored}) from None
        stored.append(row["certificate"])
    return stored


def resubmit_failed(folder: Path, fleet: Fleet) -> list[dict]:
    """Send back each script's failed and timed-out tasks: sbatch is given their array
    IDs, jobs.json their task indices."""
    rows, _ = verdicts(folder, fleet)
    done = []
    for script in sorted({r["script"] for r in rows}):
        again = [r for r in rows if r["script"] == script
                 and r["verdict"] in ("failed", "timed out")]
        if again:
            job = sbatch(str(folder / script), [r["array_index"] for r in again])
            done.append({"script": script, "job_id": job,
                         "indices": [r["index"] for r in again],
                         "submitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            record(folder, [done[-1]])
    return done
