#!/bin/bash
# NeMo's speech collection (nemo-toolkit[asr] 3.0.0) certified on the lent GPU machine, on
# a framework base: the host's own install (bench/gpu/common.sh) with the distributions
# NeMo adds over it installed from carried files, in two calls on the same machine:
#   bash bench/gpu/nemo.sh prepare OUT   carry .dk .whl: Docker and the host base
#   bash bench/gpu/nemo.sh certify OUT   carry .nemo: nemo-files.tar.xz; build the NeMo
#                                        base, certify on GPU 0, run the payload natively
# (the machine stays warm 30 s between calls: send the second at once).
# The files: `python bench/gpu/nemo_pack.py bench/gpu/host/h200-freeze-2026-12-03.txt` (the
# host's pip freeze, read in a short call) compiles "nemo-toolkit[asr]==3.0.0" for Python 3.12
# with that freeze as preferences, downloads what it chose beside the host's versions, rewrites
# the wheels ZIP_STORED and packs .nemo/nemo-files.tar.xz (xz -9e); on 2026-12-03 it packed the
# same 58 distributions the certified run installed (its log's "Would install"), 24.5 MB.
# Ran on 2026-12-02: docs/certification.md, docs/certificates/h200-nemo-2026-12-02.json.
set -uo pipefail
MODE=${1:?prepare or certify}; OUT=${2:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/nemo-$MODE.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)
source bench/gpu/common.sh || exit 1
if [ "$MODE" = prepare ]; then step "done: Docker and the host base are ready"; exit 0; fi
mkdir -p /tmp/nemo-files
# the files travel as one xz tarball of the wheels rewritten uncompressed (ZIP_STORED: 36 MB
# of wheels become 24.5 MB), in the certify call
for t in .nemo/*.tar.xz; do [ -f "$t" ] && tar xJf "$t" -C /tmp/nemo-files; done
ls /tmp/nemo-files | wc -l; du -sh /tmp/nemo-files
step "what pip takes from the files over this host's install"
python3 -m pip install --dry-run --no-index --find-links /tmp/nemo-files \
    --report "$OUT/nemo-dry-run.json" "nemo-toolkit[asr]==3.0.0" 2>&1 | tail -15
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
