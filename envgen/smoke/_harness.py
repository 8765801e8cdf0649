"""What every envgen smoke payload shares: options, the report, checks, exit codes, nvidia-smi.

Standard library only. Images carry it beside the payloads (/opt/envgen/_harness.py, imported
as `_harness` by a payload run as a script); in the package it is envgen.smoke._harness.
A payload describes itself with `Payload` and hands over to `main` / `run`. Exactly one JSON
report goes to stdout (logs to stderr); exit 0 when every check passed, 1 when any failed,
2 on bad arguments.
"""
# ruff: noqa: BLE001  (catching everything is the point: a failing check is reported, never a crash)
import argparse
import contextlib
import dataclasses
import functools
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
import traceback

T_START = time.monotonic()  # a script imports the harness first: its --timeout counts from here
LOSS_RATIO_MAX = 0.7  # mean of the last few losses < 0.7 x mean of the first few
EXPECT_KEYS = ("framework", "cuda", "cudnn", "nccl")
OOM_ADVICE = ("out of memory: lower --batch, use mixed precision, or free the GPU "
              "(nvidia-smi lists other processes)")
CHILDREN = []  # processes a payload started, killed if the overall --timeout fires


@dataclasses.dataclass(frozen=True)
class Payload:
    """One payload as the harness sees it. `name` is "<framework>_smoke" (envgen's stack.smoke
    names the file): the report's "payload", the log prefix, and through the part before
    "_smoke" the versions entry that --expect's "framework" is compared with; a payload of a
    framework over another's base is "<framework>_<base>_smoke" (keras_torch_smoke: keras)."""
    name: str
    description: str
    run_into: object  # run_into(rep, opts, deadline): appends the payload's checks to rep
    versions: tuple  # the report's "versions" keys after "python", null until read
    add_options: object = None  # add_options(parser): the payload's own options
    version: int = 1  # the report's payload_version: bumped when its format changes


def log(name, msg):
    print(f"[{name} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------- arguments
class BadArguments(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadArguments(message)


def expect_arg(text):
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    unknown = set(value) - set(EXPECT_KEYS) - {"packages"}
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown key(s) {sorted(unknown)}")
    versions = [v for k, v in value.items() if k != "packages"]
    packages = value.get("packages") or {}
    if not isinstance(packages, dict):
        raise argparse.ArgumentTypeError('"packages" maps distribution names to versions')
    versions += list(packages.values())
    if any(v is not None and not isinstance(v, str) for v in versions):
        raise argparse.ArgumentTypeError('versions are strings or null (quote them: "12.1")')
    return value


def number(cast, low):
    def parse(text):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value >= low:
            raise argparse.ArgumentTypeError(f"must be >= {low}")
        return value
    return parse


def build_parser(payload):
    p = _Parser(prog=f"{payload.name}.py", description=payload.description)
    p.add_argument("--expect", type=expect_arg, default={},
                   help='JSON object with "framework", "cuda", "cudnn", "nccl" (each optional) '
                        'and "packages": {"distribution": "version", ...}')
    p.add_argument("--require", choices=("cuda", "cpu", "auto"), default="auto",
                   help="cuda: a GPU was requested, training on the CPU fails; auto: cuda if any")
    p.add_argument("--steps", type=number(int, 6), default=None,
                   help="training steps (default 30, 12 with --quick)")
    p.add_argument("--batch", type=number(int, 1), default=64)
    p.add_argument("--multi-gpu", action="store_true",
                   help="NCCL all-reduce and DDP when more than one GPU is visible")
    p.add_argument("--timeout", type=number(float, 1.0), default=600.0,
                   help="overall budget in seconds")
    p.add_argument("--quick", action="store_true", help="fewer steps, less data")
    p.add_argument("--measure", choices=("basic", "full"), default="basic",
                   help="full: also the habits of a training run (telemetry under load, "
                        "host-to-device bandwidth, loader rates, memory peaks)")
    if payload.add_options:
        payload.add_options(p)
    return p


def train_steps(opts):
    return opts.steps or (12 if opts.quick else 30)


# ---------------------------------------------------------------------------------- report, checks
def new_report(payload, require):
    return {"payload": payload.name, "payload_version": payload.version, "level": None,
            "require": require, "passed": False, "checks": [],
            "versions": dict({"python": platform.python_version()},
                             **dict.fromkeys(payload.versions)),
            "device": {"name": None, "compute_capability": None, "count": 0,
                       "memory_total_mib": None},
            "metrics": {}, "telemetry": {}, "multi_gpu": None, "errors": []}


def check(rep, name, passed, detail, **extra):
    rep["checks"].append(dict({"name": name, "passed": bool(passed), "detail": detail}, **extra))
    word = ("SKIP" if extra.get("skipped") else "PASS") if passed else "FAIL"
    log(rep["payload"], f"{word} {name}: {detail}")


def tally(checks):
    """The one way envgen counts checks: "5 passed, 7 skipped, 0 failed". A skipped check is
    one that did not apply (a GPU check on the CPU); one that should have run and could not
    is failed, never skipped."""
    failed = sum(1 for c in checks if not c.get("passed"))
    skipped = sum(1 for c in checks if c.get("passed") and c.get("skipped"))
    passed = len(checks) - failed - skipped
    return f"{passed} passed, {skipped} skipped, {failed} failed"


def skip(rep, name, why):
    """Not applicable: passes, except when a GPU was required and we are not on one."""
    gpu_missing = rep["require"] == "cuda" and rep["level"] != "cuda"
    if gpu_missing:
        why += " (--require cuda: a GPU check that cannot run fails)"
    check(rep, name, not gpu_missing, why, skipped=True)


def guarded(rep, name, fn, *args, oom=None):
    """Run check `fn(rep, *args)`; an exception becomes a failed check. `oom(exc)` says whether
    it was out-of-memory (and frees what it can): the message then gives advice."""
    try:
        return fn(rep, *args)
    except Exception as exc:
        log(rep["payload"], traceback.format_exc())
        message = f"{type(exc).__name__}: {str(exc).strip()[:500]}"
        if oom is not None and oom(exc):
            message = f"{OOM_ADVICE} [{message}]"
        check(rep, name, False, message)
        rep["errors"].append(f"{name}: {message}")
        return None



def cpu_why(rep):
    """Why the GPU-only checks do not apply: the CPU was asked for, or there is no GPU."""
    return "CPU level (--require cpu)" if rep["require"] == "cpu" else "no GPU: CPU level"


def nvidia_smi_check(rep):
    """nvidia-smi: where a GPU was required it always runs (it tells why one is missing),
    elsewhere it is a GPU-only check."""
    if rep["require"] == "cuda":
        return guarded(rep, "nvidia_smi", check_nvidia_smi)
    return gpu_check(rep, "nvidia_smi", check_nvidia_smi)


def gpu_check(rep, name, fn, *args, oom=None):
    """A GPU-only check: it runs where training uses the GPU, and is "not applicable" elsewhere."""
    if rep["level"] == "cuda":
        return guarded(rep, name, fn, *args, oom=oom)
    return skip(rep, name, cpu_why(rep))

def loss_trend(losses):
    """(first, last, ratio, ok): means of the first and last few losses; ok when ratio < 0.7."""
    k = max(1, min(5, len(losses) // 4))
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    ratio = last / first if first > 0 else float("inf")
    return first, last, ratio, all(math.isfinite(v) for v in losses) and ratio < LOSS_RATIO_MAX


def trend(first, last, ratio):
    return f"loss {first:.3f} -> {last:.3f} (ratio {ratio:.2f}, must be < {LOSS_RATIO_MAX})"


def check_loss(rep, name, losses, how, prefix="", ok=True):
    """A training check: the losses fell (and `ok`, what else `how` says the check needs);
    metrics `{prefix}loss_first`, `_last` and `_ratio` record them."""
    first, last, ratio, fell = loss_trend(losses)
    rep["metrics"].update({f"{prefix}loss_first": first, f"{prefix}loss_last": last,
                           f"{prefix}loss_ratio": ratio})
    check(rep, name, fell and ok, f"{how}, {len(losses)} steps: {trend(first, last, ratio)}",
          loss_first=first, loss_last=last, loss_ratio=ratio)
    return fell and ok


def untrained(rep, *names):
    """The checks of a trained model, failed (not skipped) because training failed."""
    for name in names:
        check(rep, name, False, "no trained model (training failed)")


def import_framework(rep, name, importer):
    """`importer()`'s module, its __version__ in versions[name]; None where it raised (a failed
    `<name>_import` check, while the other checks still say what the image holds)."""
    try:
        module = importer()
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        rep["errors"].append(f"import {name}: {error}")
        check(rep, f"{name}_import", False, f"import {name} failed: {error}")
        return None
    rep["versions"][name] = module.__version__
    return module


def folder_bytes(path):
    """The size of a checkpoint saved as a folder."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def clean(value):  # NaN and inf are not JSON
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    return [clean(v) for v in value] if isinstance(value, (list, tuple)) else value


def finish(rep):
    rep["passed"] = bool(rep["checks"]) and all(c["passed"] for c in rep["checks"])
    return rep


# ---------------------------------------------------------------------------------- versions
def version_matches(actual, wanted, parts):
    """parts None: equal without +local; else the first `parts` dot-components `wanted` has."""
    if actual is None:
        return False
    a, w = str(actual).split("+")[0].split("."), str(wanted).split("+")[0].split(".")
    return a == w if parts is None else a[:min(parts, len(w))] == w[:parts]


def check_versions(rep, expect):
    """--expect's versions against those the payload read at run time (not the pinned ones)."""
    v = rep["versions"]
    framework = rep["payload"].rsplit("_smoke", 1)[0].split("_", 1)[0]
    rules = {"framework": (v.get(framework), None), "cuda": (v.get("cuda"), 2),
             "cudnn": (v.get("cudnn"), 3), "nccl": (v.get("nccl"), 3)}
    notes, bad = [], 0
    for key in EXPECT_KEYS:
        if (expect or {}).get(key) is not None:
            actual, parts = rules[key]
            ok = version_matches(actual, expect[key], parts)
            bad += not ok
            verdict = "matches" if ok else "MISMATCH, expected"
            notes.append(f"{key} {actual} {verdict} {expect[key]}")
    check(rep, "versions", bad == 0, "; ".join(notes) or "no --expect given", mismatches=bad)


def installed_version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_packages(rep, wanted):
    """Each distribution's installed version equals the expected one, +local aside."""
    bad = [f"{dist} {installed_version(dist) or 'not installed'}, expected {version}"
           for dist, version in sorted(wanted.items())
           if not version_matches(installed_version(dist), version, None)]
    check(rep, "packages", not bad,
          "; ".join(bad) or f"{len(wanted)} distribution(s) at the expected versions",
          mismatches=len(bad))


def check_expect(rep, expect, unexposed=None):
    """The versions check; the packages check too where --expect lists packages. A value the
    framework does not expose here (`unexposed`: key -> why) is null, and the versions check
    says it was not compared instead of failing."""
    expect, notes = dict(expect or {}), []
    for key in ("cuda", "cudnn", "nccl"):
        if expect.get(key) is not None and key in (unexposed or {}):
            notes.append(f"{key} expected {expect[key]} not compared: {unexposed[key]}")
            expect[key] = None
    guarded(rep, "versions", check_versions, expect)
    if expect.get("packages") is not None:
        guarded(rep, "packages", check_packages, expect["packages"])
    found = [c for c in rep["checks"] if c["name"] == "versions"]
    if notes and found:
        versions = found[-1]
        versions["detail"] = "; ".join(
            ([] if versions["detail"] == "no --expect given" else [versions["detail"]]) + notes)
        versions["not_compared"] = [n.split(" ", 1)[0] for n in notes]
        log(rep["payload"], f"versions: {'; '.join(notes)}")


# ------------------------------------------------------------------------------ loaded libraries
def fmt_code(v, big):
    """cuDNN >= 9 and NCCL >= 2.9 encode MMmmpp (90100 = 9.1.0); older ones Mmpp (8902 = 8.9.2)."""
    if not isinstance(v, int) or v <= 0:
        return None
    major, rest = (v // 10000, v % 10000) if v >= big else (v // 1000, v % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def fmt_cuda(v):
    """CUDA's 1000 * major + 10 * minor: 13000 = 13.0, 12080 = 12.8."""
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else None


def mapped_libraries(prefix):
    """Paths of the shared libraries named `prefix`* mapped into this process."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
            if os.path.basename(path).startswith(prefix) and path not in found:
                found.append(path)
    return found


@functools.lru_cache(maxsize=None)
def library_index(prefix):
    """Shared library name -> [(distribution, real path)] over the installed distributions
    named `prefix`* (NVIDIA's wheels; reading every file list takes seconds in a big image)."""
    index = {}
    with contextlib.suppress(Exception):
        for dist in importlib.metadata.distributions():
            name = dist.metadata["Name"] or ""
            if name.lower().startswith(prefix):
                for f in (f for f in dist.files or () if ".so" in f.name):
                    with contextlib.suppress(Exception):
                        where = os.path.realpath(dist.locate_file(f))
                        index.setdefault(f.name, []).append((f"{name} {dist.version}", where))
    return index


def distribution_of(path, prefix="nvidia"):
    """'name version' of the installed distribution (named `prefix`*) that holds `path`."""
    real = os.path.realpath(path)
    found = [label for label, where in library_index(prefix).get(os.path.basename(path), ())
             if where == real]
    return found[0] if found else None


def mapped_where(prefix):
    """'; libX.so mapped from DIR (its distribution)', or '' where none is mapped."""
    paths = mapped_libraries(prefix)
    if not paths:
        return ""
    dist = distribution_of(paths[0])
    return f"; {os.path.basename(paths[0])} mapped from {os.path.dirname(paths[0])}" + (
        f" ({dist})" if dist else "")


# ---------------------------------------------------------------------------------- nvidia-smi
def smi(query, timeout):
    """Rows of `nvidia-smi --query-gpu=QUERY --format=csv,noheader,...` as lists of strings."""
    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[:300]}")
    return [[c.strip() for c in line.split(",")] for line in out.stdout.strip().splitlines()]


def check_nvidia_smi(rep):
    try:
        rows = smi("name,driver_version", 30)
    except (OSError, subprocess.TimeoutExpired, RuntimeError) as exc:
        return check(rep, "nvidia_smi", False, f"nvidia-smi failed: {exc}")
    rep["versions"]["driver"] = rows[0][-1]
    return check(rep, "nvidia_smi", True,
                 f"{len(rows)} GPU(s), {rows[0][0]}, driver {rows[0][-1]}", gpus=len(rows))


class Telemetry:
    """nvidia-smi every `interval` s in a thread; a sample is the max over the GPUs it lists.
    Each field's min, median, max and mean; with the SM clock and the clock event (throttle)
    reasons where this nvidia-smi knows them, and `warnings` when the GPU was throttled or
    idle most of the time."""
    FIELDS = (("utilization.gpu", "utilization_gpu_pct"), ("memory.used", "memory_used_mib"),
              ("power.draw", "power_draw_w"), ("temperature.gpu", "temperature_c"))
    # newer drivers call them clock event reasons; older ones throttle reasons
    EXTRA = (("clocks.sm", "sm_clock_mhz"),)
    REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")

    def __init__(self, interval=0.5):
        self.interval, self.samples, self.error = interval, [], None
        self.fields, self.reasons = None, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)

    def _pick(self):
        """The richest query this nvidia-smi answers."""
        base = self.FIELDS + self.EXTRA
        for reason in self.REASONS:
            with contextlib.suppress(Exception):
                smi(",".join(f for f, _ in base) + "," + reason, 5)
                self.fields, self.reasons = base, reason
                return
        with contextlib.suppress(Exception):
            smi(",".join(f for f, _ in base), 5)
            self.fields = base
            return
        self.fields = self.FIELDS

    def _sample(self):
        if self.fields is None:
            self._pick()
        query = ",".join(f for f, _ in self.fields) + (f",{self.reasons}" if self.reasons else "")
        rows = smi(query, 5)
        self.samples.append(sample_of(rows, len(self.fields), bool(self.reasons)))

    def _loop(self):
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception as exc:
                self.error = f"nvidia-smi: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(self.interval)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        if self.error is None:
            with contextlib.suppress(Exception):
                self._sample()
        return summarize_telemetry(self.samples, self.fields or self.FIELDS, self.interval,
                                   self.error, bool(self.reasons))


def sample_of(rows, n_fields, with_reasons):
    """One telemetry sample from nvidia-smi's rows: each field's max over the GPUs ("[N/A]"
    left out), then the OR of their clock event reason bits (hex) where asked."""
    sample = []
    for i in range(n_fields):
        vals = []
        for row in rows:
            with contextlib.suppress(ValueError, IndexError):
                vals.append(float(row[i]))
        sample.append(max(vals) if vals else None)
    if with_reasons:
        bits = None
        for row in rows:
            with contextlib.suppress(ValueError, IndexError):
                bits = (bits or 0) | int(row[n_fields], 16)
        sample.append(bits)
    return sample


def median(vals):
    vals = sorted(vals)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


# Clock event reasons that slow a busy GPU (NVML's nvmlClocksEventReason* bits): SW power
# cap, HW slowdown, SW thermal, HW thermal, HW power brake. Idle (0x1), application clocks
# (0x2), sync boost (0x10) and display clocks (0x100) are not a slowdown of the work.
SLOWDOWN = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal slowdown",
            0x40: "HW thermal slowdown", 0x80: "HW power brake"}
IDLE_PCT, MOST = 10.0, 0.5   # utilization under 10 % counts as idle; "most" is over half


def summarize_telemetry(samples, fields, interval, error, with_reasons):
    out = {"source": "nvidia-smi", "interval_s": interval, "samples": len(samples),
           "error": error, "warnings": []}
    for i, (_, key) in enumerate(fields):
        vals = [s[i] for s in samples if s[i] is not None]
        out[key] = {"min": min(vals), "median": median(vals), "max": max(vals),
                    "mean": round(sum(vals) / len(vals), 2)} if vals else None
    util = [s[0] for s in samples if s[0] is not None]
    if util:
        idle = sum(u < IDLE_PCT for u in util) / len(util)
        out["idle_fraction"] = round(idle, 2)
        if idle > MOST:
            out["warnings"].append(
                f"GPU idle (utilization under {IDLE_PCT:g} %) in {idle:.0%} of samples: the "
                f"training waits on the input pipeline or the host")
    if with_reasons:
        bits = [s[len(fields)] for s in samples if s[len(fields)] is not None]
        slow = [b for b in bits if b & sum(SLOWDOWN)]
        seen = sorted({name for b in slow for bit, name in SLOWDOWN.items() if b & bit})
        out["throttled_fraction"] = round(len(slow) / len(bits), 2) if bits else None
        out["throttle_reasons"] = seen
        if bits and len(slow) / len(bits) > MOST:
            out["warnings"].append(f"GPU clocks throttled in {len(slow) / len(bits):.0%} of "
                                   f"samples ({', '.join(seen)}): check cooling and power limits "
                                   f"(nvidia-smi -q -d PERFORMANCE)")
    return out


# ---------------------------------------------------------------------------------- habits
SHM_SIZE = "8g"   # envgen.run_profile.SHM_SIZE: what certification and envgen run give


def shm_mib(path="/dev/shm"):
    """The size of the shared-memory file system in MiB, None where there is none."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize // 2**20


def shm_fix(shm):
    """The one sentence that names the fix for too little shared memory."""
    have = f"shared memory {shm} MB" if shm is not None else "no /dev/shm"
    return f"{have}: add --ipc=host or --shm-size={SHM_SIZE}"


def shm_trouble(text):
    """Whether a loader's error is what too little shared memory does: a worker killed by a
    bus error, or no space left in /dev/shm."""
    low = text.lower()
    return any(w in low for w in ("bus error", "no space left", "shared memory", "shm",
                                  "killed by signal", "exited unexpectedly"))


def process_age():
    """Seconds since this process started (Linux /proc), None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def bytecode_share(modules=None, under=None):
    """(modules imported from a .py file, how many of them had their .pyc on disk); the
    payload's own files (beside this one) are not the image's start-up and are left out.
    `under`: only the modules whose files lie in that folder."""
    n = cached = 0
    mine = os.path.dirname(os.path.abspath(__file__)) + os.sep
    inside = os.path.join(os.path.abspath(under), "") if under else None
    for mod in list((modules or sys.modules).values()):
        spec = getattr(mod, "__spec__", None)
        origin = str(getattr(spec, "origin", "") or "")
        if spec is None or not origin.endswith(".py") or origin.startswith(mine):
            continue
        if inside is not None and not os.path.abspath(origin).startswith(inside):
            continue
        n += 1
        cached += bool(spec.cached and os.path.exists(spec.cached))
    return n, cached


BYTECODE_MIN = 0.9   # under 90 % of the imported modules with bytecode: every start pays
VENV_BYTECODE_MIN = 0.95   # envgen compiles what it installs into its venv: under 95 % fails


ENVGEN_VENV = "/opt/venv"   # the venv envgen's images install into (templates/Dockerfile.j2)


def venv_prefix():
    """envgen's own venv when this Python runs in it (/opt/venv in its images), whose
    installed files envgen compiles to bytecode at build; None for any other Python: a
    framework base's own environment (a venv of its own, too) or a host's, run natively,
    whose bytecode is not envgen's to promise."""
    return ENVGEN_VENV if os.path.realpath(sys.prefix) == ENVGEN_VENV else None


def check_startup(rep, framework, import_s, age_s, first_kernel_s=None, modules=None,
                  venv=False):
    """How long the framework took to import (and, on a GPU, until the first kernel ran), and
    whether its modules came from bytecode; a warning with the fix when they mostly did not.
    It fails when fewer than 95 % of the modules imported from the venv (`venv`: its folder;
    False: this Python's, venv_prefix()) had their bytecode: envgen compiles what it installs
    there, so their absence is a broken build; it passes, saying so, where none came from one."""
    venv = venv_prefix() if venv is False else venv
    n, cached = bytecode_share(modules)
    n_venv, cached_venv = bytecode_share(modules, venv) if venv else (0, 0)
    vals = {"startup_import_s": round(import_s, 3), "startup_process_s": age_s,
            "startup_first_kernel_s": first_kernel_s, "startup_modules": n,
            "startup_modules_bytecode": cached, "startup_venv_modules": n_venv,
            "startup_venv_modules_bytecode": cached_venv}
    rep["metrics"].update(vals)
    since = f" ({age_s:.2f} s after the process started)" if age_s is not None else ""
    detail = (f"import {framework} {import_s:.2f} s{since}; {cached} of {n} modules from "
              f"bytecode")
    venv_ok = not n_venv or cached_venv >= VENV_BYTECODE_MIN * n_venv
    if n_venv:
        detail += (f"; {cached_venv} of {n_venv} modules of the venv {venv} from bytecode"
                   + ("" if venv_ok else f" (fewer than {VENV_BYTECODE_MIN:.0%}: its build "
                                         f"compiles them)"))
    else:
        where = (f"its venv {venv}" if venv
                 else f"{ENVGEN_VENV}, envgen's venv (this Python is not in it)")
        detail += (f"; no module imported from {where}: nothing envgen installed to hold to "
                   f"its bytecode")
    if first_kernel_s is not None:
        detail += f"; first GPU kernel done {first_kernel_s:.2f} s after the process started"
    extra = {}
    if (n and cached < BYTECODE_MIN * n) or not venv_ok:
        missing = n - cached if n and cached < BYTECODE_MIN * n else n_venv - cached_venv
        extra = {"warning": True,
                 "fix": f"start-up compiles {missing} modules on every start: set "
                        f"PYTHONPYCACHEPREFIX to a writable folder (a volume kept between "
                        f"runs) so the bytecode is written once"}
        detail += f"; {extra['fix']}"
    check(rep, "startup", venv_ok, detail, **vals, **extra)


def loader_finding(rates, step_rate):
    """(detail, fix or None): a loader's samples/s per worker count against the samples/s a
    training step consumes."""
    best = max(rates.values())
    parts = ", ".join(f"{w} workers {r:,.0f}" for w, r in sorted(rates.items()))
    detail = f"loader samples/s: {parts}; training consumes {step_rate:,.0f} samples/s"
    if best < step_rate:
        return detail, (f"the input pipeline is the bottleneck ({best:,.0f} < {step_rate:,.0f} "
                        f"samples/s): raise num_workers, or move the augmentation to the GPU")
    return detail, None


# ---------------------------------------------------------------------------------- driver
def native_stdout_to_stderr():
    """Native libraries (XLA, NCCL, CUDA) may write to file descriptor 1, where only the report may
    go: fd 1 becomes stderr, sys.stdout (the report's) a copy of the original."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = os.fdopen(saved, "w", buffering=1, encoding="utf-8")


def run(payload, options):
    """Every check's report; `options` is build_parser()'s Namespace or a dict of options."""
    opts = options
    if not isinstance(options, argparse.Namespace):
        opts = build_parser(payload).parse_args([])
        for key, val in dict(options or {}).items():
            if key == "expect" and isinstance(val, str):
                val = expect_arg(val)
            setattr(opts, key.replace("-", "_"), val)
    rep = new_report(payload, opts.require)
    payload.run_into(rep, opts, time.monotonic() + opts.timeout)
    return finish(rep)


def emit(rep, stream):
    text = None
    for _ in range(20):  # the watchdog may catch the report mid-update
        with contextlib.suppress(RuntimeError):
            text = json.dumps(clean(rep))
            break
        time.sleep(0.05)
    stream.write((text or json.dumps(clean(dict(rep, checks=[])))) + "\n")
    stream.flush()


def _watchdog(rep, opts, deadline, emitted, stdout):
    def on_timeout():  # a hung CUDA call cannot be interrupted: report what there is, and exit
        if emitted.acquire(blocking=False):
            rep["checks"].append({"name": "timeout", "passed": False, "detail":
                                  f"--timeout {opts.timeout:g} s exceeded; the report is partial"})
            rep["passed"] = False
            for proc in CHILDREN:
                with contextlib.suppress(Exception):
                    proc.kill()
            emit(rep, stdout)
            os._exit(1)
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), on_timeout)
    timer.daemon = True
    timer.start()
    return timer


def renamed(payload, name, description):
    """(PAYLOAD, run, main) of a payload that runs `payload`'s checks under the name `name`
    ("flax_smoke": --expect's "framework" is then compared with versions["flax"]): a
    framework over another whose payload already trains it (Flax and optax in jax_smoke)."""
    own = dataclasses.replace(payload, name=name, description=description)

    def run_own(options=None):
        return run(own, options)

    def main_own(argv=None, script=False):
        if script:
            native_stdout_to_stderr()
        return main(own, argv, script=script)
    return own, run_own, main_own


def main(payload, argv=None, script=False):
    """The command line; `script`: run as a file, so --timeout counts from the harness import."""
    real_stdout = sys.stdout
    try:
        opts = build_parser(payload).parse_args(argv)
    except BadArguments as exc:
        build_parser(payload).print_usage(sys.stderr)
        log(payload.name, f"bad arguments: {exc}")
        rep = new_report(payload, None)
        rep["errors"].append(f"bad arguments: {exc}")
        emit(rep, real_stdout)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    rep, emitted = new_report(payload, opts.require), threading.Lock()
    deadline = (T_START if script else time.monotonic()) + opts.timeout
    watchdog = _watchdog(rep, opts, deadline, emitted, real_stdout)
    with contextlib.redirect_stdout(sys.stderr):  # stray prints must not corrupt the report
        try:
            payload.run_into(rep, opts, deadline)
        except Exception as exc:
            log(payload.name, traceback.format_exc())
            check(rep, "payload", False, f"unexpected {type(exc).__name__}: {exc}")
            rep["errors"].append(f"payload: {type(exc).__name__}: {exc}")
    watchdog.cancel()
    if not emitted.acquire(blocking=False):
        time.sleep(60)  # the watchdog is writing the report and ends the process
        return 1
    emit(finish(rep), real_stdout)
    log(payload.name, f"{'PASSED' if rep['passed'] else 'FAILED'}: {tally(rep['checks'])}")
    return 0 if rep["passed"] else 1
