"""Apptainer's logic without apptainer: the exec options and what they claim, refusals of
bad SIFs and of a missing apptainer, and a run that outlives its time limit."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from envgen.certify.apptainer import exec_options
from envgen.cli import main
from envgen.core.errors import EnvironmentMissing, InputError
from envgen.runtime import apptainer

HEADER = b"#!/usr/bin/env run-singularity\n\x00SIF_MAGIC".ljust(128, b"\x00")


def test_as_root_the_payload_runs_as_the_image_user_without_privileges():
    opts, iso = exec_options(False, True, None)
    for flag in ("--containall", "--cleanenv", "--no-home", "--no-privs", "--net"):
        assert flag in opts
    assert opts[opts.index("--network") + 1] == "none"
    assert opts[opts.index("--security") + 1] == "uid:10001,gid:10001"
    assert "--nv" not in opts and iso["gpu"].startswith("none")


def test_as_a_user_no_security_option_and_gpus_ask_for_nv():
    opts, iso = exec_options(True, False, [0, 1])
    assert "--security" not in opts and "--nv" in opts
    assert "CUDA_VISIBLE_DEVICES=0,1" in opts and "NCCL_NVLS_ENABLE=0" in opts
    assert iso["user"] == "the calling user"


def test_a_missing_or_foreign_file_is_refused_before_apptainer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="no such SIF file"):
        apptainer.check_sif(tmp_path / "x.sif")
    (tmp_path / "y.sif").write_text("not one")
    with pytest.raises(InputError, match="not a SIF file"):
        apptainer.check_sif(tmp_path / "y.sif")
    with pytest.raises(InputError, match="not a regular file"):
        apptainer.check_sif(tmp_path)
    (tmp_path / "t.sif").write_bytes(HEADER[:112] + (1 << 20).to_bytes(8, "little") * 2)
    with pytest.raises(InputError, match="a truncated SIF"):
        apptainer.check_sif(tmp_path / "t.sif")
    (tmp_path / "-z.sif").write_bytes(HEADER)
    assert apptainer.check_sif(Path("-z.sif")) == tmp_path / "-z.sif"


def test_no_apptainer_is_exit_3(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("ENVGEN_APPTAINER", raising=False)
    sif = tmp_path / "a.sif"
    sif.write_bytes(HEADER)
    assert main(["certify", str(sif)]) == 3
    assert "apptainer is not installed" in capsys.readouterr().err
    monkeypatch.setenv("ENVGEN_APPTAINER", str(tmp_path / "nothing"))
    with pytest.raises(EnvironmentMissing, match="not an executable"):
        apptainer.command()


def _fake(tmp_path, body: str) -> str:
    exe = tmp_path / "fake-apptainer"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return str(exe)


def test_a_sif_apptainer_cannot_read_is_exit_2_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVGEN_APPTAINER", _fake(
        tmp_path, 'echo "FATAL:   could not open image: truncated" >&2; exit 255'))
    sif = tmp_path / "b c.sif"
    sif.write_bytes(HEADER)
    assert main(["certify", str(sif)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "truncated" in err and "b c.sif" in err


def test_a_run_past_its_limit_leaves_no_process(tmp_path, monkeypatch):
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("ENVGEN_APPTAINER",
                       _fake(tmp_path, f'sleep 300 & echo $! > {pidfile}; wait'))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        apptainer.run(["exec"], 1)
    assert time.monotonic() - started < 15
    pid = Path(f"/proc/{pidfile.read_text().strip()}/status")
    for _ in range(50):   # gone, or a zombie waiting for its new parent to reap it
        if not pid.exists() or "State:\tZ" in pid.read_text():
            break
        time.sleep(0.1)
    assert not pid.exists() or "State:\tZ" in pid.read_text()
