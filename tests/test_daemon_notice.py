"""The daemon's refused ulimits are said once per daemon, with advice that fits how the
daemon was started (a systemd unit, or by hand as tools/bootstrap.sh starts it)."""
import pytest

from envgen.commands import _common
from envgen.runtime import profile as run_profile

REFUSED = run_profile.Profile(refused=("memlock",))


class Daemon:
    def __init__(self, ident):
        self.ident = ident

    def info(self):
        return {"ID": self.ident}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    return tmp_path


def test_the_refusal_is_said_once_per_daemon_across_commands(home):
    said = []
    first = run_profile.once_per_daemon(said.append, Daemon("ABCD:EFGH"))
    fix = run_profile.refusal_fix(REFUSED, started="shell")
    first("building")
    first(fix)
    first(fix)
    run_profile.once_per_daemon(said.append, Daemon("ABCD:EFGH"))(fix)   # the next command
    assert said == ["building", fix]
    assert list((home / "notices").iterdir())   # remembered under ENVGEN_HOME
    run_profile.once_per_daemon(said.append, Daemon("another"))(fix)     # another daemon
    assert said == ["building", fix, fix]


def test_a_daemon_without_an_id_is_told_every_time(home):
    assert run_profile.tell_once(None, "x") and run_profile.tell_once(None, "x")


def test_the_advice_fits_how_the_daemon_was_started():
    by_hand = run_profile.refusal_fix(REFUSED, started="shell")
    assert "systemd" not in by_hand and "ulimit -l unlimited" in by_hand
    unit = run_profile.refusal_fix(REFUSED, started="systemd")
    assert "LimitMEMLOCK=infinity" in unit and "ulimit -l" not in unit
    either = run_profile.refusal_fix(REFUSED, started=None)
    assert "LimitMEMLOCK=infinity" in either and "ulimit -l unlimited" in either


def test_the_daemon_started_by_setsid_is_told_from_its_cgroup(tmp_path):
    for pid, comm, cgroup in (("7", "bash", "0::/system.slice/x.service"),
                              ("9", "dockerd", "0::/user.slice/session-2.scope")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(comm + "\n")
        (tmp_path / pid / "cgroup").write_text(cgroup + "\n")
    assert run_profile.daemon_started_by(str(tmp_path)) == "shell"
    (tmp_path / "9" / "cgroup").write_text("0::/system.slice/docker.service\n")
    assert run_profile.daemon_started_by(str(tmp_path)) == "systemd"
    (tmp_path / "9" / "comm").write_text("containerd\n")
    assert run_profile.daemon_started_by(str(tmp_path)) is None


def test_the_certificate_printout_does_not_repeat_the_refusal(capsys):
    cert = {"passed": True, "level": "cpu", "seconds": 3,
            "host": {"gpus": [], "driver": None},
            "report": {"checks": [{"name": "a", "passed": True}]},
            "run_profile": REFUSED.to_json()}
    _common.print_certificate(cert)
    assert "could not set" not in capsys.readouterr().out
