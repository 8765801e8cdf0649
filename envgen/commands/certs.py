"""`envgen certs list|show|import|merge`."""
from __future__ import annotations

import sys
from pathlib import Path

from ..certs import certificate
from ..certs import store as certs
from ..core.errors import EnvironmentMissing, InputError
from ._common import out_json, table


def _name(cert: dict) -> str:
    """The name the store knows the certificate's stack by: NAME.STACK for a project's."""
    from ..certs.view import stack_name
    try:
        return stack_name(cert)
    except (KeyError, TypeError, AttributeError):
        return str((cert.get("stack") or {}).get("stack"))


def _show(cert: dict) -> None:
    """A certificate for a person: what was certified, where, and the verdict per check."""
    from ..smoke._harness import tally
    st = cert.get("stack") or {}
    host = cert.get("host") or {}
    print(f"{_name(cert) if st.get('stack') else None}: {cert.get('image_id')}")
    print(f"  tags:      {', '.join(cert.get('image_tags') or []) or '-'}")
    print(f"  run:       {cert.get('profile') or 'default'}, level {cert.get('level')}, "
          f"{cert.get('created') or '-'}, {cert.get('seconds')} s")
    gpus = ", ".join(str(g.get("name")) for g in host.get("gpus") or [] if isinstance(g, dict))
    print(f"  host:      {gpus or 'no GPU'}, driver {host.get('driver') or '-'}")
    runs = certs.runs_by_key().get(certs.key_of(cert), 1)
    if runs > 1:
        print(f"  history:   {runs} runs of this image, profile, GPU and driver "
              f"(envgen certs list --history)")
    checks = (cert.get("report") or {}).get("checks") or []
    print(f"  verdict:   {'PASSED' if cert.get('passed') else 'FAILED'}: {tally(checks)}")
    for c in checks:
        mark = "skip" if c.get("skipped") and c.get("passed") else \
            ("ok" if c.get("passed") else "FAIL")
        print(f"    {mark:4}  {c.get('name')}: {c.get('detail', '')}")
    print("  (the whole certificate: --json)")


def _labels_reader():
    """labels_of(image_id) on this daemon, and whether one answered: without a daemon the
    certificates' images are not compared (the import says so)."""
    from ..runtime import docker as engine
    try:
        c = engine.client()
    except EnvironmentMissing:
        return (lambda _id: None), False

    def labels_of(image_id: str):
        img = engine.image_or_none(c, image_id)
        return None if img is None else ((img.attrs.get("Config") or {}).get("Labels") or {})
    return labels_of, True


def _lock(args):
    from ..lock.read import read_lock
    name = args.lock or ("envgen.lock" if Path("envgen.lock").is_file() else None)
    return (read_lock(name), name) if name else (None, None)


def _take(args) -> int:
    from ..certs.importing import run_import, store_folder
    names = args.inputs
    if args.action == "import" and names.count("-") > 1:
        raise InputError("certs import: `-` (standard input) given more than once: it can be "
                         "read once")
    certs.check_writable()
    if args.action == "merge":
        names = [str(store_folder(n)) for n in names]
    lock, lock_name = _lock(args)
    labels_of, compared = _labels_reader()
    r = run_import(names, labels_of, lock, stores=args.action == "merge")
    code = 2 if r["refusals"] else 0
    for x in r["refusals"]:
        print(f"envgen: {x['file']}:{x['line']}: refused: {x['why']}", file=sys.stderr)
    for x in r["skipped"]:   # named, so that nobody takes them for imported
        print(f"envgen: {x['file']}: skipped: {x['why']}", file=sys.stderr)
    for x in r["conflicts"]:
        print(f"envgen: {x['file']}:{x['line']}: conflict: {x['why']}", file=sys.stderr)
    if args.json:
        out_json({**r, "refusals": [x | {"exit_code": 2} for x in r["refusals"]],
                  "images_compared": compared, "lock": lock_name, "exit_code": code})
        return code
    for c in r["certificates"]:
        w = certificate.where_text({"gpu": c["gpu"], "count": c["gpu_count"],
                                    "driver": c["driver"]})
        print(f"  {'passed' if c['passed'] else 'FAILED'}  {c['stack']} "
              f"{c['image_id'][7:19]} on {w}, {c['created']}"
              f"{'' if c['current'] else ' (an earlier run: into history)'}")
    print(f"{r['imported']} imported, {r['duplicates']} already here, {r['refused']} refused"
          + (f", {len(r['skipped'])} skipped (links and FIFOs are not followed)"
             if r["skipped"] else "")
          + (f", {len(r['conflicts'])} conflict(s) of a pass and a failure of the same time "
             f"(the failure stays current)" if r["conflicts"] else "")
          + ("" if compared else " (no Docker daemon: the images were not compared)"))
    return code


def _where_json(w: dict) -> dict:
    return {"gpu": w["gpu"], "gpu_count": w["count"], "driver": w["driver"]}


def _rows(rows: list[dict]) -> None:
    print(table([[c["image_id"][7:19], _name(c), ",".join(c.get("image_tags", [])),
                   c.get("profile") or "default", c.get("level") or "-",
                   "yes" if c["passed"] else "NO", c.get("created") or "-",
                   certificate.where_text(certificate.where(c))] for c in rows],
                 ["image", "stack", "tags", "run", "level", "passed", "created", "gpus"]))


def run(args) -> int:
    if args.action in ("import", "merge"):
        return _take(args)
    if args.action == "show":
        cert = certs.find(args.image)
        if args.json:
            out_json(cert)
        else:
            _show(cert)
        return 0
    rows = certs.load_history() if args.history else certs.load_all()
    skipped = certs.passed_over()
    for line in skipped[:5]:   # a store edited by hand says so, beside what it lists
        print(f"envgen: note: certificate store: {line} (passed over)", file=sys.stderr)
    if len(skipped) > 5:
        print(f"envgen: note: and {len(skipped) - 5} more such files", file=sys.stderr)
    if args.json:
        keys = ("image_id", "image_tags", "level", "passed", "created")
        runs = certs.runs_by_key()
        out_json({"certificates": [
            {k: c.get(k) for k in keys}
            | {"stack": _name(c), "profile": c.get("profile") or ""}
            | _where_json(certificate.where(c)) | {"runs": runs.get(certs.key_of(c), 1)}
            for c in rows]})
        return 0
    _rows(rows)
    return 0
