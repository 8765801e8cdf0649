"""A SIF is certified by the one certification function (certify/run.py) through
runtime/engine.py's ApptainerEngine; its `apptainer exec` options live with the Apptainer
edge (runtime/apptainer.py). This name stays for the callers that import them from here."""
from ..runtime.apptainer import BOUND_PAYLOAD, exec_options

__all__ = ["BOUND_PAYLOAD", "exec_options"]
