#!/bin/bash
# On the lent GPU machine, natively (no Docker, no network): (1) the Keras 3 payloads over
# torch and over JAX trained on the GPU; (2) a CUDA kernel compiled the way a project's
# CUDA-kernel sdist would be: nvcc, its compiler parts and the CUDA headers from NVIDIA's
# PyPI wheels (the nvidia/cu13 tree CUDA 13 wheels share), TORCH_CUDA_ARCH_LIST from the
# GPU's compute capability, built by `pip wheel --no-build-isolation` over the host's torch,
# then run on the GPU against torch's own answer. Run from the repository root:
#   bash bench/gpu/kernel.sh OUT_DIR
set -uo pipefail
OUT=${1:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/kernel.log") 2>&1
T0=$(date +%s)
step() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
REPO=$(pwd)

step "host"
nvidia-smi -L; nvidia-smi --query-gpu=driver_version,compute_cap --format=csv,noheader
python3 - <<'PY'
import importlib.metadata as m, sys
print("python", sys.version.split()[0])
for d in ("torch", "keras", "jax", "jax-cuda13-plugin", "jax-cuda12-plugin", "nvidia-cuda-nvcc",
          "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-cuda-cccl",
          "nvidia-cuda-nvcc-cu12", "ninja", "setuptools"):
    try:
        print(f"  {d} {m.version(d)}")
    except m.PackageNotFoundError:
        print(f"  {d}: not installed")
PY
command -v gcc g++ nvcc ninja || true
gcc --version 2>/dev/null | head -1

step "keras over torch and over jax, on the GPU"
# keras 3 and what it needs beyond this host's install, from .kx/keras/ when carried
KPATH=
if ls .kx/keras/*.whl >/dev/null 2>&1 && ! python3 -c "import keras" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kx-site .kx/keras/*.whl \
    && KPATH=/tmp/kx-site
fi
for P in keras_torch_smoke keras_jax_smoke; do
  (cd envgen/smoke && PYTHONPATH=$KPATH${PYTHONPATH:+:$PYTHONPATH} timeout 600 python3 $P.py --require cuda > "$OUT/native-$P.json")
  echo "$P exit $?"; tail -c 600 "$OUT/native-$P.json"; echo
done

step "a CUDA home from NVIDIA's wheels"
SITE=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
TREE="$SITE/nvidia/cu13"
ls "$TREE" 2>/dev/null; ls "$TREE/bin" "$TREE/nvvm/bin" 2>/dev/null
# this host's torch brings nvidia-cuda-runtime (headers, libcudart) but not the compiler: the
# files of nvidia-cuda-nvcc and nvidia-nvvm 13.0.88, nvidia-cuda-crt 13.0.88 and
# nvidia-cuda-cccl 13.0.85 (nvlink left out: nvcc -c does not run it) come in .kx/, a call
# carrying 64 MiB at most
TOOLS=$TREE
if [ ! -x "$TREE/bin/nvcc" ] && [ -f .kx/cuda13-toolchain.tar.xz ]; then
  rm -rf /tmp/cu13-tools && mkdir -p /tmp/cu13-tools && tar xJf .kx/cuda13-toolchain.tar.xz -C /tmp/cu13-tools
  TOOLS=/tmp/cu13-tools/nvidia/cu13
fi
if [ ! -x "$TOOLS/bin/nvcc" ] || [ ! -x "$TOOLS/nvvm/bin/cicc" ]; then
  echo "RESULT kernel: not built: $TREE lacks bin/nvcc or nvvm/bin/cicc (nvidia-cuda-nvcc and nvidia-nvvm are not installed here)"
  exit 0
fi
CH=/tmp/cuda-home; rm -rf $CH; mkdir -p $CH/lib64 $CH/targets/x86_64-linux
cp -rs "$TOOLS/bin" "$TOOLS/nvvm" $CH/
mkdir -p $CH/include && cp -rs --update=none "$TREE/include/." $CH/include/ && cp -rs --update=none "$TOOLS/include/." $CH/include/
ln -s "$TREE/lib/libcudart.so.13" $CH/lib64/libcudart.so
ln -s ../../include $CH/targets/x86_64-linux/include; ln -s ../../lib64 $CH/targets/x86_64-linux/lib
$CH/bin/nvcc --version | tail -2
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
export CUDA_HOME=$CH PATH=$CH/bin:$PATH TORCH_CUDA_ARCH_LIST="$CAP" MAX_JOBS=8
[ -d "$CH/include/cccl" ] && export NVCC_APPEND_FLAGS="-isystem $CH/include/cccl"

step "build the extension for compute capability $CAP"
B0=$(date +%s)
rm -rf /tmp/kext && cp -r tests/projects/torch-kernel/axpy-src /tmp/kext
python3 -m pip wheel --no-build-isolation --no-deps --no-index -w /tmp/kwheels /tmp/kext > "$OUT/kernel-build.log" 2>&1
RC=$?; echo "pip wheel exit $RC in $(( $(date +%s) - B0 )) s"; tail -25 "$OUT/kernel-build.log"
[ $RC = 0 ] || { echo "RESULT kernel: build failed"; exit 0; }
ls -la /tmp/kwheels
python3 -m pip install -q --no-deps --no-index --target /tmp/ksite /tmp/kwheels/*.whl

step "run it on the GPU"
PYTHONPATH=/tmp/ksite python3 - <<'PY'
import torch, envgen_axpy
x = torch.randn(1 << 20, device="cuda"); y = torch.randn(1 << 20, device="cuda")
got = torch.ops.envgen_axpy.axpy(x, y, 2.5); torch.cuda.synchronize()
err = (got - (2.5 * x + y)).abs().max().item()
print(f"RESULT kernel: built and ran on {torch.cuda.get_device_name(0)} "
      f"(capability {torch.cuda.get_device_capability(0)}), max error {err:.3g}, "
      f"torch {torch.__version__}, {'PASS' if err < 1e-5 else 'FAIL'}")
PY
step "done"
