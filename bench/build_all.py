"""Build and certify (CPU) every stack this host can build from PyPI, one after another, and
record what the wheels inside each image really are against what the matrix says: a real
cross-check of the matrix's framework/CUDA/cuDNN/NCCL facts. Slow (GBs of wheels per stack):
`make bench-all`. Writes docs/matrix-builds.md and bench/matrix-builds.json; removes each
image after certifying it unless --keep."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def envgen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, cwd=ROOT)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stacks", nargs="*")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    rows = json.loads(envgen("matrix", "list", "--json", "--sources", "pypi").stdout)["stacks"]
    stacks = args.stacks or [r["stack"] for r in rows if "error" not in r]
    results = []
    for name in stacks:
        st = json.loads(envgen("resolve", name, "--json", "--sources", "pypi").stdout)
        t = time.monotonic()
        b = envgen("build", name, "--sources", "pypi", "--certify", "--json")
        took = time.monotonic() - t
        entry = {"stack": name, "torch": st["framework"]["version"], "python": st["python"],
                 "cuda": st["cuda"], "cudnn": st["cudnn"], "nccl": st["nccl"],
                 "seconds": round(took, 1), "exit": b.returncode}
        if b.returncode in (0, 1) and b.stdout.strip().startswith("{"):
            out = json.loads(b.stdout)
            entry["image_id"] = out.get("image_id")
            entry["size_gb"] = round(out.get("size_bytes", 0) / 1e9, 2)
            cert = out.get("certificate") or {}
            entry["passed"] = cert.get("passed")
            if cert.get("path"):
                rep = json.loads(Path(cert["path"]).read_text())["report"]
                entry["inside"] = rep["versions"]
                entry["failed"] = [c["name"] for c in rep["checks"] if not c["passed"]]
            if not args.keep and entry.get("image_id"):
                subprocess.run(["docker", "rmi", "-f", out["tag"]], capture_output=True)
        else:
            entry["error"] = (b.stderr.strip().splitlines() or ["?"])[-1][:300]
        results.append(entry)
        print(json.dumps(entry), flush=True)
    (ROOT / "bench" / "matrix-builds.json").write_text(json.dumps(results, indent=2) + "\n")
    md = ["# Real builds of the matrix's PyPI stacks", "",
          f"`make bench-all` on {time.strftime('%Y-%m-%d')}: each stack built from PyPI wheels "
          "on the local Debian base and certified on the CPU. The payload compares the "
          "versions inside the image with the matrix's (a mismatch fails `versions`).", "",
          "| stack | torch | python | matrix CUDA / cuDNN / NCCL | inside the image | "
          "certified | build+certify s | size GB |", "|---|---|---|---|---|---|---|---|"]
    for e in results:
        ins = e.get("inside") or {}
        inside = f"{ins.get('torch')} / {ins.get('cuda')} / {ins.get('cudnn')} / " \
                 f"{ins.get('nccl')}" if ins else e.get("error", "-")
        ok = "yes" if e.get("passed") else f"NO {e.get('failed') or ''}"
        md.append(f"| {e['stack']} | {e['torch']} | {e['python']} | {e['cuda']} / "
                  f"{e['cudnn']} / {e['nccl']} | {inside} | {ok} | {e['seconds']} | "
                  f"{e.get('size_gb', '-')} |")
    (ROOT / "docs" / "matrix-builds.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0 if all(e.get("passed") for e in results) else 1


if __name__ == "__main__":
    sys.exit(main())
