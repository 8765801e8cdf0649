"""`envgen diff [OLD NEW] [--driver OLD..NEW] [--gpu NAME] [--hosts FILE]`.
OLD and NEW are matrix files or folders, or git revisions (`REV`, `REV:path`)."""
from __future__ import annotations

import contextlib
import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

from .. import diff as d
from ..certs import store as certs
from ..core.errors import EnvgenError, InputError, shown
from ..matrix import load_matrix
from ..matrix.yamlfile import load_file
from ._common import load_matrix_for, out_json, table

DEFAULT_PATH = "matrices"


def _git(*argv, cwd=None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *argv], capture_output=True, cwd=cwd, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(f"cannot run git: {e}") from None


def matrix_at(arg: str, tmp: Path):
    """A matrix from a path, or from `REV` / `REV:path` of the git repository here."""
    if Path(arg).exists():
        return load_matrix(arg)
    rev, _, path = arg.partition(":")
    path = (path or DEFAULT_PATH).strip("/") or DEFAULT_PATH
    top = _git("rev-parse", "--show-toplevel")
    if top.returncode != 0 or _git("rev-parse", "--verify", "--quiet",
                                   f"{rev}^{{commit}}").returncode != 0:
        raise InputError(f"{arg!r} is neither a matrix file or folder nor a git revision "
                         f"of the repository here")
    root = top.stdout.decode().strip()
    prefix = _git("rev-parse", "--show-prefix").stdout.decode().strip()
    r = _git("archive", "--format=tar", rev, "--", prefix + path, cwd=root)
    if r.returncode != 0:
        raise InputError(f"{rev} has no {path!r} ({r.stderr.decode().strip()[:200]})")
    out = tmp / rev.replace("/", "_").replace("~", "_").replace("^", "_")
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
        links = [t.name for t in tar.getmembers() if t.issym() or t.islnk()]
        if links:   # as in a matrix folder: a link could point anywhere, so none is read
            raise InputError(f"{rev}:{links[0]} is a symbolic link; matrix files must be "
                             f"regular files inside the folder")
        try:
            tar.extractall(out, filter="data")
        except tarfile.TarError as e:
            raise InputError(f"{rev}:{path} cannot be read from git ({e})") from None
    try:
        return load_matrix(out / (prefix + path))
    except EnvgenError as e:
        _named_in_git(e, out, rev)
        raise


def _named_in_git(e: EnvgenError, out: Path, rev: str) -> None:
    """A problem of a matrix read from git, its file named `REV:path` (as `git show` takes
    it) rather than the temporary copy, which is gone by the time the message is read."""
    for p in (e, *getattr(e, "problems", ())):
        if p.file and Path(p.file).is_relative_to(out):
            p.file = f"{rev}:{Path(p.file).relative_to(out).as_posix()}"


def _say(text: str, indent: str = "") -> None:
    """One line of prose wrapped to the terminal (COLUMNS honoured; 100 in a pipe), the
    continuation indented two more: stack lists run to 50 names. textwrap rather than rich:
    the text is plain and rich would need a Console only to wrap it."""
    import shutil
    import textwrap
    width = max(40, shutil.get_terminal_size((100, 24)).columns)
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                        break_on_hyphens=False, break_long_words=False))


def _verdict_text(v: dict) -> str:
    if not v["runs"]:
        return "no"
    return "yes" if v["how"] in ("native", "cpu") else f"yes ({v['how']})"


def _print_driver_diff(r: dict) -> None:
    rows = []
    for name, row in r["stacks"].items():
        if "error" in row:
            rows.append([name, "-", "-", row["error"]])
            continue
        o, n = row["old"], row["new"]
        note = n["why"] if not n["runs"] else (n["caveat"] or "")
        if o["runs"] and not n["runs"]:
            note = "STOPS: " + n["why"]
        elif n["runs"] and not o["runs"]:
            note = "STARTS: " + (n["caveat"] or n["why"])
        rows.append([name, _verdict_text(o), _verdict_text(n), note])
    print(table(rows, ["stack", r["old_driver"], r["new_driver"], "note"]))
    _say(r["summary"])


def _print_fleet(r: dict) -> None:
    for h in r["hosts"]:
        gpus = ", ".join(f"{h['gpus'].count(g)}x {g}" for g in dict.fromkeys(h["gpus"]))
        _say(f"{h['name']}: driver {h['driver']} ({h['branch']}), {gpus}")
        if h["moves_to"]:
            _say(h["summary"], "  ")
        else:
            if r["drivers"]:
                _say(f"stays on {h['branch']} (not on {d.branch(r['drivers'][0])})", "  ")
            _say(f"runs: {', '.join(h['runs']) or 'nothing'}", "  ")
            cannot = [n for n, s in h["stacks"].items() if not s.get("now", {}).get("runs")]
            if cannot:
                _say(f"cannot run: {', '.join(cannot)}", "  ")
        _say(f"certified here: {_certified_text(h.get('certified') or [])}", "  ")
    if r.get("certified", {}).get("rows"):
        _print_certified(r["certified"])


def _certified_text(found: list[dict]) -> str:
    """Which stacks the store has certified on a host's GPUs and driver branch."""
    if not found:
        return "nothing in this envgen's store"
    return ", ".join(f"{c['stack']} ({'passed' if c['passed'] else 'FAILED'} "
                     f"{str(c['created'])[:10]}, driver {c['driver']}"
                     f"{'' if c['exact_driver'] else ', another release of the branch'})"
                     for c in found)


def _print_certified(mx: dict) -> None:
    """The store's matrix: stack x GPU/driver, each cell the verdict and its date."""
    print("\ncertified (this envgen's certificate store; envgen certs import/merge adds "
          "other hosts'):")
    cols = mx["columns"]
    rows = [[r["stack"]] + [(("pass " if c["passed"] else "FAIL ") + c["date"]
                             + (f" ({c['runs']} runs)" if c["runs"] > 1 else ""))
                            if (c := r["cells"].get(col["id"])) else "-" for col in cols]
            for r in mx["rows"]]
    print(table(rows, ["stack"] + [col["label"] for col in cols]))


def _print_matrix_diff(r: dict) -> None:
    print(f"matrix {r['old_sha256'][:12]} → {r['new_sha256'][:12]}")
    _say(f"added:   {', '.join(r['added']) or 'none'}", "  ")
    _say(f"removed: {', '.join(r['removed']) or 'none'}", "  ")
    _say(f"changed: {', '.join(c['stack'] for c in r['changed']) or 'none'}", "  ")
    if r.get("compatibility"):
        print("  compatibility tables (which driver runs which CUDA on which GPU):")
        for f in r["compatibility"]:
            _say(f"{f['table']} {f['key']}: {f['field']}: {f['old']} → {f['new']}", "    ")
    for c in r["changed"]:
        print(f"  {c['stack']}:")
        for f in c["fields"]:
            _say(f"{f['field']}: {f['old']} → {f['new']}", "    ")
        if c.get("compatibility"):
            _say(f"what runs it changed: {', '.join(c['compatibility'])}", "    ")
        p = c["packages"]
        for n, (a, b) in p["changed"].items():
            print(f"    package {n}: {a} → {b}")
        for n, v in p["added"].items():
            print(f"    package {n}: added {v}")
        for n, v in p["removed"].items():
            print(f"    package {n}: removed {v}")


def run(args) -> int:
    if (args.old is None) != (args.new is None):
        raise InputError("envgen diff: give both OLD and NEW matrices, or neither")
    if args.old is None and args.driver is None and not args.fleet:
        raise InputError("envgen diff: give OLD NEW matrices, --driver OLD..NEW, or --hosts "
                         "FILE")
    if args.gpu is not None and args.driver is None:   # else it would be silently ignored
        raise InputError("envgen diff: --gpu judges a driver change; give it with --driver "
                         "OLD..NEW (a hosts file names its own GPUs)")
    drivers = d.parse_driver_range(args.driver) if args.driver is not None else None
    out: dict = {}
    with contextlib.ExitStack() as stack:
        if args.old is not None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="envgen-diff-")))
            old, new = matrix_at(args.old, tmp / "old"), matrix_at(args.new, tmp / "new")
            out["matrix"] = d.matrix_diff(old, new)
            m = new
        else:
            m = load_matrix_for(args)
    gpu = None
    if args.gpu is not None:
        gpu = m.gpu(args.gpu)
        if gpu is None:
            raise InputError(f"--gpu {shown(args.gpu)} is not a GPU in the matrix (see `envgen "
                             f"matrix show gpus`)")
    stacks = d.resolve_all(m) if (drivers or args.fleet) else None
    if drivers and (gpu is not None or not args.fleet):   # with a fleet, its GPUs decide
        out["driver"] = d.driver_diff(m, *drivers, gpu=gpu, stacks=stacks)
    if args.fleet:
        path = Path(args.fleet)
        hosts = d.parse_fleet(load_file(path, str(path)), str(path), m)
        out["fleet"] = d.fleet_report(m, hosts, drivers, stacks=stacks,
                                      certs=certs.load_all(), runs=certs.runs_by_key())
    if args.json:
        out_json(out)
        return 0
    sections = [("matrix", _print_matrix_diff), ("driver", _print_driver_diff),
                ("fleet", _print_fleet)]
    first = True
    for key, show in sections:
        if key in out:
            if not first:
                print()
            show(out[key])
            first = False
    return 0
