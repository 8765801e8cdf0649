#!/bin/bash
# The habits of a healthy GPU training run, measured on the lent GPU machine (one GPU, no
# network, no Docker of its own), the way bench/gpu/run.sh certifies: a framework base made
# from the host's own install, a stack built on it offline. Run from the repository root:
#   bash bench/gpu/habits.sh OUT_DIR
# It records (about 5 minutes):
# - certification at level cpu, at level cuda, and at level cuda with --measure full
#   (telemetry under load, pageable vs pinned host-to-device bandwidth, loader samples/s
#   with 0 and N workers against the step rate, memory peaks, a provoked OOM): the seconds
#   of each (goals: cpu under 30 s; full adds no more than 30 s to cuda);
# - the same payload with --measure full natively;
# - the DataLoader with pinned memory on the GPU under Docker's default 64 MB of /dev/shm
#   (expected to fail, naming the fix) and under the run profile (expected to pass);
# - container start to `import torch` done and to the first CUDA kernel, 5 runs.
set -uo pipefail
OUT=${1:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/habits.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)
source bench/gpu/common.sh || exit 1
SPEC="torch==$TBASE,variant=$TLOCAL,base=host-framework"

step "build (offline)"
envgen --matrix $M build "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/habits-build.json" \
  || { cat "$OUT/habits-build.json"; exit 1; }
IMG=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' "$OUT/habits-build.json")
echo "image $IMG"
envgen --matrix $M profile "$IMG" --gpus 0 > "$OUT/habits-profile-docker.txt"
envgen --matrix $M profile "$IMG" --gpus 0 --format kubernetes > "$OUT/habits-profile-k8s.yaml"

timed() {   # timed NAME COMMAND...: stdout to $OUT/NAME.json, seconds to $OUT/NAME.seconds
  local name=$1; shift
  local s; s=$(date +%s.%N)
  "$@" > "$OUT/$name.json"; local rc=$?
  python3 -c "print(round($(date +%s.%N) - $s, 2))" > "$OUT/$name.seconds"
  echo "$name: exit $rc, $(cat "$OUT/$name.seconds") s"
}
step "certify: level cpu, level cuda, level cuda --measure full"
# HABITS_CPU=0 leaves out the level-cpu run (measured on any machine without a GPU)
[ "${HABITS_CPU:-1}" = 1 ] && timed habits-cert-cpu envgen --matrix $M certify "$IMG" --gpus none --timeout 300 --json
timed habits-cert-cuda envgen --matrix $M certify "$IMG" --gpus 0 --timeout 300 --json
timed habits-cert-full envgen --matrix $M certify "$IMG" --gpus 0 --measure full --timeout 300 --json

step "the same payload natively, --measure full"
timed habits-native-full python3 envgen/smoke/torch_smoke.py --require cuda --measure full

step "pinned-memory DataLoader on the GPU: Docker's default /dev/shm, then the run profile"
envgen --matrix $M run --dry-run --gpus 0 --no-mount --no-network "$IMG" -- \
  python /opt/envgen/torch_smoke.py --require cuda --quick --timeout 120 > "$OUT/habits-run-argv.txt"
python3 - "$OUT" <<'PY'
import json, shlex, subprocess, sys
out = sys.argv[1]
argv = shlex.split(open(f"{out}/habits-run-argv.txt").read())
i = argv.index("--shm-size")
default = argv[:i] + argv[i + 2:]          # the same command without the profile's shm
for name, cmd in (("default-shm", default), ("profile-shm", argv)):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    try:
        dl = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "dataloader")
    except (ValueError, StopIteration, KeyError):
        dl = {"passed": None, "detail": (r.stderr or r.stdout)[-500:]}
    json.dump({"exit": r.returncode, "dataloader": dl}, open(f"{out}/habits-{name}.json", "w"))
    print(f"{name}: exit {r.returncode}, dataloader passed {dl['passed']}: {dl['detail'][:200]}")
PY

step "container start to import torch, and to the first CUDA kernel (${STARTUP_RUNS:-5} runs)"
for i in $(seq "${STARTUP_RUNS:-5}"); do
  s=$(date +%s.%N)
  envgen --matrix $M run --gpus 0 --no-mount --no-network "$IMG" -- python -c \
    "import torch; torch.ones(1, device='cuda').add_(1); torch.cuda.synchronize()" \
    || echo "run $i failed"
  e=$(date +%s.%N)
  python3 -c "print('run $i: container start to first CUDA kernel', round($e - $s, 2), 's')"
done | tee "$OUT/habits-startup.txt"

step "summary"
python3 - "$OUT" <<'PY' | tee "$OUT/habits-summary.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def load(name):
    try:
        return json.loads((out / f"{name}.json").read_text())
    except (OSError, ValueError):
        return {}
secs = {n: (out / f"habits-cert-{n}.seconds").read_text().strip()
        for n in ("cpu", "cuda", "full") if (out / f"habits-cert-{n}.seconds").exists()}
print("certification seconds (wall):", secs)
for name in ("habits-cert-cpu", "habits-cert-cuda", "habits-cert-full", "habits-native-full"):
    c = load(name)
    r = c.get("report", c)
    checks = r.get("checks", [])
    print(f"{name}: passed {r.get('passed')} level {r.get('level')}, "
          f"{sum(bool(x.get('passed')) for x in checks)}/{len(checks)} checks, "
          f"payload {r.get('metrics', {}).get('duration_s')} s")
    for x in checks:
        if not x.get("passed") or x.get("warning") or x["name"] in (
                "startup", "telemetry", "h2d_bandwidth", "loader_rates", "memory_peaks",
                "oom_recovery"):
            print(f"   {'FAIL' if not x.get('passed') else 'warn' if x.get('warning') else 'ok'}"
                  f" {x['name']}: {x.get('detail', '')[:400]}")
    if r.get("habits"):
        print("   habits:", json.dumps(r["habits"])[:3000])
PY
step "done"
