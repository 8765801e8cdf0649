"""`envgen certify IMAGE|SPEC`."""
from __future__ import annotations


from .. import certs, engine, host
from ..certify import certify
from ..errors import CheckFailed, EnvgenError
from ._common import load_matrix_for, out_json, print_certificate, resolve_for


def run_certify(args, c, ref: str, matrix) -> dict:
    hg = host.detect()
    cert = certify(c, ref, hg, gpus=args.gpus, access=getattr(args, "gpu_access", "auto"),
                   timeout=getattr(args, "timeout", 900), steps=getattr(args, "steps", None),
                   multi_gpu=getattr(args, "multi_gpu", False), matrix=matrix)
    path = certs.save(cert)
    cert["_path"] = str(path)
    return cert


def run(args) -> int:
    from ..engine import image_or_none
    c = engine.client()
    m = load_matrix_for(args)
    ref = args.target
    if image_or_none(c, ref) is None and not ref.startswith("sha256:"):
        from ..build import default_tag
        try:
            st = resolve_for(args, m, ref)
        except EnvgenError:   # not a spec either: certify reports the missing image
            st = None
        if st is not None:
            ref = default_tag(st)
    cert = run_certify(args, c, ref, m)
    if args.json:
        out_json(cert)
    else:
        print_certificate(cert)
        print(f"certificate: {cert['_path']}")
    if not cert["passed"]:
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"certification of {ref} failed")
    return 0
