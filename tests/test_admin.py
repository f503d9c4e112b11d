"""KafkaAdmin over a fake KafkaAdminClient: retries, per-broker isolation, error normalisation,
the DescribeCluster v0 fallback, throttle back-off and snapshot_state. No network, no sleeping:
the adapter gets a fake clock whose sleep only advances time."""
from __future__ import annotations

import logging
import random
import socket
import threading
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as Errors
    from kafka.admin import AlterConfigOp, ConfigResourceType
    from kafka.structs import TopicPartition as KTP
    from kafka.structs import TopicPartitionReplica as KTPR

from kreassign.cluster.admin import KafkaAdmin, api_error, open_admin
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.connect_errors import connect_failure
from kreassign.cluster.errors import ClusterError, ClusterUnreachable, ExitStatus, InputError
from kreassign.cluster.model import Broker, Reassignment, ThrottleConfigs, TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    LOG_DIR_THROTTLED_RATE,
    ApiError,
    ClusterInfo,
    ClusterPort,
    ConfigEntry,
    LogDir,
    ReplicaLogDir,
    UnknownTopicError,
)
from kreassign.cluster.capture import snapshot_state
from fake_cluster import ManualClock


class FakeClock(ManualClock):
    def __init__(self) -> None:
        super().__init__(1000.0)


def cfg(value: str | None, source: str, read_only: bool = False) -> dict[str, Any]:
    """A config entry as kafka-python 3.0.12's describe_configs returns it."""
    return {"value": value, "read_only": read_only, "config_source": source, "is_sensitive": False,
            "synonyms": [], "config_type": "STRING", "documentation": None}


class FakeAdminClient:
    """Answers like kafka-python 3.0.12's KafkaAdminClient (same signatures, same result shapes)."""

    def __init__(self) -> None:
        self.brokers = {1: "r1", 2: "r2", 3: None}
        self.fenced: set[int] = set()
        self.down: set[int] = set()
        self.topics: dict[str, list[tuple[list[int], int, list[int]]]] = {
            "b": [([2, 3], 2, [2, 3])],
            "a": [([1, 2], 1, [1, 2]), ([2, 3], -1, [])],
        }
        self.log_dirs: dict[int, list[dict[str, Any]]] = {}
        self.configs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.reassignments: dict[KTP, dict[str, list[int]]] = {}
        self.fail: dict[str, list[BaseException]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.closed = False
        self.alter_results: dict[str, dict[str, str]] = {}
        self.reassign_results: dict[KTP, Any] = {}
        self.election: Any = None

    def _enter(self, name: str, arg: Any = None, broker: int | None = None) -> None:
        self.calls.append((name, arg))
        queue = self.fail.get(name)
        if queue:
            raise queue.pop(0)
        if broker is not None and broker in self.down:
            raise Errors.KafkaConnectionError(f"Connection to node {broker} refused")

    def describe_cluster(self) -> dict[str, Any]:
        self._enter("describe_cluster")
        return {"cluster_id": "cid", "controller_id": 1, "authorized_operations": None,
                "brokers": [{"broker_id": b, "host": "127.0.0.1", "port": 9090 + b, "rack": r,
                             "is_fenced": b in self.fenced} for b, r in self.brokers.items()]}

    def describe_topics(self, topics: list[str] | None = None) -> list[dict[str, Any]]:
        self._enter("describe_topics", topics)
        names = sorted(self.topics) if topics is None else topics
        out = []
        for name in names:
            if name not in self.topics:
                out.append({"error_code": 3, "name": name, "topic_id": None, "is_internal": False,
                            "partitions": [], "topic_authorized_operations": None})
                continue
            out.append({"error_code": 0, "name": name, "topic_id": None, "is_internal": False,
                        "topic_authorized_operations": None, "partitions": [
                            {"error_code": 0, "partition_index": i, "leader_id": leader,
                             "leader_epoch": 0, "replica_nodes": replicas, "isr_nodes": isr,
                             "offline_replicas": []}
                            for i, (replicas, leader, isr) in reversed(list(enumerate(self.topics[name])))]})
        return out

    def describe_log_dirs(self, topic_partitions: Any = None, brokers: Any = None) -> list[dict[str, Any]]:
        assert isinstance(topic_partitions, dict) and brokers is not None and len(brokers) == 1
        self._enter("describe_log_dirs", (topic_partitions, tuple(brokers)), broker=brokers[0])
        return [{"broker": brokers[0], "log_dirs": self.log_dirs.get(brokers[0], [])}]

    def alter_replica_log_dirs(self, replica_assignments: dict[KTPR, str]) -> dict[KTPR, Any]:
        brokers = {r.broker_id for r in replica_assignments}
        assert len(brokers) == 1
        self._enter("alter_replica_log_dirs", dict(replica_assignments), broker=brokers.pop())
        return {r: (Errors.KafkaStorageError if d == "/bad" else Errors.NoError)
                for r, d in replica_assignments.items()}

    def list_partition_reassignments(self, topic_partitions: Any = None, timeout_ms: Any = None) -> Any:
        self._enter("list_partition_reassignments", (topic_partitions, timeout_ms))
        if topic_partitions is None:
            return dict(self.reassignments)
        return {tp: v for tp, v in self.reassignments.items() if tp in topic_partitions}

    def alter_partition_reassignments(self, reassignments: dict[KTP, Any], timeout_ms: Any = None) -> Any:
        self._enter("alter_partition_reassignments", (dict(reassignments), timeout_ms))
        for replicas in reassignments.values():
            if replicas is not None and not replicas:
                raise ValueError("kafka-python refuses empty replica lists")
        return {tp: self.reassign_results.get(tp) for tp in reassignments if tp.topic != "silent"}

    def elect_leaders(self, election_type: int, topic_partitions: Any = None, timeout_ms: Any = None,
                      raise_errors: bool = True) -> Any:
        self._enter("elect_leaders", (election_type, topic_partitions, timeout_ms, raise_errors))
        return self.election

    def describe_configs(self, config_resources: list[Any], include_synonyms: bool = False,
                         config_filter: str = "modified") -> dict[str, dict[str, Any]]:
        broker_names = {r.name for r in config_resources if r.resource_type is ConfigResourceType.BROKER}
        assert len(broker_names) <= 1, "BROKER resources must go to their own broker one at a time"
        broker = int(broker_names.pop()) if broker_names else None
        self._enter("describe_configs", (config_resources, config_filter), broker=broker)
        out: dict[str, dict[str, Any]] = {}
        for r in config_resources:
            kind = r.resource_type.name.lower()
            if kind == "topic" and r.name not in self.topics:
                out.setdefault(kind, {})[r.name] = {}
                continue
            entries = self.configs.get((kind, r.name), {})
            wanted = r.configs
            out.setdefault(kind, {})[r.name] = {k: dict(v) for k, v in entries.items()
                                                if wanted is None or k in wanted}
        return out

    def alter_configs(self, config_resources: list[Any], validate_only: bool = False,
                      raise_on_unknown: bool = True, incremental: Any = None) -> dict[str, dict[str, str]]:
        broker_names = {r.name for r in config_resources if r.resource_type is ConfigResourceType.BROKER}
        broker = int(next(iter(broker_names))) if broker_names else None
        self._enter("alter_configs", (config_resources, validate_only, raise_on_unknown, incremental),
                    broker=broker)
        out: dict[str, dict[str, str]] = {}
        for r in config_resources:
            kind = r.resource_type.name.lower()
            out.setdefault(kind, {})[r.name] = self.alter_results.get(kind, {}).get(r.name, "OK")
        return out

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client() -> FakeAdminClient:
    return FakeAdminClient()


TIMEOUTS = AdminTimeouts(request_timeout_s=5.0, api_timeout_s=20.0, retry_backoff_s=0.1,
                         retry_backoff_max_s=1.0, connect_timeout_s=3.0)


@pytest.fixture
def make_admin(client: FakeAdminClient, clock: FakeClock) -> Callable[..., KafkaAdmin]:
    made: list[KafkaAdmin] = []

    def make(**kw: Any) -> KafkaAdmin:
        kw.setdefault("timeouts", TIMEOUTS)
        kw.setdefault("broker_workers", 1)  # the fake clock's sleeps in call order (concurrency: its own tests)
        admin = KafkaAdmin(client, clock=clock, sleep=clock.sleep, rng=random.Random(7), **kw)
        made.append(admin)
        return admin

    yield make  # type: ignore[misc]
    for admin in made:
        admin.close()


def test_kafka_admin_satisfies_the_port(make_admin: Callable[..., KafkaAdmin]) -> None:
    port: ClusterPort = make_admin()
    assert port.describe_brokers().cluster_id == "cid"


# ---- brokers ---------------------------------------------------------------------------------

def test_describe_brokers(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.fenced = {3}
    info = make_admin().describe_brokers()
    assert info == ClusterInfo(
        brokers=(Broker(1, "r1", "127.0.0.1", 9091), Broker(2, "r2", "127.0.0.1", 9092)),
        controller_id=1, cluster_id="cid", fenced=(3,))


def test_describe_cluster_v0_keyerror_falls_back_to_metadata(
        make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.fail["describe_cluster"] = [KeyError("endpoint_type")]
    fallback = FakeAdminClient()
    fallback.brokers = {7: "r7"}
    made: list[FakeAdminClient] = []

    def factory() -> FakeAdminClient:
        made.append(fallback)
        return fallback

    admin = make_admin(fallback_factory=factory)
    assert [b.id for b in admin.describe_brokers().brokers] == [7]
    assert [b.id for b in admin.describe_brokers().brokers] == [7]
    assert len(made) == 1
    assert [c for c, _ in client.calls] == ["describe_cluster"]  # not asked again after the KeyError
    admin.close()
    assert fallback.closed and client.closed


def test_describe_cluster_keyerror_without_fallback(make_admin: Callable[..., KafkaAdmin],
                                                    client: FakeAdminClient) -> None:
    client.fail["describe_cluster"] = [KeyError("endpoint_type")]
    with pytest.raises(ClusterError, match="only offers DescribeCluster v0"):
        make_admin().describe_brokers()


# ---- topics ----------------------------------------------------------------------------------

def test_describe_topics_all_sorted(make_admin: Callable[..., KafkaAdmin]) -> None:
    parts = make_admin().describe_topics()
    assert [(p.topic, p.partition, p.replicas, p.leader, p.isr) for p in parts] == [
        ("a", 0, (1, 2), 1, (1, 2)), ("a", 1, (2, 3), None, ()), ("b", 0, (2, 3), 2, (2, 3))]


def test_describe_topics_unknown(make_admin: Callable[..., KafkaAdmin]) -> None:
    with pytest.raises(UnknownTopicError) as err:
        make_admin().describe_topics(["zz", "a", "quux"])
    assert err.value.topics == ("quux", "zz")
    assert str(err.value) == ("Topics quux, zz not found in the cluster. Check the spelling, "
                              "or list topics with kafka-topics.sh --list.")
    assert make_admin().describe_topics([]) == []


def test_describe_topics_retries_topic_level_retriable_error(
        make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient, clock: FakeClock) -> None:
    original = client.describe_topics
    answers = iter([5, 0])

    def flaky(topics: Any = None) -> list[dict[str, Any]]:
        out = original(topics)
        out[0]["error_code"] = next(answers)
        return out

    client.describe_topics = flaky  # type: ignore[method-assign]
    assert [p.partition for p in make_admin().describe_topics(["b"])] == [0]
    assert len(clock.sleeps) == 1


def test_describe_topics_authorization_error(make_admin: Callable[..., KafkaAdmin],
                                             client: FakeAdminClient) -> None:
    original = client.describe_topics

    def denied(topics: Any = None) -> list[dict[str, Any]]:
        out = original(topics)
        out[0]["error_code"] = 29
        return out

    client.describe_topics = denied  # type: ignore[method-assign]
    with pytest.raises(ClusterError, match="Not authorized to describe topic a: TOPIC_AUTHORIZATION_FAILED"):
        make_admin().describe_topics(["a"])


# ---- retries, deadlines and error translation --------------------------------------------------

def test_retries_with_exponential_backoff_until_success(
        make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient, clock: FakeClock) -> None:
    client.fail["describe_cluster"] = [Errors.RequestTimedOutError()] * 6
    assert make_admin().describe_brokers().cluster_id == "cid"
    bases = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert len(clock.sleeps) == 6
    for slept, base in zip(clock.sleeps, bases):
        assert 0.8 * base <= slept <= 1.2 * base


def test_gives_up_at_the_operation_deadline(make_admin: Callable[..., KafkaAdmin],
                                            client: FakeAdminClient, clock: FakeClock) -> None:
    client.fail["describe_cluster"] = [Errors.NodeNotReadyError("node 1")] * 1000
    start = clock.now
    with pytest.raises(ClusterUnreachable) as err:
        make_admin().describe_brokers()
    assert clock.now - start <= TIMEOUTS.api_timeout_s
    assert str(err.value) == ("Could not describe the cluster within 20s; the last error was "
                              "NodeNotReadyError (node 1). Check that the brokers are running and reachable.")
    assert err.value.exit_code == ExitStatus.CLUSTER_UNREACHABLE


def test_non_retriable_error_fails_at_once(make_admin: Callable[..., KafkaAdmin],
                                           client: FakeAdminClient, clock: FakeClock) -> None:
    client.fail["list_partition_reassignments"] = [Errors.ClusterAuthorizationFailedError(
        "Request 'ListPartitionReassignmentsRequest(...)' failed with response '...'.")]
    with pytest.raises(ClusterError) as err:
        make_admin().list_reassignments()
    assert str(err.value).startswith("Not authorized to list partition reassignments: "
                                     "CLUSTER_AUTHORIZATION_FAILED. The principal in --command-config")
    assert clock.sleeps == []


def test_sasl_failure_message(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.fail["describe_cluster"] = [Errors.SaslAuthenticationFailedError("Invalid username or password")]
    with pytest.raises(ClusterError, match=r"Authentication failed while trying to describe the cluster: "
                                           r"SASL_AUTHENTICATION_FAILED \(Invalid username or password\)\. "
                                           r"Check sasl.mechanism"):
        make_admin().describe_brokers()


def test_unknown_topic_error_is_not_retried(make_admin: Callable[..., KafkaAdmin],
                                            client: FakeAdminClient, clock: FakeClock) -> None:
    client.fail["list_partition_reassignments"] = [Errors.UnknownTopicOrPartitionError("t")]
    with pytest.raises(ClusterError, match="unknown topic or partition"):
        make_admin().list_reassignments()
    assert clock.sleeps == []


def test_controller_moved_runtime_error_is_retried(make_admin: Callable[..., KafkaAdmin],
                                                   client: FakeAdminClient, clock: FakeClock) -> None:
    client.fail["list_partition_reassignments"] = [RuntimeError("Failed to find active controller id!")]
    assert make_admin().list_reassignments() == {}
    assert len(clock.sleeps) == 1
    client.fail["list_partition_reassignments"] = [RuntimeError("something else")]
    with pytest.raises(RuntimeError, match="something else"):
        make_admin().list_reassignments()


def test_brokers_are_asked_at_once(client: FakeAdminClient) -> None:
    """A per-broker operation waits for its slowest broker, not for the sum of them: every broker's
    request is out before any is answered (a barrier of three would time out one at a time)."""
    barrier = threading.Barrier(3, timeout=30)
    configs, log_dirs = client.describe_configs, client.describe_log_dirs

    def together(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            barrier.wait()
            return real(*args, **kwargs)
        return call

    client.describe_configs = together(configs)  # type: ignore[method-assign]
    client.describe_log_dirs = together(log_dirs)  # type: ignore[method-assign]
    client.brokers = {1: None, 2: None, 3: None}
    admin = KafkaAdmin(client, timeouts=TIMEOUTS)
    try:
        assert sorted(admin.describe_broker_configs([3, 1, 2]).configs) == [1, 2, 3]
        barrier.reset()
        assert admin.log_dir_sizes([1, 2, 3]).unreachable == {}
        barrier.reset()
        assert admin.incremental_alter_configs({b: {"x": "1"} for b in (1, 2, 3)}).brokers == {1: None, 2: None,
                                                                                                 3: None}
    finally:
        admin.close()


def test_an_operation_that_waits_says_so(client: FakeAdminClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer that takes long is reported every HEARTBEAT_S while it is awaited, with what is
    awaited and when kreassign gives up."""
    monkeypatch.setattr("kreassign.cluster.admin_retry.HEARTBEAT_S", 0.02)
    release = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        return {}

    client.list_partition_reassignments = slow  # type: ignore[method-assign,assignment]
    said: list[str] = []

    def heard(line: str) -> None:
        said.append(line)
        if len(said) == 2:
            release.set()

    admin = KafkaAdmin(client, timeouts=AdminTimeouts(api_timeout_s=600.0), waiting=heard)
    try:
        assert admin.list_reassignments() == {}
    finally:
        release.set()
        admin.close()
    assert said == ["still waiting for the cluster to list partition reassignments: 0s so far, giving up after 600s"] * 2


def test_a_stopped_controller_is_looked_up_again(make_admin: Callable[..., KafkaAdmin],
                                                 client: FakeAdminClient) -> None:
    """kafka-python keeps sending controller requests to the broker it chose (on KRaft a random
    live one) even after that broker stopped; a connection error makes the next attempt ask again."""
    client._controller_id = 2  # type: ignore[attr-defined]
    client.fail["list_partition_reassignments"] = [Errors.KafkaConnectionError("Connection to node 2 refused")]
    assert make_admin().list_reassignments() == {}
    assert client._controller_id is None  # type: ignore[attr-defined]  # no metadata here: kafka-python asks


def test_controller_requests_go_around_brokers_that_did_not_answer(make_admin: Callable[..., KafkaAdmin],
                                                                   client: FakeAdminClient) -> None:
    """A hung broker (SIGSTOP) stays in the metadata until it is fenced, so the metadata may name it
    as the KRaft "controller" again: the next attempts go through brokers that have not failed."""
    brokers = [SimpleNamespace(node_id=b) for b in (1, 2, 3)]
    client._manager = SimpleNamespace(cluster=SimpleNamespace(brokers=lambda: brokers))  # type: ignore[attr-defined]
    client._controller_id = 2  # type: ignore[attr-defined]
    routed: list[int] = []

    def through_controller(topic_partitions: Any = None, timeout_ms: Any = None) -> Any:
        routed.append(client._controller_id)  # type: ignore[attr-defined]
        if client._controller_id in (2, 3):  # type: ignore[attr-defined]
            raise Errors.RequestTimedOutError(f"node {client._controller_id}")  # type: ignore[attr-defined]
        return {}

    client.list_partition_reassignments = through_controller  # type: ignore[method-assign,assignment]
    assert make_admin().list_reassignments() == {}
    assert routed[0] == 2 and routed[-1] == 1 and routed.count(2) == 1 and routed.count(3) <= 1


class FakeGroups:
    """kafka-python 3.0.12's group-offset calls with its coordinator cache, which it never drops:
    the cached coordinator answers NOT_COORDINATOR (or is down) once the group moved."""

    def __init__(self, client: FakeAdminClient) -> None:
        self.coordinators: dict[tuple[int, str], int] = {}
        self.coordinator = 1
        self.offsets: dict[str, Any] = {}
        self.asked: list[int] = []
        client._manager = SimpleNamespace(cluster=SimpleNamespace(_coordinators=self.coordinators))  # type: ignore[attr-defined]
        client.list_group_offsets = self.list_group_offsets  # type: ignore[attr-defined]
        client.alter_group_offsets = self.alter_group_offsets  # type: ignore[attr-defined]

    def _route(self, group: str) -> int:
        node = self.coordinators.setdefault((0, group), self.coordinator)
        self.asked.append(node)
        return node

    def list_group_offsets(self, specs: dict[str, Any]) -> dict[str, Any]:
        for group in specs:
            if self._route(group) != self.coordinator:
                raise Errors.NotCoordinatorError(group)
        return {g: {tp: self.offsets[g] for tp in tps} for g, tps in specs.items() if g in self.offsets}

    def alter_group_offsets(self, group: str, offsets: dict[Any, Any]) -> dict[Any, Any]:
        if self._route(group) != self.coordinator:
            return {tp: Errors.NotCoordinatorError for tp in offsets}
        self.offsets[group] = next(iter(offsets.values()))
        return {tp: Errors.NoError for tp in offsets}


def test_markers_follow_a_coordinator_that_moved(make_admin: Callable[..., KafkaAdmin],
                                                 client: FakeAdminClient) -> None:
    """Found on Kafka 4.4.0: after a broker restart the lock's release kept asking the broker that
    coordinated the group before, and the lock stayed behind until its lease ran out."""
    groups = FakeGroups(client)
    admin = make_admin()
    assert admin.write_markers({"kreassign.execution.lock": "held"}) is None
    groups.coordinator = 3  # broker 1 stopped; broker 3 leads the offsets partition now
    assert admin.read_markers(["kreassign.execution.lock"]) == {"kreassign.execution.lock": "held"}
    groups.coordinator = 2
    assert admin.write_markers({"kreassign.execution.lock": None}) is None
    assert admin.read_markers(["kreassign.execution.lock"]) == {}
    assert groups.asked == [1, 1, 3, 3, 2, 2]

@pytest.mark.parametrize("error, expected", [
    (Errors.InvalidReplicationAssignmentError, ApiError(39, "INVALID_REPLICATION_ASSIGNMENT",
                                                        "Replication assignment is invalid.")),
    (Errors.NotControllerError(), ApiError(41, "NOT_CONTROLLER",
                                           "This is not the correct controller for this cluster.", True)),
    (Errors.KafkaConnectionError("refused"), ApiError(-1, "KafkaConnectionError", "refused", True)),
])
def test_api_error(error: Any, expected: ApiError) -> None:
    assert api_error(error) == expected


# ---- per-broker operations -----------------------------------------------------------------

def test_an_attempt_that_never_returns_is_abandoned_at_the_deadline(client: FakeAdminClient) -> None:
    release = threading.Event()
    original = client.describe_configs

    def hang(*args: Any, **kwargs: Any) -> Any:
        if args[0][0].name == "2":
            release.wait(10)
        return original(*args, **kwargs)

    client.describe_configs = hang  # type: ignore[method-assign]
    tiny = AdminTimeouts(request_timeout_s=0.05, api_timeout_s=1.0, connect_timeout_s=0.05)
    admin = KafkaAdmin(client, timeouts=tiny)
    try:
        result = admin.describe_broker_configs([1, 2])
        assert list(result.configs) == [1]
        assert result.errors[2] == ApiError(-1, "BROKER_UNREACHABLE",
                                            "broker 2 did not answer: no answer within 0.1s")
        with pytest.raises(ClusterUnreachable, match="Could not describe the cluster: no answer from "
                                                     "the cluster within 1s. Check that the brokers"):
            client.describe_cluster = lambda: release.wait(10)  # type: ignore[method-assign,assignment,return-value]
            admin.describe_brokers()
    finally:
        release.set()
        admin.close()


def test_down_broker_is_reported_not_raised(make_admin: Callable[..., KafkaAdmin],
                                            client: FakeAdminClient, clock: FakeClock) -> None:
    client.down = {2}
    client.configs[("broker", "1")] = {LEADER_THROTTLED_RATE: cfg("100", "DYNAMIC_BROKER_CONFIG", True)}
    start = clock.now
    result = make_admin().describe_broker_configs([3, 1, 2], [LEADER_THROTTLED_RATE])
    assert result.configs == {1: {LEADER_THROTTLED_RATE: ConfigEntry("100", "DYNAMIC_BROKER_CONFIG", True)},
                              3: {}}
    error = result.errors[2]
    assert error.unreachable and error.code == -1
    assert error.message == ("broker 2 did not answer: KafkaConnectionError "
                             "(Connection to node 2 refused) for 3s")
    # Gave up on broker 2 after the connect timeout, not the 20s operation timeout.
    assert clock.now - start < TIMEOUTS.connect_timeout_s + TIMEOUTS.retry_backoff_max_s * 1.2


def test_unknown_broker_id_is_unreachable_at_once(make_admin: Callable[..., KafkaAdmin],
                                                  client: FakeAdminClient, clock: FakeClock) -> None:
    client.fail["describe_configs"] = [Errors.UnknownBrokerIdError(9)]
    result = make_admin().describe_broker_configs([9])
    assert result.errors[9].unreachable
    assert "not in the cluster metadata" in result.errors[9].message
    assert clock.sleeps == []


def test_log_dir_sizes_merges_current_and_future(make_admin: Callable[..., KafkaAdmin],
                                                  client: FakeAdminClient) -> None:
    def part(i: int, size: int, lag: int = 0, future: bool = False) -> dict[str, Any]:
        return {"partition_index": i, "partition_size": size, "offset_lag": lag, "is_future_key": future}

    client.log_dirs[1] = [
        {"error_code": 0, "log_dir": "/d2", "total_bytes": 100, "usable_bytes": 60,
         "topics": [{"name": "a", "partitions": [part(0, 40, 3, future=True)]}]},
        {"error_code": 0, "log_dir": "/d1", "total_bytes": 100, "usable_bytes": 50,
         "topics": [{"name": "a", "partitions": [part(0, 50)]}]},
        {"error_code": 56, "log_dir": "/d3", "total_bytes": -1, "usable_bytes": -1, "topics": []},
    ]
    client.log_dirs[2] = [{"error_code": 0, "log_dir": "/d", "total_bytes": -1, "usable_bytes": -1,
                           "topics": [{"name": "a", "partitions": [part(0, 50), part(1, 7)]},
                                      {"name": "b", "partitions": [part(0, 9)]}]}]
    client.down = {3}
    report = make_admin().log_dir_sizes()
    a0 = TopicPartitionReplica("a", 0, 1)
    assert report.replicas[a0] == ReplicaLogDir("/d1", 50, 0, "/d2", 40, 3)
    assert report.sizes() == {a0: 50, TopicPartitionReplica("a", 0, 2): 50,
                              TopicPartitionReplica("a", 1, 2): 7, TopicPartitionReplica("b", 0, 2): 9}
    assert report.size(TopicPartition("a", 1), 2) == 7 and report.size(TopicPartition("a", 1), 1) is None
    assert report.dirs[1][0] == LogDir("/d1", None, 100, 50)
    assert report.dirs[1][2].error is not None and report.dirs[1][2].error.name == "KAFKA_STORAGE_ERROR"
    assert report.dirs[2] == (LogDir("/d", None, None, None),)
    assert list(report.unreachable) == [3]
    asked = {a[1][0]: a[0] for c, a in client.calls if c == "describe_log_dirs"}
    assert asked == {1: {"a": [0]}, 2: {"a": [0, 1], "b": [0]}, 3: {"a": [1], "b": [0]}}


def test_log_dir_sizes_for_some_partitions_and_brokers(make_admin: Callable[..., KafkaAdmin],
                                                       client: FakeAdminClient) -> None:
    report = make_admin().log_dir_sizes([1, 2], partitions=[TopicPartition("b", 0), TopicPartition("gone", 0)])
    assert report.replicas == {} and report.unreachable == {}
    assert client.calls == [("describe_topics", ["b", "gone"]),
                            ("describe_log_dirs", ({}, (1,))), ("describe_log_dirs", ({"b": [0]}, (2,)))]


def test_alter_replica_log_dirs_per_broker(make_admin: Callable[..., KafkaAdmin],
                                           client: FakeAdminClient) -> None:
    client.down = {3}
    moves = {TopicPartitionReplica("a", 0, 1): "/d2", TopicPartitionReplica("a", 0, 2): "/bad",
             TopicPartitionReplica("b", 0, 3): "/d2"}
    result = make_admin().alter_replica_log_dirs(moves)
    assert result[TopicPartitionReplica("a", 0, 1)] is None
    assert result[TopicPartitionReplica("a", 0, 2)] == api_error(Errors.KafkaStorageError)
    unreachable = result[TopicPartitionReplica("b", 0, 3)]
    assert unreachable is not None and unreachable.unreachable
    sent = [a for c, a in client.calls if c == "alter_replica_log_dirs"]
    assert sent[0] == {KTPR("a", 0, 1): "/d2"}


# ---- reassignments and elections --------------------------------------------------------------

def test_list_reassignments(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.reassignments = {KTP("a", 0): {"replicas": [3, 1, 2], "adding_replicas": [3],
                                          "removing_replicas": [2]}}
    admin = make_admin()
    assert admin.list_reassignments() == {TopicPartition("a", 0): Reassignment((3, 1, 2), (3,), (2,))}
    assert admin.list_reassignments([TopicPartition("b", 0)]) == {}
    assert admin.list_reassignments([]) == {}
    assert client.calls[-1] == ("list_partition_reassignments", ([KTP("b", 0)], 5000))


def test_alter_reassignments(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.reassign_results = {KTP("a", 1): Errors.InvalidReplicationAssignmentError,
                               KTP("b", 0): Errors.NoReassignmentInProgressError}
    result = make_admin().alter_reassignments({
        TopicPartition("a", 0): [3, 1], TopicPartition("a", 1): (9,), TopicPartition("b", 0): None,
        TopicPartition("a", 2): [], TopicPartition("silent", 0): [1]})
    assert result[TopicPartition("a", 0)] is None
    assert result[TopicPartition("a", 1)] == api_error(Errors.InvalidReplicationAssignmentError)
    assert result[TopicPartition("b", 0)] is not None and result[TopicPartition("b", 0)].code == 85  # type: ignore[union-attr]
    assert result[TopicPartition("a", 2)] == ApiError(
        39, "INVALID_REPLICATION_ASSIGNMENT", "The manual partition assignment includes an empty replica list.")
    assert result[TopicPartition("silent", 0)] == ApiError(
        -1, "UNKNOWN_SERVER_ERROR", "the controller did not report on this partition")
    sent, timeout_ms = next(a for c, a in client.calls if c == "alter_partition_reassignments")
    assert sent == {KTP("a", 0): [3, 1], KTP("a", 1): [9], KTP("b", 0): None, KTP("silent", 0): [1]}
    assert timeout_ms == 5000


def election(*results: tuple[str, int, int, str | None], throttle_ms: int = 0, code: int = 0) -> Any:
    topics: dict[str, list[Any]] = {}
    for topic, pid, err, msg in results:
        topics.setdefault(topic, []).append(SimpleNamespace(partition_id=pid, error_code=err, error_message=msg))
    return SimpleNamespace(throttle_time_ms=throttle_ms, error_code=code, replica_election_results=[
        SimpleNamespace(topic=t, partition_result=ps) for t, ps in topics.items()])


def test_elect_leaders(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.election = election(("a", 0, 0, None), ("a", 1, 84, "not needed"),
                               ("b", 0, 80, "Failed to elect leader for partition b-0"))
    result = make_admin().elect_leaders([TopicPartition("b", 0), TopicPartition("a", 1), TopicPartition("a", 0)])
    assert result == {TopicPartition("a", 0): None, TopicPartition("a", 1): None,
                      TopicPartition("b", 0): ApiError(80, "PREFERRED_LEADER_NOT_AVAILABLE",
                                                       "Failed to elect leader for partition b-0", True)}
    assert client.calls[-1] == ("elect_leaders", (0, {"a": [0, 1], "b": [0]}, 5000, False))
    make_admin().elect_leaders(None, preferred=False)
    assert client.calls[-1] == ("elect_leaders", (1, None, 5000, False))


def test_elect_leaders_top_level_error(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.election = election(code=31)
    with pytest.raises(ClusterError, match="Not authorized to elect leaders: CLUSTER_AUTHORIZATION_FAILED"):
        make_admin().elect_leaders()


# ---- throttle back-off (KIP-13 / KIP-219) ------------------------------------------------------

def test_throttle_time_in_response_delays_next_request_to_that_broker(
        make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient, clock: FakeClock) -> None:
    client.election = election(("a", 0, 0, None), throttle_ms=1500)
    admin = make_admin()
    admin.describe_brokers()  # learns controller 1
    admin.elect_leaders([TopicPartition("a", 0)])
    assert clock.sleeps == []
    admin.list_reassignments()
    assert clock.sleeps == [pytest.approx(1.5)]


def test_throttle_logged_by_kafka_python_delays_that_broker_only(
        make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient, clock: FakeClock) -> None:
    admin = make_admin()
    connection = SimpleNamespace(node_id=2)
    logger = logging.getLogger("kafka.net.connection")
    previous, logger.propagate = logger.propagate, False  # keep the record off the test output
    try:
        logger.warning("%s: %s throttled by broker (%d ms)", connection, "DescribeConfigsResponse", 700)
    finally:
        logger.propagate = previous
    admin.describe_broker_configs([1])
    assert clock.sleeps == []
    admin.describe_broker_configs([2])
    assert clock.sleeps == [pytest.approx(0.7)]
    admin.describe_broker_configs([2])
    assert len(clock.sleeps) == 1
    admin.close()
    assert not any(isinstance(f, type(admin._tap)) for f in logger.filters)  # noqa: SLF001


def test_throttle_longer_than_deadline_is_unreachable(
        make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient, clock: FakeClock) -> None:
    client.election = election(throttle_ms=60_000)
    admin = make_admin()
    admin.describe_brokers()
    admin.elect_leaders([TopicPartition("a", 0)])
    with pytest.raises(ClusterUnreachable, match=r"broker 1 throttles us \(quota\) for 60.0s more, beyond the 20s timeout"):
        admin.list_reassignments()
    assert clock.sleeps == []


# ---- configs ---------------------------------------------------------------------------------

def test_describe_topic_configs_flags_unknown_topics(make_admin: Callable[..., KafkaAdmin],
                                                     client: FakeAdminClient) -> None:
    client.configs[("topic", "a")] = {
        LEADER_THROTTLED_REPLICAS: cfg("0:1,0:2", "DYNAMIC_TOPIC_CONFIG"),
        FOLLOWER_THROTTLED_REPLICAS: cfg("", "DEFAULT_CONFIG"),
        "retention.ms": cfg("1000", "DYNAMIC_TOPIC_CONFIG")}
    result = make_admin().describe_topic_configs(["nope", "a", "b"],
                                                 [LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS])
    assert result.configs == {
        "a": {FOLLOWER_THROTTLED_REPLICAS: ConfigEntry("", "DEFAULT_CONFIG"),
              LEADER_THROTTLED_REPLICAS: ConfigEntry("0:1,0:2", "DYNAMIC_TOPIC_CONFIG")},
        "b": {}}
    assert result.errors == {"nope": ApiError(3, "UNKNOWN_TOPIC_OR_PARTITION", "Topic nope not found.", True)}
    resources, config_filter = next(a for c, a in client.calls if c == "describe_configs")
    assert config_filter == "all" and [r.name for r in resources] == ["a", "b", "nope"]
    assert make_admin().describe_topic_configs([]).configs == {}


def test_config_refusals_name_the_operation_and_resource(make_admin: Callable[..., KafkaAdmin],
                                                         client: FakeAdminClient) -> None:
    client.alter_results = {
        "broker": {"1": "[Error 31] ClusterAuthorizationFailedError: Cluster authorization failed."},
        "topic": {"t": "[Error 29] TopicAuthorizationFailedError: Topic authorization failed."}}
    result = make_admin().incremental_alter_configs({1: {LEADER_THROTTLED_RATE: "1"}},
                                                    {"t": {LEADER_THROTTLED_REPLICAS: "*"}})
    assert [f"{what}: {error}" for what, error in result.failures()] == [
        "broker 1: CLUSTER_AUTHORIZATION_FAILED: not authorized to ALTER_CONFIGS on the CLUSTER (broker 1's configs)",
        "topic t: TOPIC_AUTHORIZATION_FAILED: not authorized to ALTER_CONFIGS on TOPIC t"]


def test_incremental_alter_configs(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    client.alter_results = {
        "broker": {"2": "[Error 42] InvalidRequestError: Invalid value -5 for configuration "
                        "leader.replication.throttled.rate"},
        "topic": {"gone": "[Error 3] UnknownTopicOrPartitionError: None", "odd": "[Error 10042] Whatever: x"}}
    client.down = {3}
    result = make_admin().incremental_alter_configs(
        {1: {LEADER_THROTTLED_RATE: "1000", FOLLOWER_THROTTLED_RATE: None},
         2: {LEADER_THROTTLED_RATE: "-5"}, 3: {LEADER_THROTTLED_RATE: "1"}},
        {"a": {LEADER_THROTTLED_REPLICAS: "0:1"}, "gone": {LEADER_THROTTLED_REPLICAS: None},
         "odd": {LEADER_THROTTLED_REPLICAS: ""}})
    assert result.brokers[1] is None
    assert result.brokers[2] == ApiError(42, "INVALID_REQUEST",
                                         "Invalid value -5 for configuration leader.replication.throttled.rate")
    assert result.brokers[3] is not None and result.brokers[3].unreachable
    assert result.topics["a"] is None
    assert result.topics["gone"] == api_error(Errors.UnknownTopicOrPartitionError)
    assert result.topics["odd"] == ApiError(10042, "UNKNOWN", "x")
    assert not result.ok
    assert [w for w, _ in result.failures()] == ["broker 2", "broker 3", "topic gone", "topic odd"]
    calls = [a for c, a in client.calls if c == "alter_configs"]
    first_resources, validate_only, raise_on_unknown, incremental = calls[0]
    assert (validate_only, raise_on_unknown, incremental) == (False, False, True)
    assert [(r.resource_type, r.name) for r in first_resources] == [(ConfigResourceType.BROKER, "1")]
    assert first_resources[0].configs == {FOLLOWER_THROTTLED_RATE: (AlterConfigOp.DELETE, None),
                                          LEADER_THROTTLED_RATE: (AlterConfigOp.SET, "1000")}
    topic_resources = calls[-1][0]
    assert [r.name for r in topic_resources] == ["a", "gone", "odd"]
    assert topic_resources[1].configs == {LEADER_THROTTLED_REPLICAS: (AlterConfigOp.DELETE, None)}


def test_incremental_alter_configs_nothing_to_do(make_admin: Callable[..., KafkaAdmin],
                                                 client: FakeAdminClient) -> None:
    result = make_admin().incremental_alter_configs()
    assert result.ok and result.failures() == [] and client.calls == []


# ---- snapshot_state through the adapter --------------------------------------------------------

def test_snapshot_state(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    def dirs(*parts: tuple[str, int, int]) -> list[dict[str, Any]]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p, size in parts:
            topics.setdefault(topic, []).append(
                {"partition_index": p, "partition_size": size, "offset_lag": 0, "is_future_key": False})
        return [{"error_code": 0, "log_dir": "/d", "total_bytes": -1, "usable_bytes": -1,
                 "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]

    client.log_dirs = {1: dirs(("a", 0, 100)), 2: dirs(("a", 0, 90), ("a", 1, 30), ("b", 0, 70))}
    client.down = {3}  # leads nothing; holds replicas of a-1 and b-0
    client.reassignments = {KTP("b", 0): {"replicas": [2, 3, 1], "adding_replicas": [1],
                                          "removing_replicas": [3]}}
    client.configs[("broker", "1")] = {LEADER_THROTTLED_RATE: cfg("5000", "DYNAMIC_BROKER_CONFIG", True),
                                       FOLLOWER_THROTTLED_RATE: cfg("5000", "DYNAMIC_BROKER_CONFIG", True)}
    client.configs[("broker", "2")] = {LOG_DIR_THROTTLED_RATE: cfg("9", "STATIC_BROKER_CONFIG", True),
                                       LEADER_THROTTLED_RATE: cfg("7", "DYNAMIC_DEFAULT_BROKER_CONFIG", True)}
    client.configs[("topic", "b")] = {LEADER_THROTTLED_REPLICAS: cfg("0:2,0:3", "DYNAMIC_TOPIC_CONFIG"),
                                      FOLLOWER_THROTTLED_REPLICAS: cfg("", "DEFAULT_CONFIG")}
    warnings: list[str] = []
    state = snapshot_state(make_admin(), warn=warnings.append,
                           now=lambda: datetime(2025, 3, 1, 12, 0, 5, tzinfo=timezone.utc))
    assert state.cluster_id == "cid" and state.captured_at == "2025-03-01T12:00:05Z"
    assert state.broker_ids == (1, 2, 3)
    assert [(p.topic, p.partition, p.size_bytes) for p in state.iter_partitions()] == [
        ("a", 0, 100), ("a", 1, 30), ("b", 0, 70)]
    assert state.reassignments == {TopicPartition("b", 0): Reassignment((2, 3, 1), (1,), (3,))}
    assert state.throttles == ThrottleConfigs(
        broker={1: {FOLLOWER_THROTTLED_RATE: "5000", LEADER_THROTTLED_RATE: "5000"}},
        topic={"b": {LEADER_THROTTLED_REPLICAS: "0:2,0:3"}})
    assert len(warnings) == 2
    assert warnings[0].startswith("broker 3 did not answer DescribeLogDirs")
    assert warnings[1].startswith("broker 3: could not read its throttle configs: broker 3 did not answer")


def test_snapshot_state_without_sizes(make_admin: Callable[..., KafkaAdmin], client: FakeAdminClient) -> None:
    state = snapshot_state(make_admin(), with_sizes=False, warn=lambda m: None)
    assert int(state.size_bytes.sum()) == 0
    assert "describe_log_dirs" not in [c for c, _ in client.calls]


# ---- connecting ----------------------------------------------------------------------------

def config(**kw: Any) -> Any:
    return build_client_config({}, bootstrap_server="127.0.0.1:9092", **kw)


def test_connect_timeout_message() -> None:
    def factory(**kwargs: Any) -> Any:
        assert kwargs["bootstrap_timeout_ms"] == 10000 and kwargs["client_id"] == "reassign-partitions-tool"
        raise Errors.KafkaTimeoutError("Unable to bootstrap from ['127.0.0.1:9092']")

    with pytest.raises(ClusterUnreachable) as err:
        KafkaAdmin.connect(config(), client_factory=factory)
    assert str(err.value) == ("Could not reach any broker at 127.0.0.1:9092 within 10s. "
                              "Check --bootstrap-server and that the brokers are running. Nothing answered at "
                              "all: a firewall dropping packets, or brokers too slow to answer; a longer "
                              "--request-timeout waits longer.")


def test_connect_timeout_message_names_tls_and_last_error() -> None:
    ssl_config = build_client_config({"security.protocol": "SSL"}, bootstrap_server="h:9093")

    def factory(**kwargs: Any) -> Any:
        logger = logging.getLogger("kafka.net.manager")
        previous, logger.propagate = logger.propagate, False
        try:
            logger.error("Connection failed: %s", Errors.KafkaConnectionError("Handshake failed: bad cert"))
        finally:
            logger.propagate = previous
        raise Errors.KafkaTimeoutError("Unable to bootstrap")

    with pytest.raises(ClusterUnreachable) as err:
        KafkaAdmin.connect(ssl_config, client_factory=factory)
    assert str(err.value) == (
        "Could not reach any broker at h:9093 within 10s: the TLS handshake failed (KafkaConnectionError: "
        "Handshake failed: bad cert). Check the brokers' certificates against ssl.truststore.* / "
        "ssl.ca.location and ssl.endpoint.identification.algorithm in --command-config.")


@pytest.mark.parametrize("error, expected", [
    (None, "within 10s. Check --bootstrap-server and that the brokers are running. Nothing answered at all"),
    (ConnectionRefusedError(111, "Connection refused"), "within 10s: connection refused."),
    (Errors.KafkaConnectionError("111 ECONNREFUSED"), "within 10s: connection refused."),
    (Errors.SaslAuthenticationFailedError("bad password"), "SASL authentication failed at 127.0.0.1:9092"),
    (Errors.KafkaConnectionError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
     "TLS certificate of 127.0.0.1:9092 rejected: certificate verify failed."),
    (Errors.KafkaConnectionError("socket disconnected"), "Last error: KafkaConnectionError: socket disconnected"),
])
def test_bootstrap_failures_are_told_apart(error: BaseException | None, expected: str) -> None:
    assert expected in str(connect_failure(config(), error, probe=lambda *_, **__: None))


@pytest.mark.parametrize("error, kind, text", [
    (Errors.SaslAuthenticationFailedError("bad password"), ClusterError, "Authentication failed"),
    (Errors.KafkaConfigurationError("Unrecognized configs"), InputError, "kafka-python rejected"),
])
def test_connect_errors(error: Exception, kind: type[Exception], text: str) -> None:
    def factory(**kwargs: Any) -> Any:
        raise error

    with pytest.raises(kind, match=text):
        KafkaAdmin.connect(config(), client_factory=factory)


def test_connect_builds_a_pinned_fallback_client(clock: FakeClock) -> None:
    seen: list[dict[str, Any]] = []
    primary = FakeAdminClient()
    primary.fail["describe_cluster"] = [KeyError("endpoint_type")]

    def factory(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return primary if len(seen) == 1 else FakeAdminClient()

    admin = KafkaAdmin.connect(config(), client_factory=factory, clock=clock, sleep=clock.sleep)
    assert admin.describe_brokers().cluster_id == "cid"
    assert "api_version" not in seen[0] and seen[1]["api_version"] == (2, 7)
    admin.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_open_admin_unreachable_bootstrap_fails_fast() -> None:
    port = closed_port()
    with pytest.raises(ClusterUnreachable, match=rf"Could not reach any broker at 127.0.0.1:{port} within 0.3s"):
        with open_admin(f"127.0.0.1:{port}", timeout_s=0.3):
            pass


def test_open_admin_reports_config_warnings_and_cleans_up(tmp_path: Any) -> None:
    props = tmp_path / "admin.properties"
    props.write_text("acks=all\nssl.truststore.certificates=x\n")
    warnings: list[str] = []
    with pytest.raises(ClusterUnreachable):
        with open_admin(f"127.0.0.1:{closed_port()}", command_config=str(props), timeout_s=0.2,
                        warn=warnings.append):
            pass
    assert warnings == [
        f"{props}: ssl.* settings are ignored because security.protocol is PLAINTEXT: ssl.truststore.certificates",
        f"{props}: kreassign does not use these settings: acks"]
