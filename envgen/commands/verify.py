"""`envgen verify LOCK [--rebuild] [--no-pull]`: exit 0 when nothing drifted, 1 with the
drift, 3 when a registry or daemon needed for the check does not answer."""
from __future__ import annotations

import sys

from ..core.errors import CheckFailed, InputError
from ..lock.verify import verify
from ..lock.write import read_lock
from ..runtime import docker as engine
from ._common import out_json, progress_for


def run(args) -> int:
    lock = read_lock(args.lock)          # bad lock file: InputError with file:line, exit 2
    if not lock["stacks"]:   # a verify that checked nothing must not say all is well
        raise InputError("the lock pins no stack, so there is nothing to verify (envgen lock "
                         "STACK adds one)", file=str(args.lock))
    c = engine.client()
    quiet = progress_for(args)
    rebuild = None
    if args.rebuild:
        from ..build.buildkit import build

        def rebuild(stack, tag, closure):
            quiet(f"rebuilding {stack.stack} from the lock as {tag}")
            res = build(stack, tag=tag, client=c, progress=quiet, closure=closure)
            return res.image_id, res.layers
    pull = None
    if not args.no_pull:
        from ..runtime.registry import pull as registry_pull

        def pull(client, ref):
            quiet(f"pulling {ref}")
            return registry_pull(client, ref)
    result = verify(c, lock, rebuild=rebuild, pull=pull, level=args.level)
    if args.json:
        out_json(result)
        return 0 if result["ok"] else CheckFailed.exit_code
    for name, st in result["stacks"].items():
        print(f"{name}: {'ok' if st['ok'] else 'DRIFT'}" + (" (pulled by digest)"
                                                           if st.get("pulled") else ""))
        for d in st["drift"]:
            print(f"  - {d['message']}")
    if not result["ok"]:
        bad = [n for n, s in result["stacks"].items() if not s["ok"]]
        print(f"{len(bad)} of {len(result['stacks'])} stack(s) drifted from {args.lock}",
              file=sys.stderr)
        return CheckFailed.exit_code
    print(f"{args.lock}: all {len(result['stacks'])} stack(s) match: image IDs, "
          f"certificates, closures with their sha256s, installed packages"
          + (", rebuilt layers" if args.rebuild else ""))
    return 0
