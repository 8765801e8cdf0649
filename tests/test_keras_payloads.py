"""Keras 3 over PyTorch and JAX: the payloads keras_torch_smoke and keras_jax_smoke train with
Keras's own Model.fit on the backend KERAS_BACKEND names (envgen/smoke/keras_fit.py), and
every stack that runs Keras over another framework's base names one of them. The native runs
need keras (and torch or jax) importable and are skipped otherwise:
    pip install --target DIR keras   (then PYTHONPATH=DIR)
The image path is real in tests/test_addons_real.py (keras over the session's torch)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from test_smoke_payload import SMOKE

from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import resolve
from envgen.smoke import payload_files

NAMES = ("_harness", "keras_fit", "keras_torch_smoke", "keras_jax_smoke", "torch_smoke",
         "torch_habits", "jax_smoke")


def test_every_base_a_framework_also_runs_over_has_its_payload():
    m = load_matrix()
    over = [(f, b) for f in m.frameworks for b in f.also_over]
    assert over, "the matrix names no framework that also runs over another's base"
    for f, base in over:
        smoke = f"{f.smoke}_{m.framework(base).smoke}"
        files = payload_files(smoke)
        assert files and files[0] == f"{smoke}_smoke.py", (f.name, base)
        assert "keras_fit.py" in files


def test_the_stack_names_the_payload_over_its_base():
    m = load_matrix()
    for spec, smoke in [("keras,torch==2.4.1", "keras_torch"), ("keras,jax-cpu", "keras_jax"),
                        ("keras==2.12.0", "keras"),   # over its own base, TensorFlow
                        ("keras==3.15.1", "keras")]:
        assert resolve(m, parse_spec(spec, m)).smoke == smoke, spec


def test_framework_in_expect_is_keras_for_a_payload_over_another_base():
    from envgen.smoke import _harness as h
    rep = {"payload": "keras_torch_smoke", "versions": {"keras": "3.15.1", "torch": "2.4.1"},
           "checks": []}
    h.check_versions(rep, {"framework": "3.15.1"})
    h.check_versions(rep, {"framework": "2.4.1"})
    assert [c["passed"] for c in rep["checks"]] == [True, False]


def _keras_importable():
    os.environ.setdefault("KERAS_BACKEND", "torch")   # Keras reads it once, at import
    try:
        import keras  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"keras over torch is not importable here: {exc}")


@pytest.fixture(scope="module")
def opt_envgen(tmp_path_factory):
    folder = tmp_path_factory.mktemp("opt-envgen")
    for name in NAMES:
        shutil.copy(SMOKE / f"{name}.py", folder)
    return folder


def _run(folder, backend, *args):
    env = {**os.environ, "KERAS_BACKEND": backend}
    proc = subprocess.run([sys.executable, str(folder / "keras_torch_smoke.py"), "--quick",
                           "--require", "cpu", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tempfile.gettempdir(), check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_keras_trains_over_torch_on_the_cpu(opt_envgen):
    _keras_importable()
    import keras
    code, rep = _run(opt_envgen, "torch", "--expect", json.dumps({"framework": keras.__version__}))
    checks = {c["name"]: c for c in rep["checks"]}
    assert code == 0 and rep["passed"], rep
    assert "Model.fit on backend torch" in checks["train"]["detail"]
    assert rep["metrics"]["keras_backend"] == "torch"


def test_keras_on_another_backend_than_the_stacks_fails_its_training_check(opt_envgen):
    _keras_importable()
    try:
        import jax  # noqa: F401
    except ImportError:
        # without jax, Keras cannot load the backend at all: the import check fails instead
        code, rep = _run(opt_envgen, "jax")
        assert code != 0 and not rep["passed"]
        names = {c["name"] for c in rep["checks"] if not c["passed"]}
        assert names & {"keras_import", "train"}, rep["checks"]
        return
    code, rep = _run(opt_envgen, "jax")
    train = {c["name"]: c for c in rep["checks"]}["train"]
    assert code != 0 and not train["passed"] and "not 'torch'" in train["detail"]
