"""`envgen matrix refresh pytorch` against a recorded slice of PyPI served on loopback
(tests/recorded_index.py; recorded by tests/data/refresh/record.py), and once against the
live index (opt-in: ENVGEN_LIVE_INDEX=1)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from recorded_index import RecordedIndex, recorded

from envgen.refresh import Refused, refresh

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "matrices"


def bundled_rows() -> dict[str, dict]:
    doc = yaml.safe_load((BUNDLED / "pytorch.yaml").read_text())
    return {r["version"]: r for r in doc["framework_releases"]}


def matrix_with(tmp_path: Path, versions: list[str]) -> Path:
    """A matrix folder: the bundled files, pytorch.yaml cut down to `versions`."""
    folder = tmp_path / "matrix"
    folder.mkdir(parents=True)
    for p in BUNDLED.glob("*.yaml"):
        shutil.copyfile(p, folder / p.name)
    doc = yaml.safe_load((BUNDLED / "pytorch.yaml").read_text())
    doc["framework_releases"] = [r for r in doc["framework_releases"]
                                 if r["version"] in versions]
    (folder / "pytorch.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder


def cli(*args, env=None):
    e = {**os.environ, "ENVGEN_REFRESH_BACKOFF": "0", **(env or {})}
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, timeout=300, env=e)


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVGEN_REFRESH_BACKOFF", "0")


def test_adds_a_release_with_its_source_and_reproduces_the_bundled_rows(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1"])
    with RecordedIndex() as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
        assert idx.whole_downloads == []           # METADATA came from range reads only
    assert r["written"] and r["releases"] == 3 and r["previous_releases"] == 2
    assert r["refusals"] == []
    assert r["added"] == ["pytorch 2.6.0 (pypi:torch/torch-2.6.0-cp311-cp311-"
                          "manylinux1_x86_64.whl)"]
    assert any("PEP 658" in w for w in r["warnings"])
    new = {x["version"]: x for x in
           yaml.safe_load((folder / "pytorch.yaml").read_text())["framework_releases"]}
    # The replayed index derives exactly the rows the bundled matrix holds (generated from
    # the whole live index): PyPI's variant, its nvidia-* pins, pythons, companions.
    for v in ("2.4.1", "2.5.1", "2.6.0"):
        assert new[v] == bundled_rows()[v], v
    assert new["2.6.0"]["variants"][0]["packages"]["nvidia-cudnn-cu12"] == "9.1.0.70"
    assert new["2.6.0"]["companions"] == {"torchvision": "0.21.0", "torchaudio": "2.6.0"}
    # licences: torch's METADATA (2.4.1 says "BSD-3", mapped), the nvidia-* wheels' for the
    # CUDA variants; torchvision says only "BSD", which names no one licence
    assert new["2.4.1"]["license"] == new["2.6.0"]["license"] == "BSD-3-Clause"
    assert new["2.6.0"]["variants"][0]["license"] == "LicenseRef-NVIDIA-Proprietary"
    assert "license" not in new["2.6.0"]["variants"][-1]              # cpu
    assert "companion_licenses" not in new["2.6.0"]
    assert any(w.startswith("torchvision 0.19.1, 0.20.1, 0.21.0: no companion license")
               for w in r["warnings"])
    # and the written folder is a valid matrix the resolver uses
    out = cli("--matrix", str(folder), "resolve", "torch==2.6.0", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["packages"]["torch"] == "2.6.0"


def test_a_second_run_changes_nothing(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    with RecordedIndex() as idx:
        refresh(["pytorch"], folder, index_url=idx.url)
        before = (folder / "pytorch.yaml").read_bytes()
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
    assert r["unchanged"] and not r["written"] and r["added"] == r["changed"] == []
    assert (folder / "pytorch.yaml").read_bytes() == before


def test_check_reports_a_pending_change_and_writes_nothing(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1"])
    before = (folder / "pytorch.yaml").read_bytes()
    with RecordedIndex() as idx:
        out = cli("--matrix", str(folder), "matrix", "refresh", "pytorch", "--check",
                  "--index-url", idx.url, env={"ENVGEN_HOME": str(tmp_path / "h")})
    assert out.returncode == 1, out.stderr
    assert "would change (--check)" in out.stdout and "added: pytorch 2.6.0" in out.stdout
    assert (folder / "pytorch.yaml").read_bytes() == before


def test_fewer_rows_than_before_is_refused(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1", "2.6.0", "2.7.0"])
    before = (folder / "pytorch.yaml").read_bytes()
    with RecordedIndex() as idx:
        out = cli("--matrix", str(folder), "matrix", "refresh", "pytorch", "--json",
                  "--index-url", idx.url, env={"ENVGEN_HOME": str(tmp_path / "h")})
    assert out.returncode == 1 and "Traceback" not in out.stderr
    # under --json: the result (with every refusal), then the error, as JSON on stdout
    result, end = json.JSONDecoder().raw_decode(out.stdout)
    error = json.loads(out.stdout[end:])
    assert error["exit_code"] == 1 and error["message"].startswith("refusing to write")
    assert "pytorch 2.7.0 would disappear" in result["results"][0]["refusals"][0]
    assert (folder / "pytorch.yaml").read_bytes() == before


def _edit_metadata(data: dict, filename: str, old: str, new: str) -> dict:
    assert old in data["metadata"][filename]
    data["metadata"][filename] = data["metadata"][filename].replace(old, new)
    return data


def test_a_pin_going_backwards_is_refused(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1"])
    data = _edit_metadata(recorded(), "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
                          "nvidia-cudnn-cu12 (==9.1.0.70)", "nvidia-cudnn-cu12 (==9.0.0.312)")
    with RecordedIndex(data) as idx, pytest.raises(Refused) as e:
        refresh(["pytorch"], folder, index_url=idx.url)
    assert "pytorch 2.5.1 cu124: cudnn would go backwards, 9.1.0.70 -> 9.0.0.312" in \
        e.value.message
    assert (folder / "pytorch.yaml").read_text() == \
        (matrix_with(tmp_path / "again", ["2.4.1", "2.5.1"]) / "pytorch.yaml").read_text()


def _set_cuda(folder: Path, version: str, variant: str, cuda: str) -> None:
    path = folder / "pytorch.yaml"
    doc = yaml.safe_load(path.read_text())
    (row,) = [r for r in doc["framework_releases"] if r["version"] == version]
    (v,) = [v for v in row["variants"] if v["name"] == variant]
    v["cuda"] = cuda
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_a_hand_kept_correction_may_take_that_one_value_backwards(tmp_path):
    # torch 2.4.x cu124 was once given CUDA 12.4.1; pytorch_index_variants.yaml corrects it
    # to 12.4.0 (`corrects: {cuda: "12.4.1"}`): that value may go backwards, no other may
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1"])
    _set_cuda(folder, "2.4.1", "cu124", "12.4.1")
    with RecordedIndex() as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
    assert r["written"] and r["refusals"] == []
    assert "pytorch 2.4.1 cu124: cuda corrected, 12.4.1 -> 12.4.0" in r["changed"]
    rows = {r["version"]: r for r in
            yaml.safe_load((folder / "pytorch.yaml").read_text())["framework_releases"]}
    assert [v["cuda"] for v in rows["2.4.1"]["variants"] if v["name"] == "cu124"] == ["12.4.0"]

    other = matrix_with(tmp_path / "other", ["2.4.1", "2.5.1"])
    _set_cuda(other, "2.4.1", "cu124", "12.4.2")
    with RecordedIndex() as idx, pytest.raises(Refused) as e:
        refresh(["pytorch"], other, index_url=idx.url)
    assert "pytorch 2.4.1 cu124: cuda would go backwards, 12.4.2 -> 12.4.0" in e.value.message


def test_the_wheels_own_gpu_code_wins_over_an_arch_list_row(tmp_path, monkeypatch):
    from envgen.refresh import wheel_archs
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1"])
    wheel = "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"
    row = {"project": "torch", "version": "2.4.1", "variant": "cu121", "wheel": wheel,
           "sha256": "0" * 64,
           "library": "torch/lib/libtorch_cuda.so", "fatbins": 3, "build": 3,
           "sass": ["6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], "ptx": ["9.0"], "partial": []}
    monkeypatch.setattr(wheel_archs, "load", lambda project: {"2.4.1": row})
    with RecordedIndex() as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
    assert any(w.startswith("torch 2.4.1 cu121: the list kept as data gives SASS 5.0, 6.0")
               and w.endswith("carries SASS 6.0, 7.0, 7.5, 8.0, 8.6, 9.0 "
                                                  "and PTX 9.0: the wheel wins")
               for w in r["warnings"]), r["warnings"]
    rows = {x["version"]: x for x in
            yaml.safe_load((folder / "pytorch.yaml").read_text())["framework_releases"]}
    (cu121,) = [v for v in rows["2.4.1"]["variants"] if v["name"] == "cu121"]
    assert cu121["compute_capabilities"][0] == "6.0" and cu121["ptx"] == "9.0"
    assert "confidence" not in cu121
    # a record of another wheel (a rebuilt file) is not taken
    monkeypatch.setattr(wheel_archs, "load",
                        lambda project: {"2.4.1": {**row, "wheel": "other.whl"}})
    again = matrix_with(tmp_path / "again", ["2.4.1", "2.5.1"])
    with RecordedIndex() as idx:
        (r,) = refresh(["pytorch"], again, index_url=idx.url)
    rows = {x["version"]: x for x in
            yaml.safe_load((again / "pytorch.yaml").read_text())["framework_releases"]}
    (cu121,) = [v for v in rows["2.4.1"]["variants"] if v["name"] == "cu121"]
    assert cu121["compute_capabilities"][0] == "5.0" and cu121["ptx"] is None


def test_a_pin_that_does_not_parse_is_refused(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    data = _edit_metadata(recorded(), "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
                          "nvidia-cudnn-cu12 (==9.1.0.70)", "nvidia-cudnn-cu12 (==9.1 banana)")
    with RecordedIndex(data) as idx, pytest.raises(Refused) as e:
        refresh(["pytorch"], folder, index_url=idx.url)
    assert e.value.message.startswith("torch 2.5.1: cannot parse its requirement")
    assert e.value.exit_code == 1


def test_a_release_without_a_linux_x86_64_wheel_is_refused(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    data = recorded()
    data["projects"]["torch"] = [f for f in data["projects"]["torch"]
                                 if not (f["filename"].startswith("torch-2.6.0")
                                         and f["filename"].endswith("x86_64.whl"))]
    with RecordedIndex(data) as idx, pytest.raises(Refused) as e:
        refresh(["pytorch"], folder, index_url=idx.url)
    assert e.value.message == "torch 2.6.0: no Linux x86_64 CPython wheel on the index"


def test_an_unknown_cuda_runtime_is_refused_not_guessed(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    data = _edit_metadata(recorded(), "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
                          "nvidia-cuda-runtime-cu12 (==12.4.127)",
                          "nvidia-cuda-runtime-cu12 (==12.4.555)")
    with RecordedIndex(data) as idx, pytest.raises(Refused) as e:
        refresh(["pytorch"], folder, index_url=idx.url)
    assert "12.4.555 is not in CUDA_RUNTIME_TO_RELEASE" in e.value.message


def test_a_server_that_ignores_range_is_refused_not_downloaded(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    with RecordedIndex(honour_range=False) as idx, pytest.raises(Refused) as e:
        refresh(["pytorch"], folder, index_url=idx.url)
    assert "ignored the Range header" in e.value.message


def test_pep658_metadata_is_used_where_served(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    with RecordedIndex(pep658=True) as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
        assert idx.whole_downloads == []
    assert not any("PEP 658" in w for w in r["warnings"])
    assert r["written"] and len(r["added"]) == 2


def test_an_index_that_does_not_answer_is_exit_3(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    out = cli("--matrix", str(folder), "matrix", "refresh", "pytorch",
              "--index-url", "http://127.0.0.1:9/simple",
              env={"ENVGEN_HOME": str(tmp_path / "h")})
    assert out.returncode == 3, out.stderr
    assert "did not answer" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("url", ["http://pypi.org/simple", "file:///etc", "ftp://x/simple",
                                 "https://"])
def test_an_index_url_that_is_not_https_is_refused(tmp_path, url):
    folder = matrix_with(tmp_path, ["2.4.1"])
    out = cli("--matrix", str(folder), "matrix", "refresh", "pytorch", "--index-url", url)
    assert out.returncode == 2 and "is not an https URL" in out.stderr, out.stderr


def test_an_unknown_reader_and_a_missing_folder_are_exit_2(tmp_path):
    out = cli("--matrix", str(tmp_path), "matrix", "refresh", "tensorflow-nightly")
    assert out.returncode == 2 and "no reader named" in out.stderr
    out = cli("--matrix", str(tmp_path / "nope"), "matrix", "refresh", "pytorch")
    assert out.returncode == 2 and "not one" in out.stderr


def test_a_page_that_is_not_json_is_refused(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    with RecordedIndex() as idx:
        idx.page = lambda project: b"<html>not json</html>"
        with pytest.raises(Refused) as e:
            refresh(["pytorch"], folder, index_url=idx.url)
    assert "not a PEP 691 JSON page" in e.value.message


@pytest.mark.network
@pytest.mark.skipif(os.environ.get("ENVGEN_LIVE_INDEX") != "1",
                    reason="live PyPI: opt in with ENVGEN_LIVE_INDEX=1")
def test_live_index_agrees_with_the_bundled_matrix(tmp_path):
    """The bundled pytorch.yaml is what PyPI says today, or the refresh names the change."""
    folder = tmp_path / "matrix"
    shutil.copytree(BUNDLED, folder, ignore=shutil.ignore_patterns("closures"))
    out = cli("--matrix", str(folder), "matrix", "refresh", "pytorch", "--check", "--json")
    assert out.returncode in (0, 1), out.stderr
    (r,) = json.loads(out.stdout)["results"]
    assert r["refusals"] == [] and r["releases"] >= 30
    assert out.returncode == 0 or r["added"] or r["changed"]


def test_the_written_file_keeps_its_mode(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    (folder / "pytorch.yaml").chmod(0o644)
    with RecordedIndex() as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
    assert r["written"] and (folder / "pytorch.yaml").stat().st_mode & 0o777 == 0o644


def test_every_changed_field_is_reported(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    data = recorded()
    for f in data["projects"]["torch"]:
        if f["filename"].startswith("torch-2.4.1"):
            f["requires-python"] = ">=3.9.0"
    with RecordedIndex(data) as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
    assert "pytorch 2.4.1: requires_python '>=3.8.0' -> '>=3.9.0'" in r["changed"]
    assert any("wheels for Python 3.8 are published although Requires-Python is >=3.9.0" in w
               for w in r["warnings"])


def test_a_framework_over_pytorch_gets_every_release_since_2023_from_metadata(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    (folder / "lightning.yaml").unlink()
    with RecordedIndex() as idx:
        (r,) = refresh(["lightning"], folder, index_url=idx.url)
    assert r["written"] and r["releases"] == 3
    rows = {x["version"]: x for x in
            yaml.safe_load((folder / "lightning.yaml").read_text())["framework_releases"]}
    assert set(rows) == {"2.5.5", "2.5.6", "2.6.6"}   # every patch, not only each line's newest
    bundled = {x["version"]: x for x in yaml.safe_load(
        (BUNDLED / "lightning.yaml").read_text())["framework_releases"]}
    assert rows["2.6.6"] == bundled["2.6.6"]
    # Requires-Dist of lightning 2.6.6: torch<4.0,>=2.1.0; Requires-Python >=3.10
    assert rows["2.6.6"]["requires"] == {"torch": "<4.0,>=2.1.0"}
    assert rows["2.6.6"]["pythons"][0] == "3.10"


def test_a_licence_that_maps_to_nothing_is_left_out_with_a_warning(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1", "2.5.1"])
    data = _edit_metadata(recorded(), "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
                          "License: BSD-3-Clause", "License: BSD")
    data = _edit_metadata(data, "nvidia_cusparselt_cu12-0.6.2-py3-none-manylinux2014_x86_64.whl",
                          "License: NVIDIA Proprietary Software", "License: Proprietary")
    with RecordedIndex(data) as idx:
        (r,) = refresh(["pytorch"], folder, index_url=idx.url)
    rows = {x["version"]: x for x in
            yaml.safe_load((folder / "pytorch.yaml").read_text())["framework_releases"]}
    assert "license" not in rows["2.6.0"] and rows["2.5.1"]["license"] == "BSD-3-Clause"
    assert "license" not in rows["2.6.0"]["variants"][0]           # cu124 pins cusparselt
    assert "torch 2.6.0: no license written (torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl: " \
           "its METADATA says License 'BSD' and 'License :: OSI Approved :: BSD License', " \
           "which names no SPDX licence envgen maps)" in r["warnings"]
    assert any(w.startswith("torch 2.6.0 cu124: no license written (nvidia-cusparselt-cu12 "
                            "0.6.2: its METADATA says License 'Proprietary'")
               for w in r["warnings"])



# ---- source distributions (DeepSpeed has no Linux wheel) ----------------------------------

def _sdist(tmp_path, members: dict) -> bytes:
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_an_sdists_pkg_info_and_classifier_pythons_are_read(tmp_path):
    from envgen.refresh.pypi import classifier_pythons, pkg_info
    text = ("Metadata-Version: 2.4\nName: ds\nVersion: 1.0\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Classifier: Programming Language :: Python :: 3.10\n"
            "Classifier: Programming Language :: Python :: 3.12\n"
            "Classifier: Programming Language :: Python :: Implementation :: CPython\n"
            "Requires-Dist: torch>=2.0.0\n")
    data = _sdist(tmp_path, {"ds-1.0/PKG-INFO": text, "ds-1.0/ds.egg-info/PKG-INFO": "x"})
    assert pkg_info(data, "ds-1.0.tar.gz") == text
    assert classifier_pythons(text) == ["3.10", "3.12"]


@pytest.mark.parametrize("members", [{}, {"a/PKG-INFO": "x", "b/PKG-INFO": "y"},
                                     {"PKG-INFO": "at the top, not in a folder"}])
def test_an_sdist_without_one_pkg_info_is_refused(tmp_path, members):
    from envgen.refresh.pypi import Refused, pkg_info
    with pytest.raises(Refused, match="PKG-INFO"):
        pkg_info(_sdist(tmp_path, members), "ds-1.0.tar.gz")
    with pytest.raises(Refused, match="not a readable sdist"):
        pkg_info(b"not gzip", "ds-1.0.tar.gz")


def test_an_sdist_that_does_not_match_the_index_sha256_is_refused(tmp_path, monkeypatch):
    from envgen.refresh.pypi import Index, Refused
    index = Index(cache=tmp_path / "cache")
    data = _sdist(tmp_path, {"ds-1.0/PKG-INFO": "Name: ds\n"})
    monkeypatch.setattr(index, "get", lambda url, **kw: data)
    entry = {"filename": "ds-1.0.tar.gz", "url": "https://files.example/ds-1.0.tar.gz",
             "hashes": {"sha256": "0" * 64}}
    with pytest.raises(Refused, match="does not match the index's sha256"):
        index.sdist_metadata(entry)
    import hashlib
    entry["hashes"]["sha256"] = hashlib.sha256(data).hexdigest()
    assert index.sdist_metadata(entry) == "Name: ds\n"


# ---- an add-on whose image installs an extra (NeMo's [asr]) --------------------------------

NEMO_METADATA = ("Metadata-Version: 2.4\nName: nemo-toolkit\nVersion: 3.0.0\n"
                 "License-Expression: Apache-2.0\n"
                 "Requires-Dist: torch>=2.6.0\n"
                 "Requires-Dist: lightning<=2.4.0,>2.2.1; extra == \"asr\"\n"
                 "Requires-Dist: transformers; extra == \"asr\"\n"
                 "Requires-Dist: torch==2.9.0+cu129; extra == \"cu12\"\n")


class _Index:
    def __init__(self, text):
        self.text = text

    def metadata(self, wheel):
        return self.text, "pep658"


def test_the_extra_an_image_installs_is_read_and_the_others_are_not():
    from packaging.version import Version

    from envgen.refresh.addons import reader, release_row
    from envgen.refresh.pypi import Run
    wheel = {"filename": "nemo_toolkit-3.0.0-py3-none-any.whl", "pure": True,
             "requires-python": ">=3.10", "upload-time": "2026-08-01T00:00:00Z"}
    row = release_row(Run(index=_Index(NEMO_METADATA)), "nemo", Version("3.0.0"), [wheel])
    # the asr extra's lightning and transformers; not the cu12 extra's local torch build
    assert row["requires"] == {"lightning": "<=2.4.0,>2.2.1", "torch": ">=2.6.0",
                               "transformers": ">=0"}
    assert row["pythons"][0] == "3.10" and row["license"] == "Apache-2.0"
    assert "ctc" not in str(row) and reader("nemo").FILE == "nemo.yaml"


def test_a_release_whose_dependency_the_index_cannot_serve_is_left_out(tmp_path):
    # transformers 5.25.0 requires kernels>=0.19.1 while the index served kernels up to
    # 0.17.2: a row for it would resolve stacks whose closures cannot be built
    folder = matrix_with(tmp_path, ["2.4.1"])
    (folder / "lightning.yaml").unlink()
    data = recorded()
    (wheel,) = data["projects"]["packaging"]
    data["projects"]["packaging"] = [{**wheel, "filename": "packaging-22.0-py3-none-any.whl"}]
    with RecordedIndex(data) as idx:
        (r,) = refresh(["lightning"], folder, index_url=idx.url)
    rows = {x["version"] for x in
            yaml.safe_load((folder / "lightning.yaml").read_text())["framework_releases"]}
    assert rows == {"2.5.5", "2.5.6"}, r["warnings"]
    assert any(w.startswith("lightning 2.6.6 left out: it requires packaging")
               and "the index serves packaging up to 22.0" in w
               for w in r["warnings"])


def test_a_framework_with_every_line_left_out_is_refused(tmp_path):
    folder = matrix_with(tmp_path, ["2.4.1"])
    (folder / "lightning.yaml").unlink()
    data = recorded()
    del data["projects"]["tqdm"]
    with RecordedIndex(data) as idx:
        r = cli("--matrix", str(folder), "matrix", "refresh", "lightning",
                "--index-url", idx.url)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "every release was left out" in r.stderr and "no project tqdm" in r.stderr
    assert not (folder / "lightning.yaml").exists()
