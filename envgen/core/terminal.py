"""What envgen prints reaches a terminal as text, never as a command to it.

A certificate's check details, a job log's GPU name or an image's tag can come from a
payload inside an image; written raw, an ESC or C1 byte starts a CSI or OSC sequence (move
the cursor, rewrite a line, retitle the window, set the clipboard with OSC 52). `escaped`
shows every such character as a visible escape; `Escaping` applies it to a whole stream, and
the CLI puts it over stdout and stderr for every command, so no printer can forget it."""
from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1, and the bidirectional overrides that reorder a line
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                      "\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: str) -> str:
    """`text` with every terminal control character written as `\\x1b`, `\\u202e`, ...;
    newline and tab kept."""
    return _CONTROL.sub(_visible, text)


class Escaping:
    """A text stream that writes through `escaped`; everything else is the stream's own.
    `raw` is the stream itself, for a writer that emits its own sequences (rich's live view,
    which strips control characters from the text it is given)."""

    def __init__(self, raw):
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(escaped(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self.raw, name)


def raw(stream):
    """The stream under an `Escaping` one (the stream itself otherwise)."""
    return stream.raw if isinstance(stream, Escaping) else stream
