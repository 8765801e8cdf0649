#!/usr/bin/env python3
"""envgen smoke-training payload for TensorFlow images (TensorFlow + Keras): a small Keras model
with a Conv2D (so cuDNN loads) trained by `fit`, under the mixed_float16 policy on a GPU.

Copied into images beside _harness.py and run as ``python /opt/envgen/tensorflow_smoke.py``;
importable as ``envgen.smoke.tensorflow_smoke`` too (``main(argv) -> int``, ``run(options)``).
Imports the standard library, the harness and tensorflow only (Keras through ``tf.keras``;
``tf_keras`` where TF_USE_LEGACY_KERAS=1 says the image is a tf-keras one).
tensorflow is imported when the payload runs, after its options are parsed. Memory growth is
set on every GPU before one is used (TensorFlow otherwise takes most of its memory). CUDA,
cuDNN and NCCL are read from the libraries mapped into this process (/proc/self/maps, traced
to their nvidia-* distribution), not from tf.sysconfig.get_build_info(), which gives the
versions TensorFlow was built against. "framework" in --expect is tensorflow's version.
Prints exactly one JSON report on stdout; exits 0 when every check passed, 1 when any
failed, 2 on bad arguments. Written against TensorFlow 2.15 (Keras 2) to 2.21 (Keras 3).
"""
# ruff: noqa: BLE001  (catching everything is the point: a failing check is reported, never a crash)
import contextlib
import ctypes
import math
import os
import platform
import sys
import tempfile
import time

if __package__:  # imported as envgen.smoke.tensorflow_smoke
    from envgen.smoke import _harness as h
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h

VERSION_KEYS = ("tensorflow", "keras", "cuda", "cudnn", "nccl", "driver")
tf = None  # set by load(), after the environment
keras = None  # tf.keras, or tf_keras in a tf-keras image: set by load()


def set_environment():
    """Before tensorflow is imported: its C++ info logs only clutter the report's stderr."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def load(rep):
    global tf, keras
    set_environment()

    def importer():
        import tensorflow
        return tensorflow
    tf = h.import_framework(rep, "tensorflow", importer)
    if tf is not None:
        keras, dist = tf.keras, "keras"
        # a tf-keras image (TF_USE_LEGACY_KERAS=1): its Keras 2 trains, as tf.keras is from
        # TensorFlow 2.16 and as `import tf_keras` is before (where tf.keras is TF's own)
        if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
            with contextlib.suppress(ImportError):
                import tf_keras
                keras, dist = tf_keras, "tf-keras"
        rep["versions"]["keras"] = getattr(keras, "__version__", None) or \
            h.installed_version(dist)
    return tf is not None


def is_oom(exc):
    return "ResourceExhausted" in type(exc).__name__ or "OOM" in str(exc)[:2000]


def safe(fn, *args):
    with contextlib.suppress(Exception):
        return fn(*args)
    return None


# ---------------------------------------------------------------------------------- devices
def find_gpus(rep, opts):
    """The GPUs TensorFlow sees (none visible with --require cpu), each with memory growth
    set before first use; rep["level"] from them. (gpus, why none, growth errors)."""
    gpus = tf.config.list_physical_devices("GPU")
    why = None
    if opts.require == "cpu":
        tf.config.set_visible_devices([], "GPU")
        why = "--require cpu: no GPU made visible to TensorFlow"
    elif not gpus:
        built = safe(tf.test.is_built_with_cuda)
        why = ("this TensorFlow is built without CUDA (tensorflow-cpu)" if built is False else
               "TensorFlow lists no GPU (driver? --gpus? CUDA_VISIBLE_DEVICES? the nvidia-* "
               "libraries of tensorflow[and-cuda]?)")
    errors = []
    if opts.require != "cpu":
        for gpu in gpus:
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except Exception as exc:
                errors.append(f"{gpu.name}: {type(exc).__name__}: {exc}")
    rep["level"] = "cuda" if gpus and opts.require != "cpu" else "cpu"
    return gpus, why, errors


def check_gpu_available(rep, gpus, why):
    if rep["level"] == "cuda":
        return h.check(rep, "gpu_available", True,
                       f"tf.config.list_physical_devices('GPU'): {len(gpus)} GPU(s)",
                       count=len(gpus))
    if rep["require"] == "cuda":
        return h.check(rep, "gpu_available", False,
                       f"GPU requested (--require cuda) but tf.config.list_physical_devices"
                       f"('GPU') is empty: {why}")
    return h.skip(rep, "gpu_available", why or h.cpu_why(rep))


def check_memory_growth(rep, gpus, errors):
    grown = [g.name for g in gpus if safe(tf.config.experimental.get_memory_growth, g)]
    h.check(rep, "memory_growth", not errors and len(grown) == len(gpus),
            "; ".join(errors) or f"set_memory_growth on {len(grown)} of {len(gpus)} GPU(s)")


def check_device(rep, gpus):
    details = tf.config.experimental.get_device_details(gpus[0]) or {}
    cc = details.get("compute_capability")
    cc = f"{cc[0]}.{cc[1]}" if cc else None
    rep["device"].update(name=details.get("device_name"), compute_capability=cc,
                         count=len(gpus))
    h.check(rep, "device", bool(details.get("device_name")),
            f"{details.get('device_name')}, cc {cc} (tf.config.experimental.get_device_details)")


# ---------------------------------------------------------------------------------- versions
def loaded(prefix, symbol, by_reference):
    """(code, where) of `symbol` in the first library named `prefix`* mapped into this
    process; (None, why) where none is mapped."""
    paths = h.mapped_libraries(prefix)
    if not paths:
        return None, f"no {prefix}* is mapped in this process"
    lib = ctypes.CDLL(paths[0])
    if by_reference:
        code = ctypes.c_int(0)
        if getattr(lib, symbol)(ctypes.byref(code)) != 0:
            return None, f"{symbol}() of {paths[0]} failed"
        value = code.value
    else:
        fn = getattr(lib, symbol)
        fn.restype = ctypes.c_size_t
        value = int(fn())
    return value, f"{symbol}() = {value}{h.mapped_where(prefix)}"


def read_versions(rep):
    """CUDA, cuDNN and NCCL as loaded (after training, when TensorFlow has loaded them), and
    the keys TensorFlow did not load here (key -> why), which --expect cannot be compared
    with: on the CPU it maps no CUDA library; on one GPU it need not load NCCL."""
    v, unexposed = rep["versions"], {}
    sources = {"tensorflow": "tf.__version__", "keras": f"{keras.__name__}.__version__",
               "build_info": dict(safe(tf.sysconfig.get_build_info) or {})}
    for key, prefix, symbol, ref, fmt in (
            ("cuda", "libcudart.so", "cudaRuntimeGetVersion", True, h.fmt_cuda),
            ("cudnn", "libcudnn.so", "cudnnGetVersion", False, lambda c: h.fmt_code(c, 90000)),
            ("nccl", "libnccl.so", "ncclGetVersion", True, lambda c: h.fmt_code(c, 10000))):
        code, where = safe(loaded, prefix, symbol, ref) or (None, f"{symbol}() raised")
        v[key], sources[key] = fmt(code) if code else None, where
        if v[key] is None and (rep["level"] != "cuda" or key == "nccl"):
            unexposed[key] = where + (" (a CPU run)" if rep["level"] != "cuda" else "")
    sources["build_info"] = {k: str(x) for k, x in sources["build_info"].items()
                             if "version" in k}   # build time only: shown, never compared
    rep["version_sources"] = sources
    return unexposed


# ---------------------------------------------------------------------------------- training
def make_data(n, seed=0, classes=4):
    """Images whose class a fixed linear map of their channel means decides: learnable fast."""
    g = tf.random.Generator.from_seed(seed)
    x = g.normal((n, 16, 16, 3))
    w = tf.random.Generator.from_seed(seed + 1).normal((3, classes))
    y = tf.argmax(tf.reduce_mean(x, axis=(1, 2)) @ w, axis=1)
    return x, y


def make_model(classes=4):
    k = keras
    model = k.Sequential([
        k.Input((16, 16, 3)),
        k.layers.Conv2D(8, 3, padding="same", activation="relu"),
        k.layers.Flatten(),
        k.layers.Dense(32, activation="relu"),
        k.layers.Dense(classes),
        k.layers.Activation("linear", dtype="float32"),   # float32 logits under mixed precision
    ])
    model.compile(optimizer=k.optimizers.Adam(1e-2),
                  loss=k.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit(data, steps, batch, policy):
    """(model, per-epoch losses, seconds per step) of a fit under the Keras `policy`."""
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        model = make_model()
        x, y = data
        # one batch per epoch, so that the history holds one loss per step
        t0 = time.monotonic()
        history = model.fit(x, y, batch_size=batch, epochs=steps, verbose=0, shuffle=False)
        seconds = (time.monotonic() - t0) / steps
        return model, [float(v) for v in history.history["loss"]], seconds
    finally:
        keras.mixed_precision.set_global_policy("float32")


def check_train(rep, data, steps, batch):
    model, losses, seconds = fit(data, steps, batch, "float32")
    rep["metrics"]["step_s"] = seconds
    h.check_loss(rep, "train", losses, "Keras fit, float32")
    return model


def check_amp(rep, data, steps, batch):
    """mixed_float16 on a GPU; on the CPU mixed_bfloat16 (float16 has no fast CPU kernels)."""
    policy = "mixed_float16" if rep["level"] == "cuda" else "mixed_bfloat16"
    model, losses, _ = fit(data, steps, batch, policy)
    compute = model.layers[0].compute_dtype
    h.check_loss(rep, "amp", losses, f"Keras fit under {policy} (Conv2D computes in {compute})",
                 prefix="amp_", ok=compute in ("float16", "bfloat16"))


def variable_device(model):
    w = model.weights[0]
    return str(getattr(getattr(w, "value", w), "device", "") or "")


def check_model_on_gpu(rep, model):
    where = variable_device(model)
    h.check(rep, "model_on_gpu", "GPU" in where.upper(), f"first weight on {where or '?'}")


def check_cudnn(rep, gpus):
    """A Conv2D forward and backward on the GPU agrees with the CPU's, and libcudnn is mapped."""
    x = tf.random.Generator.from_seed(3).normal((8, 32, 32, 16))
    k = tf.random.Generator.from_seed(4).normal((3, 3, 16, 32))

    def run(device):
        with tf.device(device):
            xs = tf.identity(x)
            with tf.GradientTape() as tape:
                tape.watch(xs)
                out = tf.nn.conv2d(xs, k, 1, "SAME")
                loss = tf.reduce_sum(out * out)
            return out.numpy(), tape.gradient(loss, xs).numpy()
    (o1, g1), (o2, g2) = run("/GPU:0"), run("/CPU:0")
    err = max(float(abs(o1 - o2).max()) / (float(abs(o2).max()) or 1.0),
              float(abs(g1 - g2).max()) / (float(abs(g2).max()) or 1.0))
    libs = h.mapped_libraries("libcudnn")
    h.check(rep, "cudnn_conv", err < 1e-2 and bool(libs),
            f"conv2d forward+backward on GPU vs CPU: relative error {err:.2e}; "
            f"{len(libs)} libcudnn* mapped{h.mapped_where('libcudnn.so')}", rel_err=err)


def check_checkpoint(rep, model, data):
    x = data[0][:8]
    before = model(x, training=False).numpy()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.keras")
        model.save(path)
        size = os.path.getsize(path)
        again = keras.models.load_model(path)
    after = again(x, training=False).numpy()
    diff = float(abs(before - after).max())
    h.check(rep, "checkpoint", diff == 0.0 and math.isfinite(diff),
            f"model.save / keras.models.load_model ({size} bytes): outputs differ by {diff}",
            bytes=size)


def check_memory(rep):
    info = tf.config.experimental.get_memory_info("GPU:0")
    peak = info.get("peak", 0) / 2**20
    rep["metrics"]["peak_memory_mib"] = round(peak, 1)
    h.check(rep, "memory", peak > 0, f"peak {peak:.1f} MiB allocated by TensorFlow on GPU:0")


# ---------------------------------------------------------------------------------- this payload
def run_into(rep, opts, deadline):
    """Every check of a TensorFlow image, appended to `rep`."""
    del deadline  # the harness's watchdog keeps the overall --timeout
    t0 = time.monotonic()
    if not load(rep):
        rep["level"] = "cpu"
        return
    gpus, why, growth_errors = find_gpus(rep, opts)
    h.log(rep["payload"], f"tensorflow {tf.__version__}, level {rep['level']} (--require "
                          f"{opts.require}), {h.train_steps(opts)} steps, batch {opts.batch}")
    h.nvidia_smi_check(rep)
    check_gpu_available(rep, gpus, why)
    h.gpu_check(rep, "memory_growth", check_memory_growth, gpus, growth_errors)
    h.gpu_check(rep, "device", check_device, gpus)
    if rep["level"] != "cuda":
        rep["device"].update(name=platform.processor() or platform.machine(), count=0)
    steps = h.train_steps(opts)
    with tf.device("/GPU:0" if rep["level"] == "cuda" else "/CPU:0"):
        data = make_data(opts.batch)
        telemetry = h.Telemetry().start() if rep["level"] == "cuda" else None
        try:
            model = h.guarded(rep, "train", check_train, data, steps, opts.batch, oom=is_oom)
            h.guarded(rep, "amp", check_amp, data, steps, opts.batch, oom=is_oom)
        finally:
            rep["telemetry"] = (telemetry.stop() if telemetry
                                else {"source": None, "samples": 0, "error": h.cpu_why(rep)})
        if model is None:
            h.untrained(rep, "checkpoint", *(["model_on_gpu"] if rep["level"] == "cuda" else []))
        else:
            h.gpu_check(rep, "model_on_gpu", check_model_on_gpu, model)
            h.guarded(rep, "checkpoint", check_checkpoint, model, data)
    h.gpu_check(rep, "cudnn_conv", check_cudnn, gpus, oom=is_oom)
    h.gpu_check(rep, "memory", check_memory)
    if opts.multi_gpu:   # asked for and not run: a failure, never a skip that passes
        h.check(rep, "multi_gpu", False, "--multi-gpu asked for, but the TensorFlow payload "
                                         "has no multi-GPU check (it trains on one GPU)")
    unexposed = h.guarded(rep, "versions", read_versions)
    h.check_expect(rep, opts.expect, unexposed or {})
    rep["metrics"]["duration_s"] = round(time.monotonic() - t0, 2)


PAYLOAD = h.Payload(name="tensorflow_smoke",
                    description="Certify a TensorFlow (Keras) image by training in it.",
                    run_into=run_into, versions=VERSION_KEYS)


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
