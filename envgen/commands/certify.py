"""`envgen certify IMAGE|SPEC`."""
from __future__ import annotations

from .. import certs, engine, host, state
from ..certify import certify
from ..errors import CheckFailed, EnvgenError, EnvironmentMissing, InputError, shown
from ..gpu_access import check_gpus
from ._common import load_matrix_for, out_json, print_certificate, resolve_for


def check_inputs(args) -> None:
    """Everything a certification needs that can be refused before any work: the --gpus
    value, the GPUs it names on this host, and a certificate store that takes a write."""
    from ..gpu_access import parse_gpus
    check_gpus(args.gpus)
    if args.gpus not in ("none", "auto"):
        hg = host.detect()
        if not parse_gpus(args.gpus, len(hg.gpus)):
            raise EnvironmentMissing(f"--gpus {args.gpus} asks for a GPU, but this host has "
                                     f"none ({hg.error or 'nvidia-smi lists no GPU'})")
    certs.check_writable()


def run_certify(args, c, ref: str, matrix, tags: tuple[str, ...] = ()) -> dict:
    """Certify and store. A store that fails at the end (disk full since the check) does
    not lose the run: the certificate is printed with the error."""
    hg = host.detect()
    cert = certify(c, ref, hg, gpus=args.gpus, access=getattr(args, "gpu_access", "auto"),
                   timeout=getattr(args, "timeout", 900), steps=getattr(args, "steps", None),
                   multi_gpu=getattr(args, "multi_gpu", False), matrix=matrix, tags=tags)
    try:
        path = certs.save(cert)
    except OSError as e:
        raise EnvironmentMissing(f"the certification {'passed' if cert['passed'] else 'failed'}"
                                 f" but its certificate could not be saved in "
                                 f"{state.certs_dir()} ({e.strerror or e}); it is "
                                 f"printed above", output=cert) from None
    cert["_path"] = str(path)
    return cert


def _candidates(args, m) -> tuple[str | None, str | None]:
    """(the target as an image reference, the tag of the target as a spec), each None when
    the target is not one; InputError when it is neither. Needs no daemon."""
    from ..build import default_tag
    from ..registry import parse_image_ref
    ref = args.target
    as_ref = as_spec = None
    try:
        as_ref = parse_image_ref(ref)
    except InputError as e:
        not_ref = e
    try:
        as_spec = default_tag(resolve_for(args, m, ref))
    except EnvgenError:
        if as_ref is None:
            raise InputError(f"{shown(ref)} is neither an image reference nor a spec "
                             f"({not_ref.message})") from None
    return as_ref, as_spec


def _target(c, as_ref: str | None, as_spec: str | None) -> str:
    """The image on this daemon: the reference when it names one, else the spec's tag
    (certify then reports the missing image by the name the user meant)."""
    if as_ref is not None and (engine.image_or_none(c, as_ref) is not None
                               or as_spec is None):
        return as_ref
    return as_spec


def run(args) -> int:
    check_inputs(args)
    m = load_matrix_for(args)
    as_ref, as_spec = _candidates(args, m)
    c = engine.client()
    ref = _target(c, as_ref, as_spec)
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
