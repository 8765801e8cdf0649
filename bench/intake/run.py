"""`envgen init --from` + `envgen resolve` of a 60-line requirements file (issue 28): the
cold time (a fresh ENVGEN_HOME: uv resolves, the index is read, every wheel's module list
is fetched by range requests) and the warm time (the same inputs: everything read back from
the caches keyed by them). The warm figure must stay under 3 s; exit 1 when it does not."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LIMIT_S = 3.0


def timed(argv, cwd, home) -> float:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "envgen", *argv], cwd=cwd, capture_output=True,
                       text=True, env={**os.environ, "ENVGEN_HOME": home,
                                       "PYTHONPATH": str(ROOT)}, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"envgen {' '.join(argv)} failed: {r.stderr[-600:]}")
    return time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", help="write the figures here as JSON")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="envgen-bench-intake-") as tmp:
        shutil.copy(HERE / "requirements-60.txt", Path(tmp) / "requirements.txt")
        home = str(Path(tmp) / "home")
        init = ["init", "--from", "requirements.txt", "--name", "bench", "--force"]
        cold = timed(init, tmp, home) + timed(["resolve"], tmp, home)
        warm = [timed(init, tmp, home) + timed(["resolve"], tmp, home)
                for _ in range(args.runs)]
    out = {"requirements": 59, "cold_s": round(cold, 2),
           "warm_s": round(statistics.median(warm), 2), "warm_runs": [round(w, 2) for w in warm],
           "limit_s": LIMIT_S}
    print(json.dumps(out))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if out["warm_s"] < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
