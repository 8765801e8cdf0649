"""The main job as library functions, in its order: check every input, build, certify,
store the certificate, tag only what passed. The CLI (`envgen build --certify`,
`envgen certify`), the fleet's tasks and bench call these; the commands only parse and
print. The steps themselves live in their wings (build/, certify/, certs/); the image is
built and certified through the engine seam (runtime/engine.py: DockerEngine over the
client)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .certs import store as certs
from .core import home as state
from .core.errors import CheckFailed, EnvironmentMissing
from .core.image import default_tag, parse_tagged
from .core.model import Stack
from .runtime import host
from .runtime.gpu_access import check_gpus
from .runtime.profile import once_per_daemon


def _quiet(_msg) -> None:
    pass


@dataclass(frozen=True)
class CertifyOptions:
    """How a certification runs: which GPUs (all, none or a list), how they are reached,
    the payload's time limit and steps, DDP over every GPU, the telemetry asked for."""
    gpus: str = "auto"
    access: str = "auto"
    timeout: int = 900
    steps: int | None = None
    multi_gpu: bool = False
    measure: str = "basic"


@dataclass
class Outcome:
    """What `build_and_certify` did: the build, the certificate (None without one) and the
    tag the image carries now (None when it failed certification and was left untagged)."""
    build: object
    certificate: dict | None = None
    tag: str | None = None
    notes: list = field(default_factory=list)


def check_certify_inputs(options: CertifyOptions):
    """Everything a certification needs that can be refused before any work: the GPUs
    asked for, the GPUs this host has, and a certificate store that takes a write. This
    host's GPUs, read once for the whole run."""
    from .certify.run import gpu_indices
    check_gpus(options.gpus)
    hg = host.detect()
    gpu_indices(options.gpus, hg)
    certs.check_writable()
    return hg


def store(cert: dict) -> dict:
    """`cert` kept in the store (which judges it), with `_path` where. A store that fails
    at the end (disk full since the check) does not lose the run: the error carries the
    certificate, and the CLI prints it."""
    try:
        path = certs.save(cert)
    except CheckFailed as e:   # its own record refutes it (certs/certificate.py)
        raise CheckFailed(e.message, output=cert) from None
    except OSError as e:
        raise EnvironmentMissing(f"the certification {'passed' if cert['passed'] else 'failed'}"
                                 f" but its certificate could not be saved in "
                                 f"{state.certs_dir()} ({e.strerror or e}); it is "
                                 f"printed above", output=cert) from None
    cert["_path"] = str(path)
    return cert


def certify_and_store(client, ref: str, matrix, hg, options: CertifyOptions,
                      tags: tuple[str, ...] = (), progress=_quiet) -> dict:
    """Certify the image `ref` on this daemon and keep its certificate."""
    from .certify.run import certify
    from .runtime.engine import DockerEngine
    cert = certify(DockerEngine(client), ref, hg, gpus=options.gpus, access=options.access,
                   timeout=options.timeout, steps=options.steps,
                   multi_gpu=options.multi_gpu, matrix=matrix, tags=tags,
                   progress=once_per_daemon(progress, client), measure=options.measure)
    return store(cert)


def build_and_certify(stack: Stack, matrix, *, tag: str | None = None,
                      certify: CertifyOptions | None = None, no_cache: bool = False,
                      builder: str = "auto", client=None, progress=_quiet) -> Outcome:
    """Build `stack` and, with `certify`, certify it: every input is checked before the
    first layer is built, and with `certify` the tag comes only after the image passed (a
    tag names what works)."""
    from .build.buildkit import build, tag_image
    from .runtime import docker as engine
    from .runtime.engine import DockerEngine
    tag = default_tag(stack) if tag is None else tag   # --tag '' is refused, not ignored
    parse_tagged(tag)
    hg = check_certify_inputs(certify) if certify is not None else None
    c = client or engine.client()
    progress(f"building {stack.stack}: {stack.framework_package} {stack.version} "
             f"({stack.variant}), Python {stack.python}, base {stack.base.name}")
    res = build(stack, tag=tag, progress=progress, no_cache=no_cache, builder=builder,
                client=c, engine=DockerEngine(c), tag_it=certify is None)
    if certify is None:
        return Outcome(build=res, tag=tag)
    cert = certify_and_store(c, res.image_id, matrix, hg, certify, tags=(tag,),
                             progress=progress)
    if cert["passed"]:
        tag_image(c, res.image_id, tag)
    return Outcome(build=res, certificate=cert, tag=tag if cert["passed"] else None)
