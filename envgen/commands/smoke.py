"""`envgen smoke`: the payload run natively on this host."""
from __future__ import annotations

import json
import subprocess
import sys

from ..build.context import SMOKE_DIR
from ..core.errors import CheckFailed, EnvironmentMissing
from ._common import out_json, print_failed


def _summary(stdout: str) -> None:
    """The verdict in one line, each failed check after it: the whole report is --json's."""
    from ..smoke._harness import tally
    try:
        rep = json.loads(stdout)
        checks = rep["checks"]
    except (ValueError, KeyError, TypeError):
        raise CheckFailed("the smoke payload printed no report (run with --verbose to see "
                          "its log)") from None
    print(f"{'PASSED' if rep.get('passed') else 'FAILED'} at level {rep.get('level')}: "
          f"{tally(checks)}")
    print_failed(checks)


def _gpu_missing(stdout: str) -> None:
    """No GPU when one was required (--require cuda) is the environment, exit 3 (design.md),
    not a failed check: EnvironmentMissing with the payload's reason, a JSON error under
    --json."""
    try:
        checks = json.loads(stdout)["checks"]
        found = next(c for c in checks if c.get("name") == "cuda_available")
    except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return
    if isinstance(found, dict) and found.get("passed") is False:
        # the payload's one sentence: "GPU requested (--require cuda) but ...: why"
        raise EnvironmentMissing(str(found.get("detail") or "GPU requested (--require "
                                     "cuda) but torch.cuda.is_available() is False")[:300])


def run(args) -> int:
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        from .. import DISTRIBUTION
        raise EnvironmentMissing(f"torch is not installed in this Python; install it "
                                 f"(`pip install '{DISTRIBUTION}[torch]'`) to run the smoke "
                                 f"check")
    cmd = [sys.executable, str(SMOKE_DIR / "torch_smoke.py"), "--require", args.require]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    if args.multi_gpu:
        cmd.append("--multi-gpu")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 2:
        raise EnvironmentMissing("the smoke payload refused its arguments")
    if r.returncode != 0 and args.require == "cuda":
        _gpu_missing(r.stdout)
    if args.json:   # the payload's report, as every --json document: versioned first
        try:
            report = json.loads(r.stdout)
        except ValueError:
            raise EnvironmentMissing("the smoke payload printed no report") from None
        if not isinstance(report, dict):
            raise EnvironmentMissing("the smoke payload printed no report")
        out_json(report)
    else:
        sys.stderr.write(r.stderr[-4000:] if args.verbose else "")
        _summary(r.stdout)
    if r.returncode != 0:
        if args.json:
            return 1
        raise CheckFailed("the smoke check failed on this host (see the report above)")
    return 0
