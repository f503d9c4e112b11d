"""The admin adapter (`cluster.admin.KafkaAdmin`) over TCP against both engines (`live`: the
emulator and real Kafka brokers): brokers, topics, log dirs and sizes, reassignments, throttle
configs, elections, stopped and hung brokers.

The adapter keeps real time: kafka-python's own request timeouts are real, so tests that wait for
a timeout use short ones. The last tests inject faults only the emulator can inject (dropped
requests, held responses, injected error codes, an old broker's API versions); each says so.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kreassign.cluster.admin import KafkaAdmin, open_admin
from kreassign.cluster.capture import snapshot_state
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.errors import ClusterError, ClusterUnreachable
from kreassign.cluster.model import Broker, ThrottleConfigs, TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    ConfigEntry,
    UnknownTopicError,
)

from live import HOLD_BYTES, HOLD_RATE, LOG_DIRS, stored_bytes

pytestmark = pytest.mark.e2e

E2E_TIMEOUTS = AdminTimeouts(request_timeout_s=5.0, api_timeout_s=10.0, connect_timeout_s=1.0)
SHORT_TIMEOUTS = AdminTimeouts(request_timeout_s=0.5, api_timeout_s=1.5, connect_timeout_s=0.5)
TOPIC_KEYS = [LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS]
RATE_KEYS = [LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE]


def connect(bootstrap: str, timeouts: AdminTimeouts = E2E_TIMEOUTS) -> KafkaAdmin:
    config = build_client_config({}, bootstrap_server=bootstrap)
    return KafkaAdmin.connect(dataclasses.replace(config, timeouts=timeouts))


@pytest.fixture
def adapter(live: Any) -> Iterator[KafkaAdmin]:
    admin = connect(live.bootstrap)
    yield admin
    admin.close()


def rack(broker: int) -> str:
    return f"rack-{(broker - 1) % 2 + 1}"


def hold(admin: KafkaAdmin, topic: str, brokers: list[int]) -> None:
    """Throttle every replica of `topic` at HOLD_RATE on `brokers`: a move of HOLD_BYTES stays in flight."""
    rates = dict.fromkeys(RATE_KEYS, str(HOLD_RATE))
    assert admin.incremental_alter_configs({b: rates for b in brokers},
                                           {topic: dict.fromkeys(TOPIC_KEYS, "*")}).ok


def test_e2e_describe_brokers_and_topics(live: Any, adapter: KafkaAdmin) -> None:
    info = adapter.describe_brokers()
    assert info.brokers == tuple(Broker(b, rack(b), "127.0.0.1", live.ports[b]) for b in live.brokers)
    assert info.cluster_id == live.cluster_id and info.fenced == ()
    assert info.controller_id in live.brokers  # KRaft brokers name one of themselves, not the controller
    topic = live.topic(assignment={0: [1, 2, 3], 1: [2, 3, 4], 2: [5, 1, 2]})
    parts = adapter.describe_topics([topic])
    assert [(p.partition, p.replicas, p.leader, p.isr) for p in parts] == [
        (0, (1, 2, 3), 1, (1, 2, 3)), (1, (2, 3, 4), 2, (2, 3, 4)), (2, (5, 1, 2), 5, (5, 1, 2))]
    assert parts == [p for p in adapter.describe_topics() if p.topic == topic]
    with pytest.raises(UnknownTopicError, match="Topic nope not found"):
        adapter.describe_topics([topic, "nope"])


def test_e2e_log_dir_sizes_and_snapshot(live: Any, adapter: KafkaAdmin) -> None:
    topic = live.topic(assignment={0: [1, 2, 3], 1: [2, 3, 4]})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    live.produce(topic, 0, 300_000)
    expected = stored_bytes(300_000)

    def replicated() -> Any:
        report = adapter.log_dir_sizes(partitions=[tp0, tp1])
        return report if all(report.size(tp0, b) == expected for b in (1, 2, 3)) else None

    report = live.wait_until(replicated, what="the followers to copy the records", timeout_s=60)
    assert report.unreachable == {}
    assert {r: d.size_bytes for r, d in report.replicas.items()} == {
        TopicPartitionReplica(topic, 0, 1): expected, TopicPartitionReplica(topic, 0, 2): expected,
        TopicPartitionReplica(topic, 0, 3): expected, TopicPartitionReplica(topic, 1, 2): 0,
        TopicPartitionReplica(topic, 1, 3): 0, TopicPartitionReplica(topic, 1, 4): 0}
    assert sorted(report.dirs) == live.brokers
    assert all(len(dirs) == LOG_DIRS and all(d.error is None for d in dirs) for dirs in report.dirs.values())
    for replica, where in report.replicas.items():
        assert where.log_dir in [d.path for d in report.dirs[replica.broker]] and where.future_dir is None
    some = adapter.log_dir_sizes([2], partitions=[tp0])
    assert some.size(tp0, 2) == expected and list(some.replicas) == [TopicPartitionReplica(topic, 0, 2)]

    state = snapshot_state(adapter, warn=pytest.fail)
    assert state.broker_ids == tuple(live.brokers)
    mine = {p.tp: p.size_bytes for p in state.iter_partitions() if p.topic == topic}
    assert mine == {tp0: expected, tp1: 0}
    assert state.reassignments == {} and state.throttles.is_empty()
    assert int(snapshot_state(adapter, with_sizes=False).size_bytes.sum()) == 0


def test_e2e_reassignment_lifecycle(live: Any, adapter: KafkaAdmin) -> None:
    topic = live.topic(assignment={0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 5]})
    tp = TopicPartition(topic, 0)
    live.produce(topic, 0, HOLD_BYTES)
    hold(adapter, topic, live.brokers)
    assert adapter.alter_reassignments({tp: [1, 2, 4]}) == {tp: None}
    moving = adapter.list_reassignments()
    assert list(moving) == [tp]
    assert (moving[tp].target, moving[tp].original, moving[tp].adding, moving[tp].removing) == (
        (1, 2, 4), (1, 2, 3), (4,), (3,))
    assert adapter.list_reassignments([TopicPartition(topic, 1)]) == {}

    bad = adapter.alter_reassignments({TopicPartition(topic, 1): [1, 99], TopicPartition(topic, 99): [1, 2],
                                       TopicPartition(topic, 2): [1, 1]})
    assert {tp.partition: (e.code, e.name) for tp, e in bad.items() if e is not None} == {
        1: (39, "INVALID_REPLICATION_ASSIGNMENT"), 99: (3, "UNKNOWN_TOPIC_OR_PARTITION"),
        2: (39, "INVALID_REPLICATION_ASSIGNMENT")}

    assert adapter.alter_reassignments({tp: None}) == {tp: None}
    # the controller ends the reassignment first; the broker answering Metadata learns of it a
    # moment later (a loaded real cluster still showed (1, 2, 4, 3) there)
    live.wait_until(lambda: not adapter.list_reassignments()
                    and adapter.describe_topics([topic])[0].replicas == (1, 2, 3), what="the cancellation",
                    timeout_s=30)
    again = adapter.alter_reassignments({tp: None})[tp]
    assert again is not None and again.name == "NO_REASSIGNMENT_IN_PROGRESS"

    assert adapter.incremental_alter_configs(topic_ops={topic: dict.fromkeys(TOPIC_KEYS)}).ok
    assert adapter.alter_reassignments({tp: [1, 2, 4]}) == {tp: None}
    live.finish_moves()
    assert adapter.describe_topics([topic])[0].replicas == (1, 2, 4)


def test_e2e_throttle_configs_round_trip(live: Any, adapter: KafkaAdmin) -> None:
    topic, other = live.topic(), live.topic()
    rates = {LEADER_THROTTLED_RATE: "10000000", FOLLOWER_THROTTLED_RATE: "10000000"}
    applied = adapter.incremental_alter_configs(
        {1: rates, 2: rates}, {topic: {LEADER_THROTTLED_REPLICAS: "0:1,0:2", FOLLOWER_THROTTLED_REPLICAS: "0:3"}})
    assert applied.ok, applied.failures()
    def described() -> Any:
        # each broker answers for its own configs, a moment after the controller accepted them
        read = adapter.describe_broker_configs([1, 2, 3], RATE_KEYS)
        return read if all(LEADER_THROTTLED_RATE in read.configs.get(b, {}) for b in (1, 2)) else None

    brokers = live.wait_until(described, what="the brokers' throttle rates", timeout_s=30)
    assert brokers.errors == {}
    assert brokers.configs[1][LEADER_THROTTLED_RATE] == ConfigEntry("10000000", "DYNAMIC_BROKER_CONFIG", False)
    assert brokers.configs[3] == {}  # absent until set

    def listed() -> Any:
        # the broker that answers DescribeConfigs may replay the controller's change a moment later
        read = adapter.describe_topic_configs([topic, other, "nope"], TOPIC_KEYS)
        entry = read.configs[topic].get(FOLLOWER_THROTTLED_REPLICAS)
        return read if entry is not None and entry.value else None

    topics = live.wait_until(listed, what="the topic's throttled-replica lists", timeout_s=30)
    assert topics.configs[topic][FOLLOWER_THROTTLED_REPLICAS].value == "0:3"
    assert topics.configs[other][LEADER_THROTTLED_REPLICAS].value in ("", None)
    assert topics.errors["nope"].code == 3
    throttles = snapshot_state(adapter, with_sizes=False).throttles
    assert throttles == ThrottleConfigs(
        broker={1: rates, 2: rates},
        topic={topic: {FOLLOWER_THROTTLED_REPLICAS: "0:3", LEADER_THROTTLED_REPLICAS: "0:1,0:2"}})

    bad = adapter.incremental_alter_configs({1: {LEADER_THROTTLED_RATE: "fast"}},
                                            {topic: {LEADER_THROTTLED_REPLICAS: "a:b"},
                                             "nope": {LEADER_THROTTLED_REPLICAS: "0:1"}})
    assert bad.brokers[1] is not None and bad.brokers[1].name == "INVALID_REQUEST"
    assert bad.topics[topic] is not None and bad.topics[topic].name == "INVALID_CONFIG"
    assert bad.topics["nope"] is not None and bad.topics["nope"].code == 3

    cleared = adapter.incremental_alter_configs(
        {1: dict.fromkeys(rates), 2: dict.fromkeys(rates)}, {topic: dict.fromkeys(TOPIC_KEYS)})
    assert cleared.ok
    assert snapshot_state(adapter, with_sizes=False).throttles.is_empty()


def test_e2e_elect_leaders_and_log_dirs(live: Any, adapter: KafkaAdmin) -> None:
    topic = live.topic(assignment={0: [1, 2, 3], 1: [4, 5, 1]})
    parts = adapter.describe_topics([topic])
    result = adapter.elect_leaders([p.tp for p in parts] + [TopicPartition(topic, 99)])
    assert {tp.partition: (e.code if e is not None else None) for tp, e in result.items()} == {0: None, 1: None, 99: 3}

    here = adapter.log_dir_sizes([1], partitions=[parts[0].tp]).replicas[TopicPartitionReplica(topic, 0, 1)].log_dir
    assert here is not None
    outcome = adapter.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): here,
                                              TopicPartitionReplica(topic, 0, 2): "/no/such/dir"})
    assert outcome[TopicPartitionReplica(topic, 0, 1)] is None
    failed = outcome[TopicPartitionReplica(topic, 0, 2)]
    assert failed is not None and failed.name == "LOG_DIR_NOT_FOUND"




def test_e2e_killed_broker_is_reported_not_hanging(live: Any, adapter: KafkaAdmin) -> None:
    """kill -9: the controller keeps the broker registered, a leader and in its ISRs until it has
    missed heartbeats for broker.session.timeout.ms (9 s), then fences it. Either way the
    adapter reports it and goes on with the other brokers."""
    topic = live.topic(assignment={0: [3, 1, 2], 1: [1, 2, 4]})
    adapter.describe_broker_configs([3])  # a connection to broker 3 exists before it dies
    live.stop_broker(3, kill=True)
    assert [b.id for b in adapter.describe_brokers().brokers] == live.brokers
    parts = adapter.describe_topics([topic])
    assert [(p.leader, p.isr) for p in parts] == [(3, (3, 1, 2)), (1, (1, 2, 4))]
    configs = adapter.describe_broker_configs([1, 3], [LEADER_THROTTLED_RATE])
    assert list(configs.configs) == [1] and configs.errors[3].unreachable

    info = live.wait_until(lambda: (found := adapter.describe_brokers()).fenced and found,
                           what="the controller to fence broker 3", timeout_s=60)
    assert ([b.id for b in info.brokers], info.fenced) == ([1, 2, 4, 5], (3,))
    parts = adapter.describe_topics([topic])
    assert [(p.leader, p.isr) for p in parts] == [(1, (1, 2)), (1, (1, 2, 4))]
    configs = adapter.describe_broker_configs([1, 3], [LEADER_THROTTLED_RATE])
    assert list(configs.configs) == [1] and configs.errors[3].unreachable
    assert "broker 3" in configs.errors[3].message
    assert list(adapter.log_dir_sizes([2, 3]).unreachable) == [3]
    applied = adapter.incremental_alter_configs({2: {LEADER_THROTTLED_RATE: "1"}, 3: {LEADER_THROTTLED_RATE: "1"}})
    assert applied.brokers[2] is None and applied.brokers[3] is not None and applied.brokers[3].unreachable
    moves = adapter.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 3): "/var/lib/kafka/data"})
    assert list(moves.values())[0] is not None and list(moves.values())[0].unreachable  # type: ignore[union-attr]
    warnings: list[str] = []
    state = snapshot_state(adapter, warn=warnings.append)
    assert state.broker_ids == (1, 2, 4, 5)
    assert {p.tp: p.replicas for p in state.iter_partitions() if p.topic == topic} == {
        TopicPartition(topic, 0): (3, 1, 2), TopicPartition(topic, 1): (1, 2, 4)}


def test_e2e_hung_broker_is_reported_within_its_budget(live: Any) -> None:
    """A broker that holds its connections and answers nothing (a SIGSTOPped JVM on real Kafka)."""
    admin = connect(live.bootstrap, SHORT_TIMEOUTS)
    try:
        live.pause_broker(4)
        result = admin.describe_broker_configs([4, 5], [LEADER_THROTTLED_RATE])
        assert list(result.configs) == [5]
        assert result.errors[4].unreachable
        assert result.errors[4].message.startswith("broker 4 did not answer: ")
        assert admin.log_dir_sizes([4, 5]).unreachable.keys() == {4}
    finally:
        live.resume_broker(4)
        admin.close()


# ---- emulator only: faults a real broker cannot be made to show on demand --------------------------

def test_e2e_describe_cluster_v0_falls_back_to_metadata(sandbox_factory: Callable[..., Any]) -> None:
    """Emulator only: a broker of Kafka 2.8-3.6 offers DescribeCluster v0 alone, and no release of
    the tested matrix (4.4, 3.9) is that old; the emulator advertises v0 alone on request."""
    sb = sandbox_factory(describe_cluster_v0_only=True)
    from kafka.admin import KafkaAdminClient

    raw = KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000)
    try:
        with pytest.raises(KeyError, match="endpoint_type"):  # the kafka-python 3.0.12 pitfall
            raw.describe_cluster()
    finally:
        raw.close()
    admin = connect(sb.bootstrap)
    try:
        info = admin.describe_brokers()
        assert [b.id for b in info.brokers] == [1, 2, 3, 4, 5, 6]
        # KRaft brokers name a random live broker as the controller, so only that is stable
        assert info.brokers[0].rack == "rack-1" and info.controller_id in sb.ports and info.cluster_id
        again = admin.describe_brokers()
        assert (again.brokers, again.cluster_id) == (info.brokers, info.cluster_id)
    finally:
        admin.close()


def test_e2e_broker_dropping_connections_is_reported_after_connect_timeout(sandbox: Any) -> None:
    """Emulator only: a broker that closes the connection on one API (fault injection)."""
    admin = connect(sandbox.bootstrap, SHORT_TIMEOUTS)
    try:
        sandbox.drop_requests("DescribeConfigs", broker=4, count=None)
        result = admin.describe_broker_configs([4, 5], [LEADER_THROTTLED_RATE])
        assert list(result.configs) == [5]
        assert result.errors[4].unreachable
        assert result.errors[4].message.startswith("broker 4 did not answer: ")
        sandbox.clear_faults()
        assert admin.describe_broker_configs([4]).errors == {}
    finally:
        admin.close()


def test_e2e_unreachable_bootstrap_fails_fast(sandbox: Any) -> None:
    """Emulator only: every broker of the cluster goes away at once (the shared real cluster
    stays up for the session; a port nothing listens on is tested on both engines in
    test_kafka_live_e2e)."""
    bootstrap = sandbox.bootstrap
    sandbox.stop()
    with pytest.raises(ClusterUnreachable) as err:
        with open_admin(bootstrap, timeout_s=0.5):
            pass
    assert str(err.value) == (f"Could not reach any broker at {bootstrap} within 0.5s: connection refused. "
                              "Check --bootstrap-server and that the brokers are running.")


def test_e2e_timeout_in_the_middle(sandbox: Any) -> None:
    """Emulator only: one API's responses held until released (fault injection)."""
    admin = connect(sandbox.bootstrap, SHORT_TIMEOUTS)
    try:
        assert admin.list_reassignments() == {}
        sandbox.delay_responses(None, api="ListPartitionReassignments")
        with pytest.raises(ClusterUnreachable) as err:
            admin.list_reassignments()
        assert str(err.value).startswith("Could not list partition reassignments: no answer from the "
                                         "cluster within 1.5s")
        sandbox.release_responses()
        assert admin.list_reassignments() == {}
        assert len(admin.describe_topics(["orders"])) == 12
    finally:
        admin.close()


def test_e2e_retries_in_the_middle(sandbox: Any) -> None:
    """Emulator only: a held response, a dropped request and injected error codes, one at a time."""
    admin = connect(sandbox.bootstrap, AdminTimeouts(request_timeout_s=0.5, api_timeout_s=5.0, connect_timeout_s=2.0))
    try:
        sandbox.delay_responses(None, api="ListPartitionReassignments", count=1)
        assert admin.list_reassignments() == {}  # the held request timed out and was retried
        sandbox.drop_requests("DescribeLogDirs", broker=2, count=1)
        assert admin.log_dir_sizes([2]).unreachable == {}
        sandbox.inject_error("ListPartitionReassignments", 41, count=3)  # NOT_CONTROLLER
        assert admin.list_reassignments() == {}
        sandbox.inject_error("AlterPartitionReassignments", 31, count=1)
        with pytest.raises(ClusterError, match="Not authorized to alter partition reassignments: "
                                               "CLUSTER_AUTHORIZATION_FAILED"):
            admin.alter_reassignments({TopicPartition("orders", 0): [1, 2, 3]})
    finally:
        admin.close()



def test_e2e_a_command_waiting_for_the_cluster_says_what_it_waits_for(
        sandbox: Any, kreassign: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Emulator only (held responses): `watch` against a controller that does not answer says what
    it waits for every HEARTBEAT_S (shortened here), then gives up within its --request-timeout
    with one line (issue 29: a run once went on silently for minutes)."""
    monkeypatch.setattr("kreassign.cluster.admin_retry.HEARTBEAT_S", 0.3)
    sandbox.delay_responses(None, api="ListPartitionReassignments")
    try:
        ran = kreassign.run("watch", "--bootstrap-server", sandbox.bootstrap, "--request-timeout", "2s")
    finally:
        sandbox.release_responses()
    lines = ran.stderr.splitlines()
    assert ran.exit_code == 5, ran.stderr
    waiting = [line for line in lines if line.startswith("Waiting: ")]
    assert waiting and all(re.fullmatch(r"Waiting: still waiting for the cluster to list partition reassignments: "
                                        r"\d+s so far, giving up after 2s(; last error: .+)?", line) for line in waiting)
    # no answer at all, or kafka-python's own request timeout seen first: one line either way
    last = lines[-1]
    assert last.startswith("Error: Could not list partition reassignments") and "within 2s" in last
    assert last.endswith("Check that the brokers are running and reachable.")
