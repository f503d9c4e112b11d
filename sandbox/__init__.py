"""A local multi-broker cluster that speaks the Kafka wire protocol, with throttled replication.

* `kreassign.sandbox.cluster.SandboxCluster`: start, steer (advance time, faults) and stop it.
* `kreassign.sandbox.engine.Engine`: the socket-free core (state, KRaft rules, replication step).
* `kreassign.sandbox.daemon`: the background process behind `kreassign sandbox start --daemon`.
"""
