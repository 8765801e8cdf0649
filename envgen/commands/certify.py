"""`envgen certify IMAGE|SPEC`."""
from __future__ import annotations

import sys

from .. import certs, engine, host
from ..certify import certify
from ..errors import CheckFailed
from ._common import cert_line, failed_checks, out_json


def run_certify(args, c, ref: str, matrix) -> dict:
    hg = host.detect()
    cert = certify(c, ref, hg, gpus=args.gpus, access=getattr(args, "gpu_access", "auto"),
                   timeout=getattr(args, "timeout", 900), steps=getattr(args, "steps", None),
                   multi_gpu=getattr(args, "multi_gpu", False), matrix=matrix)
    path = certs.save(cert)
    cert["_path"] = str(path)
    return cert


def run(args) -> int:
    from ._common import load_matrix_for as _matrix, resolve_for as _resolve
    from ..engine import image_or_none
    c = engine.client()
    m = _matrix(args)
    ref = args.target
    if image_or_none(c, ref) is None and not ref.startswith("sha256:"):
        from ..build import default_tag
        try:
            st = _resolve(args, m, ref)
        except Exception:
            st = None
        if st is not None:
            ref = default_tag(st)
    cert = run_certify(args, c, ref, m)
    if args.json:
        out_json(cert)
    else:
        print(cert_line(cert))
        for f in failed_checks(cert):
            print(f"  failed: {f}", file=sys.stderr)
        print(f"certificate: {cert['_path']}")
    if not cert["passed"]:
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"certification of {ref} failed")
    return 0
