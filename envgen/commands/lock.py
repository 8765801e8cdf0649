"""`envgen lock [SPEC…] [-o envgen.lock]`."""
from __future__ import annotations

import sys

from .. import engine
from .. import lock as lk
from ..errors import InputError
from ._common import load_matrix_for, out_json, progress, resolve_for


def _refs(args, c, m) -> tuple[list[str], list]:
    """Image references to lock: the named specs (an image tag/ID, or a spec resolved to its
    default tag), or the newest certified image of every stack."""
    if not args.specs:
        refs, skipped = lk.certified_images(
            exists=lambda i: engine.image_or_none(c, i) is not None)
        if not refs:
            gone = "".join(f"; {s}: {why}" for s, why in skipped)
            raise InputError(f"no certified image to lock: build and certify one first "
                             f"(`envgen build SPEC --certify`){gone}")
        return refs, skipped
    from ..build import default_tag
    refs = []
    for spec in args.specs:
        if engine.image_or_none(c, spec) is not None:
            refs.append(spec)
            continue
        tag = default_tag(resolve_for(args, m, spec))
        if engine.image_or_none(c, tag) is None:
            raise InputError(f"{spec} resolves to {tag}, which is not on this Docker daemon "
                             f"(build it with `envgen build {spec}`)")
        refs.append(tag)
    return refs, []


def run(args) -> int:
    m = load_matrix_for(args)
    c = engine.client()
    refs, skipped = _refs(args, c, m)
    entries = {}
    for ref in refs:
        if not args.json:
            progress(f"locking {ref}: listing its packages and fetching wheel hashes")
        name, entry = lk.lock_entry(c, ref)
        entries[name] = entry
    data = lk.write_lock(args.output, entries, m.sha256)
    if args.json:
        out_json({"lock": args.output, "locked": sorted(entries),
                  "skipped": [{"stack": s, "why": w} for s, w in skipped],
                  "stacks": {n: data["stacks"][n] for n in sorted(entries)}})
        return 0
    for name in sorted(entries):
        e = entries[name]
        reqs = e["requirements"]
        hashed = sum(1 for r in reqs if r["hashes"])
        cert = e["certificate"]
        cert_text = (f"certificate {'passed' if cert['passed'] else 'FAILED'} at level "
                     f"{cert['level']} ({cert['created']})" if cert else "no certificate")
        print(f"{name}: {e['image']['tag'] or '-'} {e['image']['id'][:19]}, "
              f"{len(reqs)} packages ({hashed} hash-pinned), {cert_text}")
        for r in reqs:
            if not r["hashes"]:
                print(f"  no hash for {r['name']}=={r['version']}: {r['hash_note']}")
    for s, why in skipped:
        print(f"skipped {s}: {why}", file=sys.stderr)
    print(f"wrote {args.output} ({len(data['stacks'])} stack(s))")
    return 0
