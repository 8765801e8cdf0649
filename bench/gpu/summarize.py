"""Summarise a GPU certification run (bench/gpu/run.sh): container vs native figures."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

TORCH_BF16_REFERENCE_TFLOPS = 790.0  # torch's bf16 8192^3 GEMM on this GPU (device notes)


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def main(out: str) -> int:
    d = Path(out)
    cert, natives = load(d / "cert-1gpu.json"), [load(d / f"native-{i}.json") for i in (1, 2)]
    natives = [n for n in natives if n]
    multi = load(d / "cert-allgpu.json")
    if not cert:
        print("no single-GPU certificate")
        return 1
    rep = cert["report"]
    print(f"level {cert['level']}, passed {cert['passed']}, device {rep['device']}, "
          f"driver {cert['host']['driver']}, gpu access {cert['host']['gpu_access']}")
    print(f"versions inside {rep['versions']}")
    for c in rep["checks"]:
        mark = "skip" if c.get("skipped") else ("pass" if c["passed"] else "FAIL")
        print(f"  {mark:4} {c['name']}: {c.get('detail', '')}")
    m = rep["metrics"]
    if natives:
        step_native = statistics.mean(n["metrics"]["step_time_ms"] for n in natives)
        gemm_native = statistics.mean(n["metrics"]["gemm_tflops"] for n in natives)
        print(f"step time: container {m['step_time_ms']:.3f} ms, native {step_native:.3f} ms "
              f"(mean of {len(natives)}): container/native {m['step_time_ms'] / step_native:.3f}")
        print(f"bf16 GEMM {m.get('gemm_size')}^3: container {m['gemm_tflops']:.1f} TFLOP/s, "
              f"native {gemm_native:.1f}: container/native {m['gemm_tflops'] / gemm_native:.3f}; "
              f"{m['gemm_tflops'] / TORCH_BF16_REFERENCE_TFLOPS:.1%} of "
              f"{TORCH_BF16_REFERENCE_TFLOPS:.0f}")
    if multi:
        mg = multi["report"].get("multi_gpu") or {}
        print(f"multi-GPU: passed {multi['passed']}, world {mg.get('world_size')}, "
              f"busbw {mg.get('busbw_gbps')}, checks " + ", ".join(
                  f"{c['name']}={'pass' if c['passed'] else 'FAIL'}"
                  for c in multi["report"]["checks"] if c["name"].startswith("multi_gpu")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
