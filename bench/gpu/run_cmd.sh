#!/bin/bash
# `envgen run` and certification's live progress on a GPU host (the lent H200). From the
# repository root: bash bench/gpu/run_cmd.sh OUT_DIR. Same setup as run.sh (common.sh): the
# host's own torch as the base, a stack built on it offline. Then:
#   - certify with --progress json: the check events as the payload reports them (stderr);
#   - envgen run --gpus all IMAGE -- python -c ...: the user's own command on the GPU, in the
#     current folder, with certification's run flags (the docker command is recorded too);
#   - envgen run's exit code is the command's.
set -uo pipefail
OUT=${1:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-cmd.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)

source bench/gpu/common.sh || exit 1
SPEC="torch==$TBASE,variant=$TLOCAL,base=host-framework"
step "build (offline, BuildKit), plain progress"
envgen --matrix $M build "$SPEC" --driver "$DRIVER" --gpu H200 --progress plain --json \
  > "$OUT/build.json" 2> "$OUT/build-progress.txt" || { cat "$OUT/build.json"; exit 1; }
IMG=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' "$OUT/build.json")
cat "$OUT/build-progress.txt"

step "certify on GPU 0 with --progress json"
envgen --matrix $M certify "$IMG" --gpus 0 --timeout 500 --progress json --json \
  > "$OUT/cert.json" 2> "$OUT/cert-events.jsonl"; echo "exit $?"
grep '"event": "check"' "$OUT/cert-events.jsonl" | head -40

step "envgen run on all GPUs"
mkdir -p /tmp/proj && cd /tmp/proj && chmod 777 /tmp/proj
cat > train.py <<'PY'
import sys, time, torch
dev = torch.device("cuda")
print("gpus", torch.cuda.device_count(), torch.cuda.get_device_name(0))
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(512, 1024, device=dev), torch.randint(0, 10, (512,), device=dev)
t = time.time()
for step in range(200):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if step in (0, 199): print("step", step, "loss", round(loss.item(), 4))
torch.cuda.synchronize()
print("steps/s", round(200 / (time.time() - t), 1), "peak MiB",
      torch.cuda.max_memory_allocated() // 2**20)
sys.exit(3)
PY
chmod 644 train.py
envgen --matrix $M run --gpus all --dry-run "$IMG" -- python train.py > "$OUT/run-argv.txt"
cat "$OUT/run-argv.txt"
envgen --matrix $M run --gpus all --no-network "$IMG" -- python train.py > "$OUT/run-out.txt" 2>&1
echo "exit $? (the command exits 3)" | tee -a "$OUT/run-out.txt"
cat "$OUT/run-out.txt"
docker ps -a --filter label=io.envgen.run=1 --format '{{.ID}}' | wc -l | \
  sed 's/^/containers left: /' | tee -a "$OUT/run-out.txt"
cd "$REPO"
step "done"
