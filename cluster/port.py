"""The cluster port: the few cluster operations kreassign needs, as a typed Protocol.

`kreassign.cluster.admin.KafkaAdmin` implements it over kafka-python; tests and the sandbox use
in-memory fakes. Results are plain values: per-resource failures come back as `ApiError` values
inside the result (so one bad broker or topic does not hide the others), while failures of a
whole operation raise `ClusterError` subclasses.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Generic, Protocol, TypeVar

# Re-exported: the adapters and the throttle package import it from here.
from kreassign.cluster.errors import UnknownTopicError as UnknownTopicError
from kreassign.cluster.model import (
    Broker,
    ClusterState,
    PartitionInfo,
    Reassignment,
    ThrottleConfigs,
    TopicPartition,
    TopicPartitionReplica,
)

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLED_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLE_KEYS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, LOG_DIR_THROTTLED_RATE)
TOPIC_THROTTLE_KEYS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)

UNREACHABLE = "BROKER_UNREACHABLE"
"""`ApiError.name` of a broker that could not be reached (no Kafka error code: `code` is -1)."""
UNKNOWN_TOPIC_OR_PARTITION = 3
ELECTION_NOT_NEEDED = 84


@dataclass(frozen=True)
class ApiError:
    """A failure of one resource (broker, topic, partition, replica) within an operation."""

    code: int
    """Kafka's error code (e.g. 39 INVALID_REPLICA_ASSIGNMENT), or -1 for client-side failures."""
    name: str
    """Kafka's error name, e.g. "INVALID_REPLICA_ASSIGNMENT", or "BROKER_UNREACHABLE"."""
    message: str
    retriable: bool = False

    @property
    def unreachable(self) -> bool:
        return self.name == UNREACHABLE

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


@dataclass(frozen=True)
class ClusterInfo:
    """What DescribeCluster (or Metadata) says about the cluster as a whole."""

    brokers: tuple[Broker, ...]
    """Live brokers, sorted by id."""
    controller_id: int | None
    cluster_id: str | None
    fenced: tuple[int, ...] = ()
    """Registered brokers that are fenced (KRaft): known, but not serving."""
    authorized_operations: frozenset[str] | None = None
    """What the connected principal may do on the CLUSTER resource (ALTER, ALTER_CONFIGS,
    DESCRIBE, ...); None when the broker did not say."""


@dataclass(frozen=True)
class ReplicaLogDir:
    """Where one replica lives on its broker, and its size; `future_*` during a log-dir move."""

    log_dir: str | None
    size_bytes: int
    offset_lag: int
    future_dir: str | None = None
    future_size_bytes: int | None = None
    future_offset_lag: int | None = None


@dataclass(frozen=True)
class LogDir:
    """One log directory of a broker."""

    path: str
    error: ApiError | None = None
    total_bytes: int | None = None
    usable_bytes: int | None = None


@dataclass(frozen=True)
class LogDirReport:
    """DescribeLogDirs over several brokers; brokers that did not answer are in `unreachable`."""

    replicas: Mapping[TopicPartitionReplica, ReplicaLogDir] = field(default_factory=dict)
    dirs: Mapping[int, tuple[LogDir, ...]] = field(default_factory=dict)
    unreachable: Mapping[int, ApiError] = field(default_factory=dict)

    def sizes(self) -> dict[TopicPartitionReplica, int]:
        """Size of each replica's current log (not counting a log-dir move's future copy)."""
        return {r: d.size_bytes for r, d in self.replicas.items() if d.log_dir is not None}

    def size(self, tp: TopicPartition, broker: int) -> int | None:
        entry = self.replicas.get(TopicPartitionReplica(tp.topic, tp.partition, broker))
        return None if entry is None or entry.log_dir is None else entry.size_bytes


@dataclass(frozen=True)
class ConfigEntry:
    """One config value as DescribeConfigs reports it."""

    value: str | None
    source: str
    """Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ..."""
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_override(self) -> bool:
        """Set on this very broker or topic (not inherited from a cluster-wide default)."""
        return self.source in ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG")


K = TypeVar("K", int, str)


@dataclass(frozen=True)
class ConfigsResult(Generic[K]):
    """Configs per resource (broker id or topic name) plus the resources that failed."""

    configs: Mapping[K, Mapping[str, ConfigEntry]] = field(default_factory=dict)
    errors: Mapping[K, ApiError] = field(default_factory=dict)


ConfigOps = Mapping[str, "str | None"]
"""Config changes for one resource: key -> value to SET, or None to DELETE (back to default)."""


@dataclass(frozen=True)
class AlterConfigsResult:
    """Outcome per resource of an IncrementalAlterConfigs: None means applied."""

    brokers: Mapping[int, ApiError | None] = field(default_factory=dict)
    topics: Mapping[str, ApiError | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(e is None for e in self.brokers.values()) and all(
            e is None for e in self.topics.values())

    def failures(self) -> list[tuple[str, ApiError]]:
        """("broker 3" | "topic foo", error) for each failed resource, in a stable order."""
        out = [(f"broker {b}", e) for b, e in sorted(self.brokers.items()) if e is not None]
        return out + [(f"topic {t}", e) for t, e in sorted(self.topics.items()) if e is not None]


class ClusterPort(Protocol):
    """The cluster operations kreassign uses. Whole-operation failures raise `ClusterError`
    (`ClusterUnreachable` when nothing answered in time); per-resource failures are values."""

    def describe_brokers(self) -> ClusterInfo:
        """Live brokers with racks, the controller id and the cluster id."""
        ...

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        """Partitions (replicas, leader, ISR) of some topics or all, sorted by (topic, partition).

        Raises UnknownTopicError if a named topic does not exist."""
        ...

    def log_dir_sizes(self, brokers: Iterable[int] | None = None, *,
                      partitions: Iterable[TopicPartition] | None = None) -> LogDirReport:
        """Replica sizes and log dirs from DescribeLogDirs, per broker (all brokers by default)."""
        ...

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                           ) -> dict[TopicPartition, Reassignment]:
        """Reassignments in progress (all, or among `partitions`)."""
        ...

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None],
                            ) -> dict[TopicPartition, ApiError | None]:
        """Start (replica list) or cancel (None) reassignments; None in the result means accepted."""
        ...

    def describe_broker_configs(self, broker_ids: Iterable[int],
                                keys: Iterable[str] | None = None) -> ConfigsResult[int]:
        """Configs of each broker (only `keys` if given); unreachable brokers are errors."""
        ...

    def describe_topic_configs(self, topics: Iterable[str],
                               keys: Iterable[str] | None = None) -> ConfigsResult[str]:
        """Configs of each topic (only `keys` if given); unknown topics are errors."""
        ...

    def incremental_alter_configs(self, broker_ops: Mapping[int, ConfigOps] | None = None,
                                  topic_ops: Mapping[str, ConfigOps] | None = None, *,
                                  validate_only: bool = False) -> AlterConfigsResult:
        """SET/DELETE config keys per broker and per topic; each resource applies atomically."""
        ...

    def alter_replica_log_dirs(self, moves: Mapping[TopicPartitionReplica, str],
                               ) -> dict[TopicPartitionReplica, ApiError | None]:
        """Move replicas to another log dir of their broker."""
        ...

    def describe_cluster_configs(self, keys: Iterable[str]) -> dict[str, str]:
        """The dynamic cluster-wide broker configs (the default BROKER resource "") among `keys`
        that are set, with their values."""
        ...

    def alter_cluster_configs(self, ops: ConfigOps) -> ApiError | None:
        """SET/DELETE keys of the cluster-wide broker configs (the default BROKER resource "")."""
        ...

    def elect_leaders(self, partitions: Iterable[TopicPartition] | None = None, *,
                      preferred: bool = True) -> dict[TopicPartition, ApiError | None]:
        """Run a preferred (or unclean) leader election; None means the leader is as wanted."""
        ...

    def close(self) -> None:
        ...


_log = logging.getLogger(__name__)


def snapshot_state(
    port: ClusterPort,
    *,
    with_sizes: bool = True,
    warn: Callable[[str], None] | None = None,
    now: Callable[[], datetime] | None = None,
) -> ClusterState:
    """Read a complete `ClusterState` through the port.

    Sizes come from DescribeLogDirs of each partition's leader replica (the largest replica
    when the leader's broker did not answer). Throttles are every throttle key set on any
    broker or topic itself (cluster-wide defaults are left out: a per-broker DELETE cannot
    remove them). Brokers that do not answer are skipped with a warning.

    Args:
        port: the cluster.
        with_sizes: False skips DescribeLogDirs (sizes are then 0).
        warn: receives one line per skipped broker or topic (default: this module's logger).
        now: clock for `captured_at` (default: UTC now).

    Raises:
        ClusterError: the cluster-wide reads (brokers, topics, reassignments) failed.
    """
    say = warn if warn is not None else _log.warning
    info = port.describe_brokers()
    partitions = port.describe_topics()
    if with_sizes:
        report = port.log_dir_sizes(partitions=[p.tp for p in partitions])
        for broker, error in sorted(report.unreachable.items()):
            say(f"broker {broker} did not answer DescribeLogDirs, so sizes of partitions led "
                f"by it come from other replicas: {error.message}")
        partitions = [_with_size(p, report) for p in partitions]
    reassignments = port.list_reassignments()
    throttles = _read_throttles(port, [b.id for b in info.brokers],
                                sorted({p.topic for p in partitions}), say)
    captured = (now or (lambda: datetime.now(timezone.utc)))()
    return ClusterState.from_partitions(
        info.brokers, partitions, reassignments=reassignments, throttles=throttles,
        cluster_id=info.cluster_id,
        captured_at=captured.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def _with_size(p: PartitionInfo, report: LogDirReport) -> PartitionInfo:
    size = report.size(p.tp, p.leader) if p.leader is not None else None
    if size is None:
        sizes = [s for s in (report.size(p.tp, b) for b in p.replicas) if s is not None]
        size = max(sizes, default=0)
    return PartitionInfo(topic=p.topic, partition=p.partition, replicas=p.replicas,
                         leader=p.leader, isr=p.isr, size_bytes=size,
                         produce_bps=p.produce_bps, consume_bps=p.consume_bps)


def _read_throttles(port: ClusterPort, broker_ids: list[int], topics: list[str],
                    say: Callable[[str], None]) -> ThrottleConfigs:
    brokers = port.describe_broker_configs(broker_ids, BROKER_THROTTLE_KEYS)
    for broker, error in sorted(brokers.errors.items()):
        say(f"broker {broker}: could not read its throttle configs: {error.message}")
    topic_configs = port.describe_topic_configs(topics, TOPIC_THROTTLE_KEYS) if topics else ConfigsResult[str]()
    for topic, error in sorted(topic_configs.errors.items()):
        say(f"topic {topic}: could not read its throttle configs: {error.message}")

    def set_values(entries: Mapping[str, ConfigEntry], keys: tuple[str, ...]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, entry in sorted(entries.items()):
            if key in keys and entry.is_override and entry.value:
                out[key] = entry.value
        return out

    broker_out = {b: v for b, e in sorted(brokers.configs.items())
                  if (v := set_values(e, BROKER_THROTTLE_KEYS))}
    topic_out = {t: v for t, e in sorted(topic_configs.configs.items())
                 if (v := set_values(e, TOPIC_THROTTLE_KEYS))}
    return ThrottleConfigs(broker=broker_out, topic=topic_out)
