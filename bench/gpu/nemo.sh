#!/bin/bash
# NeMo's speech collection (nemo-toolkit[asr] 3.0.0) certified on the lent GPU machine, on
# a framework base: the host's own install (bench/gpu/common.sh) with the distributions
# NeMo adds over it installed from carried files. Those (59 cp312 wheels and the antlr4
# sdist, 37 MB) and the Docker bundle (44 MB) exceed what one call carries (64 MiB), so it
# takes two calls on the same machine:
#   bash bench/gpu/nemo.sh prepare OUT   carry .dk .whl .nemo-a: Docker, the host base, the
#                                        first part of the files kept in /tmp/nemo-files
#   bash bench/gpu/nemo.sh certify OUT   carry .nemo-b: the rest (wandb, antlr4); build the
#                                        NeMo base, certify on GPU 0, run the payload natively
# NOT RUN YET: written on 2026-12-02, when the session's GPU time was spent before a
# machine could start (docs/certification.md). The files: `pip download --no-deps
# --only-binary=:all: --python-version 3.12` of nemo-cu130's closure minus the host's
# packages (KINDS.md's list), plus fsspec 2025.12.0 and packaging 24.2 (lightning 2.4.0's caps).
set -uo pipefail
MODE=${1:?prepare or certify}; OUT=${2:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/nemo-$MODE.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)
source bench/gpu/common.sh || exit 1
mkdir -p /tmp/nemo-files
for d in .nemo-a .nemo-b; do [ -d $d ] && cp $d/* /tmp/nemo-files/; done
ls /tmp/nemo-files | wc -l; du -sh /tmp/nemo-files
if [ "$MODE" = prepare ]; then
  step "what pip would take from the files over this host's install (wandb, antlr4 come next)"
  python3 -m pip install --dry-run --no-index --find-links /tmp/nemo-files \
      --report "$OUT/nemo-dry-run.json" "nemo-toolkit[asr]==3.0.0" 2>&1 | tail -15
  step "done"; exit 0
fi
NEMO_BASE="$BASE_TAG-nemo-3.0.0"
step "NeMo over the framework base, from /tmp/nemo-files ($NEMO_BASE)"
rm -rf /tmp/nemo-ctx && mkdir -p /tmp/nemo-ctx && cp /tmp/nemo-files/* /tmp/nemo-ctx/
printf '%s\n' "FROM $BASE_TAG" "COPY . /tmp/nemo" \
  "RUN python3 -m pip install --no-index --no-build-isolation --no-compile --find-links /tmp/nemo 'nemo-toolkit[asr]==3.0.0' && python3 -m pip check; rm -rf /tmp/nemo" \
  > /tmp/nemo-ctx/Dockerfile
docker image inspect "$NEMO_BASE" >/dev/null 2>&1 || \
  docker build --network none -t "$NEMO_BASE" /tmp/nemo-ctx 2>&1 | tail -25
docker image inspect "$NEMO_BASE" >/dev/null 2>&1 || { echo "the NeMo base did not build"; exit 1; }
docker run --rm --network none "$NEMO_BASE" python3 -c "import importlib.metadata as m
for n in ('nemo-toolkit','lightning','transformers','torch','fsspec'): print(n, m.version(n))" \
  | tee "$OUT/nemo-base-versions.txt"
NPROV=$(docker run --rm --network none "$NEMO_BASE" python3 -c "import importlib.metadata as m
print(', '.join(f'{n}: \"{m.version(n)}\"' for n in ('nemo-toolkit', 'lightning')))")
PROV_NO_LIGHTNING=$(echo "$PROVIDES" | tr ',' '\n' | grep -v 'lightning:' | paste -sd, -)
cat >> $M/bases-host.yaml <<YAML
  - name: host-framework-nemo
    kind: framework
    image: $NEMO_BASE
    python: "$PY"
    os: ubuntu24.04
    provides: {$PROV_NO_LIGHTNING, $NPROV}
    source: https://github.com/envgen/envgen/blob/main/bench/gpu/nemo.sh
YAML
tail -8 $M/bases-host.yaml
SPEC="nemo==3.0.0,torch==$TBASE,variant=$TLOCAL,base=host-framework-nemo"
step "resolve, build, certify on GPU 0 ($SPEC)"
envgen --matrix $M resolve "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/stack-nemo.json" \
  || { cat "$OUT/stack-nemo.json"; exit 1; }
envgen --matrix $M build "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/build-nemo.json" \
  || { tail -c 3000 "$OUT/build-nemo.json"; exit 1; }
IMG=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' "$OUT/build-nemo.json")
envgen --matrix $M certify "$IMG" --gpus 0 --timeout 900 --json > "$OUT/cert-nemo.json"
echo "certify exit $?"
python3 - "$OUT/cert-nemo.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
r = c.get("report", {})
checks = r.get("checks", [])
print(f"nemo: {'PASSED' if c.get('passed') else 'FAILED'} level {c.get('level')}, "
      f"{sum(x['passed'] for x in checks)}/{len(checks)} checks, {c.get('seconds')} s; "
      f"versions {r.get('versions')}")
for x in checks:
    print(f"   {x['name']}: {'ok' if x['passed'] else 'FAILED'} {str(x.get('detail'))[:300]}")
PY
step "the same payload natively, in the NeMo base's Python (the host has no NeMo)"
docker run --rm --network none --device /dev/nvidia0 --device /dev/nvidiactl \
  --device /dev/nvidia-uvm --device /dev/nvidia-uvm-tools \
  -v /usr/local/nvidia:/usr/local/nvidia:ro -e LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib \
  -v "$REPO/envgen/smoke:/smoke:ro" --shm-size 8g "$NEMO_BASE" \
  python3 /smoke/nemo_smoke.py --require cuda > "$OUT/native-nemo.json"
echo "native exit $?"
step "done"
