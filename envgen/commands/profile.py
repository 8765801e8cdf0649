"""`envgen profile IMAGE|SPEC --format docker|compose|kubernetes|json`: the run profile
certification uses, written out for the place the image will run."""
from __future__ import annotations

from ..core.errors import EnvgenError
from ..runtime import docker as engine
from ..runtime import gpu_access
from ..runtime import profile as run_profile
from ._common import load_matrix_for, out_json, ref_or_spec, resolve_for

IMAGE_USER = "envgen"   # templates/Dockerfile.j2 ends with `USER envgen`


def _image(args, m) -> tuple[str, bool, str, str]:
    """(image reference, whether it is a CUDA stack, the image's user, the stack's name): from
    the daemon's image where it has it, else from the spec alone (no daemon needed)."""
    as_ref, as_spec = ref_or_spec(args, m, args.target)
    if as_ref is not None:
        try:
            from ..runtime.docker import inspect_target
            c = engine.client()
            if engine.image_or_none(c, as_ref) is not None or as_spec is None:
                t = inspect_target(c, as_ref)
                return as_ref, t.stack.cuda is not None, t.user, t.stack.stack
        except EnvgenError:
            if as_spec is None:
                raise
    stack = resolve_for(args, m, args.target)
    return as_spec, stack.cuda is not None, IMAGE_USER, stack.stack


def run(args) -> int:
    gpus = gpu_access.check_gpus(args.gpus)
    m = load_matrix_for(args)
    image, cuda, user, name = _image(args, m)
    indices = None if gpus in ("all", "auto") else [] if gpus == "none" else \
        sorted({int(x) for x in gpus.split(",")})
    mode = "none" if indices == [] else args.gpu_access
    profile = run_profile.for_stack(cuda, indices, mode, user)
    if args.json:
        out_json({"image": image, "stack": name, "format": args.format,
                  "run_profile": profile.to_json(), "notes": profile.notes(args.format),
                  "text": run_profile.render(profile, args.format, image, name)})
    else:
        print(run_profile.render(profile, args.format, image, name), end="")
    return 0
