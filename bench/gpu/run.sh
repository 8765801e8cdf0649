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

step "python dependencies"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$REPO ENVGEN_HOME=/tmp/envgen-home ENVGEN_BUILD_NETWORK=none
envgen() { python3 -m envgen "$@"; }
nvidia-smi -L; nvidia-smi --query-gpu=driver_version,compute_cap --format=csv,noheader
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
NGPU=$(nvidia-smi -L | wc -l)
TV=$(python3 -c 'import torch; print(torch.__version__)')
PY=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
TBASE=${TV%%+*}; TLOCAL=${TV#*+}
echo "driver $DRIVER, $NGPU GPU(s), torch $TV, python $PY ($(command -v python3))"

step "docker engine"
mkdir -p /tmp/dk && tar xJf .dk/docker-bin.tar.xz -C /tmp/dk
export PATH=/tmp/dk/usr/bin:/tmp/dk/usr/sbin:$PATH ENVGEN_DOCKER=/tmp/dk/usr/bin/docker
(LD_LIBRARY_PATH=/tmp/dk/lib setsid dockerd --data-root /tmp/dockerdata --iptables=false \
    --bridge=none >/tmp/dockerd.log 2>&1 &)
for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker version --format 'docker {{.Server.Version}}' || { tail -20 /tmp/dockerd.log; exit 1; }

step "framework base from this host's own install (torch $TV)"
BASE_TAG="envgen/host-framework:torch-$TBASE-$TLOCAL"
mkdir -p /tmp/fw-extra/tmp && chmod 1777 /tmp/fw-extra/tmp
VENV_BIN=$(dirname "$(command -v python3)")
tar -C / --exclude=usr/local/nvidia --exclude=usr/share/doc --exclude=usr/share/man \
    -cf - usr lib lib64 bin sbin etc opt/torch -C /tmp/fw-extra tmp 2>/dev/null \
  | docker import -c "ENV PATH=$VENV_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      - "$BASE_TAG" || exit 1
docker image ls "$BASE_TAG"

step "matrix with the framework base"
M=/tmp/matrix && mkdir -p $M && cp matrices/*.yaml $M/
cat > $M/bases-host.yaml <<YAML
bases:
  - name: host-framework
    kind: framework
    image: $BASE_TAG
    python: "$PY"
    os: ubuntu24.04
    provides: {torch: "$TV"}
    source: https://github.com/envgen/envgen/blob/main/bench/gpu/run.sh
YAML
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
