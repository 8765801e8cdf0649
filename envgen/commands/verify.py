"""`envgen verify LOCK [--rebuild]`: exit 0 when nothing drifted, 1 with the drift."""
from __future__ import annotations

import sys

from .. import engine
from ..errors import CheckFailed
from ..lock import read_lock
from ..verify import verify
from ._common import out_json, progress


def run(args) -> int:
    lock = read_lock(args.lock)          # bad lock file: InputError with file:line, exit 2
    c = engine.client()
    rebuild = None
    if args.rebuild:
        from ..build import build

        def rebuild(stack, tag):
            if not args.json:
                progress(f"rebuilding {stack.stack} from the lock as {tag}")
            return build(stack, tag=tag, client=c,
                         progress=(lambda _m: None) if args.json else progress).image_id
    result = verify(c, lock, rebuild=rebuild)
    if args.json:
        out_json(result)
        return 0 if result["ok"] else CheckFailed.exit_code
    for name, st in result["stacks"].items():
        print(f"{name}: {'ok' if st['ok'] else 'DRIFT'}")
        for d in st["drift"]:
            print(f"  - {d['message']}")
    if not result["ok"]:
        bad = [n for n, s in result["stacks"].items() if not s["ok"]]
        print(f"{len(bad)} of {len(result['stacks'])} stack(s) drifted from {args.lock}",
              file=sys.stderr)
        return CheckFailed.exit_code
    print(f"{args.lock}: all {len(result['stacks'])} stack(s) match")
    return 0
