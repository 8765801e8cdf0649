# Shared setup of the GPU scripts (sourced, from the repository root, after OUT, step and
# T0 are set): envgen's missing dependencies from .whl/, Docker from .dk/, and a framework
# base image made from this host's own install, with a matrix folder ($M) that names it.
# The base provides torch and every framework over it that this Python has.
step "python dependencies"
if ls .whl/*.whl >/dev/null 2>&1; then   # else as an earlier call on this machine left it
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
elif [ ! -d /tmp/site ]; then echo "no .whl/ and no /tmp/site"; exit 1; fi
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
# from .dk/, or as an earlier call on this machine left it (a call carries 64 MiB at most)
if [ -f .dk/docker-bin.tar.xz ]; then mkdir -p /tmp/dk && tar xJf .dk/docker-bin.tar.xz -C /tmp/dk
elif [ ! -x /tmp/dk/usr/bin/dockerd ]; then echo "no .dk/ and no /tmp/dk: no Docker"; exit 1; fi
export PATH=/tmp/dk/usr/bin:/tmp/dk/usr/sbin:$PATH ENVGEN_DOCKER=/tmp/dk/usr/bin/docker
docker info >/dev/null 2>&1 || (LD_LIBRARY_PATH=/tmp/dk/lib setsid dockerd --data-root /tmp/dockerdata --iptables=false \
    --bridge=none >/tmp/dockerd.log 2>&1 &)
for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker version --format 'docker {{.Server.Version}}' || { tail -20 /tmp/dockerd.log; exit 1; }

step "framework base from this host's own install (torch $TV)"
BASE_TAG="envgen/host-framework:torch-$TBASE-$TLOCAL"
mkdir -p /tmp/fw-extra/tmp && chmod 1777 /tmp/fw-extra/tmp
VENV_BIN=$(dirname "$(command -v python3)")
# made once per machine: a second script in the same call reuses it
docker image inspect "$BASE_TAG" >/dev/null 2>&1 || \
tar -C / --exclude=usr/local/nvidia --exclude=usr/share/doc --exclude=usr/share/man \
    -cf - usr lib lib64 bin sbin etc opt/torch -C /tmp/fw-extra tmp 2>/dev/null \
  | docker import -c "ENV PATH=$VENV_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      - "$BASE_TAG" || exit 1
docker image ls "$BASE_TAG"

step "matrix with the framework base"
PROVIDES=$(python3 - <<'PY'
import importlib.metadata as md
out = []
from pathlib import Path
# the frameworks the matrix has rows for, and what JAX's stack pins beside jax
# and the CUDA libraries the host's wheels installed: a stack on this base claims them
for name in ("torch", "lightning", "transformers", "accelerate", "jax", "jaxlib", "flax",
             "optax", "jax-cuda13-plugin", "jax-cuda13-pjrt", "nvidia-cuda-runtime",
             "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "nvidia-cuda-runtime-cu12",
             "nvidia-cudnn-cu12", "nvidia-nccl-cu12"):
    try:
        version = md.version(name)
    except md.PackageNotFoundError:
        continue
    rows = Path(f"matrices/{name}.yaml")   # a version the matrix lacks would not validate
    if name == "torch" or not rows.is_file() or f'version: "{version}"' in rows.read_text():
        out.append(f'{name}: "{version}"')
print(", ".join(out))
PY
)
echo "the base provides: $PROVIDES"
M=/tmp/matrix && mkdir -p $M && cp matrices/*.yaml $M/
# DeepSpeed is not on the host: a second base over the first, with its sdist built there as
# envgen's install/6-source layer builds it (no isolation, over the base's torch, no ops),
# from the files carried in .ds/ (the sdist and the wheels of what the host lacks).
DS_BASE=""
if ls .ds/deepspeed-*.tar.gz >/dev/null 2>&1; then
  step "DeepSpeed over the framework base, from .ds/"
  rm -rf /tmp/ds-ctx && mkdir -p /tmp/ds-ctx && cp .ds/* /tmp/ds-ctx/
  printf '%s\n' "FROM $BASE_TAG" "COPY . /tmp/ds" \
    "RUN DS_BUILD_OPS=0 python3 -m pip install --no-index --no-deps --no-build-isolation --no-compile /tmp/ds/*.whl /tmp/ds/deepspeed-*.tar.gz && rm -rf /tmp/ds" \
    > /tmp/ds-ctx/Dockerfile
  DSV=$(ls .ds/deepspeed-*.tar.gz | sed 's/.*deepspeed-\(.*\)\.tar\.gz/\1/')
  DS_BASE="$BASE_TAG-deepspeed-$DSV"
  docker image inspect "$DS_BASE" >/dev/null 2>&1 || \
    docker build -q --network none -t "$DS_BASE" /tmp/ds-ctx || DS_BASE=""
  # the same files natively, for the native run of the payload
  DS_BUILD_OPS=0 python3 -m pip install -q --no-index --no-deps --no-build-isolation \
      --no-compile --target /tmp/ds-site .ds/*.whl .ds/deepspeed-*.tar.gz || true
fi
cat > $M/bases-host.yaml <<YAML
bases:
  - name: host-framework
    kind: framework
    image: $BASE_TAG
    python: "$PY"
    os: ubuntu24.04
    provides: {$PROVIDES}
    source: https://github.com/envgen/envgen/blob/main/bench/gpu/run.sh
YAML
if [ -n "$DS_BASE" ]; then cat >> $M/bases-host.yaml <<YAML
  - name: host-framework-deepspeed
    kind: framework
    image: $DS_BASE
    python: "$PY"
    os: ubuntu24.04
    provides: {$PROVIDES, deepspeed: "$DSV"}
    source: https://github.com/envgen/envgen/blob/main/bench/gpu/common.sh
YAML
fi
