"""`envgen build SPEC [--certify]`."""
from __future__ import annotations

import sys

from .. import engine
from ..build import build
from ..errors import CheckFailed
from ._common import load_matrix_for, out_json, print_certificate, progress_for, resolve_for


def run(args) -> int:
    m = load_matrix_for(args)
    st = resolve_for(args, m)
    c = engine.client()
    report = progress_for(args)
    if not args.json:
        print(f"building {st.stack}: {st.framework_package} {st.version} ({st.variant}), "
              f"Python {st.python}, base {st.base.name}", file=sys.stderr)
    res = build(st, tag=args.tag, progress=report, no_cache=args.no_cache,
                builder=args.builder, client=c)
    out = res.to_json()
    cert = None
    if args.certify:
        from .certify import run_certify
        cert = run_certify(args, c, res.image_id, m)
        out["certificate"] = {k: cert[k] for k in ("level", "passed", "created")}
        out["certificate"]["path"] = cert["_path"]
    if args.json:
        out_json(out)
    else:
        print(f"built {res.tag} ({res.image_id[:19]}) in {res.seconds:.1f} s with "
              f"{res.builder}; {res.size_bytes / 1e9:.2f} GB; log {res.log}")
        if cert:
            print_certificate(cert)
    if cert and not cert["passed"]:
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"{res.tag} was built but failed certification "
                          f"({cert['_path']})")
    return 0
