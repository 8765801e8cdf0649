"""`envgen require-cuda check STRING --driver V --gpu NAME` judges the requirement with the
GPU's facts: its brand and compute capability (unless --brand/--arch say), and exit 1 with
the reason when the driver cannot run the GPU at all (before its first driver, past its last
branch), whatever the string says."""
from __future__ import annotations

import json

from envgen.cli import main

R470_TESLA = "cuda>=12.0 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471"


def check(capsys, *args):
    rc = main(["require-cuda", "check", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_the_gpus_brand_and_compute_capability_are_the_hosts(capsys):
    rc, out = check(capsys, R470_TESLA, "--driver", "470.256.02", "--gpu", "A100")
    assert rc == 0 and out["ok"]
    assert (out["host"]["brand"], out["host"]["arch"]) == ("nvidia", "8.0")


def test_a_geforce_gpu_fails_a_data_center_only_requirement(capsys):
    rc, out = check(capsys, R470_TESLA, "--driver", "470.256.02", "--gpu", "RTX 3090")
    assert rc == 1 and out["host"]["brand"] == "geforce"
    assert "no alternative holds" in out["why"]


def test_a_driver_older_than_the_gpu_is_refused_with_the_reason(capsys):
    rc, out = check(capsys, R470_TESLA, "--driver", "470.256.02", "--gpu", "H100")
    assert rc == 1 and out["clause"] == "--gpu H100"
    assert "the first driver that supports the H100" in out["why"]


def test_a_driver_past_the_gpus_last_branch_is_refused_with_the_reason(capsys):
    rc, out = check(capsys, "cuda>=12.0", "--driver", "590.48.01", "--gpu", "V100")
    assert rc == 1
    assert out["why"] == ("driver 590.48.01 is past R580, the last driver branch that "
                          "supports the V100 (Volta)")


def test_brand_and_arch_given_win_over_the_gpus(capsys):
    rc, out = check(capsys, "cuda>=12.0 arch=9.0", "--driver", "580.95.05", "--gpu", "A100",
                    "--arch", "9.0", "--brand", "tesla")
    assert rc == 0 and (out["host"]["brand"], out["host"]["arch"]) == ("tesla", "9.0")


def test_a_gpu_the_matrix_does_not_know_is_exit_2(capsys):
    rc = main(["require-cuda", "check", "cuda>=12.0", "--driver", "580.95.05",
               "--gpu", "Voodoo 5"])
    assert rc == 2 and "not a GPU in the matrix" in capsys.readouterr().err
