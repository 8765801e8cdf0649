"""envgen.files: locks and certificates are written atomically and readable by the team."""
import contextlib
import json
import os
import stat

import pytest
from certificates import made

from envgen.certs import store as certs
from envgen.core import files


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_lock_written_under_umask_022_is_0644(tmp_path):
    with umask(0o022):
        path = files.write_atomic(tmp_path / "envgen.lock", '{"lock_version": 1}\n')
    assert mode(path) == 0o644
    assert path.read_text() == '{"lock_version": 1}\n'


def test_a_certificate_saved_under_umask_022_is_0644(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    with umask(0o022):
        path = certs.save(made(image_id="sha256:" + "ab" * 32, gpus=[]))
    assert path.name == "ab" * 32 + ".json"
    assert mode(path) == 0o644
    assert json.loads(path.read_text())["passed"] is True


def test_the_mode_honours_a_stricter_umask(tmp_path):
    with umask(0o077):
        path = files.write_json(tmp_path / "cert.json", {"a": 1})
    assert mode(path) == 0o600


def test_replacing_a_file_keeps_the_new_mode_and_leaves_only_the_file(tmp_path):
    target = tmp_path / "envgen.lock"
    target.write_text("old\n")
    target.chmod(0o600)
    with umask(0o022):
        files.write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert mode(target) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envgen.lock"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "envgen.lock"
    target.write_text("old\n")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        files.write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envgen.lock"]


def test_a_failed_first_write_creates_nothing(tmp_path, monkeypatch):
    def refused(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files.os, "replace", refused)
    with pytest.raises(PermissionError):
        files.write_json(tmp_path / "certs" / "x.json", {"a": 1})
    assert list((tmp_path / "certs").iterdir()) == []


def test_a_temporary_name_that_is_taken_is_never_reused(tmp_path, monkeypatch):
    names = iter(["aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(files, "_token", lambda: next(names))
    (tmp_path / ".envgen.lock.aaaaaaaaaaaa.tmp").write_text("someone else's\n")
    files.write_atomic(tmp_path / "envgen.lock", "mine\n")
    assert (tmp_path / ".envgen.lock.aaaaaaaaaaaa.tmp").read_text() == "someone else's\n"
    assert (tmp_path / "envgen.lock").read_text() == "mine\n"


def test_a_full_disk_while_rendering_names_the_file_it_could_not_write(tmp_path,
                                                                      monkeypatch):
    """`cannot use: No space left on device` named no disk: the context's writer now says
    which file, and the CLI's sentence with it."""
    from envgen.build import context
    from envgen.cli import file_failed

    real = context.os.fchmod

    def full(fd, mode):
        real(fd, mode)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(context.os, "fchmod", full)
    with pytest.raises(OSError) as e:
        context._put(tmp_path, "install/x.txt", b"data", 0o644)
    err = file_failed(e.value)
    assert err.exit_code == 3 and str(tmp_path / "install" / "x.txt") in err.message
    assert [p.name for p in (tmp_path / "install").iterdir()] == []
