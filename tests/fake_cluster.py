"""An in-memory `ClusterPort` with simple KIP-455 semantics, for unit tests.

Reassignments behave like a KRaft controller: while a partition moves, its replica list is the
target followed by the removing replicas (ascending); `complete()` finishes a move on demand and
`cancel` reverts to the replicas minus the adding ones. Configs are plain dicts. Brokers can be
stopped (gone from DescribeCluster, unreachable) or made unreachable while still registered, and
any port method can be made to raise once, to test faults in the middle of an operation.
`plan_file` and `KafkaRunner` help the tests drive the CLI against the fake.
"""
from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kreassign.cli import kafka_live
from kreassign.cli.kafka_compat import run_kafka_style

from kreassign.cluster.errors import ClusterError
from kreassign.cluster.model import (
    Broker,
    PartitionInfo,
    Reassignment,
    TopicPartition,
    TopicPartitionReplica,
)
from kreassign.cluster.port import (
    BROKER_THROTTLE_KEYS,
    TOPIC_THROTTLE_KEYS,
    UNREACHABLE,
    AlterConfigsResult,
    ApiError,
    ClusterInfo,
    ConfigEntry,
    ConfigOps,
    ConfigsResult,
    LogDir,
    LogDirReport,
    ReplicaLogDir,
    UnknownTopicError,
)
from kreassign.throttle.configs import validate_throttled_replicas

INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
UNKNOWN_TOPIC_OR_PARTITION = 3
NO_REASSIGNMENT_IN_PROGRESS = 85
REPLICA_NOT_AVAILABLE = 9
LOG_DIR_NOT_FOUND = 57


def _error(code: int, name: str, message: str) -> ApiError:
    return ApiError(code=code, name=name, message=message)


def unreachable(broker: int) -> ApiError:
    return ApiError(code=-1, name=UNREACHABLE, message=f"broker {broker} did not answer within 30s")


@dataclass
class _Partition:
    replicas: list[int]
    isr: list[int]
    leader: int | None
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)


class ManualClock:
    """A clock and a sleeper for the code under test: sleeping moves the clock, nothing waits."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeCluster:
    """A tiny cluster in memory. Build it, then drive it through the `ClusterPort` methods."""

    def __init__(self, brokers: Iterable[int] = (1, 2, 3, 4), *, cluster_id: str = "fake-cluster",
                 racks: Mapping[int, str] | None = None, log_dirs: Sequence[str] = ("/data/a", "/data/b")) -> None:
        self.cluster_id = cluster_id
        self.brokers = {b: Broker(id=b, rack=(racks or {}).get(b), host="127.0.0.1", port=9000 + b)
                        for b in brokers}
        self.down: set[int] = set()
        self.unreachable: set[int] = set()
        self.partitions: dict[TopicPartition, _Partition] = {}
        self.broker_configs: dict[int, dict[str, str]] = {b: {} for b in self.brokers}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.markers: dict[str, str] = {}
        """the cluster-wide broker configs (the default BROKER resource "")"""
        self.log_dirs = tuple(log_dirs)
        self.replica_dirs: dict[TopicPartitionReplica, str] = {}
        self.future_dirs: dict[TopicPartitionReplica, str] = {}
        self.calls: list[str] = []
        self.client_metrics: dict[str, dict[str, str]] = {}
        self.reject: dict[TopicPartition, ApiError] = {}
        """per-partition errors the controller returns for reassignments (start or cancel)"""
        self.refuse_configs: dict[int | str, ApiError] = {}
        """per-resource errors (broker id or topic) for config changes, e.g. authorization"""
        self._failures: dict[str, list[BaseException]] = {}
        self.closed = False
        self.metadata_lag = 0
        """how many describe_topics calls still show a finished or cancelled move's replica list
        (real brokers learn the controller's change a moment later)"""
        self._stale: dict[TopicPartition, tuple[list[int], int]] = {}
        self.config_lag: dict[int, int] = {}
        """per broker: how many describe_broker_configs calls after a change the controller accepted
        still show the configs from before it (a real broker applies a change when it replays the
        metadata record, a moment later)"""
        self._stale_configs: dict[int, tuple[dict[str, str], int]] = {}

    # ---- building and steering ------------------------------------------------------------------
    def add_topic(self, topic: str, assignment: Sequence[Sequence[int]]) -> FakeCluster:
        """Create a topic whose partition i has replicas assignment[i] (all in sync)."""
        self.topic_configs.setdefault(topic, {})
        for p, replicas in enumerate(assignment):
            tp = TopicPartition(topic, p)
            self.partitions[tp] = _Partition(list(replicas), list(replicas), replicas[0] if replicas else None)
            for b in replicas:
                self.replica_dirs[TopicPartitionReplica(topic, p, b)] = self.log_dirs[0]
        return self

    def stop_broker(self, broker: int) -> None:
        """The broker dies: it leaves DescribeCluster and every request to it goes unanswered."""
        self.down.add(broker)

    def start_broker(self, broker: int) -> None:
        self.down.discard(broker)
        self.unreachable.discard(broker)

    def fail_next(self, method: str, error: BaseException) -> None:
        """Make the next call of a port method raise `error` (e.g. a timeout) before doing anything."""
        self._failures.setdefault(method, []).append(error)

    def complete(self, *tps: TopicPartition) -> None:
        """Finish the given moves (all moves if none given): targets join the ISR, removing ones go."""
        for tp in tps or [tp for tp, p in self.partitions.items() if p.moving]:
            part = self.partitions[tp]
            if not part.moving:
                continue
            target = [r for r in part.replicas if r not in part.removing]
            self._went_stale(tp, part.replicas)
            for b in part.removing:
                self.replica_dirs.pop(TopicPartitionReplica(tp.topic, tp.partition, b), None)
            for b in part.adding:
                self.replica_dirs.setdefault(TopicPartitionReplica(tp.topic, tp.partition, b), self.log_dirs[0])
            part.replicas, part.isr, part.adding, part.removing = target, list(target), [], []
            if part.leader not in target:
                part.leader = target[0]

    def complete_log_dir_moves(self) -> None:
        for replica, future in list(self.future_dirs.items()):
            self.replica_dirs[replica] = future
            del self.future_dirs[replica]

    def _went_stale(self, tp: TopicPartition, replicas: list[int]) -> None:
        if self.metadata_lag:
            self._stale[tp] = (list(replicas), self.metadata_lag)

    def _shown(self, tp: TopicPartition, p: _Partition) -> tuple[int, ...]:
        stale = self._stale.get(tp)
        if stale is None:
            return tuple(p.replicas)
        replicas, left = stale
        if left <= 1:
            del self._stale[tp]
        else:
            self._stale[tp] = (replicas, left - 1)
        return tuple(replicas)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(self.partitions[tp].replicas)

    def _enter(self, method: str) -> None:
        self.calls.append(method)
        pending = self._failures.get(method)
        if pending:
            raise pending.pop(0)

    def _live(self) -> list[int]:
        return sorted(b for b in self.brokers if b not in self.down)

    def _answers(self, broker: int) -> bool:
        return broker in self.brokers and broker not in self.down and broker not in self.unreachable

    # ---- ClusterPort --------------------------------------------------------------------------
    def describe_brokers(self) -> ClusterInfo:
        self._enter("describe_brokers")
        live = self._live()
        return ClusterInfo(brokers=tuple(self.brokers[b] for b in live),
                           controller_id=live[0] if live else None, cluster_id=self.cluster_id)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        self._enter("describe_topics")
        known = {tp.topic for tp in self.partitions}
        wanted = known if topics is None else set(topics)
        missing = wanted - known
        if missing:
            raise UnknownTopicError(sorted(missing))
        return [PartitionInfo(tp.topic, tp.partition, self._shown(tp, p), p.leader, tuple(p.isr))
                for tp, p in sorted(self.partitions.items()) if tp.topic in wanted]

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]]) -> ApiError | None:
        self._enter("create_topic")
        if any(tp.topic == name for tp in self.partitions):
            return ApiError(36, "TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
        self.add_topic(name, [assignment[p] for p in sorted(assignment)])
        return None

    def delete_topic(self, name: str) -> ApiError | None:
        self._enter("delete_topic")
        for tp in [tp for tp in self.partitions if tp.topic == name]:
            del self.partitions[tp]
        return None

    def list_client_metrics(self) -> list[str] | None:
        self._enter("list_client_metrics")
        return sorted(self.client_metrics)

    def describe_client_metrics(self, names: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        self._enter("describe_client_metrics")
        return {n: {k: ConfigEntry(v, "DYNAMIC_CLIENT_METRICS_CONFIG") for k, v in self.client_metrics.get(n, {}).items()}
                for n in sorted(set(names))}

    def alter_client_metrics(self, name: str, ops: Mapping[str, str | None], *,
                             validate_only: bool = False) -> ApiError | None:
        self._enter("alter_client_metrics")
        current = dict(self.client_metrics.get(name, {}))
        for key, value in ops.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        if not validate_only:
            if current:
                self.client_metrics[name] = current
            else:
                self.client_metrics.pop(name, None)
        return None

    def log_end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int] | None:
        """Like a cluster without ListOffsets: write rates then come from log sizes alone."""
        return None

    def log_start_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int] | None:
        return None

    def log_dir_sizes(self, brokers: Iterable[int] | None = None, *,
                      partitions: Iterable[TopicPartition] | None = None) -> LogDirReport:
        self._enter("log_dir_sizes")
        wanted_brokers = set(self.brokers) if brokers is None else set(brokers)
        wanted_parts = None if partitions is None else set(partitions)
        replicas: dict[TopicPartitionReplica, ReplicaLogDir] = {}
        dirs: dict[int, tuple[LogDir, ...]] = {}
        errors: dict[int, ApiError] = {}
        for b in sorted(wanted_brokers):
            if not self._answers(b):
                errors[b] = unreachable(b)
                continue
            dirs[b] = tuple(LogDir(path=d) for d in self.log_dirs)
        for replica, log_dir in sorted(self.replica_dirs.items()):
            tp = TopicPartition(replica.topic, replica.partition)
            if replica.broker in dirs and (wanted_parts is None or tp in wanted_parts):
                replicas[replica] = ReplicaLogDir(log_dir=log_dir, size_bytes=1000, offset_lag=0,
                                                  future_dir=self.future_dirs.get(replica))
        return LogDirReport(replicas=replicas, dirs=dirs, unreachable=errors)

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                           ) -> dict[TopicPartition, Reassignment]:
        self._enter("list_reassignments")
        wanted = None if partitions is None else set(partitions)
        return {tp: Reassignment(tuple(p.replicas), tuple(p.adding), tuple(p.removing))
                for tp, p in sorted(self.partitions.items())
                if p.moving and (wanted is None or tp in wanted)}

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None],
                            ) -> dict[TopicPartition, ApiError | None]:
        self._enter("alter_reassignments")
        return {tp: (self.reject[tp] if tp in self.reject
                     else self._cancel(tp) if target is None else self._reassign(tp, list(target)))
                for tp, target in sorted(targets.items())}

    def _reassign(self, tp: TopicPartition, target: list[int]) -> ApiError | None:
        part = self.partitions.get(tp)
        if part is None:
            if all(t.topic != tp.topic for t in self.partitions):
                return _error(UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION",
                              f"Unable to find a topic named {tp.topic}.")
            return _error(UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION",
                          f"Unable to find partition {tp.topic}:{tp.partition}.")
        if not target:
            return _error(INVALID_REPLICA_ASSIGNMENT, "INVALID_REPLICA_ASSIGNMENT",
                          "The manual partition assignment includes an empty replica list.")
        for b in target:
            if b not in self.brokers:
                return _error(INVALID_REPLICA_ASSIGNMENT, "INVALID_REPLICA_ASSIGNMENT",
                              f"The manual partition assignment includes broker {b}, but no such "
                              "broker is registered.")
        if len(set(target)) != len(target):
            dup = next(b for b in target if target.count(b) > 1)
            return _error(INVALID_REPLICA_ASSIGNMENT, "INVALID_REPLICA_ASSIGNMENT",
                          f"The manual partition assignment includes the broker {dup} more than once.")
        current = part.replicas
        removing = sorted(b for b in current if b not in target)
        adding = sorted(b for b in target if b not in current)
        if not removing and not adding:
            part.replicas, part.adding, part.removing = target, [], []
            return None
        part.replicas, part.adding, part.removing = target + removing, adding, removing
        return None

    def _cancel(self, tp: TopicPartition) -> ApiError | None:
        part = self.partitions.get(tp)
        if part is None or not part.moving:
            return _error(NO_REASSIGNMENT_IN_PROGRESS, "NO_REASSIGNMENT_IN_PROGRESS",
                          f"No ongoing reassignment for partition {tp.topic}:{tp.partition}.")
        self._went_stale(tp, part.replicas)
        part.replicas = [r for r in part.replicas if r not in part.adding]
        part.isr = [r for r in part.isr if r in part.replicas]
        part.adding, part.removing = [], []
        return None

    def describe_broker_configs(self, broker_ids: Iterable[int],
                                keys: Iterable[str] | None = None) -> ConfigsResult[int]:
        self._enter("describe_broker_configs")
        wanted = None if keys is None else set(keys)
        configs: dict[int, dict[str, ConfigEntry]] = {}
        errors: dict[int, ApiError] = {}
        for b in broker_ids:
            if not self._answers(b):
                errors[b] = unreachable(b)
                continue
            configs[b] = {k: ConfigEntry(v, "DYNAMIC_BROKER_CONFIG")
                          for k, v in self._applied_configs(b).items()
                          if wanted is None or k in wanted}
        return ConfigsResult(configs=configs, errors=errors)

    def _applied_configs(self, broker: int) -> dict[str, str]:
        """What the broker has applied: its configs from before the last change while it lags."""
        stale = self._stale_configs.get(broker)
        if stale is None:
            return self.broker_configs.setdefault(broker, {})
        before, left = stale
        if left <= 1:
            del self._stale_configs[broker]
        else:
            self._stale_configs[broker] = (before, left - 1)
        return before

    def describe_topic_configs(self, topics: Iterable[str],
                               keys: Iterable[str] | None = None) -> ConfigsResult[str]:
        self._enter("describe_topic_configs")
        wanted = set(TOPIC_THROTTLE_KEYS) if keys is None else set(keys)
        configs: dict[str, dict[str, ConfigEntry]] = {}
        errors: dict[str, ApiError] = {}
        for t in topics:
            if t not in self.topic_configs:
                errors[t] = _error(UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION",
                                   "This server does not host this topic-partition.")
                continue
            set_here = self.topic_configs[t]
            configs[t] = {k: (ConfigEntry(set_here[k], "DYNAMIC_TOPIC_CONFIG") if k in set_here
                              else ConfigEntry("", "DEFAULT_CONFIG")) for k in sorted(wanted)}
        return ConfigsResult(configs=configs, errors=errors)

    def incremental_alter_configs(self, broker_ops: Mapping[int, ConfigOps] | None = None,
                                  topic_ops: Mapping[str, ConfigOps] | None = None, *,
                                  validate_only: bool = False) -> AlterConfigsResult:
        self._enter("incremental_alter_configs")
        brokers: dict[int, ApiError | None] = {}
        topics: dict[str, ApiError | None] = {}
        for b, ops in (broker_ops or {}).items():
            if not self._answers(b):
                brokers[b] = unreachable(b)
                continue
            error = self.refuse_configs.get(b) or next(
                (e for k, v in ops.items() if (e := _check_broker_value(k, v))), None)
            brokers[b] = error
            if error is None and not validate_only:
                if self.config_lag.get(b):
                    before = self._stale_configs.get(b, (dict(self.broker_configs.setdefault(b, {})), 0))[0]
                    self._stale_configs[b] = (before, self.config_lag[b])
                _apply(self.broker_configs.setdefault(b, {}), ops)
        for t, ops in (topic_ops or {}).items():
            if t not in self.topic_configs:
                topics[t] = _error(UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION",
                                   "This server does not host this topic-partition.")
                continue
            error = self.refuse_configs.get(t) or next(
                (e for k, v in ops.items() if (e := _check_topic_value(k, v))), None)
            topics[t] = error
            if error is None and not validate_only:
                _apply(self.topic_configs[t], ops)
        return AlterConfigsResult(brokers=brokers, topics=topics)

    def read_markers(self, names: Iterable[str]) -> dict[str, str]:
        self._enter("read_markers")
        return {k: self.markers[k] for k in sorted(set(names)) if k in self.markers}

    def write_markers(self, ops: ConfigOps) -> ApiError | None:
        self._enter("write_markers")
        _apply(self.markers, ops)
        return None

    def alter_replica_log_dirs(self, moves: Mapping[TopicPartitionReplica, str],
                               ) -> dict[TopicPartitionReplica, ApiError | None]:
        self._enter("alter_replica_log_dirs")
        out: dict[TopicPartitionReplica, ApiError | None] = {}
        for replica, target in sorted(moves.items()):
            if not self._answers(replica.broker):
                out[replica] = unreachable(replica.broker)
            elif target not in self.log_dirs:
                out[replica] = _error(LOG_DIR_NOT_FOUND, "LOG_DIR_NOT_FOUND",
                                      f"The log dir {target} does not exist.")
            elif replica not in self.replica_dirs:
                out[replica] = _error(REPLICA_NOT_AVAILABLE, "REPLICA_NOT_AVAILABLE",
                                      "The replica is not available for the requested topic-partition.")
            else:
                if self.replica_dirs[replica] == target:
                    self.future_dirs.pop(replica, None)
                else:
                    self.future_dirs[replica] = target
                out[replica] = None
        return out

    def elect_leaders(self, partitions: Iterable[TopicPartition] | None = None, *,
                      preferred: bool = True) -> dict[TopicPartition, ApiError | None]:
        self._enter("elect_leaders")
        out: dict[TopicPartition, ApiError | None] = {}
        for tp in sorted(self.partitions if partitions is None else partitions):
            part = self.partitions[tp]
            part.leader = part.replicas[0]
            out[tp] = None
        return out

    def close(self) -> None:
        self.closed = True


def _apply(store: dict[str, str], ops: ConfigOps) -> None:
    for key, value in ops.items():
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value


def _check_broker_value(key: str, value: str | None) -> ApiError | None:
    if value is None or key not in BROKER_THROTTLE_KEYS:
        return None
    if not value.isdigit():
        return _error(INVALID_CONFIG, "INVALID_CONFIG", f"Invalid value {value} for configuration {key}")
    return None


def _check_topic_value(key: str, value: str | None) -> ApiError | None:
    if value is None or key not in TOPIC_THROTTLE_KEYS or validate_throttled_replicas(value):
        return None
    return _error(INVALID_CONFIG, "INVALID_CONFIG",
                  f"{key} must be the literal '*' or a list of replicas in the following format: "
                  "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def timeout_error(what: str = "alter partition reassignments") -> ClusterError:
    """What the admin adapter raises when the cluster stops answering mid-operation."""
    return ClusterError(f"{what} timed out after 30.0s (request.timeout.ms); the cluster may be "
                        "overloaded or a broker is down")


# ---- helpers for the live-operation tests ---------------------------------------------------
def plan_file(directory: Path, moves: dict[str, Sequence[int]], *, name: str = "plan.json",
              log_dirs: dict[str, Sequence[str]] | None = None) -> str:
    """Write a reassignment JSON: {"foo-0": [1, 2]} -> Kafka's format (log dirs optional)."""
    partitions = []
    for key, replicas in moves.items():
        topic, _, partition = key.rpartition("-")
        entry: dict[str, object] = {"topic": topic, "partition": int(partition), "replicas": list(replicas)}
        if log_dirs and key in log_dirs:
            entry["log_dirs"] = list(log_dirs[key])
        partitions.append(entry)
    path = directory / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}), encoding="utf-8")
    return str(path)


class KafkaRunner:
    """Runs `kreassign --bootstrap-server ... --<action>` against a fake cluster."""

    def __init__(self, fake: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fake = fake

        @contextmanager
        def fake_open(bootstrap: str | None, command_config: str | None, request_timeout_s: float | None,
                      warn: object = None) -> Iterator[FakeCluster]:
            yield self.fake

        monkeypatch.setattr(kafka_live, "open_port", fake_open)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = run_kafka_style(["--bootstrap-server", "127.0.0.1:9092", *argv], out, err)
        return code, out.getvalue(), err.getvalue()
