"""A review of certification: each check can fail when its subject is broken.

1. the judge (certificate.pass_problem / level_problem) refuses a pass whose checks are
   named twice, lack a training that ran, skip a check that proves the GPU at a GPU level,
   or claim level multi-gpu with no multi-GPU check run;
2. torch_smoke's amp fails when autocast silently computes in float32;
3. --multi-gpu asked for and not runnable is a failed check in the torch, JAX and
   TensorFlow payloads, never a skip that passes;
4. the startup check fails when the modules of envgen's venv were not loaded from bytecode.
Everything runs on the CPU; JAX and TensorFlow are stood in for where they are absent."""
from __future__ import annotations

import contextlib
import copy
import json
import re
import sys
import types
from pathlib import Path

import pytest

from envgen.certs import certificate
from envgen.certs.certificate import intrinsic_problem
from envgen.smoke import _harness as h
from envgen.smoke import torch_smoke as ts  # importable without torch: its checks say so

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "envgen" / "smoke"
REAL = json.loads((ROOT / "docs/certificates/h200-1gpu.json").read_text())
REAL.pop("_path", None)


def real():
    return copy.deepcopy(REAL)


# ---- 1. the judge ------------------------------------------------------------------------

def test_every_certificate_on_record_is_still_accepted():
    found = [p for p in sorted((ROOT / "docs/certificates").glob("*.json"))
             if "schema" in json.loads(p.read_text())]
    assert len(found) >= 18
    for p in found:
        assert intrinsic_problem(json.loads(p.read_text())) is None, p.name


def test_a_pass_whose_checks_share_a_name_is_refused():
    c = real()
    c["report"]["checks"] = [{"name": "whatever", "passed": True, "detail": "x"}] * 3
    assert intrinsic_problem(c) == ("it claims a pass but its payload's report names the "
                                    "check 'whatever' 3 times (a payload reports each check "
                                    "once)")
    c = real()
    c["report"]["checks"].append(dict(c["report"]["checks"][0]))   # nvidia_smi twice
    assert "names the check 'nvidia_smi' 2 times" in intrinsic_problem(c)


def test_a_gpu_pass_without_a_training_that_ran_is_refused():
    c = real()
    c["report"]["checks"] = [x for x in c["report"]["checks"] if x["name"] == "nvidia_smi"]
    assert intrinsic_problem(c) == ("it claims a pass at level cuda but its payload's report "
                                    "has no 'train' check that ran (the training is what a "
                                    "certificate proves)")
    c = real()
    next(x for x in c["report"]["checks"] if x["name"] == "train")["skipped"] = True
    assert "no 'train' check that ran" in intrinsic_problem(c)


@pytest.mark.parametrize("name", ["model_on_cuda", "cuda_arch", "cudnn_conv", "device"])
def test_a_gpu_pass_with_a_check_that_proves_the_gpu_skipped_is_refused(name):
    c = real()
    next(x for x in c["report"]["checks"] if x["name"] == name)["skipped"] = True
    assert intrinsic_problem(c) == (f"it claims a pass at level cuda but its check {name!r}, "
                                    f"which proves the GPU, was skipped")


def test_a_multi_gpu_pass_without_a_multi_gpu_check_that_ran_is_refused():
    c = real()
    c["host"]["gpus"] = [{"index": i, "name": "NVIDIA H200"} for i in range(2)]
    c["level"] = c["report"]["level"] = "multi-gpu"
    assert intrinsic_problem(c) == ("it claims a pass at level multi-gpu but no multi_gpu "
                                    "check of its payload ran")
    c["report"]["checks"].append({"name": "multi_gpu", "passed": True, "skipped": True,
                                  "detail": "needs more than one GPU"})
    assert "no multi_gpu check of its payload ran" in intrinsic_problem(c)
    c["report"]["checks"][-1] = {"name": "multi_gpu_ddp", "passed": True, "detail": "DDP"}
    assert intrinsic_problem(c) is None


def test_the_judges_check_names_are_those_the_payloads_emit():
    """Every payload trains under the check name `train` (keras_jax_smoke adds keras_train
    beside JAX's own), and each check the judge holds to have run at a GPU level is one a
    payload emits."""
    text = {p.name: p.read_text() for p in SMOKE.glob("*.py")}
    emitted = set(re.findall(r'\(rep, "([a-z_0-9]+)"', "".join(text.values())))
    assert set(certificate.GPU_CHECKS) <= emitted
    for name, src in text.items():
        if name.endswith("_smoke.py"):   # its own train, or that of the payload it runs
            assert ('(rep, "train"' in src or "h.renamed(" in src or "base.run_into" in src
                    or "ts.guarded(rep, \"train\"" in src), name


# ---- 2. torch's amp ----------------------------------------------------------------------

needs_torch = pytest.mark.skipif(ts.torch is None, reason="torch is not importable here")


def _cpu_rep():
    rep = h.new_report(ts.PAYLOAD, "cpu")
    rep["level"] = "cpu"
    return rep


def _amp(rep):
    cpu = ts.torch.device("cpu")
    ts.torch.manual_seed(0)
    data = ts.make_data(256, 0, cpu)
    ts.check_amp(rep, cpu, data, 12, 64)
    return next(c for c in rep["checks"] if c["name"] == "amp")


@needs_torch
def test_amp_passes_where_autocast_computes_in_bfloat16():
    amp = _amp(_cpu_rep())
    assert amp["passed"] and "layer outputs bfloat16" in amp["detail"], amp


@needs_torch
def test_amp_fails_when_autocast_silently_computes_in_float32(monkeypatch):
    monkeypatch.setattr(ts.torch, "autocast", lambda *a, **k: contextlib.nullcontext())
    amp = _amp(_cpu_rep())
    assert not amp["passed"] and "layer outputs float32" in amp["detail"], amp


# ---- 3. --multi-gpu asked for and not runnable -------------------------------------------

def _multi(rep):
    return next(c for c in rep["checks"] if c["name"] == "multi_gpu")


def _opts(payload):
    return h.build_parser(payload).parse_args(["--require", "cpu", "--multi-gpu", "--quick"])


@needs_torch
def test_torch_multi_gpu_asked_for_on_no_second_gpu_fails():
    rep = h.new_report(ts.PAYLOAD, "cpu")
    ts.torch_run(rep, _opts(ts.PAYLOAD), 1e12, None)
    c = _multi(rep)
    assert not c["passed"] and not c.get("skipped") and "more than one GPU" in c["detail"]
    assert not h.finish(rep)["passed"]


def test_jax_multi_gpu_asked_for_on_no_second_gpu_fails(monkeypatch):
    from envgen.smoke import jax_smoke as js

    def no_gpu(rep, opts):
        rep["level"] = "cpu"
        return [], object(), "JAX_PLATFORMS=cpu"
    monkeypatch.setattr(js, "load_stack", lambda rep, require: True)
    monkeypatch.setattr(js, "find_devices", no_gpu)
    monkeypatch.setattr(js, "read_versions", lambda rep, gpu: {})
    monkeypatch.setattr(js, "jax", types.SimpleNamespace(__version__="0.0-stand-in"))
    monkeypatch.setattr(js, "flax", None)
    rep = h.new_report(js.PAYLOAD, "cpu")
    js.run_into(rep, _opts(js.PAYLOAD), 1e12)
    c = _multi(rep)
    assert not c["passed"] and not c.get("skipped") and "more than one GPU" in c["detail"]


def test_tensorflow_multi_gpu_asked_for_fails(monkeypatch):
    from envgen.smoke import tensorflow_smoke as tfs

    def no_gpu(rep, opts):
        rep["level"] = "cpu"
        return [], "--require cpu", []
    monkeypatch.setattr(tfs, "load", lambda rep: True)
    monkeypatch.setattr(tfs, "find_gpus", no_gpu)
    monkeypatch.setattr(tfs, "make_data", lambda *a, **k: None)
    monkeypatch.setattr(tfs, "check_train", lambda *a, **k: None)
    monkeypatch.setattr(tfs, "check_amp", lambda *a, **k: None)
    monkeypatch.setattr(tfs, "read_versions", lambda rep: {})
    monkeypatch.setattr(tfs, "tf", types.SimpleNamespace(
        __version__="0.0-stand-in", device=lambda where: contextlib.nullcontext()))
    rep = h.new_report(tfs.PAYLOAD, "cpu")
    tfs.run_into(rep, _opts(tfs.PAYLOAD), 1e12)
    c = _multi(rep)
    assert not c["passed"] and not c.get("skipped") and "--multi-gpu" in c["detail"]


# ---- 4. startup: the venv's modules from bytecode ----------------------------------------

def _modules(folder, n, with_pyc, name="m"):
    folder.mkdir(parents=True, exist_ok=True)
    mods = {}
    for i in range(n):
        src, pyc = folder / f"m{i}.py", folder / f"m{i}.pyc"
        if i < with_pyc:
            pyc.write_bytes(b"")
        mods[f"{name}{i}"] = types.SimpleNamespace(
            __spec__=types.SimpleNamespace(origin=str(src), cached=str(pyc)))
    return mods


@pytest.mark.parametrize("with_pyc, passed", [(0, False), (18, False), (19, True), (20, True)])
def test_startup_fails_when_the_venvs_modules_lack_bytecode(tmp_path, monkeypatch, with_pyc,
                                                            passed):
    venv = tmp_path / "opt" / "venv"
    venv.mkdir(parents=True)
    monkeypatch.setattr(h, "ENVGEN_VENV", str(venv.resolve()))   # envgen's /opt/venv
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    mods = _modules(venv / "lib" / "site-packages", 20, with_pyc)
    mods.update(_modules(tmp_path / "usr", 20, 20, "base"))   # the base's own Python: not counted
    rep = _cpu_rep()
    h.check_startup(rep, "torch", 1.0, None, modules=mods)
    (c,) = rep["checks"]
    assert c["passed"] is passed, c
    assert f"{with_pyc} of 20 modules of the venv {venv} from bytecode" in c["detail"]
    if not passed:
        assert "fewer than 95%" in c["detail"] and "PYTHONPYCACHEPREFIX" in c["fix"]


def test_startup_of_no_venv_passes_saying_so_and_keeps_the_advice(tmp_path, monkeypatch):
    # a framework base's own environment (a venv of its own: the lent GPU machine's torch
    # is in /opt/torch/.venv), or a host's Python run natively: not envgen's venv
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "opt" / "torch" / ".venv"))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    rep = _cpu_rep()
    h.check_startup(rep, "torch", 1.0, None, modules=_modules(tmp_path, 10, 2))
    (c,) = rep["checks"]
    assert c["passed"] and "no module imported from /opt/venv, envgen's venv" in c["detail"]
    assert c["warning"] and "compiles 8 modules on every start" in c["fix"]
