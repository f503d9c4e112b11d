"""Where cluster state comes from: a live cluster or a snapshot file, behind one function."""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import ClusterState, TopicPartition, TopicPartitionReplica

if TYPE_CHECKING:
    from kreassign.cluster.port import ClusterPort


def load_cluster_state(
    *,
    bootstrap_server: str | None = None,
    snapshot: str | None = None,
    command_config: str | None = None,
    with_sizes: bool = True,
    timeout_s: float | None = None,
    sample_s: float = 0.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> ClusterState:
    """Read the cluster state from exactly one source.

    With `sample_s` > 0 and a live cluster, every partition's write rate is measured over that
    many cluster seconds (`clock` and `sleep` are wall-clock ones; the cluster's time scale
    converts them). A snapshot keeps the rates it was written with.

    Raises:
        InputError: neither or both sources given, or a malformed snapshot.
        ClusterUnreachable: no broker answered.
    """
    if bootstrap_server and snapshot:
        raise InputError("give either --bootstrap-server or --snapshot, not both")
    if snapshot:
        from kreassign.cluster.snapshot import read_snapshot

        return read_snapshot(snapshot)
    if not bootstrap_server:
        raise InputError(
            "no cluster given: use --bootstrap-server HOST:PORT (or set KREASSIGN_BOOTSTRAP_SERVER), "
            "or --snapshot FILE"
        )
    from kreassign.cluster.admin import open_admin
    from kreassign.cluster.capture import snapshot_state
    from kreassign.cluster.time_scale import cluster_timing, read_time_scale

    with open_admin(bootstrap_server, command_config=command_config, timeout_s=timeout_s) as admin:
        if sample_s > 0 and clock is not None and sleep is not None:
            ids = [b.id for b in admin.describe_brokers().brokers]
            clock, sleep = cluster_timing(clock, sleep, read_time_scale(admin, ids))
            return snapshot_state(admin, with_sizes=with_sizes, sample_s=sample_s, clock=clock, sleep=sleep,
                                  warn=warn)
        return snapshot_state(admin, with_sizes=with_sizes, warn=warn)


def replica_log_dirs(port: ClusterPort, assignment: Mapping[TopicPartition, Sequence[int]], *,
                     live: Collection[int] | None = None) -> dict[TopicPartitionReplica, str]:
    """The log dir each replica of `assignment` is in, as its broker reports it (DescribeLogDirs).

    Kafka's tool prints these in the current assignment of `--generate` and `--execute` since
    4.2 (KAFKA-19582). Replicas whose broker does not answer, or does not hold them (yet), are
    left out: they print as "any", as in Kafka. Only brokers in `live` (when given) are asked: a
    broker known to be down is not waited on."""
    wanted = {TopicPartitionReplica(tp.topic, tp.partition, b) for tp, replicas in assignment.items() for b in replicas
              if live is None or b in live}
    if not wanted:
        return {}
    report = port.log_dir_sizes({r.broker for r in wanted}, partitions=list(assignment))
    return {r: d.log_dir for r, d in report.replicas.items() if r in wanted and d.log_dir is not None}


def read_replica_log_dirs(assignment: Mapping[TopicPartition, Sequence[int]], *, bootstrap_server: str | None,
                          command_config: str | None = None, timeout_s: float | None = None,
                          ) -> dict[TopicPartitionReplica, str]:
    """`replica_log_dirs` over a connection of its own; empty without a cluster (a snapshot
    does not say which log dir a replica is in)."""
    if not bootstrap_server or not assignment:
        return {}
    from kreassign.cluster.admin import open_admin

    with open_admin(bootstrap_server, command_config=command_config, timeout_s=timeout_s) as admin:
        live = {b.id for b in admin.describe_brokers().brokers}
        return replica_log_dirs(admin, assignment, live=live)
