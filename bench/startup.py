"""Container start-up of envgen images: wall seconds from `docker run` to `import torch` done
(and the import's own seconds inside the container), for two images measured in turns, so a
busy machine slows both alike. Usage (from the repository root):

    python bench/startup.py IMAGE_WITHOUT_BYTECODE IMAGE_WITH_BYTECODE [--rounds 8]

Writes bench/startup.json (medians, every run, the images' sizes); docs/benchmarks.md quotes
it. It starts containers only (no network, removed), and removes nothing."""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import time; t = time.perf_counter(); import torch; "
         "print(round(time.perf_counter() - t, 3))")


def once(image: str) -> tuple[float, float]:
    t0 = time.monotonic()
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python", "-c",
                        PROBE], capture_output=True, text=True, timeout=300, check=True)
    return round(time.monotonic() - t0, 3), float(r.stdout.strip().splitlines()[-1])


def size(image: str) -> int:
    r = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", image],
                       capture_output=True, text=True, check=True)
    return int(r.stdout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("without")
    p.add_argument("with_")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("-o", "--output", default=str(ROOT / "bench" / "startup.json"))
    a = p.parse_args()
    images = {"without_bytecode": a.without, "with_bytecode": a.with_}
    runs = {k: [] for k in images}
    for image in images.values():   # a first start pulls the layers into the page cache
        once(image)
    for i in range(a.rounds):
        order = list(images.items()) if i % 2 == 0 else list(images.items())[::-1]
        for key, image in order:
            runs[key].append(once(image))
    out = {"date": time.strftime("%Y-%m-%d"), "rounds": a.rounds, "images": images,
           "size_bytes": {k: size(v) for k, v in images.items()}, "runs": runs}
    for key in images:
        out[f"{key}_start_to_import_s"] = round(statistics.median(w for w, _ in runs[key]), 3)
        out[f"{key}_import_s"] = round(statistics.median(i for _, i in runs[key]), 3)
    out["size_cost_bytes"] = out["size_bytes"]["with_bytecode"] - out["size_bytes"][
        "without_bytecode"]
    Path(a.output).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
