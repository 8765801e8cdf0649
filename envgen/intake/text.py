"""A team's file read as text: a regular file (never a FIFO or a device), at most 4 MiB,
strict UTF-8 without NUL, each failure one sentence with the file."""
from __future__ import annotations

import bisect
import functools
from pathlib import Path

from ..core.errors import InputError

MAX_BYTES = 4 * 1024 * 1024


def read(path: Path, what: str) -> str:
    from ..core.files import read_regular
    try:
        data = read_regular(path, MAX_BYTES, what)
    except OSError as e:
        raise InputError(f"cannot read the {what}: {e.strerror}", file=str(path)) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"is not a {what}: not UTF-8 text (byte 0x{data[e.start]:02x})",
                         file=str(path), line=line) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError(f"is not a {what}: it holds a NUL character", file=str(path),
                         line=line)
    return text


@functools.lru_cache(maxsize=8)
def _line_starts(text: str) -> tuple[int, ...]:
    """Offsets of every newline: placing a value on its line is then a bisection, not a
    count from the top (40,000 dependencies took 14 s counted, each from the top)."""
    return tuple(i for i, c in enumerate(text) if c == "\n")


def line_at(text: str, offset: int) -> int:
    """The 1-based line of offset `offset` (1 for a negative one)."""
    return bisect.bisect_left(_line_starts(text), offset) + 1 if offset >= 0 else 1


def line_of(text: str, needle: str, start: int = 0) -> int:
    """The 1-based line where `needle` first appears at or after offset `start` (1 when it
    does not: a value whose line cannot be told is placed at the top)."""
    return line_at(text, text.find(needle, start))
