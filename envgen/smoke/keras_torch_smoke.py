#!/usr/bin/env python3
"""envgen smoke-training payload for Keras 3 images over PyTorch (KERAS_BACKEND=torch):
torch_smoke's checks of torch and its CUDA libraries, with Keras's own Model.fit as the
training check (keras_fit), so "framework" in --expect is compared with the keras version
loaded at run time and the packages check holds torch and keras to the stack's pins.

Copied into images beside _harness.py, torch_smoke.py and keras_fit.py, run as ``python
/opt/envgen/keras_torch_smoke.py [options]``; importable as envgen.smoke.keras_torch_smoke.
Report and exit codes as torch_smoke's.
"""
import sys

if __package__:  # imported as envgen.smoke.keras_torch_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import keras_fit
    from envgen.smoke import torch_smoke as ts
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import keras_fit
    import torch_smoke as ts


def _train_checks(keras, rep, opts, device):
    ts.guarded(rep, "train", keras_fit.check_fit, keras, opts, "torch", device.type == "cuda")


PAYLOAD, run = ts.over_torch("keras_torch_smoke", "keras", keras_fit.importer("torch"),
                             _train_checks, "Certify a Keras 3 image over PyTorch by training.")


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
