"""Review fixes: `require-cuda check` reads NVIDIA_REQUIRE_* as the NVIDIA Container Toolkit
does (libnvidia-container src/cli/dsl.c dsl_evaluate, evaluate_rule, dsl_compare_version;
src/cli/configure.c check_device_brand/arch; nvidia-container-toolkit
internal/config/image/cuda_image.go GetRequirements, HasDisableRequire), `smoke --require cuda`
without a GPU is exit 3, nvidia-smi's `inf` is no crash, and doctor's advice names no flag
doctor lacks."""
from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from envgen import doctor as dr
from envgen.cli import main
from envgen.matrix import load_matrix
from envgen.resolve import require_cuda
from envgen.runtime import host as runtime_host

DOCKER_OK = {"reachable": True, "error": None, "version": "27.3.1", "runtimes": ["nvidia"],
             "nvidia_runtime": True, "cdi_spec_dirs": [], "cdi_specs": []}


def check(capsys, *args: str) -> tuple[int, dict | None, str]:
    """(exit code, the --json document or None, stderr)."""
    rc = main(["require-cuda", "check", *args, "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out) if out.strip() else None, err


# ---- 1: a bare driver branch is its first release, as resolve reads it ----------------------

@pytest.mark.parametrize("req, driver", [("cuda>=13.0", "580"), ("driver>=535.43", "535")])
def test_a_bare_driver_branch_is_judged_as_its_first_release(capsys, req, driver):
    rc, doc, _ = check(capsys, req, "--driver", driver)
    assert (rc, doc["ok"]) == (0, True), doc
    assert doc["host"]["driver"].startswith(f"{driver}.")
    assert any(f"driver {driver} is read as" in n for n in doc["notes"])


# ---- 2: a brand or arch not given makes no definite "no" ------------------------------------

def test_an_omitted_brand_passes_its_clause_as_the_toolkit_does_with_no_gpu_and_says_so(capsys):
    req = "cuda>=12.4 brand=tesla,driver>=535,driver<536"
    rc, doc, _ = check(capsys, req, "--driver", "535.104.05")
    assert (rc, doc["ok"], doc["assumed"]) == (0, True, ["brand"])
    assert any("--brand or --gpu" in n for n in doc["notes"])
    rc, doc, _ = check(capsys, req, "--driver", "535.104.05", "--brand", "geforce")
    assert (rc, doc["ok"], doc["assumed"]) == (1, False, [])   # given: judged


def test_an_omitted_arch_passes_its_clause_and_says_so(capsys):
    rc, doc, _ = check(capsys, "arch>=9.0", "--driver", "535.104.05")
    assert (rc, doc["assumed"]) == (0, ["arch"])
    assert any("--arch or --gpu" in n for n in doc["notes"])
    d = require_cuda.evaluate({"NVIDIA_REQUIRE_CUDA": "brand=tesla"},
                              require_cuda.Host("535.104.05", "12.2"))
    assert d.ok and d.assumed == ("brand",) and "unknown" in d.why


# ---- 3: NVIDIA_DISABLE_REQUIRE is Go's strconv.ParseBool; NVIDIA_REQUIRE_JETPACK* is skipped --

@pytest.mark.parametrize("value, disabled", [
    ("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
    ("yes", False), ("on", False), ("tRUE", False), ("0", False), ("x", False), ("", False)])
def test_nvidia_disable_require_is_read_as_go_parsebool(capsys, value, disabled):
    rc, doc, _ = check(capsys, "cuda>=99", "--driver", "535.104.05",
                       "--env", f"NVIDIA_DISABLE_REQUIRE={value}")
    assert (rc == 0) is disabled and doc["ok"] is disabled


def test_nvidia_require_jetpack_is_not_a_requirement(capsys):
    rc, doc, _ = check(capsys, "cuda>=12.0", "--driver", "535.104.05",
                       "--env", "NVIDIA_REQUIRE_JETPACK=csv-mounts=all",
                       "--env", "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS=x")
    assert (rc, doc["ok"]) == (0, True)


# ---- 4: alternatives in order, the first that holds ends it; a clause is read when reached --

@pytest.mark.parametrize("req, rc_want", [
    ("cuda>=12.0 cuda>=x", 0), ("cuda>=12.0 foo=1", 0), ("cuda>=12.0,driver>=1 ==", 0),
    (",, cuda>=99", 0),          # dsl.c: `ret` starts true; a comma-only first alternative holds
    ("cuda>=99 ,,", 1),          # ... and keeps the false of the one before it
    ("cuda>=99,foo=1 cuda>=12", 0),   # the false clause ends its alternative: foo=1 unread
])
def test_alternatives_are_judged_lazily_in_the_toolkits_order(capsys, req, rc_want):
    rc, doc, err = check(capsys, req, "--driver", "535.104.05")
    assert rc == rc_want, (doc, err)


@pytest.mark.parametrize("req, named", [("cuda>=99 foo=1", "foo=1"),
                                        ("cuda>=99 cuda>=x", "cuda>=x")])
def test_a_bad_clause_the_toolkit_reaches_is_exit_2_naming_it(capsys, req, named):
    rc, doc, _ = check(capsys, req, "--driver", "535.104.05")
    assert rc == 2 and named in doc["message"]


# ---- 5: numbers past 64 bits are malformed clauses; nvidia-smi's inf is unknown -------------

@pytest.mark.parametrize("version", ["9" * 5000, "18446744073709551615", "12." + "9" * 5000])
def test_a_version_past_64_bits_is_a_malformed_clause(capsys, version):
    rc, doc, _ = check(capsys, f"cuda>={version}", "--driver", "535.104.05")
    assert rc == 2 and "64 bits" in doc["message"] and len(doc["message"]) < 300


def test_the_largest_number_the_toolkit_reads_compares():
    host = require_cuda.Host("535.104.05", "12.2")
    assert not require_cuda.evaluate({"NVIDIA_REQUIRE_CUDA": "cuda>=18446744073709551614"},
                                     host).ok
    # decided on the first part: the toolkit never reads the second
    assert require_cuda.evaluate({"NVIDIA_REQUIRE_CUDA": "cuda>=11." + "9" * 5000}, host).ok


@pytest.mark.parametrize("field", ["inf", "-inf", "1e999", "nan"])
def test_nvidia_smi_memory_that_is_not_a_number_is_unknown(field):
    row = f"0, NVIDIA H100 80GB HBM3, GPU-1, 9.0, {field}, {field}, {field}, 580.95.05\n"
    g = runtime_host.parse_query(row).gpus[0]
    assert (g.memory_total_mib, g.memory_used_mib, g.utilization) == (0, 0, 0)


# ---- 6: --brand without case ---------------------------------------------------------------

def test_brand_is_taken_in_any_case_as_nvidia_smi_prints_it(capsys):
    rc, doc, _ = check(capsys, "cuda>=99 brand=geforce,driver>=535", "--driver", "535.104.05",
                       "--brand", "GeForce")
    assert (rc, doc["host"]["brand"]) == (0, "geforce")


# ---- 7: smoke --require cuda with no GPU is the environment (exit 3) -----------------------

def _fake_payload(monkeypatch, checks, returncode=1):
    report = {"payload": "torch_smoke", "level": "cpu", "require": "cuda", "passed": False,
              "checks": checks}
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "torch" else real_find_spec(name, *a))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, returncode, json.dumps(report), ""))


NO_GPU = {"name": "cuda_available", "passed": False,
          "detail": "GPU requested (--require cuda) but torch.cuda.is_available() is False: "
                    "no GPU visible to CUDA (driver? --gpus? CUDA_VISIBLE_DEVICES?)"}


@pytest.mark.parametrize("as_json", [False, True])
def test_smoke_requiring_cuda_on_a_host_with_no_gpu_is_exit_3(monkeypatch, capsys, as_json):
    _fake_payload(monkeypatch, [NO_GPU, {"name": "train", "passed": True, "detail": "ok"}])
    rc = main(["smoke", "--require", "cuda", *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    assert rc == 3
    if as_json:   # docs/contract.md: one object, the error's
        doc = json.loads(out)
        assert doc["error"] == "EnvironmentMissing" and doc["exit_code"] == 3
        assert "is_available() is False" in doc["message"]
    else:
        assert len(err.strip().splitlines()) == 1 and "no GPU visible" in err


def test_smoke_with_a_gpu_that_fails_another_check_is_still_exit_1(monkeypatch, capsys):
    _fake_payload(monkeypatch, [dict(NO_GPU, passed=True, detail="1 device(s)"),
                                {"name": "train", "passed": False, "detail": "loss rose"}])
    assert main(["smoke", "--require", "cuda", "--json"]) == 1


# ---- 8: doctor's advice names no flag doctor lacks -----------------------------------------

def test_doctors_forward_compat_advice_for_an_unknown_gpu_names_no_doctor_flag(capsys):
    m = load_matrix()
    text = "0, NVIDIA Future DC GPU, GPU-1, 9.0, 80000, 0, 0, 470.256.02\n"
    r = dr.examine(m, runtime_host.parse_query(text), DOCKER_OK, today="2026-11-30")
    whys = [row["why"] for row in r["stacks"].values() if "forward compatibility" in row["why"]]
    assert whys
    for why in whys:
        assert "(--gpu)" not in why and "not in the matrix" in why
        assert "`envgen resolve` and `build` take --gpu NAME" in why
    # and those commands do take it; doctor does not
    assert main(["resolve", "pytorch-cu121", "--gpu", "A100", "--json"]) == 0
    capsys.readouterr()
    assert main(["doctor", "--gpu", "A100"]) == 2
