"""Progress, as a person or a program wants it: `--progress auto|tty|plain|json|quiet`.

The modules below the CLI report through one callable, `progress(msg)`, where `msg` is a
sentence or an `Event` (a build step, a certification check) whose str() is that sentence.
This module turns them into output on stderr; stdout stays the command's result (one JSON
document under --json).

- plain: one line per event (CI logs, pipes, `--json` runs);
- json:  one JSON object per line, `{"event": ..., "time": ..., "message": ..., ...}`, for
  another tool to consume;
- tty:   a live view (rich): each build step by what it installs and its state, each check
  as it passes or fails; honours COLUMNS and NO_COLOR;
- quiet: nothing;
- auto:  tty when stderr is a terminal (and TERM is not dumb, and not under CI), else plain.
"""
from __future__ import annotations

import json
import os
import sys
import time

MODES = ("auto", "tty", "plain", "json", "quiet")


class Event:
    """A build step or a certification check, for a reporter that can show more than a line.
    (A plain class: the CLI imports this module for every command, --version included.)"""
    __slots__ = ("kind", "message", "fields")

    def __init__(self, kind: str, message: str, fields: dict | None = None):
        self.kind = kind          # "step" (a build step) or "check" (a certification check)
        self.message = message
        self.fields = fields or {}

    def __str__(self) -> str:
        return self.message


def choose(mode: str, stream=None, environ=None) -> str:
    """The mode `auto` stands for here."""
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    env = os.environ if environ is None else environ
    tty = getattr(stream, "isatty", lambda: False)()
    if tty and env.get("TERM", "") != "dumb" and not env.get("CI"):
        return "tty"
    return "plain"


class Plain:
    def __init__(self, stream=None):
        self._stream = stream

    @property
    def stream(self):   # sys.stderr as it is now, unless a stream was given
        return self._stream or sys.stderr

    def __call__(self, msg) -> None:
        print(f"  {msg}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class JsonLines(Plain):
    def __call__(self, msg) -> None:
        ev = msg if isinstance(msg, Event) else Event("note", str(msg))
        doc = {"event": ev.kind, "time": round(time.time(), 3), "message": ev.message,
               **ev.fields}
        print(json.dumps(doc, sort_keys=False), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class Quiet:
    def __call__(self, msg) -> None:
        pass

    def close(self) -> None:
        pass


_MARK = {"running": "…", "done": "✓", "cached": "✓", "failed": "✗", "passed": "✓",
         "skipped": "-"}
_STYLE = {"running": "yellow", "done": "green", "cached": "green", "failed": "red",
          "passed": "green", "skipped": "dim"}


class Live:
    """A live view on a terminal: the steps and checks so far, one row each, updated in
    place; notes scroll above it."""

    def __init__(self, stream):
        from rich.console import Console
        from rich.live import Live as RichLive

        from .terminal import raw
        # rich writes its own cursor sequences: it gets the stream under the CLI's escaping
        # one, and every text it is handed goes in as a Text (control characters stripped,
        # no markup: a check's detail cannot open an OSC 8 link)
        self.console = Console(file=raw(stream), no_color=bool(os.environ.get("NO_COLOR")) or None,
                               highlight=False)
        self.rows: dict[str, tuple[str, str]] = {}   # key -> (state, text)
        self.started = time.monotonic()
        self.live = RichLive(self._render(), console=self.console, transient=False,
                             refresh_per_second=4)
        self.live.start()

    def _render(self):
        from rich.table import Table
        from rich.text import Text
        t = Table.grid(padding=(0, 1))
        t.add_column(width=1)
        t.add_column(overflow="ellipsis", no_wrap=True)
        for state, text in self.rows.values():
            t.add_row(f"[{_STYLE.get(state, '')}]{_MARK.get(state, ' ')}[/]", Text(text))
        return t

    def __call__(self, msg) -> None:
        if isinstance(msg, Event) and msg.kind in ("step", "check"):
            f = msg.fields
            key = f"{msg.kind}:{f.get('n') or f.get('name')}"
            state = f.get("state") or ("passed" if f.get("passed") else "failed")
            self.rows[key] = (state, msg.message)
            self.live.update(self._render())
        else:
            from rich.text import Text
            self.console.print(Text(f"  {msg}"), markup=False, highlight=False)

    def close(self) -> None:
        self.live.update(self._render())
        self.live.stop()


_current: list = []   # the reporter the command made last: note() writes through it


def reporter(mode: str, stream=None):
    """A progress callable (with .close()) for `mode`, writing to `stream` (default: stderr,
    whatever sys.stderr is when a line is written)."""
    mode = choose(mode, stream or sys.stderr)
    if mode == "quiet":
        made = Quiet()
    elif mode == "json":
        made = JsonLines(stream)
    elif mode == "tty":
        try:
            made = Live(stream or sys.stderr)
        except ImportError:   # rich missing: plain lines still say everything
            made = Plain(stream)
    else:
        made = Plain(stream)
    _current[:] = [made]
    return made


def forget() -> None:
    """The command's reporters are closed: a later note() writes a plain line."""
    _current.clear()


def note(msg: str) -> None:
    """A sentence from below the CLI that no progress callable was handed to: through the
    command's reporter (a JSON line under --progress json), else a plain line on stderr."""
    (_current[0] if _current else Plain())(f"note: {msg}")
