"""`KafkaAdmin`: the cluster port over kafka-python 3.0.12's public KafkaAdminClient.

What this adapter hides:
* Retries like Kafka's admin client: every operation has a deadline (`default.api.timeout.ms`);
  errors whose kafka.errors class is `retriable` are retried with jittered exponential backoff
  (`retry.backoff.ms` doubling up to `retry.backoff.max.ms`); anything else fails at once.
* Deadlines are strict: an attempt that kafka-python would keep waiting on (a connection stuck
  in its handshake) is abandoned when the operation's time is up.
* Per-broker operations (broker configs, log dirs, log-dir moves) go to one broker at a time, so
  a broker that is down becomes an "unreachable" entry in the result instead of an exception.
* Quota throttles (KIP-13/KIP-219): kafka-python pauses a throttled connection itself but drops
  throttle_time_ms from its results; we learn it from its log records (and ElectLeaders
  responses) and wait that long before the next request to that broker.
* DescribeCluster v0 (Kafka 2.8-3.6) makes kafka-python raise KeyError('endpoint_type'); we fall
  back to Metadata through a second client pinned to Kafka 2.7's API versions.
* Config changes use IncrementalAlterConfigs with raise_on_unknown=False, because the throttle
  rates are absent from DescribeConfigs until set and read-only afterwards.
* Mixed error styles (returned classes, "Name: message" strings, raised exceptions) become
  `ApiError` values or `ClusterError` exceptions (`cluster/admin_results.py`).

The config and marker calls are `cluster/admin_configs.py` (`ConfigCalls`), the calls that
place replicas (reassignments, leader elections, log dirs) `cluster/admin_replicas.py`
(`ReplicaCalls`); `KafkaAdmin` extends both.
"""
from __future__ import annotations

import functools

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import kafka.errors as Errors
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import TopicPartition as KafkaTopicPartition

from kreassign.cluster.admin_configs import ConfigCalls
from kreassign.cluster.admin_replicas import ReplicaCalls
from kreassign.cluster.admin_results import (
    alter_ops,
    alter_result,
    api_error,
    config_entries,
    int_or_none,
    short,
    translate,
    unreachable,
)
from kreassign.cluster import admin_retry
from kreassign.cluster.admin_retry import KafkaLogTap, NoAnswer, ThrottleGate, should_retry, within
from kreassign.cluster.client_config import AdminTimeouts, ClientConfig, load_client_config
from kreassign.cluster.connect_errors import cannot_succeed, connect_failure
from kreassign.cluster.errors import ClusterError, GaveUp, InputError, UnknownTopicError
from kreassign.cluster.log_redaction import redact_client_logs
from kreassign.cluster.model import Broker, PartitionInfo, TopicPartition
from kreassign.cluster.port import (
    UNKNOWN_TOPIC_OR_PARTITION,
    UNREACHABLE,
    ApiError,
    ClusterInfo,
    ConfigEntry,
    ConfigOps,
)

T = TypeVar("T")
_log = logging.getLogger(__name__)

# The newest Kafka without DescribeCluster: a client pinned to it describes the cluster
# through Metadata, kafka-python's own fallback, which its public API offers no other way to reach.
_PRE_DESCRIBE_CLUSTER_API = (2, 7)
# Raised by kafka-python's _send_request_to_controller when NOT_CONTROLLER persists.
_CONTROLLER_MOVED = "Failed to find active controller id"
BROKER_WORKERS = 8
"""Brokers asked at once by a per-broker operation (DescribeLogDirs, DescribeConfigs and
IncrementalAlterConfigs of BROKER resources, AlterReplicaLogDirs): such an operation is bounded
by one broker's budget, not by the sum over the brokers."""
_CONNECTION_ERRORS = (Errors.KafkaConnectionError, Errors.NodeNotReadyError,
                      Errors.RequestTimedOutError, Errors.KafkaTimeoutError)


def _recorded(make: Callable[..., Any], into: list[Any]) -> Callable[..., Any]:
    """`make`, keeping every client it returns in `into` (to close them if the connect fails)."""
    def build(**configs: Any) -> Any:
        client = make(**configs)
        into.append(client)
        return client
    return build


class KafkaAdmin(ReplicaCalls, ConfigCalls):
    """The cluster port over a `kafka.KafkaAdminClient` (public methods only).

    Build one with `open_admin` or `KafkaAdmin.connect`. The constructor takes any object with
    KafkaAdminClient's methods, plus a clock and sleep so retries can be tested without waiting.
    """

    def __init__(
        self,
        client: Any,
        *,
        timeouts: AdminTimeouts | None = None,
        fallback_factory: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        waiting: Callable[[str], None] | None = None,
        broker_workers: int = BROKER_WORKERS,
    ) -> None:
        self._client = client
        self._waiting = waiting
        self._broker_workers = broker_workers
        self._unanswered: set[int] = set()
        """brokers that left a controller request unanswered: not picked to route them again"""
        self._timeouts = timeouts or AdminTimeouts()
        self._fallback_factory = fallback_factory
        self._fallback: Any = None
        self._describe_cluster_v0 = False
        self._controller_id: int | None = None
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._gate = ThrottleGate(clock)
        self._tap = KafkaLogTap(self._gate)
        self._tap.attach()
        self._closed = False

    @classmethod
    def connect(cls, config: ClientConfig, *, client_factory: Callable[..., Any] | None = None,
                **kwargs: Any) -> KafkaAdmin:
        """Connect to the cluster described by `config`.

        Raises:
            ClusterUnreachable: no bootstrap server answered within the connect timeout.
            ClusterError: authentication failed.
            InputError: kafka-python rejected a setting.
        """
        started: list[Any] = []
        first = client_factory
        if client_factory is None:
            from kafka import KafkaAdminClient

            client_factory = KafkaAdminClient
            first = functools.partial(KafkaAdminClient, kafka_client=_recorded(
                KafkaAdminClient.DEFAULT_CONFIG["kafka_client"], started))
        factory = client_factory
        redact_client_logs()
        gate = ThrottleGate(time.monotonic)
        tap = KafkaLogTap(gate, final=cannot_succeed)
        tap.attach()
        # Like Java's admin client, stop at the first refused login or rejected certificate
        # instead of retrying it until the connect timeout.
        limit = config.timeouts.connect_timeout_s + config.timeouts.request_timeout_s
        client = None
        try:
            client = within(lambda: first(**config.admin_kwargs()), limit, interrupt=tap.gave_up)
        except (Errors.KafkaTimeoutError, NoAnswer):
            raise connect_failure(config, tap.last_error) from None
        except Errors.KafkaConfigurationError as exc:
            raise InputError(f"kafka-python rejected the client settings: {exc}") from None
        except Errors.KafkaError as exc:
            raise translate(exc, "connect to the cluster") from None
        finally:
            tap.detach()
            if client is None:
                # KafkaAdminClient starts its I/O thread before it bootstraps and leaves it
                # running (retrying, forever) when the bootstrap fails: stop it, once the tap
                # that diagnoses the failure no longer listens
                for network in started:
                    network.close()

        def fallback() -> Any:
            return factory(**config.admin_kwargs(), api_version=_PRE_DESCRIBE_CLUSTER_API)

        return cls(client, timeouts=config.timeouts, fallback_factory=fallback, **kwargs)

    # ---- the retry loop ----------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], *, broker: int | None = None,
              per_broker: bool = False) -> T:
        """Run `fn` until it succeeds, fails for good, or the operation deadline passes.

        `broker` is the broker the request goes to, if known: its quota throttle is waited out
        first. With `per_broker` the budget is one request timeout plus the connect timeout, and
        connection errors end the attempts after `connect_timeout_s` (a stopped broker stays
        stopped, and the other brokers' results should not wait for it)."""
        t = self._timeouts
        start = self._clock()
        budget = min(t.api_timeout_s, t.request_timeout_s + t.connect_timeout_s) if per_broker else t.api_timeout_s
        deadline = start + budget
        first_connection_error: float | None = None
        last: Errors.KafkaError | None = None
        attempt = 0
        looked_up = False
        said = [start]

        def still_waiting() -> None:
            # at most every HEARTBEAT_S, whether the wait is one slow answer or many retries
            now = self._clock()
            if self._waiting is not None and now - said[0] >= 0.9 * admin_retry.HEARTBEAT_S:
                said[0] = now
                since = f"; last error: {short(last)}" if last else ""
                self._waiting(f"still waiting for the cluster to {what}: {now - start:.0f}s so far, giving up "
                              f"after {budget:g}s{since}")

        while True:
            wait = self._gate.remaining(broker)
            if wait > 0:
                if self._clock() + wait >= deadline:
                    throttled = f"throttles us (quota) for {wait:.1f}s more, beyond the {budget:g}s timeout"
                    raise GaveUp(f"Could not {what}: broker {broker} {throttled}.", f"it {throttled}")
                self._sleep(wait)
            still_waiting()
            try:
                return within(fn, deadline - self._clock(),
                              heartbeat=still_waiting if self._waiting is not None else None)
            except NoAnswer:
                who = f"broker {broker}" if per_broker else "the cluster"
                before = f" (before that: {short(last)})" if last else ""
                raise GaveUp(f"Could not {what}: no answer from {who} within {budget:g}s{before}. "
                              "Check that the brokers are running and reachable.",
                              f"no answer within {budget:g}s{before}") from last
            except RuntimeError as exc:
                if _CONTROLLER_MOVED not in str(exc):
                    raise
                error: Errors.KafkaError = Errors.NotControllerError(str(exc))
            except Errors.KafkaError as exc:
                error = exc
            last = error
            if isinstance(error, Errors.UnknownBrokerIdError) and not per_broker and not looked_up:
                # The broker kafka-python routes this request to (a KRaft cluster names a random
                # broker as "controller") left its cached metadata when it stopped; it may be back
                # since (found on Kafka 4.4.0 after a broker restart): read the metadata and the
                # controller again, once.
                looked_up = True
                if hasattr(self._client, "_controller_id"):
                    self._client._controller_id = None
                if self._refresh_metadata():
                    continue
            if not should_retry(error):
                raise translate(error, what) from error
            if not per_broker and isinstance(error, _CONNECTION_ERRORS) and hasattr(self._client, "_controller_id"):
                self._route_around(self._client._controller_id)
            now = self._clock()
            if per_broker and isinstance(error, _CONNECTION_ERRORS):
                first_connection_error = first_connection_error or now
                if now - first_connection_error >= t.connect_timeout_s:
                    reason = f"{short(error)} for {t.connect_timeout_s:g}s"
                    raise GaveUp(f"Could not {what}: broker {broker} did not answer: {reason}.",
                                  reason) from error
            delay = self._backoff(attempt)
            if now + delay >= deadline:
                raise GaveUp(
                    f"Could not {what} within {budget:g}s; the last error was "
                    f"{short(error)}. Check that the brokers are running and reachable.",
                    f"{short(error)}, still after {budget:g}s") from error
            _log.debug("%s: retrying in %.2fs after %s", what, delay, error)
            self._sleep(delay)
            attempt += 1

    def _route_around(self, failed: int | None) -> None:
        """Send controller requests through another broker after `failed` did not answer.

        kafka-python sends them to the broker the metadata names as controller: on KRaft a random
        live broker, which may be one that stopped or hangs (a SIGSTOPped JVM stays "live" until
        the controller fences it, 9 s later, so asking the metadata again may name it again). Any
        KRaft broker forwards them; on a ZooKeeper cluster a wrong pick answers NOT_CONTROLLER and
        kafka-python looks the controller up itself."""
        if failed is not None:
            self._unanswered.add(failed)
        cluster = getattr(getattr(self._client, "_manager", None), "cluster", None)
        known = sorted(int(b.node_id) for b in cluster.brokers()) if cluster is not None and hasattr(
            cluster, "brokers") else []
        others = [b for b in known if b not in self._unanswered]
        if not others:  # every broker failed once: start over, trusting the metadata again
            self._unanswered.clear()
        self._client._controller_id = self._rng.choice(others) if others else None

    def _backoff(self, attempt: int) -> float:
        """Kafka's ExponentialBackoff: base * 2^attempt, capped, with +/-20% jitter."""
        base = self._timeouts.retry_backoff_s * (2 ** attempt)
        return float(min(base, self._timeouts.retry_backoff_max_s) * self._rng.uniform(0.8, 1.2))

    def _per_broker(self, what: str, broker: int, fn: Callable[[], T]) -> T | ApiError:
        """`_call` for one broker; an unreachable broker becomes an ApiError value.

        A broker the client's cached metadata does not know (it was down when the metadata was
        last read, and kafka-python refreshes it only every 5 minutes) is looked up again first:
        a broker restarted since then answers (found on Kafka 4.4.0: a clear skipped a broker that
        had come back, and reported it as restored)."""
        for attempt in (0, 1):
            try:
                return self._call(what, fn, broker=broker, per_broker=True)
            except GaveUp as exc:
                return unreachable(broker, exc.reason)
            except ClusterError as exc:
                if not isinstance(exc.__cause__, Errors.UnknownBrokerIdError):
                    raise
                if attempt == 0 and self._refresh_metadata():
                    continue
                return ApiError(code=-1, name=UNREACHABLE, message=(
                    f"broker {broker} is not in the cluster metadata (stopped, fenced or wrong id)"))
        raise AssertionError("unreachable")  # pragma: no cover

    def _refresh_metadata(self) -> bool:
        """Read the cluster metadata again now (bounded by the request timeout); False when the
        client has no metadata of its own to refresh (a test double) or no answer came."""
        cluster = getattr(getattr(self._client, "_manager", None), "cluster", None)
        if cluster is None or not hasattr(cluster, "request_update"):
            return False
        future = cluster.request_update()
        deadline = self._clock() + self._timeouts.request_timeout_s
        while not future.is_done and self._clock() < deadline:
            self._sleep(0.02)
        return bool(future.is_done and future.succeeded())

    # ---- brokers and topics ----------------------------------------------------------------
    def describe_brokers(self) -> ClusterInfo:
        """Live brokers, controller and cluster id (DescribeCluster, or Metadata on old brokers)."""
        raw: dict[str, Any] | None = None
        if not self._describe_cluster_v0:
            try:
                raw = self._call("describe the cluster", self._client.describe_cluster)
            except KeyError:
                # kafka-python 3.0.12 pops 'endpoint_type', which DescribeCluster v0 lacks.
                self._describe_cluster_v0 = True
        if raw is None:
            raw = self._call("describe the cluster", lambda: self._fallback_client().describe_cluster())
        brokers = []
        fenced = []
        for b in raw.get("brokers", []):
            broker_id = int(b.get("broker_id", b.get("node_id")))
            if b.get("is_fenced"):
                fenced.append(broker_id)
                continue
            brokers.append(Broker(id=broker_id, rack=b.get("rack"), host=b.get("host"), port=b.get("port")))
        controller = int_or_none(raw.get("controller_id"))
        self._controller_id = controller
        ops = raw.get("authorized_operations")
        return ClusterInfo(brokers=tuple(sorted(brokers, key=lambda x: x.id)),
                           controller_id=controller, cluster_id=raw.get("cluster_id"),
                           fenced=tuple(sorted(fenced)),
                           authorized_operations=None if ops is None else frozenset(str(op) for op in ops))

    def _fallback_client(self) -> Any:
        if self._fallback is None:
            if self._fallback_factory is None:
                raise ClusterError("the broker only offers DescribeCluster v0 and no Metadata "
                                   "fallback client is configured")
            self._fallback = self._fallback_factory()
        return self._fallback

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        """Partitions of some topics or all, sorted. Raises UnknownTopicError for missing ones."""
        return self._partitions(topics, missing_ok=False)

    def _partitions(self, topics: Iterable[str] | None, *, missing_ok: bool) -> list[PartitionInfo]:
        names = None if topics is None else sorted(set(topics))
        if names == []:
            return []

        def fetch() -> list[dict[str, Any]]:
            result: list[dict[str, Any]] = self._client.describe_topics(names)
            for topic in result:
                error = Errors.for_code(topic.get("error_code", 0))
                if error.retriable and error is not Errors.UnknownTopicOrPartitionError:
                    raise error(f"topic {topic.get('name')}")
            return result

        raw = self._call("describe topics", fetch)
        unknown = [t["name"] for t in raw if t.get("error_code") == UNKNOWN_TOPIC_OR_PARTITION]
        if unknown and not missing_ok:
            raise UnknownTopicError(unknown)
        for topic in raw:
            if topic.get("error_code", 0) not in (0, UNKNOWN_TOPIC_OR_PARTITION):
                raise translate(Errors.for_code(topic["error_code"])(), f"describe topic {topic['name']}")
        out = [
            PartitionInfo(topic=t["name"], partition=int(p["partition_index"]),
                          replicas=tuple(int(r) for r in p["replica_nodes"]),
                          leader=int_or_none(p.get("leader_id")),
                          isr=tuple(int(r) for r in p.get("isr_nodes") or ()))
            for t in raw for p in t.get("partitions", [])
        ]
        return sorted(out, key=lambda p: (p.topic, p.partition))

    # ---- topics the tool owns (the canary) ------------------------------------------------------
    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]]) -> ApiError | None:
        """CreateTopics with an explicit replica assignment (partition -> replicas, first leads)."""
        spec = {name: {"assignments": {p: list(r) for p, r in sorted(assignment.items())}}}
        try:
            self._call(f"create topic {name}", lambda: self._client.create_topics(
                spec, timeout_ms=self._request_timeout_ms(), wait_for_metadata=True))
        except ClusterError as exc:
            cause = exc.__cause__
            return api_error(cause if isinstance(cause, Errors.KafkaError) else Errors.KafkaError(str(exc)))
        return None

    def delete_topic(self, name: str) -> ApiError | None:
        """DeleteTopics of one topic; an error value when the cluster refuses or cannot."""
        try:
            self._call(f"delete topic {name}", lambda: self._client.delete_topics(
                [name], timeout_ms=self._request_timeout_ms()))
        except ClusterError as exc:
            cause = exc.__cause__
            return api_error(cause if isinstance(cause, Errors.KafkaError) else Errors.KafkaError(str(exc)))
        return None

    # ---- KIP-714 client-metrics subscriptions -----------------------------------------------
    def list_client_metrics(self) -> list[str] | None:
        """Names of the CLIENT_METRICS resources (ListConfigResources); None when the cluster
        does not support listing them (before Kafka 3.7)."""
        try:
            raw = self._call("list client-metrics resources",
                             lambda: self._client.list_config_resources([ConfigResourceType.CLIENT_METRICS]))
        except ClusterError as exc:
            if isinstance(exc.__cause__, (Errors.UnsupportedVersionError, Errors.IncompatibleBrokerVersion)):
                return None
            raise
        return sorted(raw.get("client_metrics", []))

    def describe_client_metrics(self, names: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        """The configs of each named CLIENT_METRICS resource (empty for one that does not exist)."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        resources = [ConfigResource(ConfigResourceType.CLIENT_METRICS, n) for n in wanted]
        raw = self._call("describe client-metrics resources",
                         lambda: self._client.describe_configs(resources, config_filter="modified"))
        found = raw.get("client_metrics", {})
        return {n: config_entries(found.get(n, {})) for n in wanted}

    def alter_client_metrics(self, name: str, ops: ConfigOps, *, validate_only: bool = False) -> ApiError | None:
        """SET/DELETE keys of one CLIENT_METRICS resource; None means applied."""
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, alter_ops(ops))
        raw = self._call("alter a client-metrics resource", lambda: self._alter_configs([resource], validate_only))
        return alter_result(raw, "client_metrics", name)

    # ---- offsets -----------------------------------------------------------------------------
    def log_end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int] | None:
        """ListOffsets (latest) from each partition's leader; None when the cluster does not
        know the API (an old broker, or a sandbox without it)."""
        from kafka.admin import OffsetSpec

        return self._list_offsets(partitions, OffsetSpec.LATEST, "list log end offsets")

    def log_start_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int] | None:
        """ListOffsets (earliest) from each partition's leader; None as for `log_end_offsets`."""
        from kafka.admin import OffsetSpec

        return self._list_offsets(partitions, OffsetSpec.EARLIEST, "list log start offsets")

    def _list_offsets(self, partitions: Iterable[TopicPartition], spec: Any, what: str,
                      ) -> dict[TopicPartition, int] | None:
        wanted = {KafkaTopicPartition(p.topic, p.partition): spec for p in sorted(set(partitions))}
        if not wanted:
            return {}
        try:
            raw = self._call(what, lambda: self._client.list_partition_offsets(
                wanted, timeout_ms=self._request_timeout_ms()))
        except ClusterError as exc:
            if isinstance(exc.__cause__, (Errors.UnsupportedVersionError, Errors.IncompatibleBrokerVersion)):
                return None
            raise
        return {TopicPartition(tp.topic, tp.partition): int(v.offset) for tp, v in sorted(raw.items())}

    # ---- configs -----------------------------------------------------------------------------
    # ---- lifecycle ---------------------------------------------------------------------------
    def _request_timeout_ms(self) -> int:
        return int(self._timeouts.request_timeout_s * 1000)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._tap.detach()
        for client in (self._fallback, self._client):
            if client is not None:
                client.close()

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def open_admin(
    bootstrap_server: str | None,
    *,
    command_config: str | None = None,
    timeout_s: float | None = None,
    warn: Callable[[str], None] | None = None,
    waiting: Callable[[str], None] | None = None,
) -> Iterator[KafkaAdmin]:
    """Connect with `--bootstrap-server`, `--command-config` and an optional operation timeout;
    closes the client and removes temporary PEM files on exit. `waiting` hears what an operation
    still waits for, every HEARTBEAT_S while it waits.

    Raises:
        InputError: a bad --command-config.
        ClusterUnreachable: no broker answered.
    """
    config = load_client_config(command_config, bootstrap_server=bootstrap_server, timeout_s=timeout_s)
    for line in config.warnings:
        (warn or _log.warning)(line)
    try:
        with KafkaAdmin.connect(config, waiting=waiting) as admin:
            yield admin
    finally:
        config.cleanup()
