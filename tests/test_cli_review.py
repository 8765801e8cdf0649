"""Flags that were taken and then ignored, or given to the wrong part: each is one sentence
and exit 2 now, instead of doing something other than what was asked."""
from __future__ import annotations

import json

import pytest

from envgen.cli import main


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _err(capsys, args) -> str:
    assert main(args) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--python", "3.99"], ["--driver", "535.274.02"],
                                   ["--gpu", "H100"], ["--extra", "x"]])
def test_init_of_a_stack_refuses_the_flags_that_go_with_from(capsys, tmp_path, flags):
    """`init pytorch-cu121 --python 3.99` wrote a plain envgen.yaml and said nothing."""
    err = _err(capsys, ["init", "pytorch-cu121", *flags])
    assert "go with --from PATH" in err or "goes with --from PATH" in err
    assert not (tmp_path / "envgen.yaml").exists()


def test_init_refuses_an_empty_name(capsys, tmp_path):
    assert "--name is empty" in _err(capsys, ["init", "pytorch-cu121", "--name", ""])


def test_lock_merge_with_push_and_no_spec_is_refused(capsys, tmp_path):
    """`lock --merge L --push REPO` wrote the lock and pushed nothing, silently."""
    (tmp_path / "a.lock").write_text("{}")
    err = _err(capsys, ["lock", "--merge", "a.lock", "-o", "m.lock", "--push",
                        "localhost:5000/team"])
    assert "--merge alone takes entries as they are and pushes nothing" in err


@pytest.mark.parametrize("args", [
    ["--collect", "run", "--resubmit-failed", "run"], ["-o", "run", "--collect", "run"],
    ["--collect", "run", "--submit"]])
def test_fleet_refuses_two_things_to_do_at_once(capsys, tmp_path, args):
    """--collect with --resubmit-failed ran the resubmit and dropped the collect."""
    (tmp_path / "f.yaml").write_text("stacks: [pytorch-cu121]\ntargets:\n  - name: cpu\n"
                                     "    partition: debug\n    level: cpu\n    time: 1h\n")
    assert "are two things to do: give one" in _err(capsys, ["fleet", "f.yaml", "--slurm",
                                                              *args])


def test_certify_takes_a_file_named_like_a_stack_for_the_stack(tmp_path):
    from envgen.commands.certify import is_sif
    (tmp_path / "pytorch-cu121").write_text("notes\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "image").write_bytes(b"SIF")
    assert not is_sif("pytorch-cu121") and is_sif("./sub/image") and is_sif("x.sif")
    assert not is_sif("localhost:5000/team/x")


@pytest.mark.parametrize("flags, words", [
    (["--env", "=x"], "must be NAME=VALUE with NAME one the container runtime reads"),
    (["--env", "PATH=/x"], "must be NAME=VALUE"), (["--brand", ""], "is not a GPU brand")])
def test_require_cuda_check_refuses_what_the_runtime_would_not_read(capsys, flags, words):
    assert words in _err(capsys, ["require-cuda", "check", "cuda>=12.1", "--driver",
                                  "535.104.05", *flags])


def test_closure_json_gives_each_package_its_sha256(capsys):
    assert main(["closure", "pytorch-cu121", "--json"]) == 0
    pkgs = json.loads(capsys.readouterr().out)["packages"]
    assert all(len(p["sha256"]) == 64 and f"sha256:{p['sha256']}" in p["hashes"]
               for p in pkgs), pkgs[0]


def test_a_global_option_before_and_after_the_command_is_given_twice(capsys):
    """`--matrix /dev/zero matrix validate --matrix matrices` validated the second and
    passed: the first was dropped without a word."""
    assert main(["--matrix", "/dev/zero", "matrix", "validate", "--matrix", "x",
                 "--json"]) == 2
    assert "--matrix: given twice" in json.loads(capsys.readouterr().out)["message"]


def test_json_is_asked_by_its_own_spelling_before_the_users_command(capsys):
    """`--jso` was taken for --json by argparse while the error path looked for the literal
    --json; a --json after `--` is the user's command's argument, not envgen's."""
    assert main(["resolve", "pytorch-cu121", "--jso"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "unrecognized arguments: '--jso'" in out.err
    assert main(["run", "--no-mount", "envgen/nosuch:1", "--", "echo", "--json"]) != 0
    assert capsys.readouterr().out == ""   # not an envgen error object on stdout
