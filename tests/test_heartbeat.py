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
