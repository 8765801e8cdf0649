#!/bin/bash
# `envgen doctor` and `envgen smoke` on a GPU host (the lent H200 machine), recorded in
# docs/certification.md. Run from the repository root: bash bench/gpu/doctor.sh OUT_DIR
set -uo pipefail
OUT=${1:-/tmp/envgen-doctor}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$(pwd)
echo "== doctor without a Docker daemon (expect exit 3)"
python3 -m envgen doctor > "$OUT/doctor-nodocker.txt"; echo "exit $?" | tee -a "$OUT/doctor-nodocker.txt"
mkdir -p /tmp/dk && tar xJf .dk/docker-bin.tar.xz -C /tmp/dk
export PATH=/tmp/dk/usr/bin:/tmp/dk/usr/sbin:$PATH
(LD_LIBRARY_PATH=/tmp/dk/lib setsid dockerd --data-root /tmp/dockerdata --iptables=false \
    --bridge=none >/tmp/dockerd.log 2>&1 &)
for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
echo "== doctor"
python3 -m envgen doctor | tee "$OUT/doctor.txt"; echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/doctor.txt"
python3 -m envgen doctor --json > "$OUT/doctor.json"
echo "== smoke (native, all GPUs)"
python3 -m envgen smoke --require cuda --multi-gpu --json > "$OUT/smoke.json"; echo "exit $?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["level"], r["passed"], [c["name"] for c in r["checks"] if not c["passed"]])' "$OUT/smoke.json"
