"""One `docker buildx bake` over every stack of one CUDA line, from a cold BuildKit cache,
against one bake of the naive uv Dockerfile (bench/naive-uv.Dockerfile) for the same stacks:
wall time, CPU, and how many bytes arrive over the wire against the closures' unique files
(each wheel fetched once) and against what one cold build per stack would fetch.

    .venv/bin/python bench/bake_line.py [--cuda cu121] [--out bench/bake-line.json]

On a throw-away dockerd of its own (bench/own_daemon.py: the shared daemon's images and
build cache are never touched), with the base made there from its snapshot: renders each
stack, writes `envgen ci bake` for them, empties the build cache (layers and cache mounts),
bakes; empties it again and bakes the naive file once per stack (its top-level pins, the
same base). Bytes are read on the default route's interface (/proc/net/dev) before and
after each bake: uv prints no per-file download lines, so the wire itself is counted.
File sizes come from the index's JSON simple API (PEP 691). Builds reach the index through
the daemon's bridge, masqueraded for this run (own_daemon(outbound=True)). Exit 1 when the
envgen bake fetched 1.1 times the unique files or more, or took longer than the naive one."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
FRAMEWORKS = ("pytorch", "lightning", "transformers", "accelerate", "deepspeed")
CA = "/etc/ssl/certs/ca-certificates.crt"


def envgen(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, cwd=ROOT, **kw)


def bake(file: Path, cwd: Path, env: dict, iface: str, log: Path) -> dict:
    """One cold `docker buildx bake --load` of `file` on the daemon of `env`: seconds,
    core-seconds of the machine's CPUs kept busy, bytes received."""
    from reproducible import busy
    rx0, c0, t = rx_bytes(iface), busy(), time.monotonic()
    b = subprocess.run(["docker", "buildx", "bake", "-f", str(file), "--progress", "plain",
                        "--load"], capture_output=True, text=True,
                       cwd=cwd, env=env)
    out = {"seconds": round(time.monotonic() - t, 1), "cpu_s": round(busy() - c0, 1),
           "bytes_received": rx_bytes(iface) - rx0}
    log.write_text(b.stderr)
    if b.returncode != 0:
        sys.exit(f"bake of {file.name} failed ({b.returncode}): {b.stderr[-1500:]}; log {log}")
    return out


def naive_bake(stacks: dict, base: str, work: Path) -> Path:
    """A bake file with one target per stack: bench/naive-uv.Dockerfile, the stack's
    top-level pins, the same base."""
    from reproducible import top_pins
    targets = {}
    for name, st in stacks.items():
        ctx = work / "naive" / name
        ctx.mkdir(parents=True)
        shutil.copy(ROOT / "bench" / "naive-uv.Dockerfile", ctx / "Dockerfile")
        shutil.copy(CA, ctx / "ca.crt")   # as a naive user gives it
        targets[name] = {"context": str(ctx), "dockerfile": "Dockerfile",
                         "tags": [f"envgen-bench/naive-bake-{name}:line"],
                         "args": {"BASE": base, "PINS": " ".join(top_pins(st))}}
    path = work / "naive-bake.json"
    path.write_text(json.dumps({"group": {"default": {"targets": list(targets)}},
                                "target": targets}, indent=1))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", default="cu121")
    ap.add_argument("--out", default="bench/bake-line.json")
    args = ap.parse_args()
    from own_daemon import empty_cache, own_daemon

    from envgen.resolve import request
    names = [f"{fw}-{args.cuda}" for fw in FRAMEWORKS]
    m = request.load()
    stacks = {s: request.resolve(m, s, request.host(m)) for s in names}
    base = next(iter(stacks.values())).base
    work = Path(tempfile.mkdtemp(prefix="envgen-bake-"))
    contexts = work / "contexts"
    pins = {}   # each stack's closure, as rendered
    for s in names:
        r = envgen("render", s, "-o", str(contexts / s), "--json")
        if r.returncode != 0:
            sys.exit(f"render {s} failed: {r.stderr[-400:]}")
        pins[s] = json.loads((contexts / s / "closure.json").read_text())["packages"]
    made = envgen("ci", "bake", *names)
    if made.returncode != 0:
        sys.exit(f"envgen ci bake failed: {made.stderr[-400:]}")
    spec = json.loads(made.stdout)
    for s in names:   # tags of this run's own, never a user's
        spec["target"][s]["tags"] = [f"envgen-bench/bake-{s}:line"]
    (work / "docker-bake.json").write_text(json.dumps(spec))
    iface = default_interface()
    with own_daemon(outbound=True) as host:
        os.environ["DOCKER_HOST"] = host
        env = {**os.environ, "ENVGEN_CONTEXTS": str(contexts)}
        from envgen.build.base import make_local_base
        make_local_base(base, lambda _m: None)
        empty_cache(host)
        os.sync()
        ours = bake(work / "docker-bake.json", work, env, iface, work / "bake.log")
        empty_cache(host)
        os.sync()
        naive = bake(naive_bake(stacks, base.local_tag, work), work, env, iface,
                     work / "naive-bake.log")
    files = {}   # every file of every closure, with its size on the index
    for s in names:
        for p in pins[s]:
            if p.get("file"):
                files.setdefault(p["file"], p["name"])
    sizes = index_sizes(files)
    unique = sum(sizes.values())
    per_stack = sum(sizes.get(p.get("file") or "", 0) for s in names for p in pins[s])
    result = {"cuda": args.cuda, "stacks": names, "seconds": ours["seconds"],
              "cpu_s": ours["cpu_s"], "interface": iface,
              "bytes_received": ours["bytes_received"], "closure_files": len(files),
              "bytes_unique_files": unique,
              "received_over_unique": round(ours["bytes_received"] / unique, 3),
              "bytes_one_cold_build_per_stack": per_stack,
              "naive_uv_bake": {**naive, "received_over_unique":
                                round(naive["bytes_received"] / unique, 3)},
              "envgen_over_naive_uv": round(ours["seconds"] / naive["seconds"], 3),
              "closure_files_per_stack": {s: len(pins[s]) for s in names},
              "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (ROOT / args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"envgen bake of {len(names)} stacks: {ours['seconds']} s, {ours['cpu_s']} "
          f"core-s, {ours['bytes_received'] / 1e9:.2f} GB received on {iface} for "
          f"{len(files)} unique files of {unique / 1e9:.2f} GB (ratio "
          f"{result['received_over_unique']}); the naive uv file baked for the same stacks: "
          f"{naive['seconds']} s, {naive['cpu_s']} core-s, "
          f"{naive['bytes_received'] / 1e9:.2f} GB; envgen / naive "
          f"{result['envgen_over_naive_uv']}; one cold build per stack would fetch "
          f"{per_stack / 1e9:.2f} GB")
    shutil.rmtree(work, ignore_errors=True)
    # each file once, give or take TLS and HTTP overhead and what else the host fetched
    ok = result["received_over_unique"] < 1.1 and result["envgen_over_naive_uv"] <= 1.0
    return 0 if ok else 1


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
