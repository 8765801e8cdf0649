"""`make bench`: the figures the build-and-certify issue names, measured on this host.

- rebuild of an unchanged stack (target: under 5 s), also as a ratio to the cold build;
- image size over what it installs (base + the venv's site-packages; target: at most 1.10);
- certification of a built image on the CPU, the build excluded (target: under 60 s).
Results go to bench/results.json and a table in docs/benchmarks.md."""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVGEN = [sys.executable, "-m", "envgen"]


def timed(argv: list[str]) -> tuple[float, dict]:
    t = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    took = time.monotonic() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return took, json.loads(r.stdout)


def docker_json(*args: str):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def installed_bytes(image: str) -> int:
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "du",
                        image, "-sb", "/opt/venv"], capture_output=True, text=True, check=True)
    return int(r.stdout.split()[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="pytorch-cu121")
    ap.add_argument("--out", default="bench/results.json")
    ap.add_argument("--markdown", default="docs/benchmarks.md")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    first, built = timed([*ENVGEN, "build", args.spec, "--json"])
    rebuilds = [timed([*ENVGEN, "build", args.spec, "--json"])[0] for _ in range(args.repeat)]
    image = built["image_id"]
    img = docker_json("image", "inspect", image)[0]
    base = docker_json("image", "inspect", built["base"])[0]
    venv = installed_bytes(image)
    certs = [timed([*ENVGEN, "certify", image, "--gpus", "none", "--json"])[0]
             for _ in range(args.repeat)]
    rebuild = min(rebuilds)
    certify = min(certs)
    expected = base["Size"] + venv
    results = {
        "date": time.strftime("%Y-%m-%d"), "host": platform.node(),
        "cpus": os.cpu_count(), "spec": args.spec, "image_id": image,
        "build_first_s": round(first, 2),
        "rebuild_s": round(rebuild, 2), "rebuild_target_s": 5.0,
        "rebuild_vs_target": round(rebuild / 5.0, 3),
        "rebuild_vs_first_build": round(rebuild / first, 4),
        "image_bytes": img["Size"], "base_bytes": base["Size"], "venv_bytes": venv,
        "size_ratio": round(img["Size"] / expected, 4), "size_ratio_target": 1.10,
        "certify_cpu_s": round(certify, 2), "certify_target_s": 60.0,
        "certify_vs_target": round(certify / 60.0, 3),
    }
    results["pass"] = {"rebuild": rebuild < 5.0, "size": results["size_ratio"] <= 1.10,
                       "certify": certify < 60.0}
    Path(ROOT / args.out).write_text(json.dumps(results, indent=2) + "\n")
    md = [
        "# Benchmarks", "",
        f"Measured by `make bench` on {results['date']} ({results['cpus']} CPUs, shared "
        f"machine; figures are the best of {args.repeat}). Raw numbers: `bench/results.json`.",
        "", "| figure | measured | target | ratio to target | met |", "|---|---|---|---|---|",
        f"| rebuild of an unchanged `{args.spec}` | {rebuild:.2f} s (first build "
        f"{first:.0f} s) | < 5 s | {results['rebuild_vs_target']} | "
        f"{'yes' if results['pass']['rebuild'] else 'NO'} |",
        f"| image size / (base + /opt/venv) | {img['Size'] / 1e9:.3f} GB / "
        f"({base['Size'] / 1e9:.3f} + {venv / 1e9:.3f}) GB | <= 1.10 | "
        f"{results['size_ratio']} | {'yes' if results['pass']['size'] else 'NO'} |",
        f"| certification on the CPU (build excluded) | {certify:.2f} s | < 60 s | "
        f"{results['certify_vs_target']} | {'yes' if results['pass']['certify'] else 'NO'} |",
        "",
    ]
    Path(ROOT / args.markdown).write_text("\n".join(md))
    print("\n".join(md))
    return 0 if all(results["pass"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
