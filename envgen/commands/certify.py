"""`envgen certify IMAGE|SPEC`: parse, call the job (envgen/job.py), print."""
from __future__ import annotations

from .. import job
from ..core.errors import CheckFailed
from ..runtime import docker as engine
from ._common import load_matrix_for, out_json, print_certificate, progress_for, ref_or_spec
from .build import options


def _target(c, as_ref: str | None, as_spec: str | None) -> str:
    """The image on this daemon: the reference when it names one, else the spec's tag
    (certify then reports the missing image by the name the user meant)."""
    if as_ref is not None and (engine.image_or_none(c, as_ref) is not None
                               or as_spec is None):
        return as_ref
    return as_spec


def is_sif(target: str | None) -> bool:
    """Whether IMAGE|SPEC names a SIF file: a name ending in .sif, or a path to a file
    (one with a '/' in it: a file in this folder named like a stack, pytorch-cu121, is
    not taken for the stack's SIF)."""
    import os
    return bool(target) and (target.lower().endswith(".sif") or (
        "/" in target and ":" not in target.split("/")[0] and os.path.isfile(target)))


def run_sif(args, hg) -> int:
    from ..certify.run import certify
    from ..runtime.engine import ApptainerEngine
    cert = certify(ApptainerEngine(), args.target, hg, gpus=args.gpus, timeout=args.timeout,
                   steps=args.steps, progress=progress_for(args))
    return report(args, job.store(cert), args.target)


def report(args, cert: dict, ref: str) -> int:
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


def run(args) -> int:
    if is_sif(args.target):   # bad input (exit 2) before what the host lacks (exit 3)
        from ..core.errors import InputError
        from ..runtime.apptainer import check_sif
        if args.multi_gpu:
            raise InputError("--multi-gpu is not run on a SIF yet; certify its Docker image")
        check_sif(args.target)   # there, whole and a SIF: its header read, nothing run
    # The store is proven writable before anything else writes under ENVGEN_HOME (the
    # matrix's cache): its last free bytes are the certificate's.
    hg = job.check_certify_inputs(options(args))
    if is_sif(args.target):
        return run_sif(args, hg)
    m = load_matrix_for(args)
    as_ref, as_spec = ref_or_spec(args, m, args.target)
    c = engine.client()
    ref = _target(c, as_ref, as_spec)
    return report(args, job.certify_and_store(c, ref, m, hg, options(args),
                                              progress=progress_for(args)), ref)
