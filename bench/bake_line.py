"""One `docker buildx bake` over every stack of one CUDA line, from a cold BuildKit cache:
how many times pip downloads each wheel (the stacks over PyTorch share its layers and its
pip cache, so once), against what one build per stack with no cache would download.

    .venv/bin/python bench/bake_line.py [--cuda cu121] [--out bench/bake-line.json]

Renders each stack, writes `envgen ci bake` for them, prunes BuildKit's cache (layers and
pip's cache mount alike), runs the bake with --progress plain and counts pip's
"Downloading FILE (SIZE)" lines per file. Removes the images it loaded unless --keep."""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("pytorch", "lightning", "transformers", "accelerate", "deepspeed")
DOWNLOAD = re.compile(r"Downloading (\S+\.(?:whl|tar\.gz|zip)) \(([\d.]+) (kB|MB|GB)\)")
UNIT = {"kB": 1e3, "MB": 1e6, "GB": 1e9}


def envgen(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, cwd=ROOT, **kw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", default="cu121")
    ap.add_argument("--out", default="bench/bake-line.json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    stacks = [f"{fw}-{args.cuda}" for fw in FRAMEWORKS]
    work = Path(tempfile.mkdtemp(prefix="envgen-bake-"))
    contexts = work / "contexts"
    naive = 0   # every file of every closure, as one cold build per stack would fetch it
    files_per_stack = {}
    for s in stacks:
        r = envgen("render", s, "-o", str(contexts / s), "--json")
        if r.returncode != 0:
            sys.exit(f"render {s} failed: {r.stderr[-400:]}")
        closure = json.loads((contexts / s / "closure.json").read_text())
        files_per_stack[s] = len(closure["packages"])
    bake = envgen("ci", "bake", *stacks)
    if bake.returncode != 0:
        sys.exit(f"envgen ci bake failed: {bake.stderr[-400:]}")
    (work / "docker-bake.json").write_text(bake.stdout)
    subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True)
    tags = {s: f"envgen-bench/bake-{s}:line" for s in stacks}
    sets = [x for s, t in tags.items() for x in ("--set", f"{s}.tags={t}")]
    t = time.monotonic()
    b = subprocess.run(["docker", "buildx", "bake", "-f", str(work / "docker-bake.json"),
                        "--progress", "plain", "--load", *sets], capture_output=True,
                       text=True, cwd=work, env={**os.environ, "ENVGEN_CONTEXTS": str(contexts)})
    seconds = round(time.monotonic() - t, 1)
    (work / "bake.log").write_text(b.stderr)
    if b.returncode != 0:
        sys.exit(f"bake failed ({b.returncode}): {b.stderr[-1500:]}; log {work}/bake.log")
    counts, sizes = collections.Counter(), {}
    for name, size, unit in DOWNLOAD.findall(b.stderr):
        counts[name] += 1
        sizes[name] = float(size) * UNIT[unit]
    twice = {n: c for n, c in counts.items() if c > 1}
    per_stack_bytes = {}
    for s in stacks:
        pins = json.loads((contexts / s / "closure.json").read_text())["packages"]
        per_stack_bytes[s] = sum(sizes.get(p.get("file") or "", 0) for p in pins)
        naive += per_stack_bytes[s]
    result = {"cuda": args.cuda, "stacks": stacks, "seconds": seconds,
              "files_downloaded": len(counts), "downloads": sum(counts.values()),
              "downloaded_more_than_once": twice,
              "bytes_downloaded": round(sum(sizes[n] * c for n, c in counts.items())),
              "bytes_one_cold_build_per_stack": round(naive),
              "closure_files_per_stack": files_per_stack,
              "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (ROOT / args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"bake of {len(stacks)} stacks: {seconds} s; {len(counts)} files downloaded "
          f"{sum(counts.values())} times ({result['bytes_downloaded'] / 1e9:.2f} GB); one cold "
          f"build per stack would download {naive / 1e9:.2f} GB; more than once: {twice or 'none'}")
    if not args.keep:
        for tag in tags.values():
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    return 0 if not twice else 1


if __name__ == "__main__":
    sys.exit(main())
