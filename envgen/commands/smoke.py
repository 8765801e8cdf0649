"""`envgen smoke`: the payload run natively on this host."""
from __future__ import annotations

import subprocess
import sys

from ..context import SMOKE_DIR
from ..errors import CheckFailed, EnvironmentMissing


def run(args) -> int:
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        raise EnvironmentMissing("torch is not installed in this Python; install it "
                                 "(`pip install 'envgen[torch]'`) to run the smoke check")
    cmd = [sys.executable, str(SMOKE_DIR / "torch_smoke.py"), "--require", args.require]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    if args.multi_gpu:
        cmd.append("--multi-gpu")
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(r.stderr[-4000:] if not args.json else "")
    print(r.stdout.strip())
    if r.returncode == 2:
        raise EnvironmentMissing("the smoke payload refused its arguments")
    if r.returncode != 0:
        if args.json:
            return 1
        raise CheckFailed("the smoke check failed on this host (see the report above)")
    return 0
