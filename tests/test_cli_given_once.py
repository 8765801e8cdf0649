"""Flags and paths a user can get subtly wrong, each one sentence and exit 2 (or 3 for the
host): an option that takes one value given twice (argparse kept the last silently), `-`
named twice to `certs import` (standard input reads once), a matrix that is a device, a
report folder under a file; and a relative ENVGEN_HOME is taken from the starting folder.
Offline."""
from __future__ import annotations

from pathlib import Path

import pytest

from envgen.cli import main
from envgen.core import home


@pytest.mark.parametrize("argv,words", [
    (["resolve", "pytorch-cu121", "--python", "3.11", "--python", "3.12"],
     "argument --python: given twice (3.11, then 3.12): give it once"),
    (["resolve", "pytorch-cu121", "--python=3.11", "--python", "3.11"],
     "argument --python: given twice (3.11, then 3.11)"),
    (["lock", "--merge", "a.lock", "b.lock", "--merge", "c.lock"],
     "argument --merge: given twice (a.lock b.lock, then c.lock)"),
    (["render", "pytorch-cu121", "-o", "x", "--output", "y"],
     "argument -o/--output: given twice (x, then y)"),
    (["certify", "img", "--steps", "10", "--steps", "20"],
     "argument --steps: given twice (10, then 20)"),
])
def test_an_option_given_twice_is_refused_not_the_last_kept(argv, words, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_an_option_given_once_and_a_repeatable_one_still_work(capsys):
    assert main(["resolve", "pytorch-cu121", "--python", "3.11", "--json"]) == 0
    assert '"python": "3.11"' in capsys.readouterr().out


def test_standard_input_named_twice_to_certs_import_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    assert main(["certs", "import", "-", "-"]) == 2
    err = capsys.readouterr().err
    assert "`-` (standard input) given more than once" in err, err
    assert not (tmp_path / "home").exists()   # refused before the store is touched


def test_a_matrix_that_is_a_device_is_named_as_one_not_as_missing(capsys):
    assert main(["--matrix", "/dev/null", "resolve", "pytorch-cu121"]) == 2
    err = capsys.readouterr().err
    assert "/dev/null: is neither a regular file nor a folder" in err, err


def test_a_report_folder_under_a_file_is_bad_input_as_for_render(capsys, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    (tmp_path / "f").write_text("x")
    for argv in (["report", "-o", str(tmp_path / "f" / "r")],
                 ["render", "pytorch-cu121", "-o", str(tmp_path / "f" / "r")]):
        assert main(argv) == 2, argv
        assert "Not a directory" in capsys.readouterr().err


def test_a_relative_envgen_home_is_taken_from_the_starting_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_HOME", "state")
    assert home.home() == tmp_path / "state" and home.home().is_absolute()
    monkeypatch.delenv("ENVGEN_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")   # ignored, as XDG says
    assert home.home() == Path.home() / ".local" / "share" / "envgen"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert home.home() == tmp_path / "data" / "envgen"


def test_specs_may_follow_an_option_and_a_stray_word_is_still_refused(capsys, tmp_path,
                                                                      monkeypatch):
    """argparse takes `ci`'s KIND and SPECs together, so a SPEC after an option was an
    "unrecognized argument"; other commands keep refusing a word they do not take."""
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    assert main(["ci", "bake", "--matrix", str(Path(__file__).parents[1] / "matrices"),
                 "pytorch-cu121", "jax-cpu"]) == 0
    out = capsys.readouterr().out
    assert '"pytorch-cu121"' in out and '"jax-cpu"' in out
    assert main(["ci", "bake", "pytorch-cu121", "--bogus"]) == 2
    assert "unrecognized arguments: '--bogus'" in capsys.readouterr().err
    assert main(["resolve", "pytorch-cu121", "extra"]) == 2
    assert "unrecognized arguments: 'extra'" in capsys.readouterr().err
    # a long or hostile word is cut and its control characters shown escaped, on one line
    assert main(["resolve", "pytorch-cu121", "x" * 5000, "a\nb", *"cdefg"]) == 2
    err = capsys.readouterr().err
    assert "'" + "x" * 60 + "...'" in err and "'a\\nb'" in err and "and 2 more" in err
    assert len(err) < 400 and err.count("\n") == 1


def test_a_refused_choice_is_echoed_cut_short(capsys):
    assert main(["matrix", "show", "x" * 100_000]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: '" + "x" * 60 + "...'" in err and len(err) < 400


def test_ci_lock_takes_a_usable_file_name(capsys):
    assert main(["ci", "devcontainer", "pytorch-cu121", "--lock", ""]) == 2
    assert "'' is not a usable file or folder name" in capsys.readouterr().err


def test_a_spec_that_cannot_resolve_says_why_where_an_image_was_also_possible(capsys):
    assert main(["run", "pytorch-cu121,python=3.99", "--dry-run", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "nor a spec that resolves (" in err and "no base offers Python 3.99" in err, err
