"""docs/benchmarks.md is written by several bench scripts, each owning its `## ` sections:
one replaces its own and keeps every other."""
from __future__ import annotations


def replace_section(text: str, heading: str, body: list[str]) -> str:
    """`text` with the section that starts with the line `heading` (up to the next `## `
    heading) replaced by `heading` + `body`; appended when there is none yet."""
    lines = text.rstrip("\n").split("\n") if text.strip() else ["# Benchmarks"]
    new = [heading, "", *body]
    while new and new[-1] == "":
        new.pop()
    try:
        start = lines.index(heading)
    except ValueError:
        return "\n".join([*lines, "", *new]) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    rest = lines[end:]
    return "\n".join([*lines[:start], *new, *([""] + rest if rest else [])]) + "\n"


def write_between(path, start: str, end: str, lines: list[str], default: str = "") -> None:
    """Write `lines` between the marker lines `start` and `end` of the file at `path` (a
    pathlib.Path), replacing what stood there and keeping the rest; the markers and lines are
    appended when the file has none yet (`default`: the text of a file that does not exist)."""
    text = path.read_text() if path.is_file() else default
    block = "\n".join([start, *lines, end])
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
