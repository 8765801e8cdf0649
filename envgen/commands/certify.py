"""`envgen certify IMAGE|SPEC`."""
from __future__ import annotations

from ..certify.docker import certify, gpu_indices
from ..certs import store as certs
from ..core import home as state
from ..core.errors import CheckFailed, EnvironmentMissing
from ..runtime import docker as engine
from ..runtime import host
from ..runtime.gpu_access import check_gpus
from ..runtime.profile import once_per_daemon
from ._common import load_matrix_for, out_json, print_certificate, progress_for, ref_or_spec


def check_inputs(args):
    """Everything a certification needs that can be refused before any work: the --gpus
    value, the GPUs it names on this host, and a certificate store that takes a write.
    Returns this host's GPUs, read once for the whole run."""
    check_gpus(args.gpus)
    hg = host.detect()
    gpu_indices(args.gpus, hg)
    certs.check_writable()
    return hg


def run_certify(args, c, ref: str, matrix, hg, tags: tuple[str, ...] = ()) -> dict:
    """Certify and store."""
    cert = certify(c, ref, hg, gpus=args.gpus, access=getattr(args, "gpu_access", "auto"),
                   timeout=getattr(args, "timeout", 900), steps=getattr(args, "steps", None),
                   multi_gpu=getattr(args, "multi_gpu", False), matrix=matrix, tags=tags,
                   progress=once_per_daemon(progress_for(args), c),
                   measure=getattr(args, "measure", "basic"))
    return store(cert)


def store(cert: dict) -> dict:
    """`cert` saved, with `_path` where. A store that fails at the end (disk full since the
    check) does not lose the run: the certificate is printed with the error."""
    try:
        path = certs.save(cert)
    except CheckFailed as e:   # its own record refutes it (cert_trust): shown, not stored
        raise CheckFailed(e.message, output=cert) from None
    except OSError as e:
        raise EnvironmentMissing(f"the certification {'passed' if cert['passed'] else 'failed'}"
                                 f" but its certificate could not be saved in "
                                 f"{state.certs_dir()} ({e.strerror or e}); it is "
                                 f"printed above", output=cert) from None
    cert["_path"] = str(path)
    return cert


def _target(c, as_ref: str | None, as_spec: str | None) -> str:
    """The image on this daemon: the reference when it names one, else the spec's tag
    (certify then reports the missing image by the name the user meant)."""
    if as_ref is not None and (engine.image_or_none(c, as_ref) is not None
                               or as_spec is None):
        return as_ref
    return as_spec


def is_sif(target: str | None) -> bool:
    """Whether IMAGE|SPEC names a SIF file: a name ending in .sif, or a file that exists
    (an image reference or a spec is never a path to a file)."""
    import os
    return bool(target) and (target.lower().endswith(".sif") or os.path.isfile(target))


def run_sif(args, hg) -> int:
    from ..certify.apptainer import certify_sif
    cert = certify_sif(args.target, hg, gpus=args.gpus, timeout=args.timeout,
                       steps=args.steps, progress=progress_for(args))
    return report(args, store(cert), args.target)


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
    hg = check_inputs(args)
    if is_sif(args.target):
        if args.multi_gpu:
            from ..core.errors import InputError
            raise InputError("--multi-gpu is not run on a SIF yet; certify its Docker image")
        return run_sif(args, hg)
    m = load_matrix_for(args)
    as_ref, as_spec = ref_or_spec(args, m, args.target)
    c = engine.client()
    ref = _target(c, as_ref, as_spec)
    return report(args, run_certify(args, c, ref, m, hg), ref)
