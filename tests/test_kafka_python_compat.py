"""kafka-python 3.0.12, the client kreassign is built on, against every Kafka release of the
matrix (issue 24, item 6): every admin call `cluster/admin.py` makes, through `KafkaAdmin` as the
tool makes it, and the producer and consumer of the canary and of `sandbox load`.

What differs between the releases and is pinned here:
* DescribeCluster: both releases serve v1+ (3.9 up to v1, 4.x v2 with fenced brokers), so
  kafka-python's KeyError('endpoint_type') of v0-only brokers (2.8-3.6) never happens and the tool
  never takes its Metadata fallback; that fallback (a client pinned to Kafka 2.7's versions) still
  talks to both releases.
* The throttle rates are read-only in DescribeConfigs on 3.9 and not on 4.x; the tool changes
  them with IncrementalAlterConfigs either way (`raise_on_unknown=False`: they are absent until set).
* ListConfigResources is v0 on 3.9 (ListClientMetricsResources), v1 on 4.x: kafka-python picks
  the version and the tool lists client-metrics subscriptions on both.
* AlterPartitionReassignments v1 (allowReplicationFactorChange) exists on 4.x only.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from kreassign.cluster.admin import KafkaAdmin, open_admin
from kreassign.cluster.canary import run_canary
from kreassign.cluster.client_config import load_client_config
from kreassign.cluster.model import TopicPartition, TopicPartitionReplica
from kreassign.execute.lock import LOCK_KEY, STOP_KEY
from kreassign.sandbox.load import LoadGenerator, TopicLoad

from conftest_kafka import reset_after
from live import KafkaLive

pytestmark = pytest.mark.e2e

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_LIST, FOLLOWER_LIST = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


@pytest.fixture
def kafka(kafka_matrix: Any) -> Iterator[KafkaLive]:
    yield from reset_after(kafka_matrix)


@pytest.fixture
def admin(kafka: KafkaLive) -> Iterator[KafkaAdmin]:
    with open_admin(kafka.bootstrap, timeout_s=60.0) as port:
        yield port


def release(kafka: KafkaLive) -> tuple[int, int]:
    major, minor, _ = kafka.cluster.dist.version.split(".")
    return int(major), int(minor)


def eventually(check: Any, what: str, timeout_s: float = 120.0) -> Any:
    """The first truthy `check()` (real Kafka applies a change on each broker a moment after the
    controller committed it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.2)


def test_describe_cluster_needs_no_fallback(kafka: KafkaLive, admin: KafkaAdmin) -> None:
    raw = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, request_timeout_ms=30000)
    try:
        described = raw.describe_cluster()  # DescribeCluster v1+: no KeyError('endpoint_type')
    finally:
        raw.close()
    assert sorted(b["broker_id"] for b in described["brokers"]) == kafka.brokers
    info = admin.describe_brokers()
    assert not admin._describe_cluster_v0  # the tool's own flag: the Metadata fallback was not needed
    assert [(b.id, b.rack) for b in info.brokers] == [(b, f"rack-{(b - 1) % 2 + 1}") for b in kafka.brokers]
    assert info.controller_id in kafka.brokers and info.fenced == ()
    # forced onto its fallback (a client pinned to Kafka 2.7's API versions, reading Metadata),
    # the tool still describes the cluster: no version the fallback sends was removed by KIP-896
    admin._describe_cluster_v0 = True
    fallback = admin.describe_brokers()
    assert (fallback.brokers, fallback.cluster_id) == (info.brokers, info.cluster_id)
    assert fallback.controller_id in kafka.brokers


def test_topics_reassignments_and_elections(kafka: KafkaLive, admin: KafkaAdmin) -> None:
    name = f"compat-{uuid.uuid4().hex[:8]}"
    assert admin.create_topic(name, {0: [1, 2, 3], 1: [2, 3, 4]}) is None
    kafka.created.append(name)
    again = admin.create_topic(name, {0: [1, 2, 3]})
    assert again is not None and again.name == "TOPIC_ALREADY_EXISTS"
    parts = eventually(lambda: [p for p in admin.describe_topics([name]) if p.leader is not None], "leaders")
    assert [(p.partition, p.replicas) for p in parts] == [(0, (1, 2, 3)), (1, (2, 3, 4))]

    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    result = admin.alter_reassignments({tp0: [4, 1, 2], tp1: None})
    assert result[tp0] is None
    assert result[tp1] is not None and result[tp1].name == "NO_REASSIGNMENT_IN_PROGRESS"
    eventually(lambda: not admin.list_reassignments([tp0]), "the move of an empty partition completes")
    moved = eventually(lambda: [p for p in admin.describe_topics([name]) if p.partition == 0 and p.replicas ==
                                (4, 1, 2) and set(p.isr) == {1, 2, 4}], "metadata shows the move")
    assert moved[0].leader in (1, 2, 4)
    # preferred leader 4 (KRaft keeps the leader while it stays a replica, unless asked)
    assert admin.elect_leaders([tp0, tp1]) == {tp0: None, tp1: None}  # ELECTION_NOT_NEEDED is success
    eventually(lambda: admin.describe_topics([name])[0].leader == 4, "the preferred leader leads")
    unknown = admin.alter_reassignments({TopicPartition("no-such-topic", 0): [1, 2, 3]})
    assert [e.name for e in unknown.values() if e is not None] == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert admin.delete_topic(name) is None
    kafka.created.remove(name)


def test_configs_round_trip(kafka: KafkaLive, admin: KafkaAdmin) -> None:
    name = kafka.topic(1, 3)
    rates = {LEADER: "5000000", FOLLOWER: "6000000"}
    applied = admin.incremental_alter_configs({1: rates, 2: rates}, {name: {LEADER_LIST: "0:1", FOLLOWER_LIST: "*"}})
    assert applied.ok, applied.failures()
    shown = eventually(lambda: (c := admin.describe_broker_configs([1, 2, 3], [LEADER, FOLLOWER])).configs[2]
                       and c, "broker 2 applied its rates")
    read_only = release(kafka) < (4, 0)  # 3.9 calls the rates read-only, 4.x does not
    assert {k: (e.value, e.source, e.read_only) for k, e in shown.configs[1].items()} == {
        LEADER: ("5000000", "DYNAMIC_BROKER_CONFIG", read_only),
        FOLLOWER: ("6000000", "DYNAMIC_BROKER_CONFIG", read_only)}
    assert shown.configs[3] == {} and shown.errors == {}
    topics = eventually(lambda: (c := admin.describe_topic_configs([name, "no-such-topic"], [LEADER_LIST,
                                                                                            FOLLOWER_LIST]))
                        .configs[name][FOLLOWER_LIST].value == "*" and c, "the topic lists")
    assert topics.configs[name][LEADER_LIST].value == "0:1" and topics.errors["no-such-topic"].code == 3
    bad = admin.incremental_alter_configs({1: {LEADER: "-1"}}, {name: {LEADER_LIST: "x"}})
    assert (bad.brokers[1].name, bad.topics[name].name) == ("INVALID_REQUEST", "INVALID_CONFIG")  # type: ignore[union-attr]
    cleared = admin.incremental_alter_configs({1: {LEADER: None, FOLLOWER: None}, 2: {LEADER: None, FOLLOWER: None}},
                                              {name: {LEADER_LIST: None, FOLLOWER_LIST: None}})
    assert cleared.ok
    eventually(lambda: not any(admin.describe_broker_configs([1, 2], [LEADER, FOLLOWER]).configs.values()),
               "the rates are gone")


def test_log_dirs_and_moves_between_them(kafka: KafkaLive, admin: KafkaAdmin) -> None:
    name = kafka.topic(1, 3)
    kafka.produce(name, 0, 256 * 1024)
    report = admin.log_dir_sizes(kafka.brokers, partitions=[TopicPartition(name, 0)])
    assert report.unreachable == {} and all(len(dirs) == 3 for dirs in report.dirs.values())
    leader = admin.describe_topics([name])[0].replicas[0]
    here = report.replicas[TopicPartitionReplica(name, 0, leader)]
    assert here.size_bytes >= 256 * 1024 and here.log_dir is not None
    there = next(d.path for d in report.dirs[leader] if d.path != here.log_dir)
    assert admin.alter_replica_log_dirs({TopicPartitionReplica(name, 0, leader): there}) == {
        TopicPartitionReplica(name, 0, leader): None}
    eventually(lambda: admin.log_dir_sizes([leader], partitions=[TopicPartition(name, 0)]).replicas[
        TopicPartitionReplica(name, 0, leader)].log_dir == there, "the replica moved to the other dir")


def test_lock_markers_offsets_and_client_metrics(kafka: KafkaLive, admin: KafkaAdmin) -> None:
    assert admin.write_markers({LOCK_KEY: "owner-1", STOP_KEY: None}) is None
    assert admin.read_markers([LOCK_KEY, STOP_KEY]) == {LOCK_KEY: "owner-1"}
    assert admin.write_markers({LOCK_KEY: None}) is None
    assert admin.read_markers([LOCK_KEY]) == {}

    name = kafka.topic(1, 2)
    kafka.produce(name, 0, 3 * 64 * 1024)
    # ListOffsets' latest offset is the high watermark: acks=1 records count once the follower has them
    eventually(lambda: admin.log_end_offsets([TopicPartition(name, 0)]) == {TopicPartition(name, 0): 3},
               "the high watermark reaches the 3 records")

    subscription = f"compat-{uuid.uuid4().hex[:6]}"
    assert admin.list_client_metrics() == []
    assert admin.alter_client_metrics(subscription, {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"}) \
        is None
    try:
        assert eventually(lambda: admin.list_client_metrics() == [subscription], "the subscription is listed")
        described = admin.describe_client_metrics([subscription])[subscription]
        assert (described["metrics"].value, described["interval.ms"].value) == ("org.apache.kafka.producer.", "60000")
    finally:
        assert admin.alter_client_metrics(subscription, {"metrics": None, "interval.ms": None}) is None
    eventually(lambda: admin.list_client_metrics() == [], "the subscription is gone")


def test_canary_and_load_clients(kafka: KafkaLive, admin: KafkaAdmin) -> None:
    config = load_client_config(None, bootstrap_server=kafka.bootstrap, timeout_s=60.0)
    report = run_canary(admin, config, topic=None, rounds=2, interval_s=0.1)
    assert sorted(report.brokers) == kafka.brokers
    assert all(b.requests == 2 and b.timeouts == 0 for b in report.brokers.values()), report

    name = kafka.topic(2, 2)
    generator = LoadGenerator(kafka.bootstrap, [TopicLoad(name, 20_000.0)], group=f"compat-{uuid.uuid4().hex[:6]}")
    stop = threading.Event()
    totals = {"acked": 0, "failed": 0, "consumed": 0}
    for sample in generator.run(duration=120.0, interval=1.0, stop=stop):
        for key in totals:
            totals[key] += getattr(sample, key)
        if totals["consumed"] > 0:  # the group joined and reads what the producer writes
            stop.set()
    assert totals["acked"] > 0 and totals["failed"] == 0 and totals["consumed"] > 0, totals
