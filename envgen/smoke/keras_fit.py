"""The Keras 3 checks of a Keras image over JAX or PyTorch: a small model compiled and fit by
Keras itself on the backend KERAS_BACKEND names, so certification proves Keras trains there
(the base payload's own checks prove the base framework and its CUDA libraries).

Imported by keras_torch_smoke and keras_jax_smoke inside the image: the standard library,
the harness, numpy and keras (imported after KERAS_BACKEND is set, as Keras reads it once).
"""
import os

if __package__:  # imported as envgen.smoke.keras_fit
    from envgen.smoke import _harness as h
else:  # a script's sibling in /opt/envgen
    import _harness as h

FEATURES, HIDDEN, ROWS = 16, 32, 512


def importer(backend):
    """The function that imports keras over `backend` (the image sets KERAS_BACKEND; a run
    outside one gets the payload's own)."""
    def load():
        os.environ.setdefault("KERAS_BACKEND", backend)
        import keras
        return keras
    return load


def _device_of(keras, variable):
    """Where a Keras variable's value lives, as the backend says it: "cuda:0", "gpu:0", "cpu"."""
    value = getattr(variable, "value", variable)
    if keras.backend.backend() == "torch":
        return str(value.device)
    devices = getattr(value, "devices", None)
    if callable(devices):
        return ",".join(sorted(f"{d.platform}:{d.id}" for d in devices()))
    return "unknown"


def check_fit(rep, keras, opts, backend, gpu, name="train"):
    """`name` (train): Keras's own fit of a two-layer regression model, the loss falling, on
    `backend` (the backend Keras loaded must be it) and, at level cuda, its weights on the GPU."""
    import numpy as np
    loaded = keras.backend.backend()
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, FEATURES)).astype("float32")
    y = np.tanh(x @ rng.normal(size=(FEATURES, 1))).astype("float32")
    model = keras.Sequential([keras.Input((FEATURES,)),
                              keras.layers.Dense(HIDDEN, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    # one batch an epoch: each epoch's loss is one step's
    history = model.fit(x, y, batch_size=ROWS, epochs=h.train_steps(opts), shuffle=False,
                        verbose=0)
    where = _device_of(keras, model.weights[0])
    on_gpu = where.startswith(("cuda", "gpu"))
    rep["metrics"].update(keras_backend=loaded, keras_device=where)
    problems = [f"Keras loaded backend {loaded!r}, not {backend!r}"] if loaded != backend else []
    if gpu and not on_gpu:
        problems.append(f"its weights are on {where}, not the GPU")
    h.check_loss(rep, name, [float(v) for v in history.history["loss"]],
                 f"Keras {keras.__version__} Model.fit on backend {loaded}, weights on {where}"
                 + (f" ({'; '.join(problems)})" if problems else ""), ok=not problems)
