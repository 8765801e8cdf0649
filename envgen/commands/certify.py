"""`envgen certify IMAGE|SPEC`."""
from __future__ import annotations

from .. import certs, engine, host, state
from ..certify import certify
from ..errors import CheckFailed, EnvgenError, EnvironmentMissing, InputError
from ..gpu_access import check_gpus
from ._common import load_matrix_for, out_json, print_certificate, resolve_for


def check_inputs(args) -> None:
    """Everything a certification needs that can be refused before any work: the --gpus
    value and a certificate store that takes a write."""
    check_gpus(args.gpus)
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


def _target(args, c, m) -> str:
    """The image to certify: an image reference on this daemon, or a spec resolved to
    the tag `envgen build` gives it."""
    from ..build import default_tag
    from ..registry import parse_image_ref
    ref = args.target
    try:
        parse_image_ref(ref)
    except InputError as not_ref:
        try:
            return default_tag(resolve_for(args, m, ref))
        except EnvgenError:
            raise InputError(f"{ref[:80]!r} is neither an image reference nor a spec "
                             f"({not_ref.message})") from None
    if engine.image_or_none(c, ref) is None and not ref.startswith("sha256:"):
        try:
            return default_tag(resolve_for(args, m, ref))
        except EnvgenError:   # not a spec either: certify reports the missing image
            pass
    return ref


def run(args) -> int:
    check_inputs(args)
    m = load_matrix_for(args)
    c = engine.client()
    ref = _target(args, c, m)
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
