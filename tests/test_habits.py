"""The habits of a healthy training run: the harness's telemetry summary, start-up and loader
findings (logic, with made-up samples), the payload's `--measure full` run here on the CPU
(GPU-only parts skipped with the reason), and the one line a person reads per finding."""
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

from envgen.certs import diagnose
from envgen.smoke import _harness as h

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = REPO / "envgen" / "smoke" / "torch_smoke.py"
FIELDS = h.Telemetry.FIELDS + h.Telemetry.EXTRA


def rep():
    return {"payload": "torch_smoke", "require": "cpu", "level": "cpu", "checks": [],
            "errors": [], "metrics": {}}


# ---- telemetry ---------------------------------------------------------------------------

def test_a_sample_is_the_max_over_gpus_and_the_or_of_their_reason_bits():
    rows = [["90", "1000", "300.5", "60", "1980", "0x0000000000000000"],
            ["40", "[N/A]", "500", "70", "1500", "0x0000000000000004"]]
    assert h.sample_of(rows, len(FIELDS), True) == [90.0, 1000.0, 500.0, 70.0, 1980.0, 0x4]
    assert h.sample_of([["[N/A]"] * 5], len(FIELDS), False) == [None] * 5


def test_min_median_max_and_no_warning_for_a_busy_unthrottled_gpu():
    samples = [[u, 1000.0, 400.0, 50.0, 1980.0, 0x0] for u in (95, 97, 99, 100)]
    t = h.summarize_telemetry(samples, FIELDS, 0.25, None, True)
    assert t["utilization_gpu_pct"] == {"min": 95, "median": 98.0, "max": 100, "mean": 97.75}
    assert t["sm_clock_mhz"]["median"] == 1980.0
    assert t["idle_fraction"] == 0 and t["throttled_fraction"] == 0
    assert t["warnings"] == [] and t["throttle_reasons"] == []


def test_a_gpu_throttled_most_of_the_time_is_a_warning_naming_the_reasons():
    samples = [[99.0, 1.0, 700.0, 88.0, 1400.0, bits] for bits in (0x4, 0x40 | 0x4, 0x1, 0x4)]
    t = h.summarize_telemetry(samples, FIELDS, 0.25, None, True)
    assert t["throttled_fraction"] == 0.75
    assert t["throttle_reasons"] == ["HW thermal slowdown", "SW power cap"]
    (w,) = t["warnings"]
    assert w.startswith("GPU clocks throttled in 75% of samples (HW thermal slowdown, SW power")


def test_an_idle_gpu_most_of_the_time_is_a_warning():
    samples = [[u, 1.0, 80.0, 30.0, 210.0] for u in (0, 0, 3, 90)]
    t = h.summarize_telemetry(samples, FIELDS, 0.25, None, False)
    assert t["idle_fraction"] == 0.75 and "throttled_fraction" not in t
    assert t["warnings"] == ["GPU idle (utilization under 10 %) in 75% of samples: the "
                             "training waits on the input pipeline or the host"]


def test_telemetry_without_samples_says_so():
    t = h.summarize_telemetry([], h.Telemetry.FIELDS, 0.5, "nvidia-smi: gone", False)
    assert t["samples"] == 0 and t["utilization_gpu_pct"] is None and t["warnings"] == []


# ---- shared memory, start-up, loader -------------------------------------------------------

def test_the_shared_memory_sentence_names_the_fix_and_the_size_the_profile_gives():
    from envgen.runtime import profile as run_profile
    assert h.shm_fix(64) == "shared memory 64 MB: add --ipc=host or --shm-size=8g"
    assert h.SHM_SIZE == run_profile.SHM_SIZE        # the payload cannot import envgen
    assert h.shm_fix(None).startswith("no /dev/shm")
    assert h.shm_trouble("RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error")
    assert not h.shm_trouble("ValueError: bad batch")


def _modules(tmp_path, n, with_pyc):
    mods = {}
    for i in range(n):
        src, pyc = tmp_path / f"m{i}.py", tmp_path / f"m{i}.pyc"
        if i < with_pyc:
            pyc.write_bytes(b"")
        spec = types.SimpleNamespace(origin=str(src), cached=str(pyc))
        mods[f"m{i}"] = types.SimpleNamespace(__spec__=spec)
    mods["builtin"] = types.SimpleNamespace(__spec__=types.SimpleNamespace(origin="built-in",
                                                                           cached=None))
    return mods


def test_start_up_without_bytecode_is_a_warning_that_names_the_fix(tmp_path):
    r = rep()
    h.check_startup(r, "torch", 2.9, 3.1, modules=_modules(tmp_path, 10, 2))
    (c,) = r["checks"]
    assert c["passed"] and c["warning"] and c["startup_modules_bytecode"] == 2
    assert c["detail"].startswith("import torch 2.90 s (3.10 s after the process started); "
                                  "2 of 10 modules from bytecode")
    assert "compiles 8 modules on every start" in c["fix"]
    assert r["metrics"]["startup_import_s"] == 2.9


def test_start_up_from_bytecode_has_no_fix(tmp_path):
    r = rep()
    h.check_startup(r, "torch", 1.5, None, first_kernel_s=2.5,
                    modules=_modules(tmp_path, 10, 10))
    (c,) = r["checks"]
    assert c["passed"] and "fix" not in c and "first GPU kernel done 2.50 s" in c["detail"]


def test_process_age_is_this_process_s():
    age = h.process_age()
    assert age is None or 0 <= age < 24 * 3600


def test_a_loader_slower_than_training_is_the_bottleneck():
    detail, fix = h.loader_finding({0: 300.0, 4: 900.0}, 2000.0)
    assert detail == "loader samples/s: 0 workers 300, 4 workers 900; training consumes " \
                     "2,000 samples/s"
    assert fix.startswith("the input pipeline is the bottleneck (900 < 2,000 samples/s)")
    assert h.loader_finding({0: 300.0, 4: 2500.0}, 2000.0)[1] is None


# ---- the diagnosis -----------------------------------------------------------------------

def test_the_diagnosis_is_a_line_per_fix_failed_or_warned_never_twice():
    cert = {"report": {"checks": [
        {"name": "dataloader", "passed": False, "detail": "x", "fix": h.shm_fix(64)},
        {"name": "startup", "passed": True, "warning": True, "detail": "y", "fix": "compile"},
        {"name": "train", "passed": True, "detail": "z", "fix": "not shown: passed"},
        {"name": "dataloader", "passed": False, "detail": "x", "fix": h.shm_fix(64)}],
        "telemetry": {"warnings": ["GPU idle"]}}}
    assert diagnose.advice(cert) == [
        "dataloader: shared memory 64 MB: add --ipc=host or --shm-size=8g",
        "startup: compile", "telemetry: GPU idle"]
    assert diagnose.advice({"report": {"checks": "junk", "telemetry": []}}) == []


def test_the_certificate_summary_prints_the_change_to_make(capsys):
    from envgen.commands._common import print_certificate
    print_certificate({"passed": False, "level": "cpu", "seconds": 3.0,
                       "host": {"gpus": [], "driver": None},
                       "report": {"checks": [{"name": "dataloader", "passed": False,
                                              "detail": "d", "fix": h.shm_fix(64)}]}})
    out = capsys.readouterr().out
    assert "  change: dataloader: shared memory 64 MB: add --ipc=host or --shm-size=8g" in out


# ---- the payload's --measure full, for real on the CPU --------------------------------------

def test_measure_full_on_the_cpu_measures_the_loader_and_skips_the_gpu_parts_saying_why():
    pytest.importorskip("torch", reason="the payload runs here with torch (make bootstrap "
                                        "installs it)")
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--require", "cpu", "--quick",
                           "--steps", "8", "--batch", "32", "--gemm-size", "128",
                           "--measure", "full"], capture_output=True, text=True, timeout=120,
                          cwd=tempfile.gettempdir(), check=False)
    report = json.loads(proc.stdout)
    by = {c["name"]: c for c in report["checks"]}
    assert proc.returncode == 0, [c for c in report["checks"] if not c["passed"]]
    loader = report["habits"]["loader"]
    assert set(loader["samples_per_s"]) == {"0", str(max(2, min(4, loader["cpus"])))}
    assert all(v > 0 for v in loader["samples_per_s"].values())
    assert loader["step_samples_per_s"] == pytest.approx(report["metrics"]["samples_per_s"],
                                                         abs=0.1)
    assert by["loader_rates"]["passed"] and "training consumes" in by["loader_rates"]["detail"]
    for name in ("telemetry", "h2d_bandwidth", "memory_peaks"):
        assert by[name]["skipped"] and by[name]["detail"] == "CPU level (--require cpu)", name


def test_the_gpu_measurements_are_all_behind_gpu_check():
    """On a GPU host the same code runs them (bench/gpu/habits.sh); here: none may run
    unguarded on the CPU."""
    import inspect

    from envgen.smoke import torch_habits
    src = inspect.getsource(torch_habits.run_habits)
    for name in ("check_telemetry", "check_h2d", "check_memory_peaks"):
        assert "gpu_check(rep, " in src and name in src
    assert "guarded(rep, \"loader_rates\"" in src
