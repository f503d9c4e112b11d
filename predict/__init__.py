"""Prediction: the replication model behind every ETA (`predict.model`), estimate, schedules, suggest
and the plan report."""

if not __name__.startswith("kreassign."):  # the folder was put on sys.path: a second, divergent copy
    raise ImportError(f"import kreassign.{__name__}, not {__name__}: the top-level folders are "
                      "sub-packages of kreassign (pip install -e . or make test sets this up)")
