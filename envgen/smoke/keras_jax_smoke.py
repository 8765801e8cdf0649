#!/usr/bin/env python3
"""envgen smoke-training payload for Keras 3 images over JAX (KERAS_BACKEND=jax): every check
of jax_smoke (its Flax/optax training included), then Keras's own Model.fit on the same
devices (keras_fit) as the check "keras_train"; "framework" in --expect is compared with the
keras version loaded at run time, and the packages check holds jax and keras to the pins.

Copied into images beside _harness.py, jax_smoke.py and keras_fit.py, run as ``python
/opt/envgen/keras_jax_smoke.py [options]``; importable as envgen.smoke.keras_jax_smoke.
Report and exit codes as jax_smoke's.
"""
import dataclasses
import sys

if __package__:  # imported as envgen.smoke.keras_jax_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import jax_smoke as base
    from envgen.smoke import keras_fit
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import jax_smoke as base
    import keras_fit


def run_into(rep, opts, deadline):
    # first: its version is read before jax_smoke's versions check compares it
    keras = h.import_framework(rep, "keras", keras_fit.importer("jax"))
    base.run_into(rep, opts, deadline)
    if keras is not None:
        h.guarded(rep, "keras_train", keras_fit.check_fit, keras, opts, "jax",
                  rep["level"] == "cuda", "keras_train")


OVER_JAX = dataclasses.replace(base.PAYLOAD, run_into=run_into,
                               versions=("keras", *base.PAYLOAD.versions))
PAYLOAD, run, main = h.renamed(OVER_JAX, "keras_jax_smoke",
                               "Certify a Keras 3 image over JAX by training.")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], script=True))
