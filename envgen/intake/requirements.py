"""pip's requirements files: continuation lines, comments, `-r`/`-c` includes (a loop is
refused), `--hash` per line, `--index-url`/`--extra-index-url`/`--find-links`, and the
requirement forms of intake.line. Options pip has that change nothing envgen builds
(`--pre`, `--prefer-binary`, `--only-binary`, `--no-binary`, `--trusted-host`) are noted."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from .line import parse
from .model import Intake, Wanted, bad, check_index, check_url, masked_line, no_login, show
from .text import read

NOTED = {"--pre", "--prefer-binary", "--only-binary", "--no-binary", "--trusted-host",
         "--use-feature", "--no-index", "--require-hashes"}
_HASH = re.compile(r"sha256:([0-9a-f]{64})")
MAX_INCLUDES = 100


class _State:
    def __init__(self):
        self.reqs: list[Wanted] = []
        self.indexes: dict[str, str] = {}   # "" → the --index-url, url → "" for extras
        self.index_url = ""
        self.extras: list[str] = []
        self.links: list[str] = []
        self.notes: list[str] = []
        self.files = 0
        self.root = Path()


# a logical line with its continuations: a hash-pinned requirement of a package with many
# wheels carries dozens of --hash options (numpy's: over 4,000 characters)
MAX_LOGICAL = 100_000


def lines(text: str):
    """(line number, logical line) with continuations joined and comments dropped."""
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        # a comment line never continues (pip's join_lines): "# ... \\" ends there
        if raw.endswith("\\") and not re.match(r"\s*#", raw):
            buf += raw[:-1] + " "
            continue
        buf += raw
        line = re.sub(r"(^|\s)#.*$", "", buf).strip()
        buf = ""
        if line:
            yield start, line
    # the last line ends with a backslash: what it continues is still a line (pip reads it)
    line = re.sub(r"(^|\s)#.*$", "", buf).strip()
    if line:
        yield start, line


def read_requirements(path: Path, root: Path | None = None) -> Intake:
    """`root`: the project folder every included file must lie in, after links (the
    first file's folder when not given)."""
    st = _State()
    st.root = root or path.parent.resolve()
    _read(path, st, (), False)
    return Intake(path=str(path), kind="requirements file", requirements=tuple(st.reqs),
                  indexes=((st.index_url, *st.extras) if st.index_url or st.extras else ()),
                  find_links=tuple(st.links), notes=tuple(st.notes))


def _value(words: list[str], i: int, opt: str, file: str, n: int) -> tuple[str, int]:
    word = words[i]
    if "=" in word and word.startswith("--"):
        return word.split("=", 1)[1], i + 1
    if word != opt and not word.startswith("--"):   # -rfile, -ihttps://...
        return word[2:], i + 1
    if i + 1 >= len(words):
        raise bad(f"{opt} needs a value", file, n)
    return words[i + 1], i + 2


def _read(path: Path, st: _State, chain: tuple, constraint: bool,
          at: tuple[str, int] | None = None) -> None:
    """One requirements file into `st`; `chain`, the files including it (resolved), `at`,
    the file and line of the -r/-c that did."""
    real = path.resolve()
    file = str(path)
    if real in chain:
        raise bad(f"includes itself through {' -> '.join(p.name for p in (*chain, real))}; "
                  f"an include loop never ends: remove one -r/-c line",
                  *(at or (file, None)))
    st.files += 1
    if st.files > MAX_INCLUDES:
        raise bad(f"more than {MAX_INCLUDES} included files", file)
    text = read(path, "requirements file")
    for n, line in lines(text):
        if len(line) > MAX_LOGICAL:   # before shlex, which slows down on one long word
            raise bad(f"a line of {len(line):,} characters (at most {MAX_LOGICAL:,}, "
                      f"options and --hash values included)", file, n)
        no_login(line, file, n)   # refused before anything on the line is echoed
        try:
            words = shlex.split(line, posix=True)
        except ValueError as e:
            raise bad(f"cannot split {masked_line(line)} ({e})", file, n) from None
        if not words:
            continue
        head = words[0]
        opt = head.split("=", 1)[0]
        if head.startswith("-") and not opt.startswith("--hash"):
            if opt in ("-r", "--requirement", "-c", "--constraint") or \
                    re.match(r"^-[rc]\S", head):
                name = opt if opt.startswith("--") else head[:2]
                value, _ = _value(words, 0, name, file, n)
                if value.startswith("-") or not value:
                    raise bad(f"{name} {show(value)} looks like an option, not a file", file, n)
                if re.match(r"^[a-z+]+://", value):
                    raise bad(f"{name} {show(value)}: envgen includes local files only", file, n)
                inc = path.parent / value
                try:
                    target, found = inc.resolve(), inc.is_file()
                except (OSError, RuntimeError) as e:   # a name too long, a loop of links
                    raise bad(f"{name} {show(value)}: cannot be read "
                              f"({getattr(e, 'strerror', None) or e})", file, n) from None
                if not found:
                    raise bad(f"{name} {show(value)}: no such file beside {path.name}", file, n)
                if not target.is_relative_to(st.root):
                    # a line of it would be echoed in an error: never a file from elsewhere
                    raise bad(f"{name} {show(value)}: envgen includes files inside the "
                              f"project folder ({st.root}) only, after links", file, n)
                _read(inc, st, (*chain, real), constraint or name in ("-c", "--constraint"),
                      (file, n))
            elif opt in ("-i", "--index-url") or re.match(r"^-i\S", head):
                value, _ = _value(words, 0, "--index-url" if opt != "-i" else "-i", file, n)
                st.index_url = check_index(value, "--index-url", file, n).rstrip("/")
            elif opt == "--extra-index-url":
                value, _ = _value(words, 0, opt, file, n)
                st.extras.append(check_index(value, opt, file, n).rstrip("/"))
            elif opt in ("-f", "--find-links") or re.match(r"^-f\S", head):
                value, _ = _value(words, 0, "--find-links" if opt != "-f" else "-f", file, n)
                if "://" in value or value.startswith("-"):
                    st.links.append(check_url(value, "--find-links", file, n))
                # a folder (pip reads it beside this file) or a page of links: envgen
                # resolves from the index alone, so say what becomes of it
                st.notes.append(f"{file}:{n}: --find-links {show(value)} noted; envgen pins "
                                f"every file from its index: a wheel only found there goes "
                                f"in as a path line (./wheels/x-1.0-py3-none-any.whl), "
                                f"pinned by its sha256")
            elif opt in ("-e", "--editable"):
                raise bad(f"{show(line)}: an editable install is the team's own checkout, "
                          f"not a dependency; copy it with `copy:` in envgen.yaml or build "
                          f"a wheel of it", file, n)
            elif opt in NOTED:
                st.notes.append(f"{file}:{n}: {opt} noted; it changes nothing envgen builds "
                                f"(every file is hash-pinned from its index)")
            else:
                raise bad(f"{masked_line(head)} is not a requirement or an option envgen reads "
                          f"(it reads -r, -c, --hash, --index-url, --extra-index-url, "
                          f"--find-links)", file, n)
            continue
        # a requirement, then its options (--hash=sha256:...), quotes kept for markers
        hashes = []
        for m in re.finditer(r"(?:^|\s)--hash(?:=|\s+)(\S+)", line):
            h = _HASH.fullmatch(m.group(1))
            if not h:
                raise bad(f"--hash {show(m.group(1))} is not sha256:<64 hex digits>", file, n)
            hashes.append(h.group(1))
        req = re.sub(r"(?:^|\s)--hash(?:=|\s+)\S+", " ", line).strip()
        option = re.search(r"(?:^|\s)(--?[A-Za-z][^\s=]*)", req)
        if option:   # named without its value
            raise bad(f"{show(option.group(1))}: the only option a requirement line takes is "
                      f"--hash", file, n)
        st.reqs.append(parse(req, file, n, path.parent, tuple(hashes),
                             constraint))
