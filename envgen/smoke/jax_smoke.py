#!/usr/bin/env python3
"""envgen smoke-training payload for JAX images (JAX + Flax + optax): a Flax module trained with
optax under jax.jit, on the GPU where one was asked for.

Copied into images beside _harness.py and run as ``python /opt/envgen/jax_smoke.py [options]``;
importable as ``envgen.smoke.jax_smoke`` too (``main(argv) -> int``, ``run(options) -> dict``).
Imports the standard library, the harness, jax/jaxlib, flax, optax and numpy only. jax is
imported when the payload runs, after its options are parsed: XLA_PYTHON_CLIENT_PREALLOCATE and
(with --require cpu) JAX_PLATFORMS=cpu must be set before that import. Prints exactly one JSON
report on stdout (logs go to stderr); exits 0 when every check passed, 1 when any failed, 2 on
bad arguments. "framework" in --expect is jax's version. Written against jax 0.4.30 to 0.12.
"""
# ruff: noqa: BLE001  (catching everything is the point: a failing check is reported, never a crash)
import contextlib
import ctypes
import functools
import importlib
import importlib.metadata
import importlib.util
import logging
import math
import os
import platform
import re
import sys
import tempfile
import time

if __package__:  # imported as envgen.smoke.jax_smoke
    from envgen.smoke import _harness as h
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h

VERSION_KEYS = ("jax", "jaxlib", "flax", "optax", "cuda", "cudnn", "nccl", "driver")
# Where a CUDA jaxlib keeps its version module, in jax's own search order (jax/_src/lib).
CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jaxlib.cuda")

# Set by load_stack(), after the environment: None until then (or where the import failed).
jax = jnp = np = flax = nn = optax = None


# ---------------------------------------------------------------------------------- environment
def set_environment(require):
    """Before jax is imported. JAX preallocates 75% of GPU memory at start; the checks after
    training (and anything else in the container) need it. --require cpu: JAX_PLATFORMS=cpu,
    so that no GPU is touched (not even initialized)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if require == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"


class _Warnings(logging.Handler):
    """Warnings jax and its CUDA plugin log while they start: why a GPU backend is missing."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        with contextlib.suppress(Exception):
            self.messages.append(" ".join(record.getMessage().split())[:400])

    @contextlib.contextmanager
    def attached(self):
        loggers = [logging.getLogger(name) for name in ("jax", "jax_plugins")]
        for logger in loggers:
            logger.addHandler(self)
        try:
            yield self
        finally:
            for logger in loggers:
                logger.removeHandler(self)


def _import_jax():
    import jax as jax_module
    import jax.numpy  # noqa: F401
    return jax_module


def _import_flax():
    import flax as flax_module
    import flax.linen  # noqa: F401
    import flax.serialization  # noqa: F401
    return flax_module


def _import_optax():
    import optax as optax_module
    return optax_module


def load_stack(rep, require):
    """Import jax, flax and optax into this module (each failure a failed `<name>_import`
    check); versions[...] from their __version__. True where jax imported."""
    global jax, jnp, np, flax, nn, optax
    set_environment(require)
    jax_module = h.import_framework(rep, "jax", _import_jax)
    if jax_module is None:
        return False
    jax, jnp = jax_module, jax_module.numpy
    import numpy as np_module  # jax depends on it
    np = np_module
    if require == "cpu":  # where jax was imported before the environment was set (in-process)
        with contextlib.suppress(Exception):
            jax.config.update("jax_platforms", "cpu")
    with contextlib.suppress(Exception):
        import jaxlib
        rep["versions"]["jaxlib"] = getattr(jaxlib, "__version__", None)
    if rep["versions"]["jaxlib"] is None:
        with contextlib.suppress(Exception):
            from jax._src.lib import version_str
            rep["versions"]["jaxlib"] = version_str
    flax = h.import_framework(rep, "flax", _import_flax)
    nn = flax.linen if flax is not None else None
    optax = h.import_framework(rep, "optax", _import_optax)
    return True


# ---------------------------------------------------------------------------------- helpers
def jax_oom(exc):
    """The harness's out-of-memory hook: XLA reports RESOURCE_EXHAUSTED."""
    text = str(exc)
    if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
        with contextlib.suppress(Exception):
            jax.clear_caches()
        return True
    return False


guarded = functools.partial(h.guarded, oom=jax_oom)


gpu_check = functools.partial(h.gpu_check, oom=jax_oom)


def on_device(device):
    """Eager jax computations (data, init) on `device`."""
    with contextlib.suppress(Exception):
        return jax.default_device(device)
    return contextlib.nullcontext()


def is_gpu(platform_name):
    """A CUDA device's (and jax.default_backend()'s) platform is "gpu"; its client's "cuda"."""
    return platform_name in ("gpu", "cuda")


def get_backend(platform_name=None):
    # jax.lib.xla_bridge (the old home of get_backend) is gone since jax 0.8;
    # jax.extend.backend.get_backend is its public replacement (there since jax 0.4.2x).
    try:
        from jax.extend import backend as extend_backend
    except ImportError:  # an older jax
        return jax.lib.xla_bridge.get_backend(platform_name)
    return extend_backend.get_backend(platform_name)


def safe(fn, *args):
    with contextlib.suppress(Exception):
        return fn(*args)
    return None


def tree_devices(tree):
    """Every device the arrays of `tree` live on."""
    found = set()
    for leaf in jax.tree_util.tree_leaves(tree):
        devices = leaf.devices() if callable(getattr(leaf, "devices", None)) else ()
        found.update(devices)
    return found


def trees_equal(a, b):
    """Same structure, bit-equal arrays (compared on the host: no compile per shape)."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    same_tree = jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    return same_tree and len(la) == len(lb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))  # noqa: B905 (Python 3.9 images)


# ---------------------------------------------------------------------------------- model, data
@functools.lru_cache(maxsize=None)
def model_class():
    """A small CNN, the torch payload's: two convolutions (so cuDNN loads), two dense layers.
    `dtype` is the computation dtype (bfloat16 for mixed precision); parameters stay float32."""
    class SmokeCNN(nn.Module):
        classes: int = 4
        dtype: object = None

        @nn.compact
        def __call__(self, x):
            dt = self.dtype or jnp.float32
            x = nn.relu(nn.Conv(16, (3, 3), padding="SAME", dtype=dt)(x))
            x = nn.relu(nn.Conv(32, (3, 3), strides=(2, 2), padding="SAME", dtype=dt)(x))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(128, dtype=dt)(x))
            return nn.Dense(self.classes, dtype=dt)(x)
    return SmokeCNN


def make_model(dtype=None):
    return model_class()(dtype=dtype)


@functools.lru_cache(maxsize=None)
def _jitted_init():
    model = make_model()  # parameters are float32 whatever the computation dtype
    return jax.jit(lambda seed, x: model.init(jax.random.PRNGKey(seed), x)["params"])


def init_params(seed, x):
    """The model's parameters from `seed`, on the device of `x` (one compile for every seed)."""
    return jax.device_put(_jitted_init()(seed, x[:1]), _device_of(x))


def make_data(n, seed, device, classes=4):
    """Gaussian blobs in 16x16x3 (NHWC): fixed class centres (one task), samples from `seed`.
    Drawn on the host with numpy (jax.random would compile first), then put on `device`."""
    centres = np.random.default_rng(1234).standard_normal((classes, 16, 16, 3)) * 0.5
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = centres[y] + rng.standard_normal((n, 16, 16, 3))
    return jax.device_put((x.astype(np.float32), y.astype(np.int32)), device)


def _device_of(x):
    return next(iter(x.devices()))


def data_size(opts):
    return max(4 * opts.batch, 512 if opts.quick else 2048)


def cross_entropy(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), y).mean()


def train_loop(model, params, data, steps, batch, lr=3e-3):
    """optax.adam under jax.jit over consecutive slices of `data`: (params, losses, seconds per
    synchronized step; the first one includes compiling)."""
    x, y = data
    b = min(batch, x.shape[0])
    tx = optax.adam(lr)

    def loss_fn(p, xb, yb):
        return cross_entropy(model.apply({"params": p}, xb), yb)

    @jax.jit
    def step(p, state, x, y, lo):
        xb = jax.lax.dynamic_slice_in_dim(x, lo, b)
        yb = jax.lax.dynamic_slice_in_dim(y, lo, b)
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        updates, state = tx.update(grads, state, p)
        return optax.apply_updates(p, updates), state, loss

    # committed to the data's device like the step's outputs: else the second step compiles again
    params, state = jax.device_put((params, tx.init(params)), _device_of(x))
    losses, times = [], []
    for i in range(steps):
        lo = (i * b) % (x.shape[0] - b + 1)
        t0 = time.perf_counter()
        params, state, loss = step(params, state, x, y, lo)
        losses.append(float(loss))  # waits for the step
        times.append(time.perf_counter() - t0)
    return params, losses, times


def output_dtype(model, params, x):
    """The dtype the model's last layer computes in (the loss is float32 either way)."""
    return str(jax.eval_shape(lambda p, xb: model.apply({"params": p}, xb), params, x[:2]).dtype)


# ---------------------------------------------------------------------------------- versions
def cuda_versions_module():
    """The CUDA plugin's `_versions` module (its functions call the libraries this process has
    loaded: cudaRuntimeGetVersion, cudnnGetVersion, ...), or None with a CPU-only jaxlib."""
    with contextlib.suppress(Exception):
        from jax._src import lib as jax_lib
        if getattr(jax_lib, "cuda_versions", None) is not None:
            return jax_lib.cuda_versions
    for package in CUDA_PLUGINS:
        with contextlib.suppress(Exception):
            return importlib.import_module(f"{package}._versions")
    return None


def cuda_plugin_name():
    module = cuda_versions_module()
    if module is not None:
        return module.__name__.rsplit("._versions", 1)[0]
    for package in CUDA_PLUGINS:
        with contextlib.suppress(Exception):
            if importlib.util.find_spec(package) is not None:
                return package
    return None


def nccl_loaded():
    """(version, where) of the libnccl mapped into this process, through its ncclGetVersion();
    (None, why) where none is. JAX has no NCCL API; its CUDA plugin loads libnccl at start."""
    paths = h.mapped_libraries("libnccl.so")
    if not paths:
        return None, "JAX exposes no NCCL version and no libnccl is mapped in this process"
    code = ctypes.c_int(0)
    lib = ctypes.CDLL(paths[0])
    if lib.ncclGetVersion(ctypes.byref(code)) != 0:
        return None, f"ncclGetVersion() of {paths[0]} failed"
    where = h.mapped_where("libnccl.so")
    return h.fmt_code(code.value, 10000), f"ncclGetVersion() = {code.value}{where}"


def read_versions(rep, gpu_backend):
    """CUDA, cuDNN and NCCL as loaded in this process (not as pinned or built against): the
    values, the source of each (report["version_sources"]), and those JAX does not expose
    here (key -> why), which --expect cannot be compared with."""
    v, sources, unexposed = rep["versions"], {}, {}
    sources.update(jax="jax.__version__", jaxlib="jaxlib.__version__",
                   flax="flax.__version__", optax="optax.__version__")
    plugin, mod = cuda_plugin_name(), cuda_versions_module()
    no_plugin = "no CUDA plugin (a CPU-only jaxlib: no jax-cuda12/13 plugin installed)"
    # cuda: the libcudart loaded (cudaRuntimeGetVersion), else the GPU backend's
    # platform_version ("cuda 13000"); neither touches a GPU on its own.
    code = safe(getattr(mod, "cuda_runtime_get_version", None)) if mod else None
    built = safe(getattr(mod, "cuda_runtime_build_version", None)) if mod else None
    platform_version = safe(lambda: get_backend("gpu").platform_version) if gpu_backend else None
    match = re.search(r"cuda\D*(\d{4,6})", platform_version or "", re.IGNORECASE)
    if code:
        v["cuda"] = h.fmt_cuda(code)
        sources["cuda"] = (f"{mod.__name__}.cuda_runtime_get_version() = {code} (the libcudart "
                           f"loaded; built against {built}){h.mapped_where('libcudart.so')}")
    elif match:
        v["cuda"] = h.fmt_cuda(int(match.group(1)))
        sources["cuda"] = ("jax.extend.backend.get_backend('gpu').platform_version "
                           f"{match.group(0)!r}")
    else:
        sources["cuda"] = no_plugin if plugin is None else f"{plugin}: no CUDA version readable"
        if plugin is not None:
            unexposed["cuda"] = sources["cuda"]
    if platform_version and code:
        sources["cuda"] += f"; platform_version {' '.join(platform_version.split())!r}"
    # cudnn: the plugin's cudnnGetVersion() of the libcudnn loaded (not the one it was built for)
    get = getattr(mod, "cudnn_get_version", None) if mod else None
    if get is None:
        sources["cudnn"] = no_plugin if plugin is None else f"{plugin} has no cudnn_get_version()"
        if plugin is not None:
            unexposed["cudnn"] = sources["cudnn"]
    else:
        try:
            code = get()
            v["cudnn"] = h.fmt_code(code, 90000)
            built = safe(getattr(mod, "cudnn_build_version", lambda: None))
            sources["cudnn"] = (f"{mod.__name__}.cudnn_get_version() = {code} (the libcudnn "
                                f"loaded; built against {built}){h.mapped_where('libcudnn.so')}")
        except Exception as exc:
            sources["cudnn"] = f"{mod.__name__}.cudnn_get_version() raised {exc}"
    # nccl: JAX has no API for it; the library mapped in this process, where there is one
    v["nccl"], sources["nccl"] = safe(nccl_loaded) or (None, "ncclGetVersion() failed")
    if v["nccl"] is None:
        if plugin is None:
            sources["nccl"] = no_plugin
        else:
            unexposed["nccl"] = sources["nccl"]
    rep["version_sources"] = sources
    return unexposed


# ---------------------------------------------------------------------------------- GPU checks
def find_devices(rep, opts):
    """(GPU devices, the device training uses, why no GPU or None)."""
    why, gpus = None, []
    with _Warnings().attached() as warnings:
        try:
            gpus = [d for d in jax.devices() if is_gpu(d.platform)]
        except Exception as exc:
            why = f"jax.devices() raised {type(exc).__name__}: {exc}"
        backend = safe(jax.default_backend)
        if not gpus and opts.require != "cpu":
            try:
                gpus = list(jax.devices("gpu"))  # the error says why there is no GPU backend
            except Exception as exc:
                why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
    if gpus and not is_gpu(backend):
        why = f"GPU devices exist but jax.default_backend() is {backend!r}"
    if not gpus:
        plugin = cuda_plugin_name()
        why = ("CPU-only jaxlib: no CUDA plugin installed (jax[cuda12] / jax[cuda13])"
               if plugin is None else f"{plugin} installed but JAX has no GPU backend "
               f"(driver? --gpus? CUDA_VISIBLE_DEVICES?): {why or 'no GPU device'}")
        if warnings.messages:
            why += f"; JAX logged: {' | '.join(warnings.messages[-3:])}"
    use_gpu = bool(gpus) and is_gpu(backend) and opts.require != "cpu"
    rep["level"] = "cuda" if use_gpu else "cpu"
    if use_gpu:
        return gpus, gpus[0], None
    cpu = safe(lambda: jax.devices("cpu")[0])
    return gpus, cpu, why


def check_gpu_available(rep, gpus, why):
    if rep["level"] == "cuda":
        return h.check(rep, "gpu_available", True,
                       f"jax.devices(): {len(gpus)} GPU device(s) ({gpus[0].device_kind}), "
                       f"jax.default_backend() {jax.default_backend()!r}", count=len(gpus))
    if rep["require"] == "cpu":
        return h.skip(rep, "gpu_available", "--require cpu: JAX_PLATFORMS=cpu, no GPU touched")
    if rep["require"] != "cuda":
        return h.skip(rep, "gpu_available", f"no GPU: CPU level ({why})")
    return h.check(rep, "gpu_available", False,
                   f"GPU requested (--require cuda) but JAX has no GPU device: {why}")


def _smi_memory_mib(index):
    """nvidia-smi's memory.total of the GPU at CUDA ordinal `index` (None where unsure)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") or index is None:
        return None
    with contextlib.suppress(Exception):
        rows = h.smi("memory.total", 30)
        return int(float(rows[index][0]))
    return None


def check_device(rep, gpus):
    d = gpus[0]
    cc = getattr(d, "compute_capability", None)  # a PJRT device attribute of CUDA devices
    how = "device.compute_capability"
    if not cc:
        mod = cuda_versions_module()
        code = safe(mod.cuda_compute_capability, d.local_hardware_id) if mod else None
        cc, how = (f"{code // 10}.{code % 10}", "cuda_compute_capability()") if code else (None, "")
    stats = safe(d.memory_stats) or {}
    mib = _smi_memory_mib(getattr(d, "local_hardware_id", None))
    mem = f"{mib} MiB (nvidia-smi)" if mib else None
    if mib is None and stats.get("bytes_limit"):
        mib = stats["bytes_limit"] // 2**20
        mem = f"{mib} MiB usable by XLA (memory_stats bytes_limit)"
    rep["device"].update(name=d.device_kind, compute_capability=cc, count=len(gpus),
                         memory_total_mib=mib)
    h.check(rep, "device", bool(d.device_kind),
            f"{d.device_kind}, cc {cc} ({how or 'not readable'}), {mem or 'memory unknown'}",
            multiprocessors=getattr(d, "core_count", None), id=d.id)


def _conv_setup(device):
    conv = nn.Conv(32, (3, 3), padding="SAME")
    x = jax.random.normal(jax.random.PRNGKey(3), (8, 32, 32, 16))
    variables = conv.init(jax.random.PRNGKey(4), x)

    def objective(v, x):
        return jnp.mean(jnp.square(conv.apply(v, x)))

    fwd = jax.jit(conv.apply)
    bwd = jax.jit(jax.grad(objective, argnums=(0, 1)))
    put = functools.partial(jax.device_put, device=device)
    return fwd, bwd, put(variables), put(x)


def check_cudnn(rep, device, cpu):
    """A flax nn.Conv forward+backward on the GPU: cuDNN convolutions in the compiled program,
    finite gradients, the output as the CPU computes it."""
    fwd, bwd, variables, x = _conv_setup(device)
    out = fwd(variables, x)
    grads = bwd(variables, x)
    leaves = jax.tree_util.tree_leaves(grads)
    grads_ok = all(bool(jnp.all(jnp.isfinite(g)) and jnp.abs(g).sum() > 0) for g in leaves)
    hlo = safe(lambda: bwd.lower(variables, x).compile().as_text()) or ""
    calls = len(re.findall(r"__cudnn\$", hlo))
    err = None
    if cpu is not None:
        cpu_vars, cpu_x = jax.device_put(variables, cpu), jax.device_put(x, cpu)
        ref = np.asarray(fwd(cpu_vars, cpu_x))
        err = float(np.abs(np.asarray(out) - ref).max() / np.abs(ref).max())  # TF32: ~1e-3
    ok = grads_ok and (err is None or err < 1e-2) and (calls > 0 or not hlo)
    where = (f"{calls} cuDNN custom call(s) in the compiled backward" if hlo
             else "compiled HLO not readable")
    vs_cpu = (f"max rel. error vs CPU {err:.1e} (limit 1e-2)" if err is not None
              else "no CPU backend to compare with")
    return h.check(rep, "cudnn_conv", ok,
                   f"cuDNN {rep['versions']['cudnn']} flax nn.Conv forward+backward: {where}; "
                   f"gradients {'finite' if grads_ok else 'NOT finite or zero'}; {vs_cpu}",
                   rel_error=err, cudnn_calls=calls)


def check_memory(rep, device):
    stats = device.memory_stats() or {}
    vals = {"memory_in_use_mib": stats.get("bytes_in_use"),
            "max_memory_in_use_mib": stats.get("peak_bytes_in_use"),
            "memory_limit_mib": stats.get("bytes_limit")}
    vals = {k: round(v / 2**20, 1) if isinstance(v, (int, float)) else None
            for k, v in vals.items()}
    rep["metrics"].update(vals)
    prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")
    h.check(rep, "memory", (vals["max_memory_in_use_mib"] or 0) > 0,
            "device.memory_stats(): in use {memory_in_use_mib} MiB, peak {max_memory_in_use_mib} "
            "MiB, limit {memory_limit_mib} MiB".format(**vals)
            + f" (XLA_PYTHON_CLIENT_PREALLOCATE={prealloc})", **vals)


# ---------------------------------------------------------------------------------- training checks
def check_train(rep, device, data, steps, batch):
    model = make_model()
    params, losses, times = train_loop(model, init_params(0, data[0]), data, steps, batch)
    rep["metrics"].update(steps=steps, batch=batch)
    h.check_loss(rep, "train", losses, f"Flax float32 on {device.platform} ({device}), "
                                       f"optax.adam under jax.jit")
    return model, params, times


def check_model_on_gpu(rep, params):
    devices = tree_devices(params)
    names = ", ".join(sorted(str(d) for d in devices)) or "no device"
    h.check(rep, "model_on_gpu", bool(devices) and all(is_gpu(d.platform) for d in devices),
            f"parameters after training on {names}")


def check_amp(rep, device, data, steps, batch):
    """bfloat16 computation (Flax dtype), float32 parameters: the loss must go down too, and
    the layers must really compute in bfloat16 (on the CPU too: XLA has bf16 there)."""
    model = make_model(jnp.bfloat16)
    params = init_params(0, data[0])  # float32, as the float32 model's
    seen = output_dtype(model, params, data[0])
    _, losses, _ = train_loop(model, params, data, steps, batch)
    param_dtypes = sorted({str(p.dtype) for p in jax.tree_util.tree_leaves(params)})
    rep["metrics"]["amp_dtype"] = "bfloat16"
    return h.check_loss(rep, "amp", losses, f"Flax dtype=bfloat16, parameters "
                        f"{', '.join(param_dtypes)}, layer outputs {seen}", prefix="amp_",
                        ok=seen == "bfloat16")


def check_checkpoint(rep, device, model, params, data):
    x = data[0][:32]
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        path = os.path.join(tmp, "params.msgpack")
        with open(path, "wb") as f:
            f.write(flax.serialization.to_bytes(params))
        fresh = init_params(1, data[0])  # other weights until the load
        differed = not trees_equal(params, fresh)
        with open(path, "rb") as f:
            loaded = flax.serialization.from_bytes(fresh, f.read())
        loaded = jax.device_put(loaded, device)
        size = os.path.getsize(path)
    same_params = trees_equal(params, loaded)
    apply = jax.jit(model.apply)
    a, b = (apply({"params": p}, x) for p in (params, loaded))
    same_out = bool(jnp.array_equal(a, b))
    rep["metrics"]["checkpoint_bytes"] = size
    h.check(rep, "checkpoint", same_params and same_out and differed,
            f"flax.serialization.to_bytes/from_bytes via {tempfile.gettempdir()}: {size} bytes, "
            f"into fresh parameters ({'other' if differed else 'THE SAME'} weights before), "
            f"parameters {'equal' if same_params else 'DIFFER'}, "
            f"outputs {'equal' if same_out else 'DIFFER'}", bytes=size)


def _gemm_seconds(n, dtype, iters):
    ka, kb = jax.random.split(jax.random.PRNGKey(2))
    a, b = (jax.random.normal(k, (n, n), dtype) for k in (ka, kb))
    mm = jax.jit(jnp.matmul)
    for _ in range(2):  # compile, warm up
        mm(a, b).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(iters):
        c = mm(a, b)
    c.block_until_ready()
    return time.perf_counter() - t0


def check_throughput(rep, device, times, batch, gemm_n, quick):
    warm = max(1, min(3, len(times) // 3))  # the first step compiles
    step_s = sum(times[warm:]) / len(times[warm:])
    gpu = is_gpu(device.platform)
    dtype = jnp.bfloat16 if gpu else jnp.float32
    iters = (5 if quick else 20) if gpu else (3 if quick else 10)
    tflops = 2.0 * gemm_n ** 3 * iters / _gemm_seconds(gemm_n, dtype, iters) / 1e12
    name = jnp.dtype(dtype).name
    vals = {"samples_per_s": batch / step_s, "step_time_ms": step_s * 1000,
            "compile_step_ms": times[0] * 1000, "gemm_size": gemm_n, "gemm_dtype": name,
            "gemm_tflops": tflops, "gemm_gflops": tflops * 1000}
    rep["metrics"].update(vals)
    speed = f"{tflops:.1f} TFLOP/s" if gpu else f"{tflops * 1000:.1f} GFLOP/s"
    h.check(rep, "throughput", all(math.isfinite(v) and v > 0 for v in (step_s, tflops)),
            f"{batch / step_s:.0f} samples/s, {step_s * 1000:.2f} ms/step after {warm} warm-up "
            f"(first, compiling: {times[0] * 1000:.0f} ms); {name} GEMM {gemm_n}x{gemm_n} "
            f"under jax.jit: {speed}", **vals)


# ---------------------------------------------------------------------------------- multi-GPU
def _mesh(devices):
    return jax.sharding.Mesh(np.array(devices, dtype=object), ("i",))


def run_multi_gpu(rep, opts, devices):
    """All-reduce across `devices` (a jit'd sum over a sharded array: XLA emits an all-reduce,
    NCCL on GPUs), then data-parallel training: parameters replicated, the batch sharded."""
    P, named = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    world, mesh = len(devices), _mesh(devices)
    mb, iters = (64, 3) if opts.quick else (256, 10)
    per = mb * 2**20 // 4
    split, whole = named(mesh, P("i")), named(mesh, P())
    fill = jax.jit(lambda: jnp.broadcast_to((jnp.arange(world, dtype=jnp.float32) + 1)[:, None],
                                            (world, per)), out_shardings=split)
    reduce = jax.jit(lambda v: jnp.sum(v, axis=0), out_shardings=whole)
    buf = fill()
    total = reduce(buf)
    correct = bool(jnp.all(total == world * (world + 1) / 2))
    for _ in range(2):
        reduce(buf).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(iters):
        out = reduce(buf)
    out.block_until_ready()
    secs = (time.perf_counter() - t0) / iters
    algbw = per * 4 / secs / 1e9
    del buf, total, out
    # data parallel: the same jit'd step, the batch split over the mesh, gradients all-reduced
    model, b = make_model(), opts.batch * world
    x, y = make_data(b * 4, 10, devices[0])
    params = init_params(0, x)
    params = jax.device_put(params, whole)
    x, y = jax.device_put(x, split), jax.device_put(y, split)
    steps = min(max(opts.steps or 30, 10), 30)
    tx = optax.adam(3e-3)

    @jax.jit
    def step(p, state, xb, yb):
        loss, grads = jax.value_and_grad(
            lambda q: cross_entropy(model.apply({"params": q}, xb), yb))(p)
        updates, state = tx.update(grads, state, p)
        return optax.apply_updates(p, updates), state, loss

    state, losses = tx.init(params), []
    for i in range(steps):
        lo = (i % 4) * b
        params, state, loss = step(params, state, x[lo:lo + b], y[lo:lo + b])
        losses.append(float(loss))
    first, last, ratio, trained = h.loss_trend(losses)
    on = sorted(str(d) for d in tree_devices(params))
    rep["multi_gpu"] = {"world_size": world, "allreduce_mb": mb, "allreduce_dtype": "float32",
                        "allreduce_correct": correct, "allreduce_ms": secs * 1000,
                        "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (world - 1) / world,
                        "dp_steps": steps, "dp_loss_first": first, "dp_loss_last": last,
                        "dp_loss_ratio": ratio, "dp_ok": trained, "errors": []}
    r = rep["multi_gpu"]
    h.check(rep, "multi_gpu_allreduce", correct,
            f"{world} devices, {mb} MB float32 all-reduce (jit over a sharded array) "
            f"{'correct' if correct else 'WRONG SUM'}; algbw {algbw:.1f} GB/s, "
            f"busbw {r['busbw_gbps']:.1f} GB/s", algbw_gbps=algbw, busbw_gbps=r["busbw_gbps"])
    h.check(rep, "multi_gpu_data_parallel", trained and len(on) == world,
            f"batch sharded over {world} devices, parameters replicated on {len(on)}, "
            f"{steps} steps: {h.trend(first, last, ratio)}", loss_ratio=ratio)


# ---------------------------------------------------------------------------------- this payload
def _train_checks(rep, opts, device):
    steps, quick = h.train_steps(opts), opts.quick
    gpu = is_gpu(device.platform)
    gemm_n = opts.gemm_size or ((4096 if quick else 8192) if gpu else 512)
    with on_device(device):
        data = make_data(data_size(opts), 0, device)
        batch = min(opts.batch, int(data[1].shape[0]))
        trained = guarded(rep, "train", check_train, device, data, steps, batch)
        if trained is None and rep["level"] == "cuda":
            h.untrained(rep, "model_on_gpu")
        elif trained is None:
            h.skip(rep, "model_on_gpu", h.cpu_why(rep))
        else:
            gpu_check(rep, "model_on_gpu", check_model_on_gpu, trained[1])
        guarded(rep, "amp", check_amp, device, data, steps, batch)
        if trained is None:
            h.untrained(rep, "checkpoint")
            h.check(rep, "throughput", False, "no training step times (training failed)")
        else:
            model, params, times = trained
            guarded(rep, "checkpoint", check_checkpoint, device, model, params, data)
            guarded(rep, "throughput", check_throughput, device, times, batch, gemm_n, quick)


def run_into(rep, opts, deadline):
    """Every check of a JAX image, appended to `rep`."""
    del deadline  # the harness's watchdog keeps the overall --timeout
    t0 = time.monotonic()
    if not load_stack(rep, opts.require):
        rep["level"] = "cpu"
        return
    gpus, device, why = find_devices(rep, opts)
    h.log(rep["payload"], f"jax {jax.__version__}, level {rep['level']} (--require "
                          f"{opts.require}), {h.train_steps(opts)} steps, batch {opts.batch}")
    h.nvidia_smi_check(rep)
    check_gpu_available(rep, gpus, why)
    gpu_check(rep, "device", check_device, gpus)
    if rep["level"] != "cuda":
        rep["device"].update(name=platform.processor() or platform.machine(), count=0)
    unexposed = guarded(rep, "versions", read_versions, rep["level"] == "cuda")
    h.check_expect(rep, opts.expect, unexposed or {})
    if device is None:
        return h.check(rep, "train", False, f"JAX has no device to train on: {why}")
    cpu = safe(lambda: jax.devices("cpu")[0])
    if flax is not None and optax is not None:  # else a failed <name>_import check says why
        telemetry = h.Telemetry().start() if rep["level"] == "cuda" else None
        try:
            _train_checks(rep, opts, device)
        finally:
            rep["telemetry"] = (telemetry.stop() if telemetry
                                else {"source": None, "samples": 0, "error": h.cpu_why(rep)})
        gpu_check(rep, "cudnn_conv", check_cudnn, device, cpu)
    gpu_check(rep, "memory", check_memory, device)
    if opts.multi_gpu and rep["level"] == "cuda" and len(gpus) > 1 and flax and optax:
        guarded(rep, "multi_gpu", run_multi_gpu, opts, gpus)
    elif opts.multi_gpu:   # asked for and not run: a failure, never a skip that passes
        count = len(gpus) if rep["level"] == "cuda" else 0
        h.check(rep, "multi_gpu", False,
                f"--multi-gpu asked for, but it needs more than one GPU; {count} in use"
                if count < 2 else "--multi-gpu asked for, but Flax or optax did not import")
    # a late read: NCCL may have been loaded by now
    if rep["versions"].get("nccl") is None and "nccl" in (unexposed or {}):
        nccl = safe(nccl_loaded)
        if nccl and nccl[0]:
            rep["versions"]["nccl"], rep["version_sources"]["nccl"] = nccl
    rep["metrics"]["duration_s"] = round(time.monotonic() - t0, 2)


def _add_options(parser):
    parser.add_argument("--gemm-size", type=h.number(int, 16), default=None,
                        help="GEMM edge (default 8192 on GPU, 4096 with --quick, 512 on CPU)")


PAYLOAD = h.Payload(
    name="jax_smoke", description="Certify a JAX (Flax, optax) image by training in it.",
    run_into=run_into, versions=VERSION_KEYS, add_options=_add_options)


def build_parser():
    return h.build_parser(PAYLOAD)


def run(options):
    """Run every check and return the report; `options` is build_parser()'s Namespace or a dict."""
    return h.run(PAYLOAD, options)


def main(argv=None):
    script = __name__ == "__main__"
    if script:
        h.native_stdout_to_stderr()
    return h.main(PAYLOAD, argv, script=script)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
