"""NVIDIA_REQUIRE_* read as the NVIDIA Container Toolkit reads it. Every expected value
below follows libnvidia-container's src/cli/dsl.c (evaluate_rule, dsl_compare_version,
dsl_compare_string) and src/cli/configure.c (the four rules cuda, driver, arch, brand):
https://github.com/NVIDIA/libnvidia-container/blob/master/src/cli/dsl.c"""
from __future__ import annotations

import pytest

from envgen.core.errors import InputError
from envgen.resolve import require_cuda

HOST = require_cuda.Host(driver="550.54.15", cuda="12.4", brand="tesla", arch="9.0")


def ok(text: str, host=HOST) -> bool:
    return require_cuda.evaluate({"NVIDIA_REQUIRE_CUDA": text}, host).ok


# dsl.c: the rule name is compared with str_case_equal; NVIDIA's arm64 CUDA 12.3 images set
# NVIDIA_REQUIRE_CUDA=CUDA>=12.3 and start fine.
@pytest.mark.parametrize("text", ["CUDA>=12.3", "Cuda>=12.3", "cuda>=12.3"])
def test_rule_names_are_read_in_any_case(text):
    assert ok(text)


# dsl.c: the operator is the longest run of <>=! and must equal one of = != < <= > >=.
@pytest.mark.parametrize("text", ["cuda==12.4", "cuda=>12", "cuda<>12", "cuda!12", "cuda=<12"])
def test_operators_the_toolkit_does_not_know_are_refused(text):
    with pytest.raises(InputError, match="operators"):
        ok(text)


# dsl_compare_version returns -1 (invalid expression) for anything but digits and dots.
@pytest.mark.parametrize("text", ["cuda>=12.x", "driver>=535-1", "arch>=sm90", "cuda>="])
def test_a_version_is_digits_and_dots(text):
    with pytest.raises(InputError):
        ok(text)


# dsl_compare_version skips trailing ".0" parts: 12.4 == 12.4.0, and 12 == 12.0.
@pytest.mark.parametrize("text,expected", [("cuda=12.4.0", True), ("cuda>=12.4.0.0", True),
                                           ("cuda>12.4.0", False), ("cuda<=12.4", True),
                                           ("driver>=550.54.15", True),
                                           ("driver>550.54.15.0", False),
                                           ("driver>=550.100", False), ("arch=9", True)])
def test_versions_compare_as_numbers_with_trailing_zeros_ignored(text, expected):
    assert ok(text) is expected


# dsl_compare_string: = and != without case; other operators are -1.
def test_brands_compare_without_case_and_only_with_equality():
    assert ok("brand=TESLA,driver>=550")
    assert not ok("brand!=Tesla")
    with pytest.raises(InputError, match="= or !="):
        ok("brand>=tesla")


# dsl_evaluate: strsep on " " then ","; empty pieces are skipped.
def test_empty_pieces_are_skipped_as_the_toolkit_skips_them():
    assert ok("cuda>=12.0,,driver>=550  ")
    assert ok("  cuda>=13.0   brand=tesla,driver>=550,driver<551")
    assert not ok("cuda>=13.0 ,")


def test_unknown_rules_are_refused():
    with pytest.raises(InputError, match="cuda, driver, arch or brand"):
        ok("gpu=h100")
