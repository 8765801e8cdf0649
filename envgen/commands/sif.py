"""`envgen sif IMAGE|SPEC -o FILE.sif`: the SIF of a built image, for HPC sites."""
from __future__ import annotations

from ..runtime import docker as engine
from ..runtime.sif import make_sif
from ._common import load_matrix_for, out_json, progress_for, ref_or_spec


def run(args) -> int:
    m = load_matrix_for(args)
    as_ref, as_spec = ref_or_spec(args, m, args.target)
    c = engine.client()
    from .certify import _target
    res = make_sif(c, _target(c, as_ref, as_spec), args.output, timeout=args.timeout,
                   compression=args.compression,
                   progress=progress_for(args))
    if args.json:
        out_json(res)
    else:
        print(f"built {res['sif']} ({res['sha256'][:19]}, {res['size_bytes'] / 1e6:.0f} MB) "
              f"from {res['image_id'][:19]} ({res['stack']}) in {res['seconds']:.1f} s with "
              f"apptainer {res['apptainer']}; certify it with `envgen certify FILE.sif`")
    return 0
