#!/usr/bin/env python3
"""envgen smoke-training payload for optax images (optax installed over a jax stack):
jax_smoke's training (a Flax model trained with optax under jax.jit) under this payload's
name, so that "framework" in --expect is compared with the optax version loaded at run time;
the packages check holds the base framework and every add-on to the stack's pins.

Copied into images beside _harness.py and jax_smoke.py, run as ``python
/opt/envgen/optax_smoke.py [options]``; importable as envgen.smoke.optax_smoke. Imports the
standard library, the harness and jax_smoke. Report and exit codes as jax_smoke's.
"""
import sys

if __package__:  # imported as envgen.smoke.optax_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import jax_smoke as base
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import jax_smoke as base

PAYLOAD, run, main = h.renamed(base.PAYLOAD, "optax_smoke",
                               "Certify a optax image by training in it.")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], script=True))
