"""cuDNN CUDA ranges and driver-branch lifecycle facts, each checked against the page that
states it (or, for a fact no source states, that the row says it is inferred)."""
from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from envgen.matrix import load_matrix

M = load_matrix()
CUDNN_900 = "https://docs.nvidia.com/deeplearning/cudnn/backend/v9.0.0/reference/support-matrix.html"
CUDNN_950 = "https://docs.nvidia.com/deeplearning/cudnn/v9.5.0/reference/support-matrix.html"
CUDNN_805 = "https://developer.download.nvidia.com/compute/redist/cudnn/v8.0.5/RHEL7_3-x64"
DRIVERS_2021 = "https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf"
LIFECYCLE_615 = ("https://docs.nvidia.com/datacenter/tesla/drivers/615/"
                 "supported-drivers-and-cuda-toolkit-versions.html")
LIFECYCLE_620 = ("https://docs.nvidia.com/datacenter/tesla/drivers/620/"
                 "supported-drivers-and-cuda-toolkit-versions.html")


def _cudnn(version: str):
    return M.library("cudnn", version)


def _branch(branch: str):
    return next(d for d in M.drivers if d.branch == branch)


def _supports(spec: str, cuda: str) -> bool:
    return cuda in SpecifierSet(spec)


# cuDNN 9.0.0 support matrix: "cuDNN 9.0.0 for CUDA 11.x" rows list 11.8 and 11.7 ... 11.0
# (no static linking), "for CUDA 12.x" rows list 12.3, 12.2, 12.1, 12.0.
# cuDNN 9.5.0 support matrix: 11.8 and 11.7 ... 11.0 (no static linking), 12.6 ... 12.0.
@pytest.mark.parametrize("version,source", [("9.0.0.312", CUDNN_900), ("9.5.0.50", CUDNN_950)])
def test_cudnn_9_0_and_9_5_support_cuda_11_0_to_12_x(version, source):
    lib = _cudnn(version)
    assert lib.cuda == ">=11.0,<13" and lib.source == source and not lib.inferred
    assert _supports(lib.cuda, "11.0") and _supports(lib.cuda, "11.7")
    assert _supports(lib.cuda, "12.6") and not _supports(lib.cuda, "13.0")


def test_cudnn_8_0_5_was_built_for_cuda_10_1_to_11_1():
    # developer.download.nvidia.com/compute/redist/cudnn/v8.0.5/RHEL7_3-x64 lists
    # libcudnn8-8.0.5.39-1.cuda10.1, .cuda10.2, .cuda11.0 and .cuda11.1 packages, no other.
    lib = _cudnn("8.0.5.39")
    assert lib.cuda == ">=10.1,<11.2" and lib.source == CUDNN_805
    assert all(_supports(lib.cuda, c) for c in ("10.1", "10.2", "11.0", "11.1"))
    assert not _supports(lib.cuda, "11.2")


def test_cudnn_9_1_to_9_10_take_the_11_0_floor_of_the_tables_either_side_and_say_so():
    # No NVIDIA source states an 11.8 floor for these; the 9.0.0 and 9.5.0 tables (above)
    # list a CUDA 11.x package for 11.0-11.7 beside the 11.8 one. Their own tables were not
    # read whole, so each row says it is inferred.
    for version in ("9.1.0.70", "9.3.0.75", "9.5.1.17", "9.10.2.21"):
        lib = _cudnn(version)
        assert lib.cuda == ">=11.0,<13" and lib.inferred and "11.0-11.7" in lib.why


def test_cudnn_8_1_to_8_4_had_cuda_10_2_builds_too():
    # NVIDIA's tarballs cudnn-10.2-linux-x64-v8.1.1.33.tgz, ...-v8.2.4.15.tgz and the
    # _cuda10.2-archive files of 8.3.3.40 and 8.4.1.50; NVIDIA's 8.2.2 and 8.4.0 tables list
    # a separate CUDA 10.2 package.
    for version in ("8.1.1.33", "8.2.4.15", "8.3.3.40", "8.4.1.50"):
        lib = _cudnn(version)
        assert lib.cuda == ">=10.2,<12" and lib.inferred and "10.2" in lib.why


def test_cudnn_cu13_only_builds():
    # PyPI (https://pypi.org/simple/nvidia-cudnn-cu12/) has no 9.19.1.2 or 9.28.1.4 wheel;
    # https://pypi.org/simple/nvidia-cudnn-cu13/ has both.
    for version in ("9.19.1.2", "9.28.1.4"):
        assert _cudnn(version).cuda == ">=13.0,<14"


@pytest.mark.parametrize("branch,lts,eol", [
    ("418", True, "2022-03"), ("440", False, "2020-11"), ("450", True, "2023-07"),
    ("455", False, None), ("460", False, "2022-01")])
def test_2021_lifecycle_table(branch, lts, eol):
    # NVIDIA_CUDA_Drivers_Support.pdf (March 2021), Table 1: R418 LTSB March 2022, R440 NFB
    # November 2020, R450 LTSB July 2023, R455 Evaluation/Developer "Not Applicable",
    # R460 Production Branch January 2022.
    d = _branch(branch)
    assert (d.lts, d.eol, d.source) == (lts, eol, DRIVERS_2021)


def test_current_lifecycle_tables():
    # 615 edition: R535 LTSB June 2026, R610 New Feature Branch August 2026.
    assert (_branch("535").lts, _branch("535").eol, _branch("535").source) == (
        True, "2026-06", LIFECYCLE_615)
    assert (_branch("610").lts, _branch("610").eol) == (False, "2026-08")
    # 620 edition: R580 LTSB June 2028, R595 Production Branch March 2027.
    assert (_branch("580").lts, _branch("580").eol) == (True, "2028-06")
    assert (_branch("595").lts, _branch("595").eol, _branch("595").source) == (
        False, "2027-03", LIFECYCLE_620)


def test_r550_ended_june_2025():
    # https://github.com/NVIDIA/gpu-driver-container/pull/381 (NVIDIA, citing the lifecycle
    # table): "R550 has EOL'ed as of June 2025"; no table edition with an R550 column was found,
    # so the row says it is inferred.
    d = _branch("550")
    assert d.eol == "2025-06" and not d.lts and d.inferred
    assert d.source == "https://github.com/NVIDIA/gpu-driver-container/pull/381"


@pytest.mark.parametrize("branch,eol", [("470", "2024-07"), ("515", "2023-05"),
                                        ("525", "2023-11")])
def test_months_no_table_edition_gives_are_inferred(branch, eol):
    # No edition of the lifecycle table found gives these months (the v580 edition,
    # docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html,
    # only names R515 and R525 among end-of-life branches): values kept, marked inferred.
    d = _branch(branch)
    assert d.eol == eol and d.inferred and d.why
