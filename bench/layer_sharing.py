"""How many bytes the stacks of one CUDA line take together, against the PyTorch stack
alone: the frameworks over PyTorch share every PyTorch layer (their closures are
constrained to its closure and stamped with its time), so each adds only its own layer.

    .venv/bin/python bench/layer_sharing.py [--cuda cu121] [--out bench/layer-sharing.json]

Builds PYTORCH and each FRAMEWORK-CUDA stack (a cached build where the layers exist),
then reads the daemon's own disk accounting (`docker system df`, per image: Size and
SharedSize). Every byte one of these images shares with another lies in the PyTorch
layers they all hold, so the set takes: the PyTorch image's shared bytes once, plus each
image's unique bytes."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("pytorch", "lightning", "transformers", "accelerate", "deepspeed")


def build(stack: str) -> tuple[str, float]:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "envgen", "build", stack, "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"envgen build {stack} failed ({r.returncode}): {r.stderr[-600:]}")
    return json.loads(r.stdout)["image_id"], round(time.monotonic() - t, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", default="cu121")
    ap.add_argument("--out", default="bench/layer-sharing.json")
    ap.add_argument("--keep", action="store_true", help="keep the images it built")
    args = ap.parse_args()
    built = {fw: build(f"{fw}-{args.cuda}") for fw in FRAMEWORKS}
    df = {i["Id"]: i for i in docker.from_env(timeout=600).df()["Images"]}
    rows = {}
    for fw, (image_id, seconds) in built.items():
        d = df[image_id]
        rows[fw] = {"stack": f"{fw}-{args.cuda}", "image_id": image_id, "seconds": seconds,
                    "size": d["Size"], "shared": d["SharedSize"],
                    "unique": d["Size"] - d["SharedSize"]}
    alone = rows["pytorch"]["size"]
    together = rows["pytorch"]["shared"] + sum(r["unique"] for r in rows.values())
    result = {"cuda": args.cuda, "images": rows, "pytorch_alone_bytes": alone,
              "all_bytes": together, "ratio": round(together / alone, 4),
              "target": 1.15, "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(ROOT / args.out).write_text(json.dumps(result, indent=1) + "\n")
    for r in rows.values():
        print(f"{r['stack']:<20} {r['size'] / 1e9:6.2f} GB, unique {r['unique'] / 1e6:8.1f} MB, "
              f"build {r['seconds']} s")
    print(f"all {len(rows)}: {together / 1e9:.2f} GB against {alone / 1e9:.2f} GB for PyTorch "
          f"alone: ratio {result['ratio']} (target at most 1.15)")
    if not args.keep:   # measured: give the disk back (the build cache stays)
        for image_id, _ in built.values():
            subprocess.run(["docker", "rmi", "-f", image_id], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
