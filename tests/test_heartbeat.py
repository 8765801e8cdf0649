"""A long silent build step says it still runs: BuildKit's plain mode prints nothing of a
step between its start and its end (the base for ~98 s, the CUDA libraries for ~96 s)."""
import subprocess
import sys

from envgen.build import base
from envgen.build.steps import HEARTBEAT_S, Steps


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_running_step_says_it_still_runs_every_15_s_and_stops_when_it_ends():
    clock = Clock()
    steps = Steps(clock=clock)
    assert HEARTBEAT_S <= 15
    assert steps.heartbeat() is None                     # nothing runs yet
    steps.feed("#9 [stage-0 3/8] RUN --mount=type=bind,source=install/1-cuda,target=/x pip")
    clock.now += HEARTBEAT_S - 1
    assert steps.heartbeat() is None
    clock.now += 1
    beat = steps.heartbeat()
    assert beat is not None and beat.kind == "step"
    assert str(beat) == f"step 3/8 CUDA libraries: still running ({HEARTBEAT_S:.0f} s)"
    assert beat.fields["state"] == "running" and beat.fields["elapsed"] == HEARTBEAT_S
    assert steps.heartbeat() is None                     # not again at once
    clock.now += HEARTBEAT_S
    assert "still running (30 s)" in str(steps.heartbeat())
    steps.feed("#9 DONE 96.0s")
    clock.now += 60
    assert steps.heartbeat() is None                     # the step ended


def test_the_base_recipe_says_it_still_runs_while_it_is_silent():
    said = []
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); print('ok')"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = base._wait_saying(proc, 30, said.append, "building base x", every=0.1)
    assert out == "ok\n" and err == ""
    assert said and all(line.startswith("building base x: still running (") for line in said)


def test_the_build_output_reader_ticks_while_the_build_is_silent():
    from envgen.runtime.buildkit import _lines
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.4); print('x')"],
                            stdout=subprocess.PIPE)
    got = list(_lines(proc, idle=30, tick=0.1))
    proc.wait()
    assert got[-1] == "x\n" and got.count(None) >= 2


def _fake_tools(tmp_path, monkeypatch, mmdebstrap_rc: int):
    """mmdebstrap and docker stand-ins on PATH: the recipe's own shell runs them."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "mmdebstrap").write_text(
        f"#!/bin/sh\nsleep 0.3\nfor a; do last=$a; done\n"
        f"[ {mmdebstrap_rc} -eq 0 ] || {{ echo 'E: no mirror' >&2; exit {mmdebstrap_rc}; }}\n"
        f"prev=''; for a; do [ \"$a\" = \"$last\" ] && break; prev=$a; done\n"
        f": > \"$prev\"\n")
    (bin_ / "docker").write_text("#!/bin/sh\n[ \"$1\" = image ] && exit 1\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(base, "choose_mirror", lambda b: "http://mirror.invalid/debian")


def _bookworm():
    from envgen.resolve import request
    return request.resolve(request.load(), "pytorch-cu121", request.host(request.load())).base


def test_a_base_made_here_says_how_long_it_took(tmp_path, monkeypatch):
    _fake_tools(tmp_path, monkeypatch, 0)
    said = []
    b = _bookworm()
    assert base.make_local_base(b, said.append) == b.local_tag
    assert said[0].startswith(f"building base {b.local_tag} with mmdebstrap")
    done = said[-1]
    assert done.startswith(f"built base {b.local_tag} in ") and done.endswith(" s")
    assert float(done.split(" in ")[1][:-2]) >= 0.3    # the recipe's own time, not zero


def test_a_base_that_failed_does_not_say_it_was_built(tmp_path, monkeypatch):
    import pytest

    from envgen.core.errors import BuildFailed
    _fake_tools(tmp_path, monkeypatch, 7)
    said = []
    with pytest.raises(BuildFailed, match="no mirror"):
        base.make_local_base(_bookworm(), said.append)
    assert not any(line.startswith("built base") for line in said)


def test_an_interrupted_base_leaves_no_recipe_running(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while mmdebstrap ran: envgen ended, and the recipe's session (sh
    and mmdebstrap under it, in a session of their own) ran on into a deleted folder."""
    import subprocess

    import pytest
    _fake_tools(tmp_path, monkeypatch, 0)
    marker = f"{tmp_path}/mmdebstrap-marker"
    (tmp_path / "bin" / "mmdebstrap").write_text(
        f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(60)' {marker}\n")
    real = base._wait_saying

    def interrupted(proc, *a, **kw):
        import time
        time.sleep(1.0)   # the recipe is running
        assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0
        raise KeyboardInterrupt
    monkeypatch.setattr(base, "_wait_saying", interrupted)
    with pytest.raises(KeyboardInterrupt):
        base.make_local_base(_bookworm(), lambda s: None)
    monkeypatch.setattr(base, "_wait_saying", real)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left.split() == [], "the base recipe outlived envgen"
