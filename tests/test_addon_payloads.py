"""The add-on payloads for torch-based frameworks (Lightning, Transformers, Accelerate,
DeepSpeed, NeMo's speech collection), built on envgen/smoke/_harness.py and torch_smoke.py.
Their import rule is read from the source always; their native CPU runs need the framework,
and are skipped where it is not importable (DeepSpeed's sdist builds only without isolation,
after torch):
    pip install -c <(echo torch==2.13.0) lightning transformers accelerate
(NeMo: `nemo-toolkit[asr]` over the same torch, which is what the test runs use here.)
"""
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from test_smoke_payload import SMOKE, import_smoke, imported

# payload -> the modules it may import for its framework, the one it prefers first
ADDONS = {"lightning": ("lightning", "pytorch_lightning"), "transformers": ("transformers",),
          "accelerate": ("accelerate",), "deepspeed": ("deepspeed",), "nemo": ("nemo",)}
# what a payload imports besides its framework: NeMo's models train under Lightning's
# Trainer and take an omegaconf DictConfig
BROUGHT = {"nemo": {"lightning", "omegaconf"}}
QUICK = ["--quick", "--batch", "32"]


@pytest.fixture(scope="module")
def opt_envgen(tmp_path_factory):
    """The payloads side by side in one folder, as /opt/envgen holds them in an image."""
    folder = tmp_path_factory.mktemp("opt-envgen")
    for name in ["_harness", "torch_smoke", *(f"{a}_smoke" for a in ADDONS)]:
        shutil.copy(SMOKE / f"{name}.py", folder)
    return folder


def run_payload(folder, name, *args, timeout=300, env=None):
    """Run `<name>_smoke.py` as images do (a script, another cwd): (exit code, report, stdout)."""
    proc = subprocess.run([sys.executable, str(folder / f"{name}_smoke.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=tempfile.gettempdir(), check=False)
    assert proc.stdout.count("\n") == 1, proc.stderr[-3000:]  # one JSON line, nothing else
    return proc.returncode, json.loads(proc.stdout), proc.stdout


def checks(report):
    return {c["name"]: c for c in report["checks"]}


def failed(report):
    return sorted(c["name"] for c in report["checks"] if not c["passed"])


def framework_version(name):
    """The framework's version, or skip: the first of its modules that imports."""
    modules = ADDONS[name]
    for module in modules[:-1]:
        try:
            return importlib.import_module(module).__version__
        except ImportError:
            continue
    return pytest.importorskip(modules[-1]).__version__


@pytest.fixture(scope="module", params=sorted(ADDONS))
def addon(request):
    return request.param


@pytest.fixture(scope="module")
def cpu_run(addon, opt_envgen):
    pytest.importorskip("torch")
    expect = {"framework": framework_version(addon),
              "packages": {"torch": importlib.metadata.version("torch")}}
    return run_payload(opt_envgen, addon, "--require", "cpu", *QUICK, "--expect",
                       json.dumps(expect))


# ---------------------------------------------------------------------------------- import rule
@pytest.mark.parametrize("name", sorted(ADDONS))
def test_addon_imports_only_stdlib_harness_torch_and_its_framework(name):
    found = imported(SMOKE / f"{name}_smoke.py") - set(sys.stdlib_module_names)
    frameworks = set(ADDONS[name])
    assert found <= {"_harness", "torch_smoke", "torch"} | frameworks | BROUGHT.get(name, set()), \
        found
    assert {"_harness", "torch_smoke"} <= found and found & frameworks


def test_addons_are_importable_without_their_framework():
    for name in ADDONS:  # the framework is imported when the payload runs, inside its report
        assert import_smoke(f"{name}_smoke").PAYLOAD.name == f"{name}_smoke"


# ---------------------------------------------------------------------------------- harness
def _payload(h, run_into=None):
    return h.Payload(name="demo_smoke", description="", run_into=run_into, versions=("demo",))


def test_packages_check_ignores_local_suffix_and_names_what_is_missing():
    h = import_smoke("_harness")
    rep = h.new_report(_payload(h), "cpu")
    pytest_version = importlib.metadata.version("pytest")
    h.check_packages(rep, {"pytest": f"{pytest_version}+local", "envgen-no-such-dist": "1.0"})
    (check,) = rep["checks"]
    assert check["name"] == "packages" and not check["passed"] and check["mismatches"] == 1
    assert "envgen-no-such-dist not installed, expected 1.0" == check["detail"]


def test_framework_in_expect_is_the_payloads_own():
    h = import_smoke("_harness")
    rep = h.new_report(_payload(h), "cpu")
    rep["versions"]["demo"] = "1.2.3+cpu"
    h.check_expect(rep, {"framework": "1.2.3"})
    assert checks(rep)["versions"]["passed"] and "packages" not in checks(rep)


@pytest.mark.parametrize("expect", ['{"packages": ["torch"]}', '{"packages": {"torch": 2}}',
                                    '{"package": {"torch": "2.4.1"}}'])
def test_bad_packages_in_expect_exit_2(expect, capsys):
    h = import_smoke("_harness")
    assert h.main(_payload(h, lambda *_: pytest.fail("ran")), ["--expect", expect]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["payload"] == "demo_smoke" and report["errors"][0].startswith("bad arguments")


# ---------------------------------------------------------------------------------- native runs
def test_cpu_run_passes(addon, cpu_run):
    code, report, _ = cpu_run
    by_name = checks(report)
    assert code == 0 and report["passed"] is True, failed(report)
    assert report["payload"] == f"{addon}_smoke" and report["payload_version"] == 1
    assert report["level"] == "cpu" and report["errors"] == []
    assert set(report["versions"]) >= {"python", addon, "torch", "cuda", "cudnn", "nccl"}
    assert "matches" in by_name["versions"]["detail"] and by_name["packages"]["passed"]
    for name in ("train", "amp", "checkpoint"):
        assert by_name[name]["passed"] and not by_name[name].get("skipped"), name
    assert by_name["train"]["loss_ratio"] < 0.7 and by_name["amp"]["loss_ratio"] < 0.7
    assert "layer outputs bfloat16" in by_name["amp"]["detail"]  # really mixed, on the CPU too
    assert "outputs equal" in by_name["checkpoint"]["detail"]
    assert by_name["dataloader"]["passed"] and not by_name["dataloader"].get("skipped")
    for name in ("nvidia_smi", "cuda_available", "device", "cuda_arch", "model_on_cuda",
                 "cudnn_conv", "memory"):
        assert by_name[name].get("skipped") is True and by_name[name]["passed"], name


def test_gpu_required_but_cpu_training_fails(addon, opt_envgen):
    torch = pytest.importorskip("torch")
    framework_version(addon)
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, report, _ = run_payload(opt_envgen, addon, "--require", "cuda", *QUICK)
    by_name = checks(report)
    assert code == 1 and report["passed"] is False
    assert not by_name["cuda_available"]["passed"] and not by_name["nvidia_smi"]["passed"]
    assert not by_name["model_on_cuda"]["passed"]  # it trained on the CPU: never a pass
    assert by_name["train"]["passed"]  # the training itself worked


def test_wrong_framework_and_package_versions_fail(addon, opt_envgen):
    pytest.importorskip("torch")
    version = framework_version(addon)
    expect = {"framework": "0.0.1", "packages": {
        "torch": "0.0.1", "pytest": importlib.metadata.version("pytest")}}
    code, report, _ = run_payload(opt_envgen, addon, "--require", "cpu", *QUICK, "--expect",
                                  json.dumps(expect))
    by_name = checks(report)
    assert code == 1 and failed(report) == ["packages", "versions"]
    assert by_name["versions"]["mismatches"] == 1
    assert f"framework {version} MISMATCH, expected 0.0.1" in by_name["versions"]["detail"]
    assert by_name["packages"]["mismatches"] == 1  # pytest's matched: only torch is listed
    assert by_name["packages"]["detail"].startswith("torch ")


def test_lightning_payload_loads_one_namespace(opt_envgen):
    pytest.importorskip("lightning")  # lightning depends on pytorch_lightning: both installed
    code = ("import sys, lightning_smoke as m; m._import_lightning(); "
            "print(sorted({'lightning', 'pytorch_lightning'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=opt_envgen, check=True).stdout
    assert out.strip() == "['lightning']"


@pytest.mark.parametrize("name", sorted(ADDONS))
def test_a_broken_framework_is_reported_not_a_crash(name, tmp_path, opt_envgen):
    pytest.importorskip("torch")
    package = tmp_path / ADDONS[name][0]
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('half-installed')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code, report, _ = run_payload(opt_envgen, name, "--require", "cpu", *QUICK, env=env)
    by_name = checks(report)
    assert code == 1 and failed(report) == [f"{name}_import"]
    assert "RuntimeError: half-installed" in by_name[f"{name}_import"]["detail"]
    assert by_name["versions"]["passed"] and "train" not in by_name  # the rest still reports


class _Gloo:
    """torch.distributed as the payload sees it: a world of one on `backend`, whose
    all_reduce refuses the dtypes in `refuses` the way torch 2.0's gloo refuses bfloat16."""

    def __init__(self, backend="gloo", refuses=(), initialized=True):
        self.backend, self.refuses, self.initialized = backend, refuses, initialized
        self.reduced = []

    def is_available(self):
        return True

    def is_initialized(self):
        return self.initialized

    def get_backend(self):
        return self.backend

    def all_reduce(self, t):
        self.reduced.append(t.dtype)
        if t.dtype in self.refuses:
            raise RuntimeError("Invalid scalar type")


def test_deepspeed_amp_is_left_to_level_cuda_only_where_gloo_refuses_bf16():
    torch = pytest.importorskip("torch")
    from envgen.smoke import deepspeed_smoke as d
    old = _Gloo(refuses=(torch.bfloat16,))
    why = d.gloo_bf16_refusal(old, torch.bfloat16)
    assert "cannot all-reduce bfloat16 (Invalid scalar type)" in why and "level cuda" in why
    assert old.reduced == [torch.bfloat16]   # it asked the backend, it did not guess
    assert d.gloo_bf16_refusal(_Gloo(), torch.bfloat16) is None            # gloo has it
    assert d.gloo_bf16_refusal(_Gloo(backend="nccl", refuses=(torch.bfloat16,)),
                               torch.bfloat16) is None
    assert d.gloo_bf16_refusal(_Gloo(initialized=False), torch.bfloat16) is None
    assert d.gloo_bf16_refusal(old, torch.float16) is None
