#!/bin/bash
# GPU certification on a host with NVIDIA GPUs but no network, no Docker and no NVIDIA
# Container Toolkit (the lent H200 machine). Run from the repository root:
#   bash bench/gpu/run.sh OUT_DIR             (certify on 1 and all GPUs, native run)
#   MODE=compare ROUNDS=5 STEPS=300 bash bench/gpu/run.sh OUT_DIR   (container vs native)
# Needs, beside the checkout: .dk/docker-bin.tar.xz (../shared/tools/docker-bundle.sh .dk)
# and .whl/ (wheels of envgen's dependencies missing there: docker, jsonschema, ...).
# It starts Docker, turns the host's own framework install into a base image (the way teams
# build on NGC's framework images), has envgen resolve, render and build a stack on it
# offline, certifies it on one GPU and on all GPUs, and runs the same payload natively.
set -uo pipefail
OUT=${1:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)

source bench/gpu/common.sh || exit 1
SPEC="torch==$TBASE,variant=$TLOCAL,base=host-framework"
envgen --matrix $M resolve "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/stack.json" \
  || { cat "$OUT/stack.json"; exit 1; }
envgen --matrix $M render "$SPEC" --driver "$DRIVER" --gpu H200 -o /tmp/ctx && cat /tmp/ctx/Dockerfile

step "build (offline, BuildKit)"
envgen --matrix $M build "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/build.json" \
  || { cat "$OUT/build.json"; exit 1; }
IMG=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' "$OUT/build.json")
echo "image $IMG"

if [ "${MODE:-full}" = compare ]; then
  step "container vs native, ${ROUNDS:-5} rounds of ${STEPS:-300} steps"
  python3 bench/gpu/compare.py $M "$IMG" "${ROUNDS:-5}" "${STEPS:-300}" "$OUT/compare.json"
  step "done"; exit 0
fi
step "native payload (before)"
python3 envgen/smoke/torch_smoke.py --require cuda > "$OUT/native-1.json"; echo "exit $?"
step "certify on GPU 0"
envgen --matrix $M certify "$IMG" --gpus 0 --timeout 500 --json > "$OUT/cert-1gpu.json"; echo "exit $?"
step "signals during a GPU certification (SIGTERM, then SIGKILL and the next run)"
python3 bench/gpu/signals.py $M "$IMG" "$OUT/signals.json"; echo "exit $?"
step "native payload (after)"
python3 envgen/smoke/torch_smoke.py --require cuda > "$OUT/native-2.json"; echo "exit $?"
if [ "$NGPU" -ge 2 ]; then
  step "certify on all $NGPU GPUs with DDP over NCCL"
  envgen --matrix $M certify "$IMG" --gpus all --multi-gpu --timeout 500 --json \
    > "$OUT/cert-allgpu.json"; echo "exit $?"
else
  echo "only $NGPU GPU: the multi-GPU part did not run" > "$OUT/cert-allgpu.json"
fi
step "summary"
python3 bench/gpu/summarize.py "$OUT" | tee "$OUT/summary.txt"
tail -5 /tmp/dockerd.log
step "done"
