#!/bin/bash
# GPU certification of the frameworks built over PyTorch (Lightning, Transformers,
# Accelerate, DeepSpeed from the sdist in .ds/) and of JAX on the lent GPU machine, the way bench/gpu/run.sh certifies PyTorch: on a
# framework base made from the host's own install, built offline, certified on GPU 0, and
# the same payload run natively. Run from the repository root:
#   bash bench/gpu/frameworks.sh OUT_DIR     (FRAMEWORKS="lightning" for fewer)
set -uo pipefail
OUT=${1:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/frameworks.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)
source bench/gpu/common.sh || exit 1

ALL="lightning transformers accelerate jax deepspeed"
for FW in ${FRAMEWORKS:-$ALL}; do
  NATIVE_PATH=$PYTHONPATH
  if [ "$FW" = deepspeed ]; then
    [ -n "$DS_BASE" ] || { echo "no DeepSpeed base (.ds/ missing or its build failed)" \
      | tee "$OUT/cert-$FW.json"; continue; }
    V=$DSV; SPEC="deepspeed==$V,torch==$TBASE,variant=$TLOCAL,base=host-framework-deepspeed"
    NATIVE_PATH=/tmp/ds-site:$PYTHONPATH
  else
    V=$(python3 -c "import importlib.metadata as m; print(m.version('$FW'))" 2>/dev/null) || {
      echo "$FW is not installed on this host: not certified" | tee "$OUT/cert-$FW.json"; continue; }
    SPEC="$FW==$V,torch==$TBASE,variant=$TLOCAL,base=host-framework"
  fi
  # JAX has CUDA builds of its own: its variant is the CUDA line of the host's plugin
  [ "$FW" = jax ] && SPEC="jax==$V,variant=$(python3 -c 'import importlib.metadata as m
print(next(("cuda" + d.metadata["Name"].split("cuda")[1].split("-")[0]) for d in m.distributions()
           if d.metadata["Name"].startswith("jax-cuda") and d.metadata["Name"].endswith("plugin")))'),base=host-framework"
  step "$FW $V: resolve, build, certify on GPU 0 ($SPEC)"
  envgen --matrix $M resolve "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/stack-$FW.json" \
    || { cat "$OUT/stack-$FW.json"; continue; }
  envgen --matrix $M build "$SPEC" --driver "$DRIVER" --gpu H200 --json > "$OUT/build-$FW.json" \
    || { cat "$OUT/build-$FW.json"; continue; }
  IMG=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' "$OUT/build-$FW.json")
  envgen --matrix $M certify "$IMG" --gpus 0 --timeout 600 --json > "$OUT/cert-$FW.json"
  echo "certify exit $?"
  step "$FW: the same payload natively"
  PYTHONPATH=$NATIVE_PATH python3 envgen/smoke/${FW}_smoke.py --require cuda > "$OUT/native-$FW.json"
  echo "native exit $?"
done
step "summary"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for fw in ("lightning", "transformers", "accelerate", "jax", "deepspeed"):
    p = out / f"cert-{fw}.json"
    try:
        c = json.loads(p.read_text())
    except (OSError, ValueError):
        print(f"{fw}: no certificate ({p.read_text()[:200] if p.exists() else 'missing'})")
        continue
    r = c.get("report", {})
    checks = r.get("checks", [])
    print(f"{fw}: {'PASSED' if c.get('passed') else 'FAILED'} level {c.get('level')}, "
          f"{sum(x['passed'] for x in checks)}/{len(checks)} checks, {c.get('seconds')} s; "
          f"versions {r.get('versions')}")
    for x in checks:
        if not x["passed"]:
            print(f"   failed {x['name']}: {x.get('detail')}")
PY
step "done"
