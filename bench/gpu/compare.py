"""Container vs native on the same GPU: alternate the smoke payload natively and through
`envgen certify` for several rounds, and compare medians (step time, samples/s, GEMM)."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys


def native(steps: int) -> dict:
    r = subprocess.run([sys.executable, "envgen/smoke/torch_smoke.py", "--require", "cuda",
                        "--steps", str(steps)], capture_output=True, text=True)
    return json.loads(r.stdout)["metrics"]


def container(matrix: str, image: str, steps: int) -> dict:
    r = subprocess.run([sys.executable, "-m", "envgen", "--matrix", matrix, "certify", image,
                        "--gpus", "0", "--steps", str(steps), "--json"],
                       capture_output=True, text=True)
    cert = json.loads(r.stdout)
    assert cert["passed"], r.stdout[-2000:]
    return cert["report"]["metrics"]


def main(matrix: str, image: str, rounds: int, steps: int, out: str) -> int:
    runs = {"native": [], "container": []}
    for i in range(rounds):
        order = ("native", "container") if i % 2 == 0 else ("container", "native")
        for kind in order:
            m = native(steps) if kind == "native" else container(matrix, image, steps)
            runs[kind].append({k: m[k] for k in ("step_time_ms", "samples_per_s",
                                                 "gemm_tflops")})
            print(kind, runs[kind][-1], flush=True)
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    ratio = {f: med["container"][f] / med["native"][f] for f in med["native"]}
    result = {"rounds": rounds, "steps": steps, "runs": runs, "median": med,
              "container_over_native": ratio}
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({"median": med, "container_over_native": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
