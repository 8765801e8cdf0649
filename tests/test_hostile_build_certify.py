"""Hostile flag values of `envgen build`, `certify` and `lock`, offline: each one is exit 2
with one sentence before any Docker daemon is asked (the daemon here fails the test if it
is), never taken for "use the default" or said after an environment problem."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_lock import lock_text

from envgen.cli import main
from envgen.runtime import docker as engine
from envgen.runtime import host
from envgen.runtime.host import HostGpus


@pytest.fixture(autouse=True)
def no_daemon(tmp_path, monkeypatch):
    """No project file, a store of our own, no GPU, and a daemon that must not be asked."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_PROJECT", "")
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(host, "detect", lambda: HostGpus(None, (), "nvidia-smi not found"))

    def client(*_a, **_k):
        raise AssertionError("the Docker daemon was asked")
    monkeypatch.setattr(engine, "client", client)


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


def test_build_refuses_an_empty_tag_instead_of_the_default(capsys):
    assert main(["build", "pytorch-cpu", "--tag", ""]) == 2
    assert "the repository is empty" in _err(capsys)


def test_build_refuses_a_bad_gpus_without_certify_too(capsys):
    for gpus in ("bogus", "-1", "0,,1", "all,none"):
        assert main(["build", "pytorch-cpu", f"--gpus={gpus}"]) == 2
        assert "--gpus" in _err(capsys)


def test_lock_refuses_an_empty_push_instead_of_not_pushing(tmp_path, capsys):
    merged = tmp_path / "ci.lock"
    merged.write_text(json.dumps(lock_text()))
    out = tmp_path / "out.lock"
    assert main(["lock", "--push", "", "--merge", str(merged), "-o", str(out)]) == 2
    assert "the repository is empty" in _err(capsys)
    assert not out.exists()
    assert main(["lock", "--push", "", "pytorch-cpu"]) == 2


def test_lock_output_under_a_file_is_refused_before_the_daemon(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for out in (f"{tmp_path}/file/x.lock", f"{tmp_path}/file/a/b/\x1b[2J.lock"):
        assert main(["lock", "pytorch-cpu", "-o", out]) == 2
        err = _err(capsys)
        assert "is not a folder" in err and "\x1b" not in err and err.count("\n") == 1


def test_certify_says_a_bad_target_as_such_and_multi_gpu_on_a_sif_before_the_host(
        tmp_path, capsys):
    for target in ("UPPER", "-x", "a:b:c", "host:99999/x", "x@sha256:short"):
        assert main(["certify", "--gpus", "none", "--", target]) == 2
        assert "is neither an image reference" in _err(capsys)
    assert main(["certify", "--gpus", "0", "--multi-gpu", str(tmp_path / "x.sif")]) == 2
    assert "--multi-gpu" in _err(capsys)
    # what the host lacks (no GPU 0 here) is said before the target is read: the store's
    # check comes before anything writes under ENVGEN_HOME (test_hardening_real's full disk)
    assert main(["certify", "--gpus", "0", "UPPER"]) == 3
    assert "no GPU 0" in _err(capsys)


def test_certify_of_a_sif_that_is_not_there_is_bad_input_before_the_host(tmp_path, capsys):
    assert main(["certify", "--gpus", "0", str(tmp_path / "missing.sif")]) == 2
    assert "no such SIF file" in _err(capsys)
    (tmp_path / "fake.sif").write_bytes(b"#!/usr/bin/env run-singularity\n" + b"\0" * 200)
    assert main(["certify", "--gpus", "0", str(tmp_path / "fake.sif")]) == 2
    assert "not a SIF file" in _err(capsys)


def test_a_lock_written_under_a_name_with_a_line_break_is_said_quoted(tmp_path, capsys):
    from test_hostile_lock import lock_text, write
    merged = write(tmp_path, lock_text())
    out = str(tmp_path / "a\nb.lock")
    assert main(["lock", "--merge", str(merged), "-o", out]) == 0
    said = capsys.readouterr().out
    assert said.splitlines()[-1].startswith("wrote ") and "a\\nb.lock" in said
    assert Path(out).is_file()
