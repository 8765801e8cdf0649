"""The in-container payload envgen/smoke/torch_smoke.py (with its harness), run here on the CPU.

Torch comes from the CPU wheel on disk:
    pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
Tests that run the payload are skipped where torch is missing.
"""
import ast
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "envgen" / "smoke"
PAYLOAD = SMOKE / "torch_smoke.py"
QUICK = ["--quick", "--steps", "8", "--batch", "32", "--gemm-size", "128"]


def run_payload(*args, timeout=60):
    """Run the payload as images do (a lone script, another cwd): (exit code, report, stdout)."""
    proc = subprocess.run([sys.executable, str(PAYLOAD), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=tempfile.gettempdir(), check=False)
    report = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    return proc.returncode, report, proc.stdout


def checks(report):
    return {c["name"]: c for c in report["checks"]}


@pytest.fixture(scope="module")
def cpu_run():
    pytest.importorskip("torch")
    return run_payload("--require", "cpu", *QUICK)  # the CPU level, also on a machine with a GPU


def import_smoke(name):
    sys.path.insert(0, str(REPO))
    try:
        return importlib.import_module(f"envgen.smoke.{name}")
    finally:
        sys.path.remove(str(REPO))


@pytest.fixture(scope="module")
def payload_module():
    pytest.importorskip("torch")
    return import_smoke("torch_smoke")


def module_level_imports(path):
    """What a payload imports at module level (before its options are parsed): functions are
    not looked into; `if __package__: ... else: ...` picks the harness."""
    top = set()
    for node in ast.parse(path.read_text()).body:
        for sub in (node.body + node.orelse) if isinstance(node, ast.If) else [node]:
            if isinstance(sub, ast.Import):
                top.update(a.name.split(".")[0] for a in sub.names)
            elif isinstance(sub, ast.ImportFrom):
                top.update([a.name for a in sub.names] if sub.module == "envgen.smoke"
                           else [sub.module.split(".")[0]])
    return top


def imported(path):
    """Top-level names a file imports; `from envgen.smoke import X` counts as X."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import, line {node.lineno}: the file travels alone"
            if node.module == "envgen.smoke":
                found.update(alias.name for alias in node.names)
            else:
                found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            pytest.fail(f"dynamic __import__ at line {node.lineno}")
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value.split(".")[0])
    return found


def test_only_stdlib_harness_and_torch_imports():
    found = imported(PAYLOAD)
    # torch_habits: the --measure full part, a sibling that travels with it
    assert found - set(sys.stdlib_module_names) == {"_harness", "torch", "torch_habits"}
    assert imported(SMOKE / "torch_habits.py") - set(sys.stdlib_module_names) == {
        "_harness", "torch"}


def test_harness_imports_only_the_stdlib():
    assert imported(SMOKE / "_harness.py") <= set(sys.stdlib_module_names)


def test_cpu_run_passes(cpu_run):
    code, report, _ = cpu_run
    by_name = checks(report)
    assert code == 0, [c for c in report["checks"] if not c["passed"]]
    assert report["passed"] is True and report["errors"] == []
    assert report["payload"] == "torch_smoke" and report["payload_version"] == 1
    assert report["level"] == "cpu" and report["multi_gpu"] is None
    assert set(report["versions"]) >= {"python", "torch", "cuda", "cudnn", "nccl"}
    assert set(report["device"]) >= {"name", "compute_capability", "count", "memory_total_mib"}
    assert by_name["train"]["passed"] and by_name["train"]["loss_ratio"] < 0.7
    assert by_name["train"]["loss_last"] < by_name["train"]["loss_first"]
    assert by_name["amp"]["passed"]
    assert by_name["checkpoint"]["passed"] and "outputs equal" in by_name["checkpoint"]["detail"]
    assert by_name["throughput"]["passed"]
    assert report["metrics"]["samples_per_s"] > 0 and report["metrics"]["gemm_gflops"] > 0
    # worker processes through /dev/shm, on the CPU too
    assert by_name["dataloader"]["passed"] and not by_name["dataloader"].get("skipped")
    assert "12 batches of 24 MiB in order" in by_name["dataloader"]["detail"]
    assert report["metrics"]["dataloader_mib_per_s"] > 0
    # start-up: how long `import torch` took, and how much of it came from bytecode
    startup = by_name["startup"]
    assert startup["passed"] and 0 < startup["startup_import_s"] < 120
    assert 0 < startup["startup_modules_bytecode"] <= startup["startup_modules"]
    assert startup["startup_first_kernel_s"] is None     # no GPU here
    assert "habits" not in report                        # --measure full only
    for name in ("nvidia_smi", "cuda_available", "device", "cuda_arch", "model_on_cuda",
                 "cudnn_conv", "memory"):
        assert by_name[name].get("skipped") is True and by_name[name]["passed"], name
    for check in report["checks"]:
        assert isinstance(check["name"], str) and isinstance(check["detail"], str)
        assert isinstance(check["passed"], bool)


def test_report_is_one_json_object_on_stdout(cpu_run):
    _, report, stdout = cpu_run
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    assert json.loads(lines[0]) == report


def test_gpu_required_but_cpu_training_fails():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, report, _ = run_payload("--require", "cuda", *QUICK)
    by_name = checks(report)
    assert code == 1 and report["passed"] is False
    assert not by_name["cuda_available"]["passed"]
    assert not by_name["model_on_cuda"]["passed"]  # the model trained on the CPU: never a pass
    assert not by_name["nvidia_smi"]["passed"]


def test_wrong_torch_version_fails(payload_module):
    report = payload_module.run({"expect": '{"framework": "1.0.0", "cuda": null}', "quick": True,
                                 "steps": 6, "batch": 16, "gemm_size": 64})
    by_name = checks(report)
    assert report["passed"] is False
    assert not by_name["versions"]["passed"] and by_name["versions"]["mismatches"] == 1
    assert "framework" in by_name["versions"]["detail"]
    assert by_name["train"]["passed"]  # only the version check failed


def test_expect_matching_versions_passes():
    torch = pytest.importorskip("torch")
    expect = json.dumps({"framework": torch.__version__.split("+")[0]})
    code, report, _ = run_payload("--expect", expect, *QUICK)
    assert checks(report)["versions"]["passed"] and code == 0


def test_expect_cuda_on_cpu_build_fails():
    torch = pytest.importorskip("torch")
    if torch.version.cuda:
        pytest.skip("a CUDA build of torch")
    code, report, _ = run_payload("--expect", '{"cuda": "12.1"}', *QUICK)
    assert code == 1 and not checks(report)["versions"]["passed"]


@pytest.mark.parametrize("args", [
    ["--expect", "{not json"], ["--expect", '{"cuda": 12.1}'], ["--expect", '{"cudaa": "12.1"}'],
    ["--expect", '["2.4.1"]'], ["--require", "gpu"], ["--steps", "0"], ["--timeout", "-1"],
    ["--bogus"]])
def test_bad_arguments_exit_2(args, payload_module, capsys):
    assert payload_module.main(args) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is False and report["errors"][0].startswith("bad arguments")


def test_bad_arguments_exit_2_from_the_command_line():
    pytest.importorskip("torch")
    code, report, _ = run_payload("--steps", "many")
    assert code == 2 and report["passed"] is False and report["checks"] == []


def test_version_helpers(payload_module):
    ts = payload_module
    assert ts._fmt_code(90100, 90000) == "9.1.0" and ts._fmt_code(8902, 90000) == "8.9.2"
    assert ts._fmt_code((2, 20, 5), 10000) == "2.20.5" and ts._fmt_code(21003, 10000) == "2.10.3"
    matches = import_smoke("_harness").version_matches
    assert matches("2.4.1+cu121", "2.4.1", None)
    assert not matches("2.4.10", "2.4.1", None)
    assert matches("12.1", "12.1", 2) and not matches("12.4", "12.1", 2)
    assert matches("9.1.0", "9.1.0.70", 3)
    assert not matches("9.1.1", "9.1.0.70", 3)
    assert not matches(None, "12.1", 2)


def test_arch_match(payload_module):
    match = payload_module.arch_match
    arches = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert match(arches, (9, 0)) == "sm_90"
    assert match(arches, (8, 9)) == "sm_86"  # same major, lower minor
    assert match(arches, (10, 0)) is None  # Blackwell, cu121 build: "no kernel image is available"
    assert match(arches + ["compute_90"], (12, 0)) == "compute_90"  # PTX JIT
    assert match(["sm_90a"], (9, 0)) == "sm_90a" and match(["sm_90a"], (10, 0)) is None
    assert match([], (8, 0)) is None


def test_a_dataloader_that_cannot_get_shared_memory_fails_naming_the_fix(monkeypatch):
    """What Docker's 64 MB /dev/shm does to a loader with workers, provoked here by workers
    that die as SIGBUS kills them; the real 64 MB container is tests/test_run_real.py."""
    torch = pytest.importorskip("torch")
    from envgen.smoke import _harness as h
    from envgen.smoke import torch_smoke as ts

    class Dying(ts._Batches):
        def __getitem__(self, i):
            import os
            import signal
            os.kill(os.getpid(), signal.SIGBUS)
    monkeypatch.setattr(ts, "_Batches", Dying)
    rep = {"payload": "torch_smoke", "require": "cpu", "level": "cpu", "checks": [],
           "errors": [], "metrics": {}}
    ts.check_dataloader(rep, torch.device("cpu"))
    (check,) = rep["checks"]
    assert check["name"] == "dataloader" and check["passed"] is False
    shm = h.shm_mib()
    assert check["detail"].startswith(f"shared memory {shm} MB: add --ipc=host or "
                                      f"--shm-size=8g (2 workers failed: ")
    assert check["fix"] == h.shm_fix(shm)
    assert h.tally(rep["checks"]) == "0 passed, 0 skipped, 1 failed"
