"""The cluster port: the few cluster operations kreassign needs, as a typed Protocol.

`kreassign.cluster.admin.KafkaAdmin` implements it over kafka-python; tests and the sandbox use
in-memory fakes. Results are plain values: per-resource failures come back as `ApiError` values
inside the result (so one bad broker or topic does not hide the others), while failures of a
whole operation raise `ClusterError` subclasses.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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

    def log_end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int] | None:
        """Log end offsets (ListOffsets, latest: a client is told the high watermark) from the
        partitions' leaders; None when the cluster does not support ListOffsets."""
        ...

    def log_start_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int] | None:
        """Log start offsets (ListOffsets, earliest: where retention has cut each log) from the
        partitions' leaders; None when the cluster does not support ListOffsets."""
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

    def read_markers(self, names: Iterable[str]) -> dict[str, str]:
        """The markers among `names` that are set, with their values: small records kreassign
        keeps on the cluster itself (the execution lock), readable by any kreassign."""
        ...

    def write_markers(self, ops: ConfigOps) -> ApiError | None:
        """Set (a value) or clear (None) markers; each write is seen by every later read."""
        ...

    def elect_leaders(self, partitions: Iterable[TopicPartition] | None = None, *,
                      preferred: bool = True) -> dict[TopicPartition, ApiError | None]:
        """Run a preferred (or unclean) leader election; None means the leader is as wanted."""
        ...

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]]) -> ApiError | None:
        """Create a topic with this replica assignment (partition -> replicas); None: created."""
        ...

    def delete_topic(self, name: str) -> ApiError | None:
        """Delete a topic; None: deleted."""
        ...

    def list_client_metrics(self) -> list[str] | None:
        """Names of the KIP-714 CLIENT_METRICS resources; None when the cluster cannot list them."""
        ...

    def describe_client_metrics(self, names: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        """The set configs of each named CLIENT_METRICS resource (empty: it does not exist)."""
        ...

    def alter_client_metrics(self, name: str, ops: ConfigOps, *, validate_only: bool = False) -> ApiError | None:
        """SET/DELETE keys of one CLIENT_METRICS resource; None means applied."""
        ...

    def close(self) -> None:
        ...
