"""`envgen build SPEC [--certify]`: parse, call the job (envgen/job.py), print."""
from __future__ import annotations

from .. import job
from ..core.errors import CheckFailed
from ..runtime.gpu_access import check_gpus
from ._common import load_matrix_for, out_json, print_certificate, progress_for, resolve_for


def options(args) -> job.CertifyOptions:
    """The certification options the flags give."""
    return job.CertifyOptions(gpus=args.gpus, access=getattr(args, "gpu_access", "auto"),
                              timeout=getattr(args, "timeout", 900),
                              steps=getattr(args, "steps", None),
                              multi_gpu=getattr(args, "multi_gpu", False),
                              measure=getattr(args, "measure", "basic"))


def run(args) -> int:
    check_gpus(args.gpus)   # a bad --gpus is exit 2, with or without --certify
    m = load_matrix_for(args)
    st = resolve_for(args, m)
    done = job.build_and_certify(st, m, tag=args.tag,
                                 certify=options(args) if args.certify else None,
                                 no_cache=args.no_cache, builder=args.builder,
                                 progress=progress_for(args))
    res, cert = done.build, done.certificate
    out = res.to_json()
    if cert is not None:
        out["tag"] = done.tag
        out["certificate"] = {k: cert[k] for k in ("level", "passed", "created")}
        out["certificate"]["path"] = cert["_path"]
    if args.json:
        out_json(out)
    else:
        named = res.tag if out["tag"] else f"{res.image_id[:19]} (untagged)"
        print(f"built {named} in {res.seconds:.1f} s with {res.builder}; "
              f"{res.size_bytes / 1e9:.2f} GB; log {res.log}")
        if cert:
            print_certificate(cert)
    if cert and not cert["passed"]:
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"{res.image_id[:19]} was built but failed certification, so it "
                          f"was not tagged {res.tag} ({cert['_path']})")
    return 0
