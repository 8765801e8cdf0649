"""Certificates from where they come: certificate JSON files, folders of them (another
host's store), and job logs (Slurm output, `kubectl logs`) in which each certificate is one
line `envgen-certificate: {...}`. Every input yields (file, line, certificate or None, why):
nothing here raises for a bad input; cert_trust judges what parses."""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

from ..core.errors import InputError
from ..core.files import read_regular

PREFIX = "envgen-certificate: "
MAX_INPUT = 64 * 1024 * 1024
MAX_FILES = 100_000
# the line a job prints; `kubectl logs --timestamps` puts an RFC 3339 time in front
_LINE = re.compile(r"^(?:[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9:.]+(?:Z|[+-][0-9][0-9]:[0-9][0-9]) )?"
                   + re.escape(PREFIX) + r"(.*)$")


def _loads(text: str):
    """JSON, or ValueError with the reason (a truncated document says so)."""
    from ..core.strictjson import NotJSON, loads
    try:
        return loads(text)
    except NotJSON as e:
        raise ValueError(f"malformed JSON: {e}") from None
    except json.JSONDecodeError as e:
        # the text ends before the document does: a string or value left open at its end
        end = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        raise ValueError(("truncated JSON: " if end else "malformed JSON: ")
                         + f"{e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise ValueError("malformed JSON: nested too deeply") from None


def from_text(text: str, name: str):
    """A certificate file (a JSON object) or a log of certificate lines."""
    if text.lstrip().startswith("{"):
        try:
            yield name, 1, _loads(text), None
        except ValueError as e:
            yield name, 1, None, f"not a certificate file: {e}"
        return
    found = False
    # lines as a log's writer made them: at \n only (str.splitlines would also break at
    # \x1c, \x85 or \u2028, and make a line of what its writer printed inside another)
    for n, line in enumerate(text.split("\n"), 1):
        m = _LINE.match(line.strip("\r"))
        if not m:
            continue
        found = True
        try:
            yield name, n, _loads(m.group(1)), None
        except ValueError as e:
            yield name, n, None, f"a certificate line that is not one: {e}"
    if not found:
        yield name, 1, None, (f"no certificate in it: neither a certificate's JSON nor a log "
                              f"with `{PREFIX.strip()}` lines")


def _read(path: Path, name: str):
    try:
        data = read_regular(path, MAX_INPUT, "input")
        text = data.decode("utf-8")
    except InputError as e:
        yield name, 1, None, e.message
        return
    except UnicodeDecodeError as e:
        yield name, 1, None, f"not UTF-8 text (byte {e.start})"
        return
    except FileNotFoundError:
        yield name, 1, None, "no such file or folder"
        return
    except OSError as e:
        yield name, 1, None, f"cannot read it: {e.strerror or e}"
        return
    yield from from_text(text, name)


def _stdin():
    stream = sys.stdin
    if stream is None or stream.isatty():
        yield "-", 1, None, "standard input is a terminal: pipe a log into it (kubectl logs " \
                            "POD | envgen certs import -)"
        return
    data = stream.buffer.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        yield "-", 1, None, f"standard input is larger than {MAX_INPUT >> 20} MiB"
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        yield "-", 1, None, f"not UTF-8 text (byte {e.start})"
        return
    yield from from_text(text, "-")


def folder_files(folder: Path, skipped: list | None = None) -> list[Path]:
    """The *.json files under a folder (a store's history included), in a stable order.
    Links are not followed (out of it, or into a FIFO), nor is anything but a regular file
    read; each such entry goes into `skipped` as {file, why}, so that it is named."""
    out: list[Path] = []
    for p in _walk(folder, skipped if skipped is not None else []):
        out.append(p)
        if len(out) > MAX_FILES:
            break
    return sorted(out)


def _walk(folder: Path, skipped: list):
    """Regular *.json files under `folder`, without following a link;
    a link (named *.json, or to a folder) or a *.json that is no regular file is skipped."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        skipped.append({"file": str(folder), "why": f"cannot list it: {e.strerror or e}"})
        return
    for e in entries:
        path = Path(e.path)
        if e.is_symlink():
            if e.name.endswith(".json") or path.is_dir():
                skipped.append({"file": str(path), "why": "a symbolic link: not followed"})
            continue
        mode = e.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            yield from _walk(path, skipped)
        elif e.name.endswith(".json"):
            if stat.S_ISREG(mode):
                yield path
            else:
                skipped.append({"file": str(path), "why": "not a regular file (a FIFO, "
                                                          "socket or device): not read"})


def read_inputs(names: list[str], skipped: list | None = None):
    """Each of FILE, FOLDER or `-`, in the order given; what a folder holds that is not
    read (folder_files) goes into `skipped`."""
    for name in names:
        if name == "-":
            yield from _stdin()
            continue
        path = Path(name)
        if path.is_dir():
            found = folder_files(path, skipped)
            if len(found) > MAX_FILES:
                yield name, 1, None, f"holds more than {MAX_FILES} JSON files"
                continue
            if not found:
                yield name, 1, None, "a folder with no certificate (*.json) in it"
            for p in found:
                yield from _read(p, str(p))
        else:
            yield from _read(path, name)
