"""A local multi-broker cluster that speaks the Kafka wire protocol, with throttled replication.

* `kreassign.sandbox.cluster.SandboxCluster`: start, steer (advance time, faults) and stop it.
* `kreassign.sandbox.engine.Engine`: the socket-free core (state, KRaft rules, replication step).
* `kreassign.sandbox.daemon`: the background process behind `kreassign sandbox start --daemon`.
"""

if not __name__.startswith("kreassign."):  # the folder was put on sys.path: a second, divergent copy
    raise ImportError(f"import kreassign.{__name__}, not {__name__}: the top-level folders are "
                      "sub-packages of kreassign (pip install -e . or make test sets this up)")
