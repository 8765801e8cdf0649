"""`envgen matrix refresh tensorflow` against a small index served on loopback
(tests/recorded_index.py): TensorFlow's and-cuda pins read from wheel METADATA with range
requests, cross-checked against the tested build table the reader keeps (TESTED)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from recorded_index import RecordedIndex

from envgen.refresh import Refused, refresh
from envgen.refresh import tensorflow as reader

BUNDLED = Path(__file__).resolve().parents[1] / "matrices"
EXACT = {"nvidia-cuda-runtime-cu12": "==12.5.82", "nvidia-cudnn-cu12": "==9.3.0.75",
         "nvidia-nccl-cu12": "==2.23.4"}
RANGES = {"nvidia-cuda-runtime-cu12": "<13.0,>=12.5.82", "nvidia-cudnn-cu12": "<10.0,>=9.3.0.75",
          "nvidia-nccl-cu12": "<3.0,>=2.27.7"}
NEWER = {"nvidia-cuda-runtime-cu12": ["12.5.82", "12.9.79"],
         "nvidia-cudnn-cu12": ["9.3.0.75", "9.20.0.48"],
         "nvidia-nccl-cu12": ["2.23.4", "2.27.7", "2.29.3"]}


def _file(name, version, tag, requires_python=">=3.9"):
    stem = name.replace("-", "_")
    return {"filename": f"{stem}-{version}-{tag}.whl", "hashes": {"sha256": "0" * 64},
            "requires-python": requires_python, "size": 1, "upload-time": "2026-03-06T00:00:00Z",
            "yanked": False}


def _meta(name, version, requires=(), license="Apache 2.0"):
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             f"License: {license}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n\n"


def index_data(releases: dict[str, dict], cpu: bool = True) -> dict:
    """tensorflow (and tensorflow-cpu) at each version with its and-cuda requirements, Keras,
    and the nvidia-* wheels the floors and licences are looked up in."""
    projects, metadata = {}, {}

    def add(project, version, tag, requires=(), rp=">=3.9", license="Apache 2.0"):
        f = _file(project, version, tag, rp)
        projects.setdefault(project, []).append(f)
        metadata[f["filename"]] = _meta(project, version, requires, license)

    for version, extra in releases.items():
        reqs = ["keras>=3.5.0"] + [f"{n}{s}; extra == \"and-cuda\"" for n, s in extra.items()]
        for py in ("310", "311"):
            tag = f"cp{py}-cp{py}-manylinux_2_17_x86_64"
            add("tensorflow", version, tag, reqs)
            if cpu or py == "311":   # cpu=False: tensorflow-cpu lacks a Python
                add("tensorflow-cpu", version, tag, reqs[:1])
    add("keras", "3.10.0", "py3-none-any", rp=">=3.9")
    add("keras", "3.12.4", "py3-none-any", rp=">=3.11")   # not for TensorFlow's 3.10
    for name, versions in NEWER.items():
        for v in versions:
            add(name, v, "py3-none-manylinux_2_17_x86_64", license="NVIDIA Proprietary Software")
    return {"projects": projects, "metadata": metadata, "source": "synthetic"}


def folder_for(tmp_path) -> Path:
    folder = tmp_path / "matrix"
    folder.mkdir()
    for p in BUNDLED.glob("*.yaml"):
        if p.name != reader.FILE:
            shutil.copyfile(p, folder / p.name)
    return folder


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVGEN_REFRESH_BACKOFF", "0")


def run(tmp_path, releases, cpu=True):
    folder = folder_for(tmp_path)
    with RecordedIndex(index_data(releases, cpu)) as idx:
        (result,) = refresh(["tensorflow"], folder, index_url=idx.url)
        assert idx.whole_downloads == []
    doc = yaml.safe_load((folder / reader.FILE).read_text())
    return result, {r["version"]: r for r in doc["framework_releases"]}


def test_exact_pins_are_written_as_the_wheel_states_them(tmp_path):
    result, rows = run(tmp_path, {"2.19.1": EXACT})
    cu, cpu = rows["2.19.1"]["variants"]
    assert cu["name"] == "cu125" and cu["cuda"] == "12.5.1"   # cudart 12.5.82, cuda.yaml
    assert (cu["cudnn"], cu["nccl"]) == ("9.3.0.75", "2.23.4")
    assert cu["packages"] == {n: s[2:] for n, s in EXACT.items()}
    assert "ranges" not in cu["why"] and ".bazelrc" in cu["why"]   # CC: inferred
    assert cu["ptx"] == "9.0" and "9.0" not in cu["compute_capabilities"]
    assert cpu == {"name": "cpu", "package": "tensorflow-cpu", "cuda": None, "cudnn": None,
                   "nccl": None, "compute_capabilities": [], "ptx": None,
                   "sources": ["pypi"], "packages": {}}
    assert rows["2.19.1"]["pythons"] == ["3.10", "3.11"]
    assert rows["2.19.1"]["companions"] == {"keras": "3.10.0"}   # 3.12.4 lacks Python 3.10
    assert rows["2.19.1"]["license"] == "Apache-2.0" and result["written"]


def test_ranges_are_pinned_to_their_floor_on_the_tested_line_not_the_newest(tmp_path):
    _, rows = run(tmp_path, {"2.21.0": RANGES})
    cu = rows["2.21.0"]["variants"][0]
    assert cu["packages"] == {"nvidia-cuda-runtime-cu12": "12.5.82",
                              "nvidia-cudnn-cu12": "9.3.0.75", "nvidia-nccl-cu12": "2.27.7"}
    assert cu["confidence"] == "inferred"
    assert "states ranges, not pins" in cu["why"] and "inferred from the table" in cu["why"]


def test_wheels_that_disagree_with_the_tested_table_are_refused(tmp_path):
    older = dict(EXACT, **{"nvidia-cudnn-cu12": "==9.20.0.48"})
    with pytest.raises(Refused) as e:
        run(tmp_path, {"2.19.1": older})
    assert "tested build table gives CUDA 12.5 and cuDNN 9.3" in e.value.message
    assert not (tmp_path / "matrix" / reader.FILE).exists()


def test_a_line_the_table_lacks_is_refused_not_guessed(tmp_path):
    with pytest.raises(Refused) as e:
        run(tmp_path, {"2.21.0": RANGES, "2.22.0": RANGES})
    assert "no row for 2.22" in e.value.message and reader.TESTED_SOURCE in e.value.message


def test_where_tensorflow_cpu_lacks_a_python_the_cpu_variant_is_plain_tensorflow(tmp_path):
    result, rows = run(tmp_path, {"2.21.0": RANGES}, cpu=False)
    cpu = rows["2.21.0"]["variants"][1]
    assert cpu["name"] == "cpu" and "package" not in cpu
    assert any("tensorflow-cpu lacks wheels" in w for w in result["warnings"])


def test_the_bundled_table_agrees_with_the_bundled_matrix():
    """Every release of matrices/tensorflow.yaml has its CUDA and cuDNN line in TESTED."""
    doc = yaml.safe_load((BUNDLED / reader.FILE).read_text())
    for r in doc["framework_releases"]:
        cuda, cudnn = reader.TESTED[".".join(r["version"].split(".")[:2])]
        cu = next((v for v in r["variants"] if v["cuda"]), None)
        if cu is None:   # before the and-cuda extra (2.14): the reason is in the row
            assert r["refused_variants"] == {"cu" + cuda.replace(".", ""): reader.NO_EXTRA}
            continue
        assert cu["cuda"].startswith(cuda + ".") and cu["cudnn"].startswith(cudnn + ".")
        assert cu["name"] == "cu" + cuda.replace(".", "")


def _read(version, sass, ptx):
    return {"project": "tensorflow", "version": version, "variant": "cu125",
            "wheel": f"tensorflow-{version}-cp311-cp311-manylinux_2_17_x86_64.whl",
            "sha256": "0" * 64, "library": "tensorflow/libtensorflow_cc.so.2",
            "fatbins": 9, "build": 9, "sass": sass, "ptx": ptx, "partial": []}


def test_the_wheels_own_gpu_code_replaces_the_bazelrc_list(tmp_path, monkeypatch):
    from envgen.refresh import wheel_archs
    record = {"2.19.1": _read("2.19.1", ["5.0", "6.0", "7.0", "7.5", "8.0"], ["8.0"]),
              "2.21.0": _read("2.21.0", ["6.0", "7.0", "8.0", "8.9"], ["9.0"])}
    monkeypatch.setattr(wheel_archs, "load", lambda project: record)
    result, rows = run(tmp_path, {"2.19.1": EXACT, "2.21.0": RANGES})
    exact = rows["2.19.1"]["variants"][0]
    assert (exact["compute_capabilities"], exact["ptx"]) == \
        (["5.0", "6.0", "7.0", "7.5", "8.0"], "8.0")
    assert "confidence" not in exact and "why" not in exact     # every fact read
    assert any(w.startswith("tensorflow 2.19.1 cu125: the list kept as data gives SASS "
                            "6.0, 7.0, 8.0, 8.9 and PTX 9.0") for w in result["warnings"])
    ranged = rows["2.21.0"]["variants"][0]
    assert ranged["confidence"] == "inferred" and "ranges" in ranged["why"]
    assert ".bazelrc" not in ranged["why"]                       # the CC part is read now
    assert not any(w.startswith("tensorflow 2.21.0") and "the wheel wins" in w
                   for w in result["warnings"])                  # the same: no warning
