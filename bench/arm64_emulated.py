"""linux/arm64 on an x86_64 host (issue 29): `envgen build pytorch-cpu-arm64 --certify --gpus
none` through QEMU's binfmt_misc handler, timed part by part from envgen's own progress
lines (the arm64 Debian base by mmdebstrap, each image step, the export, the certification
under emulation), and the certificate's word that the run was emulated. Part of `make
bench-all`; the figures merge into bench/arm64-emulated.json and the table between the arm64
markers of docs/matrix-builds.md.

--cold first removes this stack's image and its arm64 base (envgen's own tags, rebuilt
bit-identical from the snapshot) so the base is made again; BuildKit's cache is left alone:
the row says which steps it answered."""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_all import DOC, ROOT  # noqa: E402
from sections import write_between  # noqa: E402

JSON = ROOT / "bench" / "arm64-emulated.json"
STACK, TAG = "pytorch-cpu-arm64", "envgen-bench/pytorch-cpu-arm64:emulated"
START, END = "<!-- arm64 emulated: start -->", "<!-- arm64 emulated: end -->"
STEP = re.compile(r"^\s*(?:step \d+/\d+ )?(.+?): done \((\d+(?:\.\d+)?) s\)")


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True)


def timed_build(home: str) -> tuple[int, str, list[tuple[float, str]]]:
    """envgen's exit code, its JSON, and each progress line with the seconds it came at."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", "--progress", "plain", "build", STACK, "--certify",
         "--gpus", "none", "--tag", TAG, "--json"], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "ENVGEN_HOME": home})
    t0, lines = time.monotonic(), []
    for line in proc.stderr:
        lines.append((round(time.monotonic() - t0, 1), line.rstrip("\n")))
    out = proc.stdout.read()
    return proc.wait(), out, lines


def parts(lines: list[tuple[float, str]]) -> dict:
    """Seconds of the base, of each image step (envgen's own figure), of the certification
    (from the first check line back to the export's end), and the whole."""
    steps, base_end, export_end, last_check = {}, None, None, None
    for at, text in lines:
        m = STEP.match(text)
        if m:
            steps[m.group(1).strip()] = float(m.group(2))
            if m.group(1).strip() == "exporting the image":
                export_end = at
        if base_end is None and "base image: ..." in text:
            base_end = at
        if text.strip().startswith("check "):
            last_check = at
    total = lines[-1][0] if lines else None
    return {"base_s": base_end, "steps_s": steps,
            "certify_s": round(last_check - export_end, 1) if last_check and export_end
            else None, "total_s": total}


def row(entry: dict) -> str:
    p = entry["parts"]
    steps = ", ".join(f"{k} {v:g}" for k, v in p["steps_s"].items())
    return (f"| {entry['date']} | {entry['host_machine']}, {entry['cpus']} CPUs | "
            f"{'yes' if entry['cold_base'] else 'no (kept)'} | {p['base_s']} | {steps} | "
            f"{p['certify_s']} | {p['total_s']} | {entry['level']}, "
            f"{'passed' if entry['passed'] else 'FAILED'}, emulated {entry['emulated']} |")


def write_doc(entries: list[dict]) -> None:
    head = ["| date | host | base made anew | base s (to the first image step) | image steps "
            "s (envgen's figures) | certification s | whole run s | certificate |",
            "|---|---|---|---|---|---|---|---|"]
    write_between(DOC, START, END, [*head, *(row(e) for e in entries)])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true",
                    help="remove this stack's image and its arm64 base first")
    args = ap.parse_args()
    if platform.machine() != "aarch64" and \
            not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        print("no qemu-aarch64 binfmt_misc handler: tools/bootstrap.sh registers it",
              file=sys.stderr)
        return 2
    st = json.loads(subprocess.run([sys.executable, "-m", "envgen", "resolve", STACK, "--json"],
                                   cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    if args.cold:
        docker("rmi", "-f", TAG)
        # envgen/base:<name>-arm64-<key>: the arm64 bases of this stack's base name
        prefix = f"{st['base']['image']}:{st['base']['name']}-arm64-"
        for tag in docker("images", "--format", "{{.Repository}}:{{.Tag}}",
                          st["base"]["image"]).stdout.split():
            if tag.startswith(prefix):
                docker("rmi", tag)
    with tempfile.TemporaryDirectory(prefix="envgen-arm64-") as home:
        code, out, lines = timed_build(home)
        built = json.loads(out) if out.strip().startswith("{") else {}
        cert = built.get("certificate") or {}
        full = json.loads(Path(cert["path"]).read_text()) if cert.get("path") else {}
    entry = {"date": time.strftime("%Y-%m-%d"), "exit": code, "host_machine": platform.machine(),
             "cpus": len(os.sched_getaffinity(0)), "cold_base": args.cold,
             "parts": parts(lines), "level": cert.get("level"), "passed": cert.get("passed"),
             "emulated": full.get("emulated"), "platform": full.get("platform"),
             "size_bytes": built.get("size_bytes")}
    if built.get("image_id"):
        docker("rmi", "-f", built["image_id"])
    old = json.loads(JSON.read_text()) if JSON.is_file() else []
    entries = [*old, entry]
    JSON.write_text(json.dumps(entries, indent=2) + "\n")
    write_doc(entries)
    print(json.dumps(entry))
    if code != 0:
        print("\n".join(t for _, t in lines[-20:]), file=sys.stderr)
    return 0 if code == 0 and entry["passed"] and entry["emulated"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
