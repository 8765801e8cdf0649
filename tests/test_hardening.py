"""The logic around faults, with fakes: exit codes of internal and daemon errors, reaping
of orphaned containers, certificate run profiles, tags only after certification, regular
files only. Each faked path has a real counterpart in test_hardening_real.py."""
from __future__ import annotations

import json
import os
import signal
import socket
import types

import pytest

from envgen.certs import certificate
from envgen.certs import store as certs
from envgen.cli import main
from envgen.core.errors import EnvironmentMissing, InputError
from envgen.core.files import read_regular
from envgen.runtime import docker as engine

ID = "sha256:" + "ab" * 32


# ---- exit codes -----------------------------------------------------------------------------

def test_an_unexpected_exception_is_exit_4_with_one_sentence(monkeypatch, capsys):
    from envgen import cli

    def broken(_args):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(cli, "cmd_resolve", broken)
    assert main(["resolve", "torch"]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "internal error at test_hardening.py:" in err and "ZeroDivisionError" in err
    assert "--debug" in err and "github.com/envgen/envgen/issues" in err


def test_debug_shows_the_traceback_of_an_internal_error(monkeypatch, capsys):
    from envgen import cli
    monkeypatch.setattr(cli, "cmd_resolve", lambda _a: 1 / 0)
    assert main(["resolve", "torch", "--debug"]) == 4
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().endswith("--debug)")


def test_internal_error_under_json_is_json(monkeypatch, capsys):
    from envgen import cli
    monkeypatch.setattr(cli, "cmd_resolve", lambda _a: {}["missing"])
    assert main(["resolve", "torch", "--json"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "InternalError" and out["exit_code"] == 4


def test_sigterm_is_handled_like_ctrl_c_and_exits_143(monkeypatch, capsys):
    from envgen import cli

    def slow(_args):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("not reached: the handler raises")
    monkeypatch.setattr(cli, "cmd_resolve", slow)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["resolve", "torch"]) == 143
    assert "terminated (SIGTERM)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before   # given back to whoever had it


def test_a_daemon_http_500_is_exit_3_naming_it():
    import docker
    import requests
    resp = requests.Response()
    resp.status_code = 500
    e = docker.errors.APIError("500 Server Error", response=resp, explanation="boom")
    known = engine.daemon_failed(e)
    assert isinstance(known, EnvironmentMissing) and known.exit_code == 3
    assert "HTTP 500: boom" in known.message
    assert engine.daemon_failed(ValueError("x")) is None


def test_a_denied_docker_socket_is_named_as_such():
    try:
        raise ConnectionError("Connection aborted.") from PermissionError(13, "denied")
    except ConnectionError as e:
        msg = engine.unreachable(e, 15).message
    assert msg.startswith("permission denied on the Docker socket")
    assert "docker group" in msg


def test_a_hung_daemon_is_named_with_the_time_waited():
    import requests
    e = requests.exceptions.ReadTimeout("Read timed out. (read timeout=2)")
    assert "did not answer within 2 s" in engine.unreachable(e, 2).message


@pytest.mark.parametrize("value", ["0", "-1", "soon", "1e9", "nan"])
def test_timeouts_from_the_environment_are_checked(monkeypatch, value):
    monkeypatch.setenv("ENVGEN_DOCKER_TIMEOUT", value)
    with pytest.raises(InputError, match="ENVGEN_DOCKER_TIMEOUT"):
        engine.seconds_from_env("ENVGEN_DOCKER_TIMEOUT", 120)


# ---- orphaned containers ---------------------------------------------------------------------

def _dead_pid() -> int:
    import subprocess
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_container_of_a_dead_envgen_on_this_host_is_orphaned():
    host = socket.gethostname()
    far = str(10**10)
    ns = {engine.PIDNS_LABEL: engine.pid_namespace()}
    assert engine.orphaned({engine.OWNER_LABEL: f"{host}:{_dead_pid()}",
                            engine.DEADLINE_LABEL: far, **ns}, now=0)
    assert not engine.orphaned({engine.OWNER_LABEL: f"{host}:{os.getpid()}",
                                engine.DEADLINE_LABEL: far, **ns}, now=0)
    # the same host name in another PID namespace (two CI containers): only the deadline
    assert not engine.orphaned({engine.OWNER_LABEL: f"{host}:{_dead_pid()}",
                                engine.DEADLINE_LABEL: far, engine.PIDNS_LABEL: "1"}, now=0)
    # another host's envgen cannot be checked: only its deadline decides
    assert not engine.orphaned({engine.OWNER_LABEL: f"elsewhere:{_dead_pid()}",
                                engine.DEADLINE_LABEL: far}, now=0)
    assert engine.orphaned({engine.OWNER_LABEL: "elsewhere:1", engine.DEADLINE_LABEL: "5"},
                           now=10)
    assert engine.orphaned({engine.OWNER_LABEL: "x:1", engine.DEADLINE_LABEL: "soon"}, now=0)


def test_reap_removes_only_orphans_and_never_fails():
    host = socket.gethostname()
    removed = []

    class Ct:
        def __init__(self, cid, labels):
            self.id, self.labels = cid, labels

        def remove(self, force):
            removed.append(self.id)

    mine = Ct("live", {engine.OWNER_LABEL: f"{host}:{os.getpid()}",
                       engine.DEADLINE_LABEL: str(10**10)})
    orphan = Ct("orphan", {engine.OWNER_LABEL: f"{host}:{_dead_pid()}",
                           engine.DEADLINE_LABEL: str(10**10),
                           engine.PIDNS_LABEL: engine.pid_namespace()})
    client = types.SimpleNamespace(containers=types.SimpleNamespace(
        list=lambda all, filters: [mine, orphan]))
    assert engine.reap(client) == ["orphan"] and removed == ["orphan"]

    def failing(**_kw):
        raise RuntimeError("daemon fault")
    assert engine.reap(types.SimpleNamespace(
        containers=types.SimpleNamespace(list=failing))) == []


def test_reap_leaves_a_container_whose_envgen_labels_came_from_its_image():
    """A container inherits its image's labels: an image carrying envgen's owner label (a
    certified image re-tagged, or one made to) must not get every container made from it
    removed by the next envgen command; only what envgen labelled at create is its own."""
    removed = []
    labels = {engine.OWNER_LABEL: "elsewhere:1", engine.DEADLINE_LABEL: "0",
              engine.CALL_LABEL: "t"}

    class Ct:
        def __init__(self, cid, image):
            self.id, self.labels, self.attrs = cid, dict(labels), {"Image": image}

        def remove(self, force):
            removed.append(self.id)
    images = {"sha256:made": labels, "sha256:plain": {}}
    client = types.SimpleNamespace(
        containers=types.SimpleNamespace(list=lambda all, filters: [
            Ct("victim", "sha256:made"), Ct("orphan", "sha256:plain")]),
        images=types.SimpleNamespace(get=lambda ref: types.SimpleNamespace(
            labels=images[ref])))
    assert engine.reap(client) == ["orphan"] and removed == ["orphan"]


def test_containers_get_an_owner_a_deadline_init_and_their_own_limit():
    made = {}

    class Container:
        def start(self):
            pass

        def wait(self, timeout):
            return {"StatusCode": 0}

        def logs(self, stdout, stderr):
            return b"out" if stdout else b""

        def remove(self, force):
            made["removed"] = True

    def create(image, command, detach, **kw):
        made.update(kw, command=command)
        return Container()
    client = types.SimpleNamespace(containers=types.SimpleNamespace(create=create))
    assert engine.run_to_end(client, "img", ["python", "x.py"], 100,
                             labels={"io.envgen.certify": "1"}) == (0, "out", "")
    assert "init" not in made and made["removed"]
    assert made["command"][:2] == ["python", "-c"] and "signal.alarm(limit)" in made["command"][2]
    assert made["command"][3:] == [str(100 + engine.GRACE_S), "python", "x.py"]
    labels = made["labels"]
    assert labels[engine.OWNER_LABEL] == f"{socket.gethostname()}:{os.getpid()}"
    assert labels["io.envgen.certify"] == "1" and float(labels[engine.DEADLINE_LABEL]) > 0
    assert labels[engine.PIDNS_LABEL] == engine.pid_namespace() != ""
    # a payload printing without end: its log keeps the last 64 MB, not the whole disk
    assert made["log_config"] == {"type": "json-file",
                                  "config": {"max-size": "64m", "max-file": "1"}}
    # a probe (the lock's pip list) runs as the image's user; certification's PID 1
    # refuses to start a payload as uid 0, whatever name maps to it
    assert "os.getuid() == 0" not in made["command"][2]
    engine.run_to_end(client, "img", ["python", "x.py"], 100, refuse_root=True)
    assert "os.getuid() == 0" in made["command"][2] and "signal.alarm" in made["command"][2]


def test_a_signal_while_the_container_is_being_created_still_removes_it():
    # The daemon made the container, then Ctrl-C or SIGTERM arrived before docker-py handed it
    # back: there is no handle, so run_to_end finds it by its own token and removes it.
    daemon, removed = {}, []

    class Ct:
        def __init__(self, cid, labels):
            self.id, self.labels = cid, labels

        def remove(self, force):
            removed.append(self.id)
            daemon.pop(self.id)

    def create(image, command, detach, labels, **kw):
        daemon["half"] = Ct("half", labels)
        raise KeyboardInterrupt

    def listing(all, filters):
        key, _, value = filters["label"].partition("=")
        return [ct for ct in daemon.values() if ct.labels.get(key) == value]
    other = Ct("other", {engine.CALL_LABEL: "not-this-call"})
    daemon["other"] = other
    client = types.SimpleNamespace(containers=types.SimpleNamespace(create=create,
                                                                    list=listing))
    with pytest.raises(KeyboardInterrupt):
        engine.run_to_end(client, "img", ["python", "x.py"], 100)
    assert removed == ["half"] and list(daemon) == ["other"]


# ---- certificates ----------------------------------------------------------------------------

def _cert(profile="", passed=True, created="2026-12-01T00:00:00Z"):
    from certificates import made
    return made(image_id=ID, tags=["team/img:1"], passed=passed, created=created,
                profile=profile, gpus=[])


def test_a_run_with_other_parameters_is_another_certificate(monkeypatch, tmp_path):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    assert certificate.profile_of("cuda", True, None, False) == ""
    assert certificate.profile_of("cpu", False, None, False) == ""
    assert certificate.profile_of("cpu", True, 3, True) == "cpu-steps3-multi-gpu"
    good = certs.save(_cert())
    worse = certs.save(_cert("steps3", passed=False, created="2026-12-02T00:00:00Z"))
    assert good != worse and good.exists() and worse.exists()
    assert certs.latest_for(ID)["passed"] is True          # the lock pins the default run
    assert certs.find("abab")["profile"] == ""
    assert len(certs.load_all()) == 2


@pytest.mark.parametrize("text", ["[]", "null", '{"image_id": 5}', "{", '"x"'])
def test_a_malformed_certificate_file_is_skipped(monkeypatch, tmp_path, text):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / ("ab" * 32 + ".json")).write_text(text)
    assert certs.load_all() == [] and certs.latest_for(ID) is None
    with pytest.raises(InputError, match="no certificate"):
        certs.find("abab")


@pytest.mark.parametrize("key", ["", "ab", "a\nb", "x" * 400])
def test_certs_show_refuses_what_names_no_image(monkeypatch, tmp_path, key):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    certs.save(_cert())
    with pytest.raises(InputError):
        certs.find(key)


def test_an_unwritable_store_is_found_before_the_run(monkeypatch, tmp_path):
    (tmp_path / "home").write_text("a file, not a folder")
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    with pytest.raises(EnvironmentMissing, match="cannot write certificates"):
        certs.check_writable()


def test_a_certificate_that_cannot_be_saved_is_printed(monkeypatch, capsys):
    from envgen import job
    from envgen.certify import run as certify_run
    cert = _cert()
    monkeypatch.setattr(certify_run, "certify", lambda *a, **k: dict(cert))

    def full(_c):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(job.certs, "save", full)
    with pytest.raises(EnvironmentMissing) as e:
        job.certify_and_store(None, ID, None, None, job.CertifyOptions(gpus="none"))
    assert "passed but its certificate could not be saved" in e.value.message
    assert "No space left on device" in e.value.message
    assert e.value.output["image_id"] == ID


# ---- build --certify tags only what passed ---------------------------------------------------

@pytest.mark.parametrize("passed", [True, False])
def test_build_certify_tags_only_a_certified_image(monkeypatch, capsys, passed):
    from envgen import job
    from envgen.build import buildkit
    from envgen.runtime import docker as engine
    tagged, built = [], {}
    res = types.SimpleNamespace(image_id=ID, tag="envgen-test/x:1", seconds=1.0,
                                builder="fake", size_bytes=1, log="log",
                                to_json=lambda: {"image_id": ID, "tag": "envgen-test/x:1"})

    def fake_build(st, tag, tag_it, **kw):
        built["tag_it"] = tag_it
        return res
    monkeypatch.setattr(buildkit, "build", fake_build)
    monkeypatch.setattr(buildkit, "tag_image", lambda c, i, t: tagged.append(t))
    monkeypatch.setattr(engine, "client", lambda: None)
    monkeypatch.setattr(job.certs, "check_writable", lambda: None)
    monkeypatch.setattr(job, "certify_and_store", lambda *a, **k: {
        **_cert(passed=passed), "level": "cpu", "_path": "p", "seconds": 1,
        "host": {"gpus": [], "driver": None}, "report": {"checks": []}})
    rc = main(["build", "pytorch-cu121", "--certify", "--tag", "envgen-test/x:1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert built["tag_it"] is False
    assert (rc, tagged, out["tag"]) == ((0, ["envgen-test/x:1"], "envgen-test/x:1") if passed
                                        else (1, [], None))


# ---- files -----------------------------------------------------------------------------------

def test_only_regular_files_of_a_sane_size_are_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        read_regular(fifo, 100)
    with pytest.raises(InputError, match="is a folder"):
        read_regular(tmp_path, 100)
    with pytest.raises(InputError, match="is a character device"):
        read_regular("/dev/zero", 100)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="larger than"):
        read_regular(big, 100)
    big.write_bytes(b"x" * 100)
    assert read_regular(big, 100) == b"x" * 100


@pytest.mark.parametrize("image_user, want", [
    ("", "65534:65534"), ("root", "65534:65534"), ("0", "65534:65534"),
    ("0:0", "65534:65534"), ("root:root", "65534:65534"), ("root:1000", "65534:65534"),
    ("0:1000", "65534:65534"), ("0000", "65534:65534"), ("1000:0", "65534:65534"),
    ("1000:root", "65534:65534"), ("envgen", "envgen"), ("1000:1000", "1000:1000"),
    ("1000", "1000")])
def test_a_payload_never_runs_as_root_in_any_spelling(image_user, want):
    from envgen.runtime.profile import user_for
    assert user_for(image_user) == want


def test_a_container_that_ends_as_its_wait_times_out_is_a_timeout_not_a_dead_daemon():
    """The wait timed out just as the container exited: kill answers 409 (not running);
    that is the run's time limit (exit 1), not the daemon failing (exit 3)."""
    import requests

    class Gone(Exception):
        response = types.SimpleNamespace(status_code=409)

    class Container:
        def start(self):
            pass

        def wait(self, timeout):
            raise requests.exceptions.ReadTimeout("Read timed out.")

        def kill(self):
            raise Gone("Conflict: container is not running")

        def remove(self, force):
            pass
    client = types.SimpleNamespace(containers=types.SimpleNamespace(
        create=lambda image, command, detach, **kw: Container()))
    with pytest.raises(TimeoutError, match="no exit within 5 s"):
        engine.run_to_end(client, "img", ["python", "x.py"], 5)


def test_a_daemon_that_stops_answering_is_not_asked_five_times_to_remove():
    import requests
    calls = []

    class Container:
        def remove(self, force):
            calls.append(1)
            raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=5)")
    listed = []
    client = types.SimpleNamespace(containers=types.SimpleNamespace(
        list=lambda **kw: listed.append(kw) or []))
    from envgen.core import leftovers
    leftovers.taken()
    engine._remove(client, Container(), "token")
    assert calls == [1] and listed == []
    assert leftovers.taken() == [f"container labelled {engine.CALL_LABEL}=token"]


def test_a_container_the_daemon_did_not_remove_is_named_not_called_nothing_kept(
        monkeypatch, capsys):
    """A daemon that stops answering while envgen cleans up leaves the container behind:
    the last words name it instead of claiming nothing half-done was kept."""
    import argparse

    import requests

    from envgen import cli
    from envgen.core import leftovers

    class Container:
        id = "0123456789abcdef"

        def remove(self, force):
            raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=5)")

    def command(args):
        engine._remove(types.SimpleNamespace(), Container(), "token")
        raise KeyboardInterrupt

    def parser():
        p = argparse.ArgumentParser()
        p.set_defaults(func=command)
        return p
    monkeypatch.setattr(cli, "build_parser", parser)
    leftovers.taken()
    assert cli.main([]) == 130
    err = capsys.readouterr().err
    assert "left behind: container 0123456789ab" in err and "nothing half-done" not in err
    assert leftovers.taken() == []
    monkeypatch.setattr(cli, "build_parser", lambda: _interrupting(argparse))
    assert cli.main([]) == 130
    assert "nothing half-done was kept" in capsys.readouterr().err


def _interrupting(argparse):
    p = argparse.ArgumentParser()

    def command(args):
        raise KeyboardInterrupt
    p.set_defaults(func=command)
    return p
