"""A team's file read as text: a regular file (never a FIFO or a device), at most 4 MiB,
strict UTF-8 without NUL, each failure one sentence with the file."""
from __future__ import annotations

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


def line_of(text: str, needle: str, start: int = 0) -> int:
    """The 1-based line where `needle` first appears at or after offset `start` (1 when it
    does not: a value whose line cannot be told is placed at the top)."""
    at = text.find(needle, start)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1
