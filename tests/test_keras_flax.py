"""Keras 2 and 3, tf-keras, Flax and optax are frameworks a team pins at any release since
2023 (issue 27), installed over the stack of the framework they run on, through the same
builds_on machinery as Transformers over PyTorch: their rows come from each release's own
METADATA (Keras 2's tensorflow range from TensorFlow's METADATA, which states the Keras range
each TensorFlow release installs). Keras 3 goes over TensorFlow, JAX or PyTorch as the spec
says, with KERAS_BACKEND in the image's environment. A framework named as its CPU build
(tensorflow-cpu) goes beside one with CUDA libraries of its own."""
from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envgen.cli import main
from envgen.core.errors import InputError, Unsatisfiable
from envgen.core.model import Stack
from envgen.matrix import load_matrix
from envgen.refresh.addons import BUILDS_ON, base_ranges, range_of, reader, release_row
from envgen.refresh.pypi import Run
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()
HOST = Host(driver="550.54.14")


def res(text: str, host: Host = HOST) -> Stack:
    return resolve(M, parse_spec(text, M), host)


def inside(version: str, spec: str) -> bool:
    return SpecifierSet(spec).contains(version.split("+")[0], prereleases=True)


# ---- the readers: every row from METADATA ---------------------------------------------------

class _Index:
    """A package index of METADATA texts, by wheel file name; project pages by name."""

    def __init__(self, metadata: dict, pages: dict | None = None):
        self.texts, self.pages = metadata, pages or {}

    def metadata(self, wheel):
        return self.texts[wheel["filename"]], "pep658"

    def project(self, name):
        return self.pages[name]


def _wheel(name: str, python: str = ">=3.9", uploaded: str = "2024-10-01T00:00:00Z"):
    return {"filename": name, "pure": True, "requires-python": python,
            "upload-time": uploaded}


def test_keras_takes_its_tensorflow_range_from_the_tensorflow_releases_that_admit_it():
    ranges = [(Version("2.15.0"), SpecifierSet(">=2.15.0,<2.16")),
              (Version("2.15.1"), SpecifierSet(">=2.15.0,<2.16")),
              (Version("2.16.1"), SpecifierSet(">=3.0.0")),
              (Version("2.17.0"), SpecifierSet(">=3.2.0")),
              (Version("2.20.0"), SpecifierSet(">=3.10.0"))]
    assert range_of(Version("2.15.0"), ranges) == ">=2.15.0,<2.16.1"
    assert range_of(Version("3.6.0"), ranges) == ">=2.16.1,<2.20.0"
    assert range_of(Version("3.12.0"), ranges) == ">=2.16.1"
    assert range_of(Version("3.1.0"), ranges) == ">=2.16.1,<2.17.0"
    assert range_of(Version("2.14.0"), ranges) is None


def test_a_keras_release_no_tensorflow_admits_is_left_out_with_a_warning():
    run = Run(index=_Index({"keras-2.11.0-py3-none-any.whl": "Name: keras\nVersion: 2.11.0\n"
                                                            "License: Apache-2.0\n"}))
    ranges = [(Version("2.15.0"), SpecifierSet(">=2.15.0,<2.16"))]
    row = release_row(run, "keras", Version("2.11.0"),
                      [_wheel("keras-2.11.0-py3-none-any.whl")], ranges)
    assert row is None
    assert run.warnings == ["keras 2.11.0 left out: no tensorflow release since 2023-01-01 "
                            "states a keras range that admits it"]


def test_base_ranges_read_each_tensorflow_wheels_keras_requirement():
    def tf(version, keras):
        name = f"tensorflow-{version}-cp311-cp311-manylinux_2_17_x86_64.whl"
        return name, f"Name: tensorflow\nVersion: {version}\nRequires-Dist: {keras}\n" \
                     f"Requires-Dist: numpy<2\n"
    files = dict([tf("2.15.1", "keras<2.16,>=2.15.0"), tf("2.16.1", "keras>=3.0.0")])
    page = {"files": [{"filename": n, "upload-time": "2024-03-01T00:00:00Z"} for n in files]}
    run = Run(index=_Index(files, {"tensorflow": page}), jobs=1)
    got = sorted(base_ranges(run, "keras"))
    assert got == [(Version("2.15.1"), SpecifierSet("<2.16,>=2.15.0")),
                   (Version("2.16.1"), SpecifierSet(">=3.0.0"))]


def test_flax_keeps_its_jax_and_optax_ranges_and_not_torch():
    text = ("Name: flax\nVersion: 0.10.2\nLicense: Apache-2.0\nRequires-Dist: jax>=0.4.27\n"
            "Requires-Dist: optax\nRequires-Dist: torch; "
            "extra == \"testing\"\n")
    row = release_row(Run(index=_Index({"flax-0.10.2-py3-none-any.whl": text})), "flax",
                      Version("0.10.2"), [_wheel("flax-0.10.2-py3-none-any.whl", ">=3.10")])
    assert row["requires"] == {"jax": ">=0.4.27", "optax": ">=0"}
    assert row["pythons"][0] == "3.10" and row["license"] == "Apache-2.0"


def test_tf_keras_without_a_stated_range_gets_its_own_minor_line_as_an_inferred_need():
    text = "Name: tf-keras\nVersion: 2.14.1\nLicense: Apache-2.0\n"
    row = release_row(Run(index=_Index({"tf_keras-2.14.1-py3-none-any.whl": text})),
                      "tf-keras", Version("2.14.1"),
                      [_wheel("tf_keras-2.14.1-py3-none-any.whl", ">=3.9")])
    assert row["requires"] == {} and row["needs"] == {"tensorflow": ">=2.14,<2.15"}
    assert row["needs_why"].startswith("inferred: tf-keras 2.14.* states no tensorflow")


def test_the_readers_frameworks_name_their_base_and_keras_its_backends():
    assert BUILDS_ON == {"keras": "tensorflow", "tf-keras": "tensorflow", "flax": "jax",
                         "optax": "jax"}
    assert reader("keras").FILE == "keras.yaml"
    keras = M.framework("keras")
    assert keras.builds_on == "tensorflow" and keras.also_over == ("jax", "pytorch")
    assert keras.env_variable == "KERAS_BACKEND"
    assert dict(keras.env_values) == {"tensorflow": "tensorflow", "jax": "jax",
                                      "pytorch": "torch"}


def test_every_release_since_2023_is_in_the_matrix():
    versions = {f: {r.version for r in M.releases_of(f)}
                for f in ("keras", "tf-keras", "flax", "optax")}
    assert {"2.12.0", "2.15.0", "3.0.0", "3.6.0"} <= versions["keras"]
    assert {"2.14.1", "2.15.0", "2.15.1", "2.16.0", "2.19.0"} <= versions["tf-keras"]
    assert {"0.6.4", "0.10.2", "0.12.12"} <= versions["flax"]
    assert {"0.1.5", "0.2.4"} <= versions["optax"]
    rows = {r.version: r for r in M.releases_of("keras")}
    assert dict(rows["2.15.0"].requires) == {"tensorflow": ">=2.15.0,<2.16.1"}
    assert rows["3.6.0"].source == "pypi:keras/keras-3.6.0-py3-none-any.whl"


# ---- resolve: over TensorFlow, JAX or PyTorch -----------------------------------------------

def test_keras_3_alone_is_a_tensorflow_stack_with_its_backend_set():
    st = res("keras==3.6.0")
    pins = dict(st.packages)
    assert st.builds_on == "tensorflow" and st.version == "3.6.0" and pins["keras"] == "3.6.0"
    assert inside(pins["tensorflow"], ">=2.16.1,<2.20.0")
    assert st.env == (("KERAS_BACKEND", "tensorflow"),)
    assert st.to_json()["env"] == {"KERAS_BACKEND": "tensorflow"}
    assert Stack.from_json(st.to_json()).env == st.env


def test_keras_2_goes_with_the_tensorflow_of_its_minor_line():
    st = res("keras==2.15.0")
    assert dict(st.packages)["keras"] == "2.15.0"
    assert inside(dict(st.packages)["tensorflow"], "==2.15.*")
    assert res("keras==2.13.1").packages[0][1].startswith("2.13.")


@pytest.mark.parametrize("spec, backend, base_package", [
    ("keras==3.6.0,torch==2.4.1", "torch", "torch"),
    ("jax==0.4.35,keras==3.6.0", "jax", "jax"),
    ("torch==2.4.1,keras==3.6.0", "torch", "torch"),
])
def test_keras_3_follows_the_framework_the_spec_names(spec, backend, base_package):
    st = res(spec)
    pins = dict(st.packages)
    assert st.builds_on_package == base_package and pins["keras"] == "3.6.0"
    assert st.env == (("KERAS_BACKEND", backend),)
    assert "tensorflow" not in pins   # Keras 3's tensorflow range limits a tensorflow base only
    assert any(r.startswith(f"KERAS_BACKEND={backend} is set") for r in st.reasons)
    assert st.stack.startswith("keras-")


def test_keras_over_jax_trains_with_its_own_payload_over_jaxs():
    assert res("jax==0.4.35,keras==3.6.0").smoke == "keras_jax"
    assert res("keras==3.6.0").smoke == "keras"


def test_keras_2_over_jax_is_refused_naming_the_releases_that_do():
    with pytest.raises(Unsatisfiable) as e:
        res("keras==2.15.0,jax")
    assert "no keras release matching it runs over jax (keras >=3 does" in e.value.message


def test_tf_keras_follows_tensorflow_minors():
    st = res("tf-keras==2.16.0")
    assert st.builds_on == "tensorflow" and inside(dict(st.packages)["tensorflow"], "==2.16.*")
    old = res("tf-keras==2.14.1")
    assert inside(dict(old.packages)["tensorflow"], "==2.14.*")
    assert any("tf-keras 2.14.1 needs" in r for r in old.reasons)


def test_flax_and_optax_go_over_jax_within_their_stated_ranges():
    st = res("flax==0.10.2")
    pins = dict(st.packages)
    assert st.builds_on == "jax" and pins["flax"] == "0.10.2" and inside(pins["jax"], ">=0.4.27")
    assert st.env == ()
    st = res("optax==0.2.4,jax==0.4.35")
    assert dict(st.packages)["optax"] == "0.2.4" and dict(st.packages)["jax"] == "0.4.35"


def test_a_keras_dockerfile_sets_the_backend(monkeypatch, tmp_path):
    from closures import fake_closure, use_fake_resolver

    from envgen.render.views import render_texts
    use_fake_resolver(monkeypatch, tmp_path)
    st = res("jax==0.4.35,keras==3.6.0")
    texts = render_texts(st, fake_closure(st))
    assert 'ENV KERAS_BACKEND="jax"\n' in texts["Dockerfile"]
    plain = res("jax==0.4.35")
    assert "KERAS_BACKEND" not in render_texts(plain, fake_closure(plain))["Dockerfile"]


# ---- frameworks together --------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["jax==0.4.35,tensorflow-cpu==2.17.0",
                                  "tensorflow-cpu==2.17.0,jax==0.4.35"])
def test_jax_on_cuda_with_tensorflow_cpu_beside_it_is_one_stack(spec):
    st = res(spec)
    pins = dict(st.packages)
    assert st.framework == "jax" and st.variant == "cuda12" and pins["jax"] == "0.4.35"
    assert pins["tensorflow-cpu"] == "2.17.0" and "tensorflow" not in pins
    assert pins["nvidia-cublas-cu12"] == dict(res("jax==0.4.35").packages)["nvidia-cublas-cu12"]
    assert any(r.startswith("tensorflow-cpu 2.17.0 goes beside it") for r in st.reasons)


def test_two_frameworks_with_cuda_libraries_of_their_own_are_still_one_refusal():
    with pytest.raises(Unsatisfiable) as e:
        res("jax==0.4.35,tensorflow==2.17.0")
    msg = e.value.message
    assert "jax and tensorflow each bring their own CUDA libraries" in msg
    assert "(jax 0.4.35)" in msg and "(tensorflow 2.17.0)" in msg and "\n" not in msg


def test_a_cpu_build_beside_a_framework_of_another_python_is_refused_naming_both():
    # tensorflow 2.11.1 has wheels up to Python 3.10; jax 0.4.35 resolves on 3.11 here
    with pytest.raises(Unsatisfiable) as e:
        res("jax==0.4.35,tensorflow-cpu==2.11.1")
    assert "jax 0.4.35 resolves on Python 3.11" in e.value.message
    assert "tensorflow-cpu==2.11.1" in e.value.message


# ---- bad input: one sentence with the nearest releases, exit 2 ------------------------------

@pytest.mark.parametrize("spec, said", [
    ("keras==3.6.9", "keras==3.6.9 is not a release in the matrix (the matrix has 2.12.0 to"),
    ("tf-keras==2.13.0", "nearest: 2.14.1"),
    ("flax==0.10.99", "nearest: 0.10.7, 0.11.0"),
    ("optax==0.1.4", "nearest: 0.1.5"),
    ("flaxx==0.10.2", "unknown framework 'flaxx'; nearest: flax (0.6.4 to"),
    ("tf_keras>=9", "no tf-keras release in the matrix matches tf_keras>=9"),
])
def test_a_release_or_name_that_is_not_there_is_exit_2_with_the_nearest(spec, said, capsys):
    assert main(["resolve", spec]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert err.splitlines()[0].count(". ") == 0   # one sentence


def test_a_bad_release_is_refused_before_resolving():
    with pytest.raises((InputError, Unsatisfiable)):
        parse_spec("keras==3.6.9", M)


# ---- other add-ons are picked inside the base range the spec names ---------------------------

@pytest.mark.parametrize("spec, base_pin", [("flax==0.10.2,optax,jax==0.4.35", "0.4.35"),
                                            ("transformers,accelerate,torch==2.1.2", "2.1.2")])
def test_another_add_on_is_the_newest_that_leaves_the_named_base(spec, base_pin):
    # optax 0.2.8 states jax>=0.5.3: the newest optax that admits jax 0.4.35 is taken instead
    st = res(spec, Host())
    assert dict(st.packages)[st.builds_on_package].split("+")[0] == base_pin
    for name in st.addons:
        row = next(r for r in M.releases_of(M.framework(name).name)
                   if r.version == dict(st.packages)[name])
        assert inside(base_pin, dict(row.requires).get(st.builds_on_package, ""))


# ---- the matrix holds the new fields to their meaning ---------------------------------------

def _validate(tmp_path, capsys, name: str, old: str, new: str) -> tuple[int, str]:
    from pathlib import Path
    src = Path(__file__).resolve().parents[1] / "matrices"
    folder = tmp_path / "m"
    folder.mkdir(parents=True)
    for f in src.glob("*.yaml"):
        text = f.read_text()
        if f.name == name:
            assert old in text
            text = text.replace(old, new, 1)
        (folder / f.name).write_text(text)
    rc = main(["--matrix", str(folder), "matrix", "validate"])
    return rc, capsys.readouterr().err


def test_also_over_must_name_a_framework_with_stacks_of_its_own(tmp_path, capsys):
    rc, err = _validate(tmp_path, capsys, "keras.yaml", "frameworks: [jax, pytorch]",
                        "frameworks: [jax, flax]")
    assert rc == 2 and "framework keras: also_over 'flax' is not a framework with stacks" in err


def test_a_release_over_a_base_needs_a_range_of_it_stated_or_needed(tmp_path, capsys):
    rc, err = _validate(tmp_path, capsys, "tf-keras.yaml",
                        '  needs: {tensorflow: ">=2.14,<2.15"}\n', '  needs: {numpy: "<2"}\n')
    assert rc == 2
    assert "tf-keras 2.14.1: neither requires nor needs gives a tensorflow range" in err
    assert _validate(tmp_path / "ok", capsys, "tf-keras.yaml", "", "")[0] == 0


# ---- the payloads: the base's training, the add-on's version --------------------------------

@pytest.mark.parametrize("smoke, base", [("flax", "jax"), ("optax", "jax"),
                                         ("keras", "tensorflow")])
def test_an_add_on_payload_compares_the_add_ons_version(smoke, base):
    import importlib

    from envgen.smoke import _harness as h
    from envgen.smoke import payload_files
    payload = importlib.import_module(f"envgen.smoke.{smoke}_smoke").PAYLOAD
    assert payload_files(smoke)[:1] == (f"{smoke}_smoke.py",)
    assert f"{base}_smoke.py" in payload_files(smoke) and "_harness.py" in payload_files(smoke)
    rep = h.new_report(payload, "cpu")
    rep["versions"].update({base: "9.9.9", smoke: "1.2.3"})
    h.check_versions(rep, {"framework": "1.2.3"})
    assert rep["checks"][-1]["passed"], rep["checks"]
    h.check_versions(rep, {"framework": "9.9.9"})   # the base's version is not the add-on's
    assert not rep["checks"][-1]["passed"]


@pytest.mark.parametrize("spec, smoke, env", [
    ("flax==0.10.2", "flax", ()), ("optax==0.2.4", "optax", ()),
    ("keras==3.6.0", "keras", (("KERAS_BACKEND", "tensorflow"),)),
    ("tf-keras==2.16.0", "keras", (("TF_USE_LEGACY_KERAS", "1"),)),
])
def test_each_add_on_stack_names_its_payload_and_environment(spec, smoke, env):
    st = res(spec)
    assert st.smoke == smoke and st.env == env
