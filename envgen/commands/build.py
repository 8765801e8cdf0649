"""`envgen build SPEC [--certify]`."""
from __future__ import annotations

from ..build.buildkit import build, tag_image
from ..core.errors import CheckFailed
from ..core.image import default_tag, parse_tagged
from ..runtime import docker as engine
from ._common import load_matrix_for, out_json, print_certificate, progress_for, resolve_for


def run(args) -> int:
    # Every input is checked before the first layer is built.
    m = load_matrix_for(args)
    st = resolve_for(args, m)
    tag = args.tag or default_tag(st)
    parse_tagged(tag)
    hg = None
    if args.certify:
        from .certify import check_inputs
        hg = check_inputs(args)
    c = engine.client()
    report = progress_for(args)
    report(f"building {st.stack}: {st.framework_package} {st.version} ({st.variant}), "
           f"Python {st.python}, base {st.base.name}")
    # With --certify the tag comes only after the image passed: a tag names what works.
    res = build(st, tag=tag, progress=report, no_cache=args.no_cache,
                builder=args.builder, client=c, tag_it=not args.certify)
    out = res.to_json()
    cert = None
    if args.certify:
        from .certify import run_certify
        cert = run_certify(args, c, res.image_id, m, hg, tags=(tag,))
        if cert["passed"]:
            tag_image(c, res.image_id, tag)
        else:
            out["tag"] = None
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
                          f"was not tagged {tag} ({cert['_path']})")
    return 0
