#!/usr/bin/env python3
"""envgen smoke-training payload for Keras images (Keras installed over a tensorflow stack):
tensorflow_smoke's training (a Keras Conv2D model fit) under this payload's name, so that
"framework" in --expect is compared with the tf.keras (tf-keras's where
TF_USE_LEGACY_KERAS=1) version loaded at run time; the packages check holds the base
framework and every add-on to the stack's pins.

Copied into images beside _harness.py and tensorflow_smoke.py, run as ``python
/opt/envgen/keras_smoke.py [options]``; importable as envgen.smoke.keras_smoke. Imports the
standard library, the harness and tensorflow_smoke. Report and exit codes as
tensorflow_smoke's.
"""
import sys

if __package__:  # imported as envgen.smoke.keras_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import tensorflow_smoke as base
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import tensorflow_smoke as base

PAYLOAD, run, main = h.renamed(base.PAYLOAD, "keras_smoke",
                               "Certify a Keras image by training in it.")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], script=True))
