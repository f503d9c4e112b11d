"""The admin adapter's replica calls (`ReplicaCalls`, a part of `KafkaAdmin`): where replicas
are and where they go: partition reassignments (to the controller), leader elections, and the
log dirs of each broker with the moves between them (each broker asked on its own)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import kafka.errors as Errors
from kafka.structs import TopicPartition as KafkaTopicPartition
from kafka.structs import TopicPartitionReplica as KafkaReplica

from kreassign.cluster.admin_results import api_error, merge_log_dirs
from kreassign.cluster.admin_retry import ThrottleGate, each_broker
from kreassign.cluster.model import PartitionInfo, Reassignment, TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import ELECTION_NOT_NEEDED, ApiError, ClusterInfo, LogDir, LogDirReport, ReplicaLogDir

T = TypeVar("T")


class ReplicaCalls:
    """Reassignment, election and log-dir calls over `KafkaAdmin`'s client, retries and
    per-broker routing."""

    if TYPE_CHECKING:
        _client: Any
        _controller_id: int | None
        _gate: ThrottleGate
        _broker_workers: int

        def _call(self, what: str, fn: Callable[[], T], *, broker: int | None = None) -> T: ...

        def _per_broker(self, what: str, broker: int, fn: Callable[[], T]) -> T | ApiError: ...

        def _partitions(self, topics: Iterable[str] | None, *, missing_ok: bool) -> list[PartitionInfo]: ...

        def _request_timeout_ms(self) -> int: ...

        def describe_brokers(self) -> ClusterInfo: ...

    # ---- log dirs ----------------------------------------------------------------------------
    def log_dir_sizes(self, brokers: Iterable[int] | None = None, *,
                      partitions: Iterable[TopicPartition] | None = None) -> LogDirReport:
        """DescribeLogDirs, each broker asked on its own; brokers that do not answer are reported.

        Each broker is asked only about the wanted partitions it hosts (from Metadata, which
        lists adding replicas too), so requests stay small on big clusters; partitions of
        topics that no longer exist are skipped."""
        ids = sorted(set(brokers)) if brokers is not None else [b.id for b in self.describe_brokers().brokers]
        wanted = None if partitions is None else set(partitions)
        topics = None if wanted is None else {tp.topic for tp in wanted}
        hosted: dict[int, dict[str, list[int]]] = {b: defaultdict(list) for b in ids}
        for p in self._partitions(topics, missing_ok=True):
            if wanted is not None and p.tp not in wanted:
                continue
            for b in p.replicas:
                if b in hosted:
                    hosted[b][p.topic].append(p.partition)
        replicas: dict[TopicPartitionReplica, ReplicaLogDir] = {}
        dirs: dict[int, tuple[LogDir, ...]] = {}
        unreachable: dict[int, ApiError] = {}
        answers = each_broker(ids, lambda broker: self._per_broker(
            f"describe the log dirs of broker {broker}", broker,
            partial(self._client.describe_log_dirs, topic_partitions=dict(hosted[broker]), brokers=[broker])),
            workers=self._broker_workers)
        for broker, result in answers.items():
            if isinstance(result, ApiError):
                unreachable[broker] = result
                continue
            for entry in result:
                dirs[broker] = merge_log_dirs(int(entry["broker"]), entry["log_dirs"], replicas)
        return LogDirReport(replicas=replicas, dirs=dirs, unreachable=unreachable)

    def alter_replica_log_dirs(self, moves: Mapping[TopicPartitionReplica, str],
                               ) -> dict[TopicPartitionReplica, ApiError | None]:
        """AlterReplicaLogDirs, each broker asked on its own."""
        by_broker: dict[int, dict[TopicPartitionReplica, str]] = defaultdict(dict)
        for replica, path in moves.items():
            by_broker[replica.broker][replica] = path
        out: dict[TopicPartitionReplica, ApiError | None] = {}
        answers = each_broker(sorted(by_broker), lambda broker: self._per_broker(
            f"move replicas between log dirs of broker {broker}", broker, partial(
                self._client.alter_replica_log_dirs,
                {KafkaReplica(r.topic, r.partition, r.broker): d for r, d in by_broker[broker].items()})),
            workers=self._broker_workers)
        for broker, result in answers.items():
            for replica in by_broker[broker]:
                if isinstance(result, ApiError):
                    out[replica] = result
                    continue
                error = result.get(KafkaReplica(replica.topic, replica.partition, replica.broker))
                out[replica] = (None if error is None or error is Errors.NoError else api_error(error))
        return out

    # ---- reassignments -----------------------------------------------------------------------
    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                           ) -> dict[TopicPartition, Reassignment]:
        request = None if partitions is None else [KafkaTopicPartition(p.topic, p.partition)
                                                   for p in sorted(set(partitions))]
        if request == []:
            return {}
        raw = self._call("list partition reassignments", lambda: self._client.list_partition_reassignments(
            request, timeout_ms=self._request_timeout_ms()), broker=self._controller_id)
        return {TopicPartition(tp.topic, tp.partition): Reassignment(
                    replicas=tuple(v["replicas"]), adding=tuple(v["adding_replicas"]),
                    removing=tuple(v["removing_replicas"]))
                for tp, v in sorted(raw.items())}

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None],
                            ) -> dict[TopicPartition, ApiError | None]:
        """Start (replica list) or cancel (None) reassignments; the controller checks each one."""
        out: dict[TopicPartition, ApiError | None] = {}
        request: dict[KafkaTopicPartition, list[int] | None] = {}
        for tp, replicas in sorted(targets.items()):
            if replicas is not None and len(replicas) == 0:
                out[tp] = api_error(Errors.InvalidReplicationAssignmentError,
                                    "The manual partition assignment includes an empty replica list.")
                continue
            request[KafkaTopicPartition(tp.topic, tp.partition)] = (
                None if replicas is None else [int(r) for r in replicas])
        if request:
            raw = self._call("alter partition reassignments",
                             lambda: self._client.alter_partition_reassignments(
                                 request, timeout_ms=self._request_timeout_ms()),
                             broker=self._controller_id)
            for ktp in request:
                tp = TopicPartition(ktp.topic, ktp.partition)
                if ktp not in raw:
                    out[tp] = ApiError(code=-1, name="UNKNOWN_SERVER_ERROR",
                                       message="the controller did not report on this partition")
                else:
                    error = raw[ktp]
                    out[tp] = None if error is None or error is Errors.NoError else api_error(error)
        return dict(sorted(out.items()))

    def elect_leaders(self, partitions: Iterable[TopicPartition] | None = None, *,
                      preferred: bool = True) -> dict[TopicPartition, ApiError | None]:
        """Preferred (or unclean) leader election; ELECTION_NOT_NEEDED counts as success."""
        request: dict[str, list[int]] | None = None
        if partitions is not None:
            request = defaultdict(list)
            for tp in sorted(set(partitions)):
                request[tp.topic].append(tp.partition)
            if not request:
                return {}

        def elect() -> Any:
            response = self._client.elect_leaders(0 if preferred else 1, dict(request) if request else None,
                                                  timeout_ms=self._request_timeout_ms(), raise_errors=False)
            if self._controller_id is not None:
                self._gate.note(self._controller_id, int(getattr(response, "throttle_time_ms", 0) or 0))
            top = Errors.for_code(getattr(response, "error_code", 0) or 0)
            if top is not Errors.NoError:
                raise top("ElectLeaders")
            return response

        response = self._call("elect leaders", elect, broker=self._controller_id)
        out: dict[TopicPartition, ApiError | None] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, p.partition_id)
                if p.error_code in (0, ELECTION_NOT_NEEDED):
                    out[tp] = None
                else:
                    out[tp] = api_error(Errors.for_code(p.error_code), p.error_message)
        return dict(sorted(out.items()))
