"""The proof of issue 27: build and certify at level cpu the oldest and the newest release of
each framework's range (every release since 2023), as a spec, one after another. Each image
is removed once certified (unless --keep). Slow (GBs of wheels): part of `make bench-all`.

The add-ons name a torch whose PyPI build this host already has layers for where their
range allows it (torch 2.4.1, the CI's pytorch-cu121), and the torch of their own time
where it does not. A release that fails is recorded with the reason and becomes data (a
`needs` in envgen/refresh/addons.py, or refused), never dropped.

Results merge into bench/release-range.json by spec; the table between the release-range
markers of docs/matrix-builds.md is written from all of them."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_all import DOC, ROOT, envgen, one  # noqa: E402
from sections import write_between  # noqa: E402

JSON = ROOT / "bench" / "release-range.json"
START, END = "<!-- release range: start -->", "<!-- release range: end -->"
# the oldest and the newest release of each framework's range, as a spec that builds
SPECS = [
    "pytorch-lightning==2.0.9,torch==2.4.1",
    "pytorch-lightning==2.6.6,torch==2.4.1",
    "lightning==2.0.0,torch==2.0.1",
    "lightning==2.6.6,torch==2.4.1",
    "transformers==4.26.0,torch==2.0.1",
    "transformers==5.24.0",
    "accelerate==0.16.0,torch==2.0.1",
    "accelerate==1.16.0",   # needs torch>=2.6.0: over the newest torch, as transformers 5
    "deepspeed==0.16.3,torch==2.4.1",   # 0.8.0 .. 0.16.2 name no Python 3.11
    "deepspeed==0.19.8",
    "tensorflow-cpu==2.11.1",
    "tensorflow-cpu==2.21.0",
    "jax-cpu==0.4.18",
    "jax-cpu==0.12.0.1",
    # Keras 2 over its own TensorFlow; Keras 3 over each backend; tf-keras; Flax and optax
    # over a CPU jaxlib
    "keras==2.12.0",
    "keras==3.15.1,tensorflow-cpu",
    "keras==3.0.0,jax-cpu",
    "keras==3.15.1,jax-cpu",
    "keras==3.0.0,torch==2.4.1",
    "keras==3.15.1,torch==2.4.1",
    "tf-keras==2.14.1,tensorflow-cpu",
    "tf-keras==2.21.0,tensorflow-cpu",
    "flax==0.6.4,jax-cpu",   # refused: needs a jax older than the matrix's (the row says why)
    "flax==0.6.9,jax-cpu",
    "flax==0.12.12,jax-cpu",
    "optax==0.1.5,jax-cpu",
    "optax==0.2.8,jax-cpu",
    "nemo-toolkit==2.6.1",   # 2.6.0 pins ctc_segmentation 1.7.4 (sdist only): left out
    "nemo-toolkit==3.0.0",
]


def table(results: dict[str, dict]) -> list[str]:
    md = ["| spec | resolved | python / base | certified at level cpu (passed / skipped / "
          "failed) | build+certify s | size GB | date |", "|---|---|---|---|---|---|---|"]
    for spec, e in results.items():
        ok = "yes" if e.get("passed") else f"**no**: {e.get('error', '')}".rstrip(": ")
        if e.get("checks"):
            c = e["checks"]
            ok += f": {c['passed']} / {c['skipped']} / {len(c['failed'])}"
            if c["failed"]:
                ok += f" ({', '.join(c['failed'])})"
        md.append(f"| `{spec}` | {e.get('framework', '-')} {e.get('version', '-')} | "
                  f"{e.get('python', '-')} / {e.get('base', '-')} | {ok} | "
                  f"{e.get('seconds', '-')} | {e.get('size_gb', '-')} | {e.get('date', '-')} |")
    return md


def write_doc(results: dict[str, dict]) -> None:
    write_between(DOC, START, END, table(results))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="*")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--budget-s", type=float, default=None)
    args = ap.parse_args()
    old = json.loads(JSON.read_text()) if JSON.is_file() else []
    results = {e["spec"]: e for e in old}
    started = time.monotonic()
    for spec in args.specs or SPECS:
        if args.budget_s is not None and time.monotonic() - started > args.budget_s:
            print(f"budget spent: {spec} and later not built", flush=True)
            break
        refused = envgen("resolve", spec, "--sources", "pypi")
        if refused.returncode != 0:   # it did not resolve: envgen's sentence is the row
            entry = {"error": "did not resolve: " + (refused.stderr.strip().splitlines()
                                                     or ["?"])[0][:300],
                     "date": time.strftime("%Y-%m-%d")}
        else:
            entry = one(spec, args.keep)
        results[spec] = {"spec": spec, **entry}
        print(json.dumps(results[spec]), flush=True)
        JSON.write_text(json.dumps(list(results.values()), indent=2) + "\n")
        write_doc(results)
    return 0 if all(results[s].get("passed") for s in (args.specs or SPECS)
                    if s in results) else 1


if __name__ == "__main__":
    sys.exit(main())
