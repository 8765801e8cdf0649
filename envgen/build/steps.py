"""BuildKit's plain progress, read as steps named by what they install.

A rendered Dockerfile's steps are, in order: the user and venv, the installer (uv, in a
stage of its own that runs beside the next steps), then one `RUN` per layer of
`install/<n>-<layer>/` (packaging tools, CUDA libraries, framework, companions, frameworks
over the base; a project's apt packages, its own pip layer and its files), then the
payload. BuildKit prints each as `#7 [stage-0 3/8] RUN ...` when it
starts, and `#7 DONE 4.4s`, `#7 CACHED` or `#7 ERROR ...` when it ends; exporting the image
is a step of its own without a `[k/n]`."""
from __future__ import annotations

import re
import time

from ..core.progress import Event
from ..render.views import APT_LOG, LAYER_DIRS, LAYER_TITLES

_START = re.compile(r"^#(\d+) \[(?:[\w-]+ )?(\d+)/(\d+)\] (.*)$")
_END = re.compile(r"^#(\d+) (DONE [0-9.]+s|CACHED|ERROR\b.*)$")
_EXPORT = re.compile(r"^#(\d+) exporting to image$")
_LAYER = re.compile(r"source=install/\d+-([a-z-]+)")

# the rendered layers' own titles, by the name in their folder (install/2-cuda -> cuda)
LAYER_NAMES = {d.split("-", 1)[1]: title for d, title in zip(LAYER_DIRS, LAYER_TITLES, strict=True)}
LAYER_NAMES.update({"project-build": "sdists built into wheels",
                    # the same step, its backends pinned (it mounts their folder first)
                    "project-build-tools": "sdists built into wheels",
                    "kernel-tools": "nvcc and build tools from NVIDIA's wheels",
                    "project-kernels": "CUDA kernels compiled"})


def step_name(command: str) -> str:
    """What a Dockerfile step does, in the words a person uses."""
    if "source=install/0-uv," in command:
        return "installer (uv)"
    m = _LAYER.search(command)
    if m:
        return LAYER_NAMES.get(m.group(1), m.group(1))
    if command.startswith("FROM "):
        return "base image"
    if APT_LOG in command:   # a builder stage's compiler, or the project's own packages
        if " python3-dev" in command:
            return "compiler and Python headers"
        return "pip for the builder stage" if "venv /opt/build" in command else \
            "project apt packages"
    if "source=project," in command:
        return "project files"
    if "from=project-build," in command:   # the image's step that installs the built wheels
        return "wheels built from sdists, installed"
    if "from=kernel-build," in command:
        return "CUDA kernels, installed"
    if "python3 -m venv" in command or "useradd" in command:
        return "user and venv"
    if "/opt/envgen/src" in command:
        return "payload, stack and closure"
    if command.startswith(("WORKDIR", "USER", "ENV", "LABEL")):
        return command.split()[0].lower()
    return command.split(" ", 1)[0].lower()


HEARTBEAT_S = 15.0   # a running step says it still runs at least this often


class Steps:
    """Feed BuildKit lines; get an Event for each step that starts or ends, and from
    heartbeat() one for a step that has run HEARTBEAT_S without a word."""

    def __init__(self, clock=time.monotonic):
        self.steps: dict[str, dict] = {}   # BuildKit's #id -> {"n", "of", "name"}
        self.last_header = ""   # the latest `#7 [stage-0 3/8] RUN ...` line, as printed
        self.clock = clock
        self.running: dict | None = None   # the step that started last and has not ended
        self.said = clock()                # when the last event went out
        self._touched: dict | None = None  # the step the last line started or ended

    def heartbeat(self) -> Event | None:
        """`step k/n NAME: still running (N s)` when the running step has been silent for
        HEARTBEAT_S, else None (BuildKit's plain mode prints nothing while a step runs)."""
        now = self.clock()
        if self.running is None or now - self.said < HEARTBEAT_S:
            return None
        self.said = now
        step = self.running
        elapsed = now - step["started"]
        ev = self._event(step, "running")
        ev.message = f"{ev.message[:-3]}still running ({elapsed:.0f} s)"
        ev.fields["elapsed"] = round(elapsed)
        return ev

    def feed(self, line: str) -> Event | None:
        ev = self._feed(line)
        if ev is not None:
            self.said = self.clock()
            state = ev.fields["state"]
            if state == "running":
                self.running = self._touched
                self.running.setdefault("started", self.said)
            elif self.running is self._touched:
                self.running = None
        return ev

    def _feed(self, line: str) -> Event | None:
        line = line.strip()
        m = _START.match(line)
        if m:
            self.last_header = line
            vid, n, of, command = m.groups()
            if vid in self.steps:
                return None   # BuildKit repeats a step's header when it prints more of it
            step = {"n": int(n), "of": int(of), "name": step_name(command)}
            self.steps[vid] = self._touched = step
            return self._event(step, "running")
        m = _EXPORT.match(line)
        if m:
            step = {"n": None, "of": None, "name": "exporting the image"}
            self.steps[m.group(1)] = self._touched = step
            return self._event(step, "running")
        m = _END.match(line)
        if m and m.group(1) in self.steps:
            step = self._touched = self.steps[m.group(1)]
            word = m.group(2)
            if word.startswith("DONE"):
                return self._event(step, "done", float(word[5:-1]))
            return self._event(step, "cached" if word == "CACHED" else "failed")
        return None

    @staticmethod
    def _event(step: dict, state: str, seconds: float | None = None) -> Event:
        where = f"step {step['n']}/{step['of']} " if step["n"] else ""
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        words = {"running": "...", "done": "done", "cached": "cached", "failed": "FAILED"}
        fields = {"n": step["n"] or step["name"], "of": step["of"], "name": step["name"],
                  "state": state}
        if seconds is not None:
            fields["seconds"] = seconds
        return Event("step", f"{where}{step['name']}: {words[state]}{took}", fields)
