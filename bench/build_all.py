"""Build and certify (CPU) every stack this host can build from PyPI, one after another, and
record what is really inside each image against what the matrix says: a real cross-check of
the matrix's framework/CUDA/cuDNN/NCCL facts. Slow (GBs of wheels per stack): `make
bench-all`. Stacks go CUDA line by CUDA line, PyTorch first, so the stacks over PyTorch
reuse its layers; each image is removed once certified (unless --keep), and BuildKit's cache
is pruned when the disk runs low.

Results merge into bench/matrix-builds.json by stack (a run of some stacks keeps the rows of
the others), and the table between the bench-all markers of docs/matrix-builds.md is written
from all of them; the rest of that page is left as it is. --skip-recorded skips a stack whose
recorded row passed with the closure it has now; --budget-s stops starting new builds."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sections import write_between  # bench/ is first on sys.path (run as a script)

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "bench" / "matrix-builds.json"
DOC = ROOT / "docs" / "matrix-builds.md"
START, END = "<!-- make bench-all: start -->", "<!-- make bench-all: end -->"
LOW_DISK = 25 << 30


def envgen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, cwd=ROOT)


def order(rows: list[dict]) -> list[str]:
    """CUDA line by CUDA line, PyTorch first in each: the others reuse its layers."""
    names = [r["stack"] for r in rows if "error" not in r]
    return sorted(names, key=lambda n: (n.rsplit("-", 1)[-1], not n.startswith("pytorch-"), n))


def one(name: str, keep: bool) -> dict:
    st = json.loads(envgen("resolve", name, "--json", "--sources", "pypi").stdout)
    t = time.monotonic()
    b = envgen("build", name, "--sources", "pypi", "--certify", "--gpus", "none", "--json")
    entry = {"stack": name, "date": time.strftime("%Y-%m-%d"),
             "framework": st["framework"]["package"], "version": st["framework"]["version"],
             "python": st["python"], "base": st["base"]["name"], "cuda": st["cuda"],
             "cudnn": st["cudnn"], "nccl": st["nccl"],
             "seconds": round(time.monotonic() - t, 1), "exit": b.returncode}
    if b.returncode in (0, 1) and b.stdout.strip().startswith("{"):
        out = json.loads(b.stdout)
        entry["image_id"] = out.get("image_id")
        entry["closure"] = (out.get("closure") or {}).get("key")
        entry["size_gb"] = round(out.get("size_bytes", 0) / 1e9, 2)
        cert = out.get("certificate") or {}
        entry["passed"] = cert.get("passed")
        if cert.get("path"):
            rep = json.loads(Path(cert["path"]).read_text())["report"]
            entry["inside"] = {k: v for k, v in rep["versions"].items() if v is not None}
            checks = rep["checks"]
            entry["checks"] = {"passed": sum(c["passed"] and not c.get("skipped")
                                             for c in checks),
                               "skipped": sum(bool(c.get("skipped")) for c in checks),
                               "failed": [c["name"] for c in checks if not c["passed"]]}
        if not keep and entry.get("image_id"):
            subprocess.run(["docker", "rmi", "-f", entry["image_id"]], capture_output=True)
    else:
        entry["error"] = (b.stderr.strip().splitlines() or ["?"])[-1][:300]
    return entry


def table(results: dict[str, dict]) -> list[str]:
    md = ["| stack | framework | python / base | matrix CUDA / cuDNN / NCCL | inside the image "
          "| certified at level cpu (passed / skipped / failed) | build+certify s | size GB "
          "| date |", "|---|---|---|---|---|---|---|---|---|"]
    for name in order([{"stack": n} for n in results]):
        e = results[name]
        ins = e.get("inside") or {}
        inside = ", ".join(f"{k} {v}" for k, v in ins.items() if v is not None and k != "python") \
            if ins else e.get("error", "-")
        ok = "yes" if e.get("passed") else "**no**"
        if e.get("checks"):
            c = e["checks"]
            ok += f": {c['passed']} / {c['skipped']} / {len(c['failed'])}"
            if c["failed"]:
                ok += f" ({', '.join(c['failed'])})"
        lib = " / ".join(str(e[k] or "-") for k in ("cuda", "cudnn", "nccl"))
        md.append(f"| {name} | {e['framework']} {e['version']} | {e['python']} / "
                  f"{e.get('base', '-')} | {lib} | {inside} | {ok} | {e['seconds']} | "
                  f"{e.get('size_gb', '-')} | {e.get('date', '-')} |")
    return md


def write_doc(results: dict[str, dict]) -> None:
    write_between(DOC, START, END, table(results),
                  default="# Real builds of the matrix's PyPI stacks\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stacks", nargs="*")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-recorded", action="store_true")
    ap.add_argument("--budget-s", type=float, default=None)
    args = ap.parse_args()
    rows = json.loads(envgen("matrix", "list", "--json", "--sources", "pypi").stdout)["stacks"]
    stacks = args.stacks or order(rows)
    old = json.loads(JSON.read_text()) if JSON.is_file() else []
    results = {e["stack"]: e for e in old}
    started = time.monotonic()
    for name in stacks:
        if args.budget_s is not None and time.monotonic() - started > args.budget_s:
            print(f"budget spent: {name} and later not built", flush=True)
            break
        if args.skip_recorded and results.get(name, {}).get("passed"):
            r = json.loads(envgen("render", name, "--json", "-o", "/tmp/envgen-bench-all-r")
                           .stdout or "{}")
            if r.get("closure", {}).get("key") == results[name].get("closure"):
                print(f"{name}: recorded, same closure: skipped", flush=True)
                continue
        if shutil.disk_usage("/").free < LOW_DISK:
            subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True)
        results[name] = one(name, args.keep)
        print(json.dumps(results[name]), flush=True)
        JSON.write_text(json.dumps(list(results.values()), indent=2) + "\n")
        write_doc(results)
    write_doc(results)
    return 0 if all(results[n].get("passed") for n in stacks if n in results) else 1


if __name__ == "__main__":
    sys.exit(main())
