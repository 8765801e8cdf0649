#!/bin/bash
# On the lent GPU machine (no Docker image can travel there: a call carries 64 MiB): the axpy
# operator envgen compiled inside a project image, in its kernel-build stage (nvcc from
# NVIDIA's PyPI wheels, TORCH_CUDA_ARCH_LIST=9.0), carried as the one file the image
# installed (.kx/envgen_axpy.abi3.so, a module of Python's limited API, so the image's
# Python 3.11 build loads in this host's Python), loaded into this host's torch of the same
# release as the image's, and run on the GPU against torch's own answer.
#   bash bench/gpu/kernel-from-image.sh OUT_DIR
set -uo pipefail
OUT=${1:-${OUT:-/tmp/envgen-gpu}}
mkdir -p "$OUT"
exec > >(tee "$OUT/kernel-from-image.log") 2>&1
nvidia-smi -L; nvidia-smi --query-gpu=driver_version,compute_cap --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
rm -rf /tmp/kimg && mkdir -p /tmp/kimg && cp .kx/envgen_axpy.abi3.so /tmp/kimg/ || { echo "RESULT: .kx/envgen_axpy.abi3.so was not carried"; exit 0; }
sha256sum /tmp/kimg/envgen_axpy.abi3.so
PYTHONPATH=/tmp/kimg python3 - <<'PY'
import torch, envgen_axpy
x = torch.randn(1 << 22, device="cuda"); y = torch.randn(1 << 22, device="cuda")
got = torch.ops.envgen_axpy.axpy(x, y, 2.5); torch.cuda.synchronize()
err = (got - (2.5 * x + y)).abs().max().item()
t = torch.cuda.Event(enable_timing=True); u = torch.cuda.Event(enable_timing=True)
t.record()
for _ in range(100):
    torch.ops.envgen_axpy.axpy(x, y, 2.5)
u.record(); torch.cuda.synchronize()
ms = t.elapsed_time(u) / 100
try:
    torch.ops.envgen_axpy.axpy(x.cpu(), y.cpu(), 2.5)
    cpu = "CPU tensors were accepted (unexpected)"
except (RuntimeError, NotImplementedError) as e:
    cpu = "CPU tensors refused: " + str(e).splitlines()[0][:120]
print(f"RESULT kernel from the image: ran on {torch.cuda.get_device_name(0)} (capability "
      f"{torch.cuda.get_device_capability(0)}), {x.numel()} elements, max error {err:.3g}, "
      f"{ms * 1000:.1f} us a call; {cpu}; {'PASS' if err < 1e-5 else 'FAIL'}")
PY
