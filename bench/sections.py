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
