"""What a hostile-input sweep of diff, doctor, profile, matrix and resolve found, each now one
sentence and exit 2: a spec option written twice with the same value (the contract says
once), a --sources mirror whose [IPv6] bracket urllib cannot read (was exit 4), an empty
--sources, --gpu, --driver or --image taken as not given, a --gpu of kilobytes echoed
whole, a file name with a line break printed raw in file:line, and a matrix read from a
git revision named by its deleted temporary copy. Offline, no daemon."""
from __future__ import annotations

import subprocess

import pytest

from envgen.cli import main
from envgen.core.errors import InputError
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec


@pytest.fixture(autouse=True)
def _offline(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing-listens.sock")
    monkeypatch.delenv("ENVGEN_SOURCES", raising=False)


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("spec", ["torch==2.3.1,python=3.11,python=3.11",
                                  "torch==2.3.1,variant=cu121,variant=cu121"])
def test_a_spec_option_written_twice_with_one_value_is_refused(spec):
    with pytest.raises(InputError, match="is given twice; keep one"):
        parse_spec(spec, load_matrix())
    # an arm64 stack's name is not the option written: its own platform= is still taken
    assert parse_spec("pytorch-cpu-arm64,platform=linux/arm64",
                      load_matrix()).platform == "linux/arm64"


@pytest.mark.parametrize("url", ["https://[::1/simple", "https://[zz]/simple"])
def test_a_mirror_with_a_bracket_that_is_no_address_is_bad_input(url, capsys):
    assert main(["resolve", "pytorch-cu121", "--sources", url]) == 2
    assert "names no host name envgen can reach" in _error(capsys)


@pytest.mark.parametrize("argv,words", [
    (["resolve", "pytorch-cu121", "--sources", ""], "--sources: '' must be auto"),
    (["diff", "--driver", "535.104.05..580.95.05", "--gpu", ""], "--gpu '' is not a GPU"),
    (["diff", "{m}", "{m}", "--driver", ""], "--driver '' must be OLD..NEW"),
    (["doctor", "--image", ""], "'' is neither an image ID"),
])
def test_an_empty_flag_value_is_refused_not_taken_as_no_flag(argv, words, capsys):
    from envgen.matrix.load import bundled_path
    assert main([a.replace("{m}", str(bundled_path())) for a in argv]) == 2
    assert words in _error(capsys)


@pytest.mark.parametrize("argv", [["resolve", "pytorch-cu121", "--gpu", "x" * 5000],
                                  ["diff", "--driver", "535.1..580.1", "--gpu", "x" * 5000]])
def test_a_gpu_name_of_kilobytes_is_not_echoed_whole(argv, capsys):
    assert main(argv) == 2
    assert len(_error(capsys)) < 200


@pytest.mark.parametrize("name", ["a\nenvgen: ok", "a\u2028b"])
def test_a_file_name_with_a_line_break_is_quoted_in_its_location(name, capsys):
    assert main(["--matrix", name, "matrix", "validate"]) == 2
    assert f"envgen: error: {name!r}: no such matrix file or folder" in _error(capsys)


def test_a_matrix_from_git_is_named_rev_path_not_its_temporary_copy(tmp_path, monkeypatch,
                                                                      capsys):
    def git(*argv):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv],
                       cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "m.yaml").write_text("drivers:\n  - {\n")
    git("add", "m.yaml")
    git("commit", "-qm", "a bad matrix")
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "HEAD:m.yaml", "HEAD:m.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("envgen: error: HEAD:m.yaml:"), err
