"""`envgen report -o DIR [--fleet FILE]`: DIR/index.html, every stack on every driver branch
(for each of the fleet's GPUs too), and DIR/certs/ with a copy of each certificate it links."""
from __future__ import annotations

import os
from pathlib import Path

from ..certs import store as certs
from ..core.errors import EnvironmentMissing, InputError
from ..core.files import fault_class, write_atomic, write_json
from ..diff import parse_fleet, resolve_all
from ..matrix.yamlfile import load_file
from ..report import build_report, render_page
from ._common import load_matrix_for, out_json


def _unwritable(folder: Path, e: OSError) -> EnvironmentMissing | InputError:
    """A path that cannot be a folder (through a file, too long, a loop) is bad input (exit
    2), as for render (core.files.fault_class); anything else the host (exit 3)."""
    text = f"cannot write the report here: {e.strerror or e}"
    if fault_class(e) is InputError:
        return InputError(text, file=str(folder))
    return EnvironmentMissing(text, file=str(folder))


def _check_output(folder: Path) -> None:
    """The output folder, made and proven writable before any work starts."""
    if folder.exists() and not folder.is_dir():
        raise InputError("-o must name a folder; this is a file", file=str(folder))
    try:
        (folder / "certs").mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}"
        probe.write_bytes(b"x" * 4096)
        probe.unlink()
    except OSError as e:
        raise _unwritable(folder, e) from None


def run(args) -> int:
    out = Path(args.output)
    _check_output(out)
    m = load_matrix_for(args)
    hosts = []
    if args.fleet:
        path = Path(args.fleet)
        hosts = parse_fleet(load_file(path, str(path)), str(path), m)
    report = build_report(m, resolve_all(m), hosts, certs.load_all(), fleet_file=args.fleet,
                          store_runs=certs.runs_by_key())
    index = out / "index.html"
    try:
        for c in report["certificates"]:
            write_json(out / c["file"], c["cert"])
        write_atomic(index, render_page(report))
    except OSError as e:
        raise _unwritable(out, e) from None
    branches = [c["name"] for c in report["columns"]]
    if args.json:
        out_json({"index": str(index), "stacks": report["stacks"],
                  "branches": branches, "certified": report["certified"]})
        return 0
    print(f"wrote {index}: {report['stacks']} stacks on {len(branches)} driver branches "
          f"({branches[0]} to {branches[-1]})" if branches else f"wrote {index}")
    if len(report["views"]) > 1:
        print(f"  GPU filter: {', '.join(v['gpu'] for v in report['views'][1:])}")
    print(f"  {report['certified']} stacks certified; {len(report['certificates'])} "
          f"certificates copied into {out / 'certs'}")
    if report["unresolved"]:
        print(f"  {len(report['unresolved'])} stacks do not resolve (listed on the page)")
    return 0
