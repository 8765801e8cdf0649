"""One `docker buildx bake` over every stack of one CUDA line, from a cold BuildKit cache:
how many bytes arrive over the wire against the closures' unique files (each wheel fetched
once) and against what one cold build per stack would fetch.

    .venv/bin/python bench/bake_line.py [--cuda cu121] [--out bench/bake-line.json]

Renders each stack, writes `envgen ci bake` for them, prunes BuildKit's cache (layers and
the cache mount alike), runs the bake, and reads the bytes received on the default route's
interface (/proc/net/dev) before and after: the install steps use uv, which prints no
per-file download lines, so the wire itself is counted. File sizes come from the index's
JSON simple API (PEP 691). Removes the images it loaded unless --keep."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("pytorch", "lightning", "transformers", "accelerate", "deepspeed")


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
    iface = default_interface()
    rx0 = rx_bytes(iface)
    t = time.monotonic()
    b = subprocess.run(["docker", "buildx", "bake", "-f", str(work / "docker-bake.json"),
                        "--progress", "plain", "--load", *sets], capture_output=True,
                       text=True, cwd=work, env={**os.environ, "ENVGEN_CONTEXTS": str(contexts)})
    seconds = round(time.monotonic() - t, 1)
    (work / "bake.log").write_text(b.stderr)
    if b.returncode != 0:
        sys.exit(f"bake failed ({b.returncode}): {b.stderr[-1500:]}; log {work}/bake.log")
    received = rx_bytes(iface) - rx0
    files = {}   # every file of every closure, with its size on the index
    for s in stacks:
        for p in json.loads((contexts / s / "closure.json").read_text())["packages"]:
            if p.get("file"):
                files.setdefault(p["file"], p["name"])
    sizes = index_sizes(files)
    unique = sum(sizes.values())
    for s in stacks:
        pins = json.loads((contexts / s / "closure.json").read_text())["packages"]
        naive += sum(sizes.get(p.get("file") or "", 0) for p in pins)
    result = {"cuda": args.cuda, "stacks": stacks, "seconds": seconds, "interface": iface,
              "bytes_received": received, "closure_files": len(files),
              "bytes_unique_files": unique, "received_over_unique": round(received / unique, 3),
              "bytes_one_cold_build_per_stack": naive,
              "closure_files_per_stack": files_per_stack,
              "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (ROOT / args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"bake of {len(stacks)} stacks: {seconds} s; {received / 1e9:.2f} GB received on "
          f"{iface} for {len(files)} unique files of {unique / 1e9:.2f} GB (ratio "
          f"{result['received_over_unique']}); one cold build per stack would fetch "
          f"{naive / 1e9:.2f} GB")
    if not args.keep:
        for tag in tags.values():
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    # each file once, give or take TLS and HTTP overhead and what else the host fetched
    return 0 if result["received_over_unique"] < 1.1 else 1


def default_interface() -> str:
    """The interface of the default route (/proc/net/route: destination 00000000)."""
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) > 1 and parts[1] == "00000000":
            return parts[0]
    sys.exit("no default route in /proc/net/route")


def rx_bytes(iface: str) -> int:
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() == iface:
            return int(rest.split()[0])
    sys.exit(f"no interface {iface} in /proc/net/dev")


def index_sizes(files: dict[str, str]) -> dict[str, int]:
    """file name -> its size, from the index's PEP 691 JSON page of its distribution."""
    sys.path.insert(0, str(ROOT))
    from concurrent.futures import ThreadPoolExecutor

    from envgen.resolve.closure import SIMPLE_URL, fetch_json
    index = os.environ.get("ENVGEN_PYPI_SIMPLE", SIMPLE_URL).rstrip("/")
    names = sorted(set(files.values()))
    with ThreadPoolExecutor(max_workers=8) as pool:
        pages = dict(zip(names, pool.map(lambda n: fetch_json(f"{index}/{n}/"), names)))
    out = {}
    for f, n in files.items():
        hit = [x for x in pages[n].get("files") or [] if x.get("filename") == f]
        if hit and hit[0].get("size"):
            out[f] = int(hit[0]["size"])
    return out


if __name__ == "__main__":
    sys.exit(main())
