"""Every release a team pins (issue 27): the releases since 2023 resolve by spec under the
names people write (pytorch-lightning, torchvision, tensorflow-cpu), a build upstream has
but envgen does not serve is data with its reason, and the named menu stays one stack per
framework and variant."""
from __future__ import annotations

import json

import pytest
import yaml

from envgen.cli import main
from envgen.core.errors import InputError, Unsatisfiable
from envgen.matrix import load_matrix
from envgen.matrix.load import bundled_path
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()


def stack(text: str):
    return resolve(M, parse_spec(text, M), Host())


@pytest.mark.parametrize("text, framework, version", [
    ("transformers==4.46.2", "transformers", "4.46.2"),
    ("transformers==4.57.1", "transformers", "4.57.1"),
    ("lightning==2.5.1", "lightning", "2.5.1"),
    ("lightning==2.0.0", "lightning", "2.0.0"),
    ("pytorch-lightning==2.4.0", "pytorch-lightning", "2.4.0"),
    ("pytorch-lightning==1.9.5", "pytorch-lightning", "1.9.5"),
    ("tensorflow==2.17.0", "tensorflow", "2.17.0"),
    ("tensorflow==2.13.0", "tensorflow", "2.13.0"),
])
def test_a_release_the_issue_found_refused_now_resolves(text, framework, version):
    st = stack(text)
    assert (st.framework, st.version) == (framework, version)


def test_pytorch_lightning_installs_its_own_distribution_and_lightnings_payload():
    st = stack("pytorch-lightning==2.4.0,torch==2.4.1")
    pins = dict(st.packages)
    assert pins["pytorch-lightning"] == "2.4.0" and pins["torch"] == "2.4.1"
    assert "lightning" not in pins and st.smoke == "lightning"
    assert st.stack == "pytorch-lightning-cu121"


@pytest.mark.parametrize("text, torch", [
    ("torchvision==0.16.2", "2.1.2"),
    ("torchaudio==2.4.1", "2.4.1"),
    ("torchvision>=0.19,<0.20", "2.4.1"),
])
def test_a_companion_asked_for_directly_resolves_to_the_torch_that_pins_it(text, torch):
    st = stack(text)
    assert st.framework == "pytorch" and st.version == torch
    name, want = text.split("=", 1)[0].rstrip("<>="), None
    assert name in dict(st.packages)
    assert st.reasons[0].startswith(f"torch {torch} is the newest release matching {text}")
    del want


def test_a_companion_version_no_release_pins_is_one_sentence_with_the_nearest(capsys):
    with pytest.raises(Unsatisfiable) as e:
        stack("torchvision==0.16.9")
    assert "no torch release in the matrix comes with torchvision==0.16.9" in e.value.message
    assert "nearest: 0.16.2, 0.17.0" in e.value.message
    assert main(["resolve", "torchvision==0.16.9"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 3


def test_a_companion_with_an_extra_is_refused_naming_the_framework():
    with pytest.raises(InputError) as e:
        parse_spec("torchvision[cu121]==0.16.2", M)
    assert "torchvision is installed with torch" in e.value.message


def test_a_tensorflow_release_before_the_and_cuda_extra_is_a_cpu_stack_and_says_why():
    st = stack("tensorflow==2.13.0")
    assert st.variant == "cpu" and dict(st.packages) == {"tensorflow-cpu": "2.13.0",
                                                         **{k: v for k, v in st.packages
                                                            if k != "tensorflow-cpu"}}
    doc = yaml.safe_load((bundled_path() / "tensorflow.yaml").read_text())
    row = next(r for r in doc["framework_releases"] if r["version"] == "2.13.0")
    assert "no and-cuda extra" in row["refused_variants"]["cu118"]
    # with a CUDA release in range, the CUDA build is still the one taken
    assert stack("tensorflow>=2.13,<2.15").variant == "cu118"


def test_every_release_since_2023_is_in_the_matrix():
    versions = {f: {r.version for r in M.releases_of(f)} for f in
                ("lightning", "pytorch-lightning", "tensorflow")}
    assert {"1.9.0", "2.0.0", "2.5.1", "2.6.6"} <= versions["lightning"]
    assert {"1.9.0", "1.9.5", "2.4.0"} <= versions["pytorch-lightning"]
    assert {"2.11.1", "2.12.0", "2.17.0", "2.21.0"} <= versions["tensorflow"]


def test_the_named_menu_is_one_stack_per_framework_and_variant(capsys):
    names = M.stack_names()
    assert len(names) == len(set(names)) and len(names) < 100
    per = {}
    for n in names:
        fw = n.rsplit("-", 1)[0]
        per[fw] = per.get(fw, 0) + 1
    # releases add no names: a framework has at most one stack per CUDA line it is built for
    assert max(per.values()) <= 16
    assert main(["matrix", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["stacks"]) == len(names)


def _tgz(members: dict) -> bytes:
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


def test_an_sdist_without_requires_dist_takes_its_requirements_txt():
    # DeepSpeed before 0.16.1: PKG-INFO names no requirement, setup.py reads this file
    from envgen.refresh.pypi import Refused, pkg_info, requirements
    head = "Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.15.4\n"
    data = _tgz({"deepspeed-0.15.4/PKG-INFO": head + "\nlong description\n",
                 "deepspeed-0.15.4/requirements/requirements.txt":
                     "hjson\nninja\n# a comment\ntorch\npydantic>=2.0.0\n"})
    text = pkg_info(data, "deepspeed-0.15.4.tar.gz")
    names = [r.name for r in requirements(text, "3.11", "deepspeed 0.15.4")]
    assert names == ["hjson", "ninja", "torch", "pydantic"]
    assert text.endswith("\n\nlong description\n")
    stated = _tgz({"d-1/PKG-INFO": head + "Requires-Dist: torch>=2\n\nbody\n",
                   "d-1/requirements/requirements.txt": "numpy\n"})
    assert [r.name for r in requirements(pkg_info(stated, "d-1.tar.gz"), "3.11", "d")] == \
        ["torch"]                                   # PKG-INFO's own list wins
    bad = _tgz({"d-1/PKG-INFO": head, "d-1/requirements/requirements.txt": "not a $req\n"})
    with pytest.raises(Refused, match="no requirement"):
        pkg_info(bad, "d-1.tar.gz")


def test_a_release_whose_code_needs_a_newer_torch_than_it_states_is_not_a_menu_stack():
    # nemo-toolkit 2.6.0 and 2.6.1 state torch unbounded; 2.6.2 says torch>=2.6.0
    row = next(r for r in M.releases_of("nemo") if r.version == "2.6.1")
    assert dict(row.needs) == {"torch": ">=2.6"} and row.needs_why.startswith("inferred")
    assert not {"nemo-cu117", "nemo-cu121"} & set(M.stack_names())
    from packaging.version import Version
    torch = dict(stack("nemo-toolkit==2.6.1,python=3.11").packages)["torch"]
    assert Version(torch.split("+")[0]) >= Version("2.6")
    with pytest.raises(Unsatisfiable, match="2.6.0 and 2.6.1 state torch without a range"):
        stack("nemo-toolkit==2.6.1,torch==2.4.1")


@pytest.mark.parametrize("text, said", [
    ("jax==0.4.20,variant=cuda12", "served only from Google's find-links page"),
    ("tensorflow==2.12.0,variant=cu118", "has no and-cuda extra")])
def test_a_variant_the_matrix_refuses_says_why(text, said):
    """refused_variants is data the refusal quotes, not a silent 'no such build'."""
    with pytest.raises(Unsatisfiable) as e:
        stack(text)
    assert said in e.value.message


def test_a_framework_and_its_companion_named_together_are_one_requirement():
    st = stack("torch==2.1.2,torchvision==0.16.2")
    assert (st.stack, st.version) == ("pytorch-cu121", "2.1.2")
    with pytest.raises(Unsatisfiable) as e:
        stack("torch==2.1.2,torchvision==0.17.0")
    assert "'torch==2.1.2' and 'torchvision==0.17.0' pin no pytorch release" in e.value.message
    with pytest.raises(InputError) as e:
        stack("torch==2.1.2,torch==2.2.0")
    assert "names a framework twice" in e.value.message


def test_an_old_jax_gets_the_numpy_its_code_needs():
    """jax before 0.4.26 calls numpy.trapz, gone from NumPy 2 (found by certifying
    jax-cpu==0.4.18): the stack pins numpy<2 and says why; 0.4.26 on does not."""
    m = load_matrix()
    old = resolve(m, parse_spec("jax-cpu==0.4.18", m), Host())
    assert dict(old.packages)["numpy"] == "<2" and dict(old.packages)["scipy"] == "<1.13"
    assert any("needs numpy<2" in r and "trapz" in r for r in old.reasons)
    assert "scipy" not in dict(resolve(m, parse_spec("jax-cpu==0.4.24", m), Host()).packages)
    new = resolve(m, parse_spec("jax-cpu==0.4.26", m), Host())
    assert "numpy" not in dict(new.packages)


@pytest.mark.parametrize("spec,cap", [("tensorflow-cpu==2.11.1", "<1.24"),
                                      ("tensorflow-cpu==2.14.1", "<2"),
                                      ("tensorflow-cpu==2.15.0", None)])
def test_a_tensorflow_without_a_numpy_cap_gets_the_next_lines(spec, cap):
    """TensorFlow 2.11 and 2.14 state no NumPy cap though the next line does (2.11.1 failed
    import over NumPy 2.5.5): their stacks pin the cap with the reason; 2.15 states its own."""
    m = load_matrix()
    st = resolve(m, parse_spec(spec, m), Host())
    assert dict(st.packages).get("numpy") == cap
    assert any("needs numpy" in r for r in st.reasons) == (cap is not None)


def test_lightning_2_0_gets_the_lightning_cloud_its_import_needs():
    """lightning 2.0's import reaches lightning_cloud.openapi.AppinstancesIdBody, gone in
    lightning-cloud 0.6.0 (2.0.0 failed certification on it): capped with the reason, and
    setuptools<82 kept; 2.1 on needs no cap."""
    m = load_matrix()
    old = dict(resolve(m, parse_spec("lightning==2.0.0,torch==2.0.1", m), Host()).packages)
    assert old["lightning-cloud"] == "<0.6" and old["setuptools"] == "<82"
    new = dict(resolve(m, parse_spec("lightning==2.1.0,torch==2.1.2", m), Host()).packages)
    assert "lightning-cloud" not in new


def test_accelerate_before_0_21_gets_a_setuptools_with_pkg_resources():
    """accelerate to 0.20.3 imports pkg_resources (0.16.0 failed certification without
    it): setuptools<82 with the reason; 0.21 on needs nothing."""
    m = load_matrix()
    old = resolve(m, parse_spec("accelerate==0.16.0,torch==2.0.1", m), Host())
    assert dict(old.packages)["setuptools"] == "<82"
    assert any("pkg_resources" in r for r in old.reasons)
    new = resolve(m, parse_spec("accelerate==0.21.0,torch==2.0.1", m), Host())
    assert "setuptools" not in dict(new.packages)
