"""On a GPU host: the GPU code in the host's own framework installs, read by envgen's fatbin
reader, set beside the GPU's compute capability, and a prebuilt kernel of JAX's CUDA plugin
run on the GPU. Cross-checks envgen/refresh/wheel_archs.yaml's reading on a real machine.

    python3 bench/gpu/host_archs.py OUT.json

Reads torch/lib/libtorch_cuda.so and every shared library of the jax CUDA plugin that is
installed; then `jax.lax.linalg.lu` on the GPU, whose pivots-to-permutation step is one of
the plugin's own CUDA kernels (jaxlib/gpu/linalg_kernels.cu), not XLA-generated code."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envgen.refresh.fatbin import FatbinError, library_archs, runs_on  # noqa: E402


def gpu_cc() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out[0] if out else None


def package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if not spec or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read(libs: list[Path], cc: str | None) -> list[dict]:
    rows = []
    for lib in libs:
        if not lib.is_file():
            continue
        try:
            a = library_archs(lib)
        except FatbinError as e:
            rows.append({"library": str(lib), "error": str(e)})
            continue
        if not a["fatbins"]:
            continue
        row = {"library": str(lib), **a}
        if cc:
            row["runs_on_this_gpu"] = runs_on(cc, a["sass"], a["ptx"])
        rows.append(row)
    return rows


def jax_lu() -> dict:
    t = time.monotonic()
    try:
        import jax
        import jax.numpy as jnp
        dev = jax.devices("gpu")[0]
        a = jax.device_put(jnp.array([[0.0, 2.0, 1.0], [3.0, 1.0, 0.0], [1.0, 1.0, 4.0]]), dev)
        lu, piv, perm = jax.lax.linalg.lu(a)
        perm = [int(x) for x in perm]
        # the rows of `a` in `perm`'s order are L @ U
        n = a.shape[0]
        low = jnp.tril(lu, -1) + jnp.eye(n)
        up = jnp.triu(lu)
        err = float(jnp.max(jnp.abs(low @ up - a[jnp.array(perm)])))
        return {"ran": True, "device": str(dev), "jax": jax.__version__, "perm": perm,
                "max_error": err, "passed": err < 1e-5 and sorted(perm) == list(range(n)),
                "seconds": round(time.monotonic() - t, 2)}
    except Exception as e:   # a report of what failed, not a crash of the run
        return {"ran": False, "error": f"{type(e).__name__}: {e}"[:500]}


def main() -> int:
    out = Path(sys.argv[1])
    cc = gpu_cc()
    result = {"gpu_cc": cc, "libraries": []}
    torch_dir = package_dir("torch")
    if torch_dir:
        result["libraries"] += read([torch_dir / "lib" / "libtorch_cuda.so"], cc)
    for plugin in ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_plugins"):
        d = package_dir(plugin)
        if d:
            result["libraries"] += read(sorted(d.rglob("*.so")), cc)
    result["jax_lu"] = jax_lu()
    out.write_text(json.dumps(result, indent=1) + "\n")
    for row in result["libraries"]:
        print(row.get("library"), row.get("sass"), "ptx", row.get("ptx"),
              "runs here" if row.get("runs_on_this_gpu") else row.get("error", "NO kernel here"))
    print("jax lu on the GPU:", result["jax_lu"])
    ok = all(r.get("runs_on_this_gpu", False) for r in result["libraries"]) and \
        result["jax_lu"].get("passed", False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
