"""The TensorFlow payload envgen/smoke/tensorflow_smoke.py (TensorFlow + Keras), built on
_harness.py.

Its import rule, arguments and GPU logic (against a stand-in `tensorflow` module) need nothing;
its native CPU runs need TensorFlow, and are skipped where it is not importable:
    python3 -m venv /tmp/tf-venv && /tmp/tf-venv/bin/pip install tensorflow-cpu pytest
    /tmp/tf-venv/bin/python -m pytest -q tests/test_tensorflow_payload.py
The payload and the harness are copied side by side into a folder and run as scripts there, as
/opt/envgen holds them in an image.
"""
import ast
import importlib.metadata
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
PAYLOAD = SMOKE / "tensorflow_smoke.py"
QUICK = ["--quick", "--batch", "32"]
GPU_CHECKS = ("nvidia_smi", "gpu_available", "memory_growth", "device", "model_on_gpu",
              "cudnn_conv", "memory")

# A stand-in for tensorflow: just enough API for the payload to find (or not find) GPUs.
FAKE_TF = """
import types
__version__ = "2.99.0"
keras = types.SimpleNamespace(__version__="3.0.0")
GPUS = {gpus}
class _Dev:
    def __init__(self, name): self.name = name
def list_physical_devices(kind): return [_Dev(f"/physical_device:GPU:{{i}}") for i in range(GPUS)]
def set_visible_devices(devices, kind): pass
def set_memory_growth(device, on): raise RuntimeError("Physical devices cannot be modified")
def get_memory_growth(device): return False
config = types.SimpleNamespace(list_physical_devices=list_physical_devices,
                               set_visible_devices=set_visible_devices,
                               experimental=types.SimpleNamespace(
                                   set_memory_growth=set_memory_growth,
                                   get_memory_growth=get_memory_growth))
test = types.SimpleNamespace(is_built_with_cuda=lambda: {built})
"""


@pytest.fixture(scope="module")
def opt_envgen(tmp_path_factory):
    """tensorflow_smoke.py and _harness.py side by side, as /opt/envgen holds them."""
    folder = tmp_path_factory.mktemp("opt-envgen")
    for name in ("_harness.py", "tensorflow_smoke.py"):
        shutil.copy(SMOKE / name, folder)
    return folder


def run_payload(folder, *args, env=None, timeout=400):
    """Run tensorflow_smoke.py as images do (a script, another cwd): (exit code, report)."""
    proc = subprocess.run([sys.executable, str(folder / "tensorflow_smoke.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=tempfile.gettempdir(), check=False)
    assert proc.stdout.count("\n") == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def checks(report):
    return {c["name"]: c for c in report["checks"]}


def failed(report):
    return sorted(c["name"] for c in report["checks"] if not c["passed"])


def fake_tf(tmp_path, gpus, built):
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(FAKE_TF.format(gpus=gpus, built=built))
    return dict(os.environ, PYTHONPATH=str(tmp_path))


# ---------------------------------------------------------------------------------- import rule
def test_imports_only_stdlib_the_harness_and_tensorflow():
    found = imported(PAYLOAD) - set(sys.stdlib_module_names)
    # tf_keras: only where TF_USE_LEGACY_KERAS=1 says the image is a tf-keras one
    assert found == {"_harness", "tensorflow", "tf_keras"}, found


def test_tensorflow_is_imported_only_when_the_payload_runs():
    top = module_level_imports(PAYLOAD)
    assert top - set(sys.stdlib_module_names) == {"_harness"}, top


def test_build_info_is_shown_never_compared():
    """Versions come from the libraries mapped at run time; get_build_info() is build time."""
    text = PAYLOAD.read_text()
    assert "/proc/self/maps" in text and "h.mapped_libraries(prefix)" in text
    tree = ast.parse(text)
    read = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                and n.name == "read_versions")
    assigned = [ast.unparse(t) for n in ast.walk(read) if isinstance(n, ast.Assign)
                for t in n.targets]
    assert "sources['build_info']" in assigned and not any("v[" in a and "build" in a
                                                           for a in assigned)


# ---------------------------------------------------------------------------------- no tensorflow
def test_bad_arguments_exit_2_before_tensorflow_is_imported(opt_envgen):
    code, report = run_payload(opt_envgen, "--batch", "0")
    assert code == 2 and report["passed"] is False and report["checks"] == []
    assert report["payload"] == "tensorflow_smoke"
    assert report["errors"][0].startswith("bad arguments")


def test_no_tensorflow_is_a_failed_check_not_a_crash(opt_envgen, tmp_path):
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text("raise ImportError('no tf here')\n")
    code, report = run_payload(opt_envgen, "--require", "cpu",
                               env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert code == 1 and failed(report) == ["tensorflow_import"]
    assert "no tf here" in checks(report)["tensorflow_import"]["detail"]
    assert report["versions"]["tensorflow"] is None


def test_a_gpu_asked_for_and_none_listed_fails_naming_the_cpu_build(opt_envgen, tmp_path):
    code, report = run_payload(opt_envgen, "--require", "cuda", *QUICK,
                               env=fake_tf(tmp_path, gpus=0, built=False))
    c = checks(report)
    assert code == 1 and report["level"] == "cpu" and not c["gpu_available"]["passed"]
    assert "list_physical_devices('GPU') is empty" in c["gpu_available"]["detail"]
    assert "built without CUDA (tensorflow-cpu)" in c["gpu_available"]["detail"]
    assert not c["memory_growth"]["passed"]   # a GPU check that cannot run fails


def test_memory_growth_that_cannot_be_set_fails(opt_envgen, tmp_path):
    code, report = run_payload(opt_envgen, "--require", "cuda", *QUICK,
                               env=fake_tf(tmp_path, gpus=2, built=True))
    c = checks(report)
    assert code == 1 and report["level"] == "cuda" and c["gpu_available"]["passed"]
    assert not c["memory_growth"]["passed"]
    assert "Physical devices cannot be modified" in c["memory_growth"]["detail"]


# ---------------------------------------------------------------------------------- native runs
@pytest.fixture(scope="module")
def cpu_run(opt_envgen):
    pytest.importorskip("tensorflow")
    expect = {"framework": importlib.metadata.version(_tf_dist()), "cuda": "12.5",
              "cudnn": "9.3.0"}
    return run_payload(opt_envgen, "--require", "cpu", *QUICK, "--expect", json.dumps(expect))


def _tf_dist():
    for name in ("tensorflow", "tensorflow-cpu"):
        try:
            importlib.metadata.version(name)
            return name
        except importlib.metadata.PackageNotFoundError:
            continue
    pytest.skip("no tensorflow distribution installed")


def test_cpu_run_trains_a_conv_model_and_round_trips_it(cpu_run):
    code, report = cpu_run
    assert code == 0 and report["passed"], failed(report)
    c = checks(report)
    assert report["level"] == "cpu" and report["payload"] == "tensorflow_smoke"
    for name in ("train", "amp", "checkpoint", "versions"):
        assert c[name]["passed"] and not c[name].get("skipped"), name
    assert c["amp"]["detail"].startswith("Keras fit under mixed_bfloat16")
    assert report["metrics"]["loss_ratio"] < 0.7 and c["checkpoint"]["bytes"] > 0
    for name in GPU_CHECKS:
        assert c[name]["skipped"], name
    assert report["versions"]["keras"] and report["versions"]["tensorflow"]


def test_a_cpu_run_does_not_compare_the_cuda_libraries_it_never_loaded(cpu_run):
    _, report = cpu_run
    versions = checks(report)["versions"]
    assert versions["not_compared"] == ["cuda", "cudnn"]
    assert "no libcudart.so* is mapped in this process (a CPU run)" in versions["detail"]


def test_a_wrong_tensorflow_version_fails(opt_envgen):
    pytest.importorskip("tensorflow")
    code, report = run_payload(opt_envgen, "--require", "cpu", *QUICK, "--steps", "6",
                               "--expect", '{"framework": "2.0.0"}')
    assert code == 1 and failed(report) == ["versions"]
    assert "MISMATCH, expected 2.0.0" in checks(report)["versions"]["detail"]


def test_gpu_required_on_a_host_without_one_fails(opt_envgen):
    tf = pytest.importorskip("tensorflow")
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this host has a GPU")
    code, report = run_payload(opt_envgen, "--require", "cuda", *QUICK)
    c = checks(report)
    assert code == 1 and report["level"] == "cpu"
    assert not c["gpu_available"]["passed"] and not c["nvidia_smi"]["passed"]
    assert c["train"]["passed"]   # it still trained on the CPU, and says so


def test_a_mapped_library_is_traced_to_its_distribution(opt_envgen):
    """How version_sources names where a library was loaded from: /proc/self/maps, then the
    distribution whose files hold that path (TensorFlow's own framework library here)."""
    pytest.importorskip("tensorflow")
    dist = _tf_dist()
    code = ("import json, tensorflow, _harness as h\n"
            "paths = h.mapped_libraries('libtensorflow_framework')\n"
            "print(json.dumps([paths[:1], h.distribution_of(paths[0], 'tensorflow')]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=opt_envgen, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    paths, found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert paths and found.replace("_", "-") == f"{dist} {importlib.metadata.version(dist)}"
