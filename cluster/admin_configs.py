"""The admin adapter's config calls (`ConfigCalls`, a part of `KafkaAdmin`): DescribeConfigs and
IncrementalAlterConfigs on brokers and topics, and the execution lock's markers."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import kafka.errors as Errors
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import TopicPartition as KafkaTopicPartition

from kreassign.cluster.admin_results import alter_ops, alter_result, api_error, config_entries, named_refusal
from kreassign.cluster.admin_retry import each_broker
from kreassign.cluster.authorization import LOCK_ACLS
from kreassign.cluster.errors import ClusterError, NotAuthorized
from kreassign.cluster.port import (
    UNKNOWN_TOPIC_OR_PARTITION,
    AlterConfigsResult,
    ApiError,
    ConfigEntry,
    ConfigOps,
    ConfigsResult,
)

T = TypeVar("T")
# A group's coordinator moved (its broker stopped, or leads the offsets partition no more):
# kafka-python's admin caches coordinators for good, so these errors drop the cached one.
_COORDINATOR_MOVED = (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError,
                      Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.RequestTimedOutError)
MARKER_PARTITION = KafkaTopicPartition("__consumer_offsets", 0)
"""Where the markers live: partition 0 of the offsets topic (see `read_markers`)."""


class ConfigCalls:
    """Config and marker calls over `KafkaAdmin`'s client, retries and per-broker routing."""

    if TYPE_CHECKING:
        _client: Any
        _broker_workers: int

        def _call(self, what: str, fn: Callable[[], T], *, broker: int | None = None) -> T: ...

        def _per_broker(self, what: str, broker: int, fn: Callable[[], T]) -> T | ApiError: ...

    def describe_broker_configs(self, broker_ids: Iterable[int],
                                keys: Iterable[str] | None = None) -> ConfigsResult[int]:
        """DescribeConfigs sent to each broker; unreachable brokers are reported, not raised."""
        wanted = None if keys is None else sorted(set(keys))
        configs: dict[int, dict[str, ConfigEntry]] = {}
        errors: dict[int, ApiError] = {}
        answers = each_broker(sorted(set(broker_ids)), lambda broker: self._per_broker(
            f"describe the configs of broker {broker}", broker,
            partial(self._client.describe_configs, [ConfigResource(ConfigResourceType.BROKER, str(broker), wanted)],
                    config_filter="all")), workers=self._broker_workers)
        for broker, result in answers.items():
            if isinstance(result, ApiError):
                errors[broker] = result
                continue
            configs[broker] = config_entries(result.get("broker", {}).get(str(broker), {}))
        return ConfigsResult(configs=configs, errors=errors)

    def describe_topic_configs(self, topics: Iterable[str],
                               keys: Iterable[str] | None = None) -> ConfigsResult[str]:
        """DescribeConfigs for topics; a topic that does not exist is reported as an error."""
        names = sorted(set(topics))
        if not names:
            return ConfigsResult()
        wanted = None if keys is None else sorted(set(keys))
        resources = [ConfigResource(ConfigResourceType.TOPIC, t, wanted) for t in names]
        raw = self._call("describe topic configs",
                         lambda: self._client.describe_configs(resources, config_filter="all"))
        by_topic = raw.get("topic", {})
        configs = {t: config_entries(by_topic.get(t, {})) for t in names}
        # kafka-python drops DescribeConfigs' per-resource error codes: an unknown topic just
        # comes back empty, so check whether empty ones exist at all.
        empty = [t for t in names if not configs[t] and wanted != []]
        errors: dict[str, ApiError] = {}
        if empty:
            for t in self._missing_topics(empty):
                errors[t] = api_error(Errors.UnknownTopicOrPartitionError, f"Topic {t} not found.")
                del configs[t]
        return ConfigsResult(configs=configs, errors=errors)

    def _missing_topics(self, topics: list[str]) -> list[str]:
        raw = self._call("describe topics", lambda: self._client.describe_topics(topics))
        return sorted(t["name"] for t in raw if t.get("error_code") == UNKNOWN_TOPIC_OR_PARTITION)

    def incremental_alter_configs(self, broker_ops: Mapping[int, ConfigOps] | None = None,
                                  topic_ops: Mapping[str, ConfigOps] | None = None, *,
                                  validate_only: bool = False) -> AlterConfigsResult:
        """IncrementalAlterConfigs: BROKER resources each to their own broker, topics together."""
        brokers: dict[int, ApiError | None] = {}
        ops_of = dict(broker_ops or {})
        answers = each_broker(sorted(ops_of), lambda broker: self._per_broker(
            f"alter the configs of broker {broker}", broker, partial(self._alter_configs, [ConfigResource(
                ConfigResourceType.BROKER, str(broker), alter_ops(ops_of[broker]))], validate_only)),
            workers=self._broker_workers)
        for broker, result in answers.items():
            brokers[broker] = result if isinstance(result, ApiError) else named_refusal(
                alter_result(result, "broker", str(broker)), "ALTER_CONFIGS", f"the CLUSTER (broker {broker}'s configs)")
        topics: dict[str, ApiError | None] = {}
        if topic_ops:
            resources = [ConfigResource(ConfigResourceType.TOPIC, t, alter_ops(ops))
                         for t, ops in sorted(topic_ops.items())]
            raw = self._call("alter topic configs", lambda: self._alter_configs(resources, validate_only))
            topics = {t: named_refusal(alter_result(raw, "topic", t), "ALTER_CONFIGS", f"TOPIC {t}")
                      for t in sorted(topic_ops)}
        return AlterConfigsResult(brokers=brokers, topics=topics)

    # Markers: a consumer group per marker whose committed offset on partition 0 of
    # `__consumer_offsets` carries the value in its metadata string. Kafka hides the value of
    # any config it does not know (DescribeConfigs marks it sensitive), so a custom config cannot
    # hold them; an offset commit can, is answered by one coordinator that every later OffsetFetch
    # reads from, and needs no topic of kreassign's own (the offsets topic exists once any
    # group has asked for its coordinator, which the first commit does).
    def read_markers(self, names: Iterable[str]) -> dict[str, str]:
        """The value of each marker among `names` that is set (group offset metadata)."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        spot = MARKER_PARTITION

        def fetch() -> dict[str, Any]:
            try:
                result: dict[str, Any] = self._client.list_group_offsets({name: [spot] for name in wanted})
            except _COORDINATOR_MOVED:
                self._forget_coordinators(wanted)
                raise
            return result

        try:
            raw = self._call("read the execution lock (consumer group offsets)", fetch)
        except ClusterError as exc:
            if isinstance(exc.__cause__, Errors.AuthorizationError):
                raise NotAuthorized(f"Not authorized to read the execution lock (the offsets of the consumer group "
                                    f"{wanted[0]}): {api_error(type(exc.__cause__)).name}. kreassign needs "
                                    f"{LOCK_ACLS} for it; nothing was changed.") from exc
            raise
        out: dict[str, str] = {}
        for name in wanted:
            committed = raw.get(name, {}).get(spot)
            if committed is not None and committed.offset >= 0 and committed.metadata:
                out[name] = committed.metadata
        return out

    def write_markers(self, ops: ConfigOps) -> ApiError | None:
        """Set or clear (an empty metadata string) each marker; the first refusal is returned."""
        from kafka.structs import OffsetAndMetadata

        for name, value in sorted(ops.items()):
            offset = OffsetAndMetadata(0, value or "", None)

            def commit(group: str = name, committed: Any = offset) -> Any:
                try:
                    result = self._client.alter_group_offsets(group, {MARKER_PARTITION: committed})
                except _COORDINATOR_MOVED:
                    self._forget_coordinators([group])
                    raise
                error = result.get(MARKER_PARTITION, Errors.NoError)
                if error is not Errors.NoError and getattr(error, "retriable", False):
                    if issubclass(error, _COORDINATOR_MOVED):
                        self._forget_coordinators([group])
                    raise error(f"group {group}")  # coordinator moving or loading: try again
                return error

            error = self._call("write the execution lock (consumer group offsets)", commit)
            if error is not Errors.NoError:
                return named_refusal(api_error(error), "READ", f"GROUP {name} and TOPIC __consumer_offsets")
        return None

    def _forget_coordinators(self, groups: Iterable[str]) -> None:
        """Drop the cached coordinators of `groups`, so the next call asks FindCoordinator again
        (found on Kafka 4.4.0: after a broker restart the lock's release kept asking the broker
        that coordinated the group before, and the lock stayed until its lease ran out)."""
        cluster = getattr(getattr(self._client, "_manager", None), "cluster", None)
        cached = getattr(cluster, "_coordinators", None)
        if isinstance(cached, dict):
            for key in [k for k in cached if isinstance(k, tuple) and k[-1] in set(groups)]:
                del cached[key]

    def _alter_configs(self, resources: list[Any], validate_only: bool) -> dict[str, dict[str, str]]:
        # raise_on_unknown=False: the throttle rates are unknown to DescribeConfigs until set,
        # and read-only once set, so kafka-python's pre-check would reject them.
        result: dict[str, dict[str, str]] = self._client.alter_configs(
            resources, validate_only=validate_only, raise_on_unknown=False, incremental=True)
        return result
