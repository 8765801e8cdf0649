"""What a release's code needs that its metadata does not say, read from its source and
marked inferred. Lightning 2.2 and 2.3 import pkg_resources, which setuptools 82 removed:
`needs: {setuptools: "<82"}`, resolved in the add-ons' layer. And a release whose code needs
a newer Python patch release than its Requires-Python says:
NeMo 3.0 restores a .nemo through TarFile.extract(filter=...), which Python 3.11 has from
3.11.4 on, and Debian bookworm's python3 is 3.11.2. The matrix says so (python_floors on
the release, python_patch on each base); the resolver moves the stack to a base whose
Python has it, or refuses naming both versions."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from envgen.core.errors import EnvgenError, Unsatisfiable
from envgen.matrix import load_matrix
from envgen.refresh.addons import needs, python_floors
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

BUNDLED_DIR = Path(__file__).resolve().parents[1] / "matrices"
M = load_matrix()


def res(spec: str, **host):
    return resolve(M, parse_spec(spec, M), host_from_flags(M, **host))


def test_the_bases_python_patch_releases_are_the_matrixs():
    patch = {b.name: b.python_patch for b in M.bases}
    assert patch["debian-bookworm"] == "3.11.2" and patch["debian-trixie"] == "3.13.5"
    assert all(p and p.startswith(b.python + ".") for b, p in
               ((b, b.python_patch) for b in M.bases if b.kind != "framework"))


def test_nemo_3_goes_to_trixie_saying_why_and_2_7_stays_on_bookworm():
    st = res("nemo-cu124")
    assert (st.version, st.base.name, st.python) == ("3.0.0", "debian-trixie", "3.13")
    said = [r for r in st.reasons if "3.11.4" in r]
    assert len(said) == 1 and "debian-bookworm has 3.11.2" in said[0]
    assert not any("requested Python" in r for r in st.reasons), "no Python was requested"
    old = res("nemo==2.7.3,variant=cu124")
    assert old.base.name == "debian-bookworm" and old.python == "3.11"


def test_python_3_11_asked_for_gets_the_newest_nemo_that_runs_on_it():
    st = res("nemo-cu124,python=3.11")
    assert st.version == "2.7.3" and st.base.name == "debian-bookworm"


@pytest.mark.parametrize("spec", ["nemo==3.0.0,python=3.11",
                                  "nemo==3.0.0,variant=cu124,base=debian-bookworm"])
def test_nemo_3_on_bookworms_python_is_refused_naming_both_versions(spec):
    with pytest.raises(Unsatisfiable) as e:
        res(spec)
    assert "3.11.4" in e.value.message and "3.11.2" in e.value.message


def test_a_lock_or_label_carries_no_patch_release():
    assert "python_patch" not in res("nemo-cu124").base.to_json()


def test_the_reader_writes_the_floors_for_the_releases_that_need_them():
    pythons = ["3.10", "3.11", "3.12", "3.13"]
    row = python_floors("nemo", Version("3.0.0"), pythons)
    assert row["python_floors"] == ["3.10.12", "3.11.4"] and "PEP 706" in \
        row["python_floors_why"]
    assert python_floors("nemo", Version("2.7.3"), pythons) == {}
    assert python_floors("lightning", Version("2.5.0"), pythons) == {}


def _matrix_with(tmp_path, name, old, new) -> Path:
    folder = tmp_path / "m"
    shutil.copytree(BUNDLED_DIR, folder, ignore=shutil.ignore_patterns("closures"))
    text = (folder / name).read_text()
    assert old in text
    (folder / name).write_text(text.replace(old, new, 1))
    return folder


@pytest.mark.parametrize("name,old,new,says", [
    ("nemo.yaml", 'python_floors: ["3.10.12", "3.11.4"]', 'python_floors: ["3.11.4", "3.11.6"]',
     "at most once"),
    ("nemo.yaml", 'python_floors: ["3.10.12", "3.11.4"]', 'python_floors: ["3.9.17"]',
     "at most once"),
    ("nemo.yaml", 'python_floors: ["3.10.12", "3.11.4"]', 'python_floors: ["3.11"]',
     "python_floors"),
    ("bases.yaml", 'python_patch: "3.11.2"', 'python_patch: "3.12.1"', "not a release of"),
])
def test_a_floor_or_patch_release_that_does_not_fit_is_refused_with_its_line(
        tmp_path, name, old, new, says):
    folder = _matrix_with(tmp_path, name, old, new)
    with pytest.raises(EnvgenError) as e:
        load_matrix(folder)
    assert says in str(e.value) and name in (e.value.file or "") and e.value.line


def test_lightning_2_3_gets_a_setuptools_with_pkg_resources_in_its_own_layer():
    st = res("lightning-cu117")
    assert st.version == "2.3.3" and dict(st.packages)["setuptools"] == "<82"
    assert "setuptools" in st.addons, "resolved anew over the base closure's setuptools"
    assert any("pkg_resources" in r for r in st.reasons)
    assert "setuptools" not in dict(res("lightning-cu121").packages)   # 2.4 and later


def test_the_reader_writes_needs_for_the_releases_that_have_them():
    assert needs("lightning", Version("2.3.3"))["needs"] == {"setuptools": "<82"}
    assert needs("lightning", Version("2.4.0")) == {} == needs("nemo", Version("3.0.0"))


@pytest.mark.parametrize("old,new,says", [
    ("  needs_why: 'inferred: lightning/fabric/__init__.py imports pkg_resources, which "
     "setuptools 82.0.0 removed'\n", "", "needs without needs_why"),
    ('needs: {setuptools: "<82"}', 'needs: {setuptools: "<<82"}', "needs"),
])
def test_needs_that_do_not_parse_or_say_nothing_of_why_are_refused(tmp_path, old, new, says):
    folder = _matrix_with(tmp_path, "lightning.yaml", old, new)
    with pytest.raises(EnvgenError) as e:
        load_matrix(folder)
    assert says in str(e.value) and e.value.line


def test_transformers_5_14_is_not_put_over_torch_2_4():
    # 5.14.1 states torch>=2.4 but imports DTensor, public from torch 2.5 (certification of
    # transformers-cu121 over torch 2.4.1 failed on it): the cu121 stack takes 5.13.1
    st = res("transformers-cu121")
    assert st.version == "5.13.1" and dict(st.packages)["torch"] == "2.4.1"
    pinned = res("transformers==5.14.1,variant=cu121")
    assert Version(dict(pinned.packages)["torch"].split("+")[0]) >= Version("2.5")
    assert any("DTensor" in r for r in pinned.reasons)


def test_transformers_4_50_and_4_51_are_not_put_over_torch_2_0():
    # modeling_utils imports flex_attention.py, whose module-level @torch.compiler.disable
    # needs torch 2.1 (transformers-cu117, 4.51.3 over torch 2.0.1, failed certification)
    assert needs("transformers", Version("4.51.3"))["needs"] == {"torch": ">=2.1"}
    assert needs("transformers", Version("4.50.0"))["needs"] == {"torch": ">=2.1"}
    assert needs("transformers", Version("4.49.0")) == {} == needs("transformers",
                                                                   Version("4.52.4"))
    st = res("transformers-cu117")
    assert st.version == "4.49.0" and dict(st.packages)["torch"] == "2.0.1"
    with pytest.raises(EnvgenError) as e:
        res("transformers==4.51.3,variant=cu117")
    assert e.value.exit_code == 2 and "torch.compiler" in str(e.value)


def test_deepspeed_gets_a_setuptools_with_pkg_resources_only_over_torch_before_2_2():
    # torch 2.0.1's cpp_extension imports pkg_resources (gone in setuptools 82): DeepSpeed's
    # build over it failed; over torch 2.4.1 it builds with setuptools 84
    row = needs("deepspeed", Version("0.16.9"))
    assert row["needs"] == {"setuptools": "<82"} and row["needs_over"] == "<2.2"
    # 0.18 and later compile Muon's kernels with torch.compile when imported (torch 2.0
    # refuses it on Python 3.11+), and 0.17.6's ZeRO-2 failed over torch 2.0.1: they take
    # torch 2.2 or later, so cu117 takes 0.16.9
    assert needs("deepspeed", Version("0.19.8"))["needs"] == {"torch": ">=2.2"}
    assert needs("deepspeed", Version("0.17.6"))["needs"] == {"torch": ">=2.2"}
    old = res("deepspeed-cu117")
    assert old.version == "0.16.9" and dict(old.packages)["torch"].startswith("2.0.") and \
        dict(old.packages)["setuptools"] == "<82"
    with pytest.raises(EnvgenError) as e:
        res("deepspeed==0.19.8,variant=cu117")
    assert "torch.compile" in str(e.value) and "deepspeed==0.16.9" in " ".join(e.value.hints)
    assert any("over torch<2.2" in r and "pkg_resources" in r for r in old.reasons)
    new = res("deepspeed-cu121")
    assert "setuptools" not in dict(new.packages)
    assert not any("over torch<2.2" in r for r in new.reasons)


@pytest.mark.parametrize("old,new,says", [
    ('needs_over: "<2.2"', 'needs_over: "<<2.2"', "not a version specifier"),
    ('  needs: {setuptools: "<82"}\n', "", "needs_over without needs"),
])
def test_a_needs_over_that_does_not_parse_or_has_no_needs_is_refused(tmp_path, old, new, says):
    folder = _matrix_with(tmp_path, "deepspeed.yaml", old, new)
    with pytest.raises(EnvgenError) as e:
        load_matrix(folder)
    assert says in str(e.value) and e.value.line and "deepspeed.yaml" in str(e.value.file)
