"""The spec grammar holds real requirement lines (issue 27): commas separate frameworks and
the clauses of one range, PEP 440 operators, extras and local versions keep their meaning,
the spec is echoed as written, and a version, release or name that is not there is one
sentence naming the nearest that are (exit 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from envgen.cli import main
from envgen.core.errors import InputError, Unsatisfiable
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

BUNDLED = load_matrix()
MINI = load_matrix(Path(__file__).parent / "fixtures" / "mini.yaml")


def refused(text: str, m=BUNDLED) -> InputError:
    with pytest.raises(InputError) as e:
        resolve(m, parse_spec(text, m), Host())
    return e.value


# ---- commas: frameworks and the clauses of one range ----------------------------------------

def test_clauses_after_a_name_belong_to_it_until_the_next_name():
    s = parse_spec("transformers>=4.41.2,<=4.45.2,accelerate>=0.30.1,<=0.34.2", BUNDLED)
    assert s.framework == "transformers" and s.specifier == SpecifierSet(">=4.41.2,<=4.45.2")
    assert s.also == (("accelerate", SpecifierSet(">=0.30.1,<=0.34.2")),)


def test_a_two_range_requirement_line_resolves_inside_both_ranges():
    st = resolve(BUNDLED, parse_spec("transformers>=4.41.2,<=4.45.2,accelerate>=0.30.1,"
                                     "<=0.34.2", BUNDLED), Host())
    pins = dict(st.packages)
    assert st.version == "4.45.2" and SpecifierSet(">=0.30.1,<=0.34.2").contains(
        pins["accelerate"])


def test_options_stay_options_after_a_range():
    s = parse_spec("torch>=2.3,<2.5,python=3.11,variant=cu121", BUNDLED)
    assert (s.specifier, s.python, s.variant) == (SpecifierSet(">=2.3,<2.5"), "3.11", "cu121")


def test_spaces_around_operators_and_commas_are_read():
    s = parse_spec("torch >= 2.3, < 2.5", BUNDLED)
    assert s.specifier == SpecifierSet(">=2.3,<2.5")


def test_a_canonical_spelling_of_a_name_is_the_same_framework():
    assert parse_spec("Nemo_Toolkit", BUNDLED).framework == "nemo"


def test_a_single_equals_sign_after_a_framework_says_to_write_two():
    e = refused("torch=2.4")
    assert "torch==2.4" in e.message


def test_an_unknown_option_is_named_with_the_known_ones():
    e = refused("torch,os=linux")   # platform= is an option since the platform axis
    assert "'os'" in e.message and "python" in e.message and "platform" in e.message


def test_a_version_clause_before_any_name_is_refused():
    e = refused(">=2.4,torch")
    assert "'>=2.4'" in e.message and "name" in e.message


# ---- operators, extras and local versions keep their meaning -------------------------------

@pytest.mark.parametrize("text", ["torch~=2.4.0", "torch!=2.4.0,>=2.4,<2.5",
                                  "torch===2.4.1", "torch >= 2.4, < 2.5"])
def test_the_spec_is_echoed_as_written(text):
    st = resolve(BUNDLED, parse_spec(text, BUNDLED), Host())
    assert st.version == "2.4.1"
    assert f"matching {text} " in st.reasons[0], st.reasons[0]


def test_compatible_release_is_not_echoed_with_a_doubled_tilde(capsys):
    assert main(["resolve", "torch~=2.4.0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "~~=" not in json.dumps(doc) and "torch~=2.4.0" in doc["reasons"][0]


def test_an_extra_names_the_variant():
    st = resolve(BUNDLED, parse_spec("jax[cuda12]", BUNDLED), Host())
    assert st.variant == "cuda12" and st.framework == "jax"


def test_an_extra_that_names_no_variant_is_refused_saying_which_there_are():
    e = refused("jax[tpu]")
    assert "tpu" in e.message and "cuda12" in e.message and "cpu" in e.message


def test_the_extra_the_image_installs_anyway_is_accepted():
    extra = BUNDLED.framework("nemo").extra
    assert parse_spec(f"nemo-toolkit[{extra}]", BUNDLED).framework == "nemo"


def test_a_local_version_pins_the_release_and_names_the_variant():
    st = resolve(BUNDLED, parse_spec("torch==2.1.2+cu121", BUNDLED), Host())
    assert (st.version, st.variant) == ("2.1.2", "cu121")
    assert "torch==2.1.2+cu121" in st.reasons[0]


def test_a_local_version_that_names_no_variant_is_refused():
    e = refused("torch==2.1.2+cu999")
    assert "cu999" in e.message and "cu121" in e.message


def test_a_local_version_and_a_variant_option_that_disagree_are_refused():
    e = refused("torch==2.1.2+cu121,variant=cu118")
    assert "names two variants" in e.message


def test_the_base_framework_named_first_is_echoed_as_written():
    st = resolve(BUNDLED, parse_spec("torch~=2.4.0,transformers", BUNDLED), Host())
    assert "torch~=2.4.0" in st.reasons[0] and "pytorch~=" not in st.reasons[0]


# ---- bad input: one sentence with the nearest releases that exist --------------------------

def test_a_version_between_releases_names_the_one_below_and_the_one_above():
    e = refused("torch==2.5.0", MINI)
    assert isinstance(e, Unsatisfiable)
    assert e.message.startswith("torch==2.5.0 is not a release")
    assert e.message.endswith("nearest: 2.3.1, 2.7.1")
    assert list(e.hints) == ["torch==2.3.1", "torch==2.7.1"]


def test_a_range_above_every_release_names_the_newest():
    e = refused("torch>=99", MINI)
    assert "no torch release in the matrix matches torch>=99" in e.message
    assert e.message.endswith("nearest: 2.11.0")


def test_a_pre_release_is_said_to_be_one():
    e = refused("torch==2.7.1rc1", MINI)
    assert "pre-release" in e.message and "nearest: 2.3.1, 2.7.1" in e.message


def test_a_version_that_is_no_version_is_refused_with_the_releases_there_are():
    e = refused("torch==banana", MINI)
    assert "not a PEP 440 version" in e.message and "2.11.0" in e.message


def test_an_unknown_release_of_a_second_framework_is_named():
    e = refused("torch==2.4.1,transformers==4.0.0")
    assert "transformers==4.0.0 is not a release" in e.message and "nearest:" in e.message


def test_a_misspelt_framework_names_the_nearest_one():
    e = refused("tranformers==4.44.2")
    assert "unknown framework 'tranformers'" in e.message and "nearest: transformers" in e.message


@pytest.mark.parametrize("text", ["transformers==4.57.9", "torch==banana", "tranformers",
                                  "jax[tpu]", "torch==2.1.2+cu999", "torch=2.4",
                                  "torch;python_version>'3'", "torch @ https://x/y.whl"])
def test_bad_specs_are_one_sentence_and_exit_2(capsys, text):
    rc = main(["resolve", text])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.startswith("envgen: error: ")
