"""A container's creation is not cut in half by a signal: SIGINT, SIGTERM and SIGHUP that
arrive while the daemon is asked are held and delivered when it has answered, so the
handle exists and the cleanup removes it. Offline (a fake client)."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from envgen.core.signals import deferred
from envgen.runtime import docker as engine


class Raised(Exception):
    pass


def _raise(signum, _frame):
    raise Raised(signum)


@pytest.fixture
def raising_sigterm():
    previous = signal.signal(signal.SIGTERM, _raise)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_signal_inside_the_block_arrives_when_it_ends(raising_sigterm):
    done = []
    with pytest.raises(Raised):
        with deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("the block ran on")
    assert done == ["the block ran on"]
    assert signal.getsignal(signal.SIGTERM) is _raise   # the handler is back


def test_without_a_signal_nothing_is_raised_and_off_the_main_thread_it_runs_as_is(
        raising_sigterm):
    with deferred():
        pass
    seen = []

    def other():
        with deferred():
            seen.append(signal.getsignal(signal.SIGTERM) is _raise)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [True]


class FakeContainer:
    def __init__(self, log):
        self.log = log

    def remove(self, force=False):
        self.log.append("removed")

    def start(self):
        self.log.append("started")


class FakeClient:
    def __init__(self):
        self.log = []
        self.containers = self

    def create(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)   # Ctrl-C or SIGTERM while the daemon answers
        self.log.append("created")
        return FakeContainer(self.log)

    def list(self, **kwargs):
        self.log.append("listed")
        return []


def test_a_signal_while_the_container_is_created_still_removes_it(raising_sigterm):
    c = FakeClient()
    with pytest.raises(Raised):
        engine.run_to_end(c, "img", ["true"], timeout=60)
    assert c.log == ["created", "removed"]   # never started, and removed by its handle


class FailingRemoval(FakeContainer):
    def __init__(self, log, failures):
        super().__init__(log)
        self.failures = failures

    def remove(self, force=False):
        if self.failures:
            self.failures -= 1
            self.log.append("busy")
            raise RuntimeError("removal of container x is already in progress")
        self.log.append("removed")


def test_a_removal_the_daemon_refuses_for_a_moment_is_tried_again(monkeypatch):
    monkeypatch.setattr(engine.time, "sleep", lambda s: None)
    log = []
    engine._remove(FakeClient(), FailingRemoval(log, 2), "token")
    assert log == ["busy", "busy", "removed"]
    c = FakeClient()
    engine._remove(c, FailingRemoval(c.log, 99), "token", tries=3)
    assert c.log == ["busy"] * 3 + ["listed"]   # then looked for by its token


class Gone(FakeContainer):
    def remove(self, force=False):
        self.log.append("gone")
        e = RuntimeError("404 Client Error: Not Found (No such container: x)")
        e.response = type("Response", (), {"status_code": 404})()
        raise e


def test_a_container_already_gone_is_not_looked_for_again():
    c = FakeClient()
    engine._remove(c, Gone(c.log), "token")
    assert c.log == ["gone"]


def test_a_stopped_build_ends_every_process_of_its_cli(tmp_path):
    """A 20.10 docker CLI runs buildx as a plugin process: killing the CLI alone left the
    plugin driving the build on. Past the idle limit (or on a signal) the whole session of
    the build CLI ends."""
    import subprocess as sp
    import sys

    from envgen.core.errors import EnvironmentMissing
    from envgen.runtime import buildkit as bk
    from envgen.runtime.docker import BuildCli
    marker = f"{tmp_path}/plugin"
    cli = tmp_path / "docker"
    # the "CLI" starts a child that ignores SIGTERM (as the plugin did), then waits
    cli.write_text(f"#!/bin/sh\n{sys.executable} -c 'import signal, time; signal.signal("
                   f"signal.SIGTERM, signal.SIG_IGN); time.sleep(300)' {marker} &\n"
                   "sleep 300\n")
    cli.chmod(0o755)
    with pytest.raises(EnvironmentMissing, match="printed nothing"):
        bk.build_buildkit(BuildCli((str(cli),), (), "fake"), tmp_path, tmp_path / "iid",
                          dockerfile=tmp_path / "Dockerfile", on_line=lambda line: None,
                          failed=lambda: "failed", log="log", idle=1.0)
    left = sp.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == [], "the plugin outlived its build"
