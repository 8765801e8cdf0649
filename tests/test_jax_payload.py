"""The JAX payload envgen/smoke/jax_smoke.py (JAX + Flax + optax), built on _harness.py.

Its import rule, arguments and version rules need nothing; its native CPU runs need jax, flax
and optax, and are skipped where they are not importable (Python 3.11 gets jax 0.10.2 at most):
    python3 -m venv /tmp/jax-venv && /tmp/jax-venv/bin/pip install "jax==0.10.2" flax optax pytest
    /tmp/jax-venv/bin/python -m pytest -q tests/test_jax_payload.py
The payload and the harness are copied side by side into a folder and run as scripts there, as
/opt/envgen holds them in an image; nothing here imports envgen's other modules (the import
reader comes from test_smoke_payload.py, which needs no more than this file).
"""
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_smoke_payload import imported, module_level_imports  # stdlib and pytest only

SMOKE = Path(__file__).resolve().parents[1] / "envgen" / "smoke"
PAYLOAD = SMOKE / "jax_smoke.py"
QUICK = ["--quick", "--batch", "32", "--gemm-size", "128"]
ALLOWED = {"_harness", "jax", "jaxlib", "flax", "optax", "numpy"}
GPU_CHECKS = ("nvidia_smi", "gpu_available", "device", "model_on_gpu", "cudnn_conv", "memory")


@pytest.fixture(scope="module")
def opt_envgen(tmp_path_factory):
    """jax_smoke.py and _harness.py side by side, as /opt/envgen holds them in an image."""
    folder = tmp_path_factory.mktemp("opt-envgen")
    for name in ("_harness.py", "jax_smoke.py"):
        shutil.copy(SMOKE / name, folder)
    return folder


def run_payload(folder, *args, python=sys.executable, env=None, timeout=400):
    """Run jax_smoke.py as images do (a script, another cwd): (exit code, report, stderr)."""
    proc = subprocess.run([python, str(folder / "jax_smoke.py"), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir(),
                          check=False)
    assert proc.stdout.count("\n") == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def in_folder(folder, code, env=None, timeout=300):
    """Run Python `code` with the folder's modules importable; its stdout, parsed as JSON."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=folder, env=env, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def checks(report):
    return {c["name"]: c for c in report["checks"]}


def failed(report):
    return sorted(c["name"] for c in report["checks"] if not c["passed"])


def stack():
    """jax, flax and optax, or skip."""
    return tuple(pytest.importorskip(name) for name in ("jax", "flax", "optax"))


def has_gpu(jax):
    return any(d.platform == "gpu" for d in jax.devices())


@pytest.fixture(scope="module")
def cpu_run(opt_envgen):
    stack()
    expect = {"framework": importlib.metadata.version("jax"),
              "packages": {name: importlib.metadata.version(name)
                           for name in ("jax", "jaxlib", "flax", "optax")}}
    return run_payload(opt_envgen, "--require", "cpu", *QUICK, "--expect", json.dumps(expect))


# ---------------------------------------------------------------------------------- import rule
def test_imports_only_stdlib_harness_and_the_jax_stack():
    found = imported(PAYLOAD) - set(sys.stdlib_module_names)
    assert found <= ALLOWED, found - ALLOWED
    assert {"_harness", "jax", "flax", "optax"} <= found


def test_jax_is_imported_only_when_the_payload_runs():
    """Module level imports the standard library and the harness only: the environment
    (XLA_PYTHON_CLIENT_PREALLOCATE, JAX_PLATFORMS) is set, after the arguments, before jax."""
    top = module_level_imports(PAYLOAD)
    assert top - set(sys.stdlib_module_names) == {"_harness"}, top


def test_the_harness_is_imported_like_the_other_payloads():
    text = PAYLOAD.read_text()
    assert "if __package__:" in text and "from envgen.smoke import _harness as h" in text
    assert "    import _harness as h" in text


# ---------------------------------------------------------------------------------- no jax needed
def test_bad_arguments_exit_2_before_jax_is_imported(opt_envgen):
    code, report, _ = run_payload(opt_envgen, "--steps", "0")
    assert code == 2 and report["passed"] is False and report["checks"] == []
    assert report["payload"] == "jax_smoke" and report["errors"][0].startswith("bad arguments")


def test_bad_expect_exits_2(opt_envgen):
    code, report, _ = run_payload(opt_envgen, "--expect", '{"cuda": 13.0}')
    assert code == 2 and "bad arguments" in report["errors"][0]


def test_no_jax_is_a_failed_check_not_a_crash(opt_envgen, tmp_path):
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("raise ImportError('no jax here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code, report, _ = run_payload(opt_envgen, "--require", "cpu", env=env)
    assert code == 1 and failed(report) == ["jax_import"]
    assert "no jax here" in checks(report)["jax_import"]["detail"]
    assert report["level"] == "cpu" and report["versions"]["jax"] is None


def test_environment_is_set_before_jax(opt_envgen):
    code = ("import json, os; os.environ.pop('XLA_PYTHON_CLIENT_PREALLOCATE', None); "
            "os.environ['JAX_PLATFORMS'] = 'cuda'; import jax_smoke as m; "
            "m.set_environment('auto'); a = dict(os.environ); m.set_environment('cpu'); "
            "print(json.dumps([a['XLA_PYTHON_CLIENT_PREALLOCATE'], a['JAX_PLATFORMS'], "
            "os.environ['JAX_PLATFORMS'], 'jax' in __import__('sys').modules]))")
    assert in_folder(opt_envgen, code) == ["false", "cuda", "cpu", False]


def test_version_codes(opt_envgen):
    code = ("import json, _harness as m; print(json.dumps([m.fmt_cuda(13000), "
            "m.fmt_cuda(12080), m.fmt_code(91900, 90000), m.fmt_code(8902, 90000), "
            "m.fmt_code(22703, 10000), m.fmt_code(2708, 10000), m.fmt_cuda(0)]))")
    assert in_folder(opt_envgen, code) == ["13.0", "12.8", "9.19.0", "8.9.2", "2.27.3", "2.7.8",
                                           None]


def test_a_value_jax_does_not_expose_is_not_compared(opt_envgen):
    """nccl expected, JAX exposes none: noted, not a failure; a real mismatch still fails."""
    code = ("import json, _harness as h, jax_smoke as m\n"
            "out = []\n"
            "for cudnn in ('9.19.0', '9.12.0'):\n"
            "    rep = h.new_report(m.PAYLOAD, 'cuda')\n"
            "    rep['versions'].update(jax='0.11.2', cuda='13.0', cudnn='9.19.0', nccl=None)\n"
            "    h.check_expect(rep, {'framework': '0.11.2', 'cuda': '13.0', 'cudnn': cudnn,\n"
            "                         'nccl': '2.27.3'}, {'nccl': 'no libnccl mapped'})\n"
            "    out.append(rep['checks'])\n"
            "print(json.dumps(out))")
    (good,), (bad,) = in_folder(opt_envgen, code)
    assert good["name"] == "versions" and good["passed"] and good["not_compared"] == ["nccl"]
    assert "nccl expected 2.27.3 not compared: no libnccl mapped" in good["detail"]
    assert "framework 0.11.2 matches 0.11.2" in good["detail"]
    assert not bad["passed"] and bad["mismatches"] == 1 and "cudnn 9.19.0 MISMATCH" in bad["detail"]


# ---------------------------------------------------------------------------------- native runs
def test_cpu_run_passes(cpu_run):
    code, report, _ = cpu_run
    by_name = checks(report)
    assert code == 0 and report["passed"] is True, failed(report)
    assert report["payload"] == "jax_smoke" and report["payload_version"] == 1
    assert report["level"] == "cpu" and report["require"] == "cpu" and report["errors"] == []
    assert list(report["versions"]) == ["python", "jax", "jaxlib", "flax", "optax", "cuda",
                                        "cudnn", "nccl", "driver"]
    for name in ("jax", "jaxlib", "flax", "optax"):
        assert report["versions"][name] == importlib.metadata.version(name)
        assert report["version_sources"][name] == f"{name}.__version__"
    assert set(report["version_sources"]) >= {"cuda", "cudnn", "nccl"}
    assert f"framework {report['versions']['jax']} matches" in by_name["versions"]["detail"]
    assert by_name["packages"]["passed"] and by_name["packages"]["mismatches"] == 0
    for name in ("train", "amp", "checkpoint", "throughput"):
        assert by_name[name]["passed"] and not by_name[name].get("skipped"), name
    assert by_name["train"]["loss_ratio"] < 0.7 and by_name["amp"]["loss_ratio"] < 0.7
    assert "optax.adam under jax.jit" in by_name["train"]["detail"]
    assert "layer outputs bfloat16" in by_name["amp"]["detail"]  # really bf16, on the CPU too
    assert "parameters float32" in by_name["amp"]["detail"]
    detail = by_name["checkpoint"]["detail"]
    assert "flax.serialization" in detail and "parameters equal, outputs equal" in detail
    assert "other weights before" in detail  # the fresh parameters differed before the load
    for name in GPU_CHECKS:
        assert by_name[name].get("skipped") is True and by_name[name]["passed"], name
    assert "JAX_PLATFORMS=cpu" in by_name["gpu_available"]["detail"]
    assert report["metrics"]["samples_per_s"] > 0 and report["multi_gpu"] is None
    for check in report["checks"]:
        assert isinstance(check["detail"], str) and isinstance(check["passed"], bool)


def test_require_cpu_overrides_a_gpu_platform(opt_envgen):
    """--require cpu sets JAX_PLATFORMS=cpu: a GPU-only platform setting would fail otherwise."""
    stack()
    env = dict(os.environ, JAX_PLATFORMS="cuda")
    code, report, _ = run_payload(opt_envgen, "--require", "cpu", *QUICK, "--steps", "6", env=env)
    assert code == 0 and report["level"] == "cpu", failed(report)


def test_gpu_required_but_cpu_training_fails(opt_envgen):
    jax, _, _ = stack()
    if has_gpu(jax):
        pytest.skip("this machine has a GPU")
    code, report, _ = run_payload(opt_envgen, "--require", "cuda", *QUICK)
    by_name = checks(report)
    assert code == 1 and report["passed"] is False and report["level"] == "cpu"
    assert not by_name["gpu_available"]["passed"] and not by_name["nvidia_smi"]["passed"]
    assert "GPU requested (--require cuda)" in by_name["gpu_available"]["detail"]
    for name in GPU_CHECKS:
        assert not by_name[name]["passed"], name  # trained on the CPU: never a pass
    assert by_name["train"]["passed"] and by_name["checkpoint"]["passed"]  # training worked


def test_wrong_framework_and_package_versions_fail(opt_envgen):
    jax, _, _ = stack()
    expect = {"framework": "0.0.1", "packages": {
        "optax": "0.0.1", "flax": importlib.metadata.version("flax")}}
    code, report, _ = run_payload(opt_envgen, "--require", "cpu", *QUICK, "--steps", "6",
                                  "--expect", json.dumps(expect))
    by_name = checks(report)
    assert code == 1 and failed(report) == ["packages", "versions"]
    assert by_name["versions"]["mismatches"] == 1
    assert f"framework {jax.__version__} MISMATCH, expected 0.0.1" in by_name["versions"]["detail"]
    assert by_name["packages"]["mismatches"] == 1  # flax matched: only optax is listed
    assert by_name["packages"]["detail"].startswith("optax ")
    assert by_name["train"]["passed"]  # only the version checks failed


def test_expect_cuda_without_a_cuda_plugin_fails(opt_envgen):
    """A CPU-only jaxlib has no CUDA at all: an expected CUDA version is a mismatch."""
    stack()
    if importlib.util.find_spec("jax_cuda12_plugin") or importlib.util.find_spec(
            "jax_cuda13_plugin"):
        pytest.skip("a CUDA plugin is installed")
    code, report, _ = run_payload(opt_envgen, "--require", "cpu", *QUICK, "--steps", "6",
                                  "--expect", '{"cuda": "13.0"}')
    assert code == 1 and failed(report) == ["versions"]
    assert "no CUDA plugin" in report["version_sources"]["cuda"]


def test_a_broken_flax_is_reported_not_a_crash(opt_envgen, tmp_path):
    stack()
    (tmp_path / "flax").mkdir()
    (tmp_path / "flax" / "__init__.py").write_text("raise RuntimeError('half-installed')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code, report, _ = run_payload(opt_envgen, "--require", "cpu", *QUICK, env=env)
    by_name = checks(report)
    assert code == 1 and failed(report) == ["flax_import"]
    assert "RuntimeError: half-installed" in by_name["flax_import"]["detail"]
    assert by_name["versions"]["passed"] and "train" not in by_name  # the rest still reports
    assert report["versions"]["jax"] and report["versions"]["optax"]


def test_data_parallel_checks_over_two_host_devices(opt_envgen):
    """The --multi-gpu checks' code (all-reduce over a sharded array, data-parallel training),
    run over two XLA host devices: on a machine without two GPUs they cannot run otherwise."""
    stack()
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    code = ("import json, _harness as h, jax_smoke as m\n"
            "rep = h.new_report(m.PAYLOAD, 'cpu')\n"
            "assert m.load_stack(rep, 'cpu')\n"
            "opts = m.build_parser().parse_args(['--quick', '--batch', '16', '--steps', '10'])\n"
            "m.run_multi_gpu(rep, opts, m.jax.devices())\n"
            "print(json.dumps(h.clean(rep)))")
    report = in_folder(opt_envgen, code, env=env)
    by_name = checks(report)
    assert by_name["multi_gpu_allreduce"]["passed"], by_name["multi_gpu_allreduce"]["detail"]
    assert by_name["multi_gpu_data_parallel"]["passed"], by_name["multi_gpu_data_parallel"]
    assert report["multi_gpu"]["world_size"] == 2 and report["multi_gpu"]["allreduce_correct"]


def test_a_mapped_library_is_traced_to_its_distribution(opt_envgen):
    """How version_sources names where cuDNN, NCCL and cudart were loaded from: /proc/self/maps,
    then the distribution whose files hold that path (jaxlib's own extension here)."""
    stack()
    code = ("import json, jax, _harness as m\n"
            "paths = [p for p in m.mapped_libraries('_jax') if '/jaxlib/' in p]\n"
            "print(json.dumps([paths[:1], m.distribution_of(paths[0], 'jaxlib'),\n"
            "                  m.distribution_of(paths[0]), m.mapped_libraries('libno-such')]))")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    paths, dist, not_nvidia, none = in_folder(opt_envgen, code, env=env)
    assert paths and dist == f"jaxlib {importlib.metadata.version('jaxlib')}"
    assert not_nvidia is None and none == []
