"""Consumer groups and KIP-13 client quotas on the sandbox, over TCP with real clients
(confluent-kafka / librdkafka and kafka-python).

The sandbox runs on a scaled clock here: group rebalances (group.initial.rebalance.delay.ms),
session timeouts and quota windows are sandbox time, which runs `SPEED` times faster than wall
time. Assertions are on what the clients receive and on sandbox time, never on wall time.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import KREASSIGN

from kreassign.cluster.kafka_json import format_reassignment
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox import codes
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.groups import coordinator_for
from kreassign.sandbox.rawclient import roundtrip
from kreassign.sandbox.topics import parse_topic_spec
from kreassign.sandbox.wire import APIS

pytestmark = pytest.mark.e2e
SPEED = 10.0
WALL_LIMIT = 30.0  # seconds a client loop may take before the test fails (never reached when green)
# Clients time their heartbeats in wall time, the sandbox their sessions in sandbox time: at 10x a
# 30 s session lasts 3 s of wall time, so heartbeat well inside it.
KP_GROUP = {"session_timeout_ms": 30_000, "heartbeat_interval_ms": 300}

Record = tuple[int, int, bytes]  # partition, offset, value


def _start(factory: Callable[..., SandboxCluster], topics: list[str], **kw: Any) -> SandboxCluster:
    return factory(brokers=kw.pop("brokers", 6), racks=3, topics=[parse_topic_spec(t) for t in topics],
                   clock=ScaledClock(kw.pop("speed", SPEED)), **kw)


def _produce_confluent(bootstrap: str, topic: str, values: list[bytes], **conf: Any) -> list[Record]:
    from confluent_kafka import Producer

    delivered: list[Record] = []

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **conf})
    for i, value in enumerate(values):
        producer.produce(topic, value, key=str(i % 11).encode(), on_delivery=report)
        producer.poll(0)
    assert producer.flush(WALL_LIMIT) == 0
    return delivered


def _produce_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> list[Record]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    futures = [producer.send(topic, value, key=str(i % 11).encode()) for i, value in enumerate(values)]
    producer.flush(WALL_LIMIT)
    producer.close()
    return [(meta.partition, meta.offset, value)
            for value, meta in ((v, f.get(timeout=WALL_LIMIT)) for v, f in zip(values, futures))]


def _consume_confluent(bootstrap: str, topic: str, group: str, count: int, **conf: Any) -> list[Record]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "heartbeat.interval.ms": 500, **conf})
    consumer.subscribe([topic])
    got: list[Record] = []
    deadline = time.monotonic() + WALL_LIMIT
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.value()))
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


def _consume_kafka_python(bootstrap: str, topic: str, group: str, count: int) -> list[Record]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=int(WALL_LIMIT * 1000), **KP_GROUP)
    got: list[Record] = []
    for msg in consumer:
        got.append((msg.partition, msg.offset, msg.value))
        if len(got) >= count:
            break
    consumer.commit()
    consumer.close()
    return got


def _assert_same_log(produced: list[Record], consumed: list[Record]) -> None:
    """Every produced record consumed once, each partition in offset order with the same values."""
    def by_partition(records: list[Record]) -> dict[int, list[tuple[int, bytes]]]:
        out: dict[int, list[tuple[int, bytes]]] = {}
        for p, o, v in records:
            out.setdefault(p, []).append((o, v))
        return out

    want = {p: sorted(rs) for p, rs in by_partition(produced).items()}
    got = by_partition(consumed)
    assert got == want  # consumed in offset order, nothing lost, nothing twice
    assert len({v for _, _, v in consumed}) == len(produced)


def test_confluent_subscribe_consumes_commits_and_offsets_survive_a_restart(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    state = tmp_path / "state"
    sb = _start(sandbox_factory, ["events:4:3:1MB:0"], state_dir=state)
    produced = _produce_confluent(sb.bootstrap, "events", [f"v{i}".encode() for i in range(200)])
    consumed = _consume_confluent(sb.bootstrap, "events", "g-restart", 200)
    _assert_same_log(produced, consumed)
    ends = {p: max(o for q, o, _ in produced if q == p) + 1 for p in range(4)}
    sb.stop()
    again = _start(sandbox_factory, [], state_dir=state)
    consumer = Consumer({"bootstrap.servers": again.bootstrap, "group.id": "g-restart"})
    committed = consumer.committed([CTP("events", p) for p in range(4)], timeout=10)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == ends


def test_kafka_python_group_consumer(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    sb = _start(sandbox_factory, ["events:3:3:1MB:0"], brokers=3)
    produced = _produce_confluent(sb.bootstrap, "events", [f"k{i}".encode() for i in range(150)])
    consumed = _consume_kafka_python(sb.bootstrap, "events", "g-kp", 150)
    _assert_same_log(produced, consumed)
    check = KafkaConsumer(bootstrap_servers=sb.bootstrap, group_id="g-kp", enable_auto_commit=False)
    assert {p: check.committed(KTP("events", p)) for p in range(3)} == {
        p: max(o for q, o, _ in produced if q == p) + 1 for p in range(3)}
    check.close()


def test_two_members_share_the_partitions(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    from confluent_kafka import Consumer

    sb = _start(sandbox_factory, ["shared:6:3:1MB:0"])
    conf = {"bootstrap.servers": sb.bootstrap, "group.id": "g-two", "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range", "heartbeat.interval.ms": 500}
    members = [Consumer(conf), Consumer(conf)]
    for c in members:
        c.subscribe(["shared"])
    deadline = time.monotonic() + WALL_LIMIT
    assigned: list[set[int]] = [set(), set()]
    while time.monotonic() < deadline and sorted(len(a) for a in assigned) != [3, 3]:
        for i, c in enumerate(members):
            c.poll(0.1)
            assigned[i] = {tp.partition for tp in c.assignment()}
    for c in members:
        c.close()
    assert sorted(assigned, key=min) == [{0, 1, 2}, {3, 4, 5}]  # range: first member 0-2, second 3-5


def test_the_group_moves_on_when_its_coordinator_broker_stops(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """The next broker takes over the group (its state is Kafka's replicated __consumer_offsets): the
    consumer finds it after NOT_COORDINATOR and resumes from its committed offsets."""
    from confluent_kafka import Consumer

    sb = _start(sandbox_factory, ["events:3:3:1MB:0"], brokers=4)
    group = "g-failover"
    first = _produce_confluent(sb.bootstrap, "events", [f"f{i}".encode() for i in range(120)])
    consumer = Consumer({"bootstrap.servers": sb.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "heartbeat.interval.ms": 500})
    consumer.subscribe(["events"])
    got: list[Record] = []
    deadline = time.monotonic() + WALL_LIMIT
    while len(got) < len(first) and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.value()))
    consumer.commit(asynchronous=False)
    old = coordinator_for(group, [1, 2, 3, 4])
    sb.stop_broker(old)
    second = _produce_confluent(sb.bootstrap, "events", [f"s{i}".encode() for i in range(120)])
    deadline = time.monotonic() + WALL_LIMIT
    while len(got) < len(first) + len(second) and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.value()))
    consumer.commit(asynchronous=False)
    consumer.close()
    _assert_same_log(first + second, got)
    with sb.lock:
        committed = {p: c.offset for (_, p), c in sb.clients.groups.groups[group].offsets.items()}
    assert committed == {p: max(o for q, o, _ in first + second if q == p) + 1 for p in range(3)}


def test_admin_client_lists_and_describes_groups(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    from confluent_kafka import Consumer, ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    sb = _start(sandbox_factory, ["t:4:3:1MB:0"], brokers=3)
    consumer = Consumer({"bootstrap.servers": sb.bootstrap, "group.id": "g-admin", "client.id": "member-1"})
    consumer.subscribe(["t"])
    deadline = time.monotonic() + WALL_LIMIT
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    admin = AdminClient({"bootstrap.servers": sb.bootstrap})
    listed = admin.list_consumer_groups().result(WALL_LIMIT)
    assert [(g.group_id, g.state, g.is_simple_consumer_group) for g in listed.valid] == [
        ("g-admin", ConsumerGroupState.STABLE, False)]
    described = {k: f.result(WALL_LIMIT) for k, f in admin.describe_consumer_groups(["g-admin", "none"]).items()}
    group = described["g-admin"]
    assert (group.state, group.partition_assignor, group.coordinator.id) == (
        ConsumerGroupState.STABLE, "range", coordinator_for("g-admin", [1, 2, 3]))
    assert [(m.client_id, m.host, sorted(tp.partition for tp in m.assignment.topic_partitions))
            for m in group.members] == [("member-1", "/127.0.0.1", [0, 1, 2, 3])]
    assert (described["none"].state, described["none"].members) == (ConsumerGroupState.DEAD, [])
    consumer.close()


def test_a_silent_member_is_dropped_after_its_session_timeout_in_sandbox_time(
        sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """A raw-protocol member joins, syncs and then never heartbeats; a librdkafka consumer that joins
    next waits in the rebalance until the silent member's 6 s session (sandbox time) runs out."""
    import struct

    from confluent_kafka import Consumer

    sb = _start(sandbox_factory, ["t:2:1:1MB:0"], brokers=2, speed=4.0)
    group = "g-silent"
    coordinator = coordinator_for(group, [1, 2])
    assert coordinator is not None
    port = sb.ports[coordinator]
    JoinReq, SyncReq, HbReq = APIS[11][0], APIS[14][0], APIS[12][0]
    subscription = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)  # ConsumerProtocolSubscription v0

    def join(member_id: str) -> Any:
        protocol = JoinReq.JoinGroupRequestProtocol(version=5, name="range", metadata=subscription)
        return roundtrip(port, JoinReq(group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=20_000,
                                       member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                       protocols=[protocol]), 5)

    first = join("")
    assert first.error_code == codes.MEMBER_ID_REQUIRED
    joined = join(first.member_id)  # waits out group.initial.rebalance.delay.ms (3 sandbox seconds)
    assert (joined.error_code, joined.generation_id, joined.leader) == (codes.NONE, 1, first.member_id)
    silent_since = sb.now  # its last sign of life is the SyncGroup below, a little later
    synced = roundtrip(port, SyncReq(group_id=group, generation_id=1, member_id=first.member_id,
                                     group_instance_id=None, assignments=[]), 3)
    assert synced.error_code == codes.NONE
    consumer = Consumer({"bootstrap.servers": sb.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300})
    consumer.subscribe(["t"])
    deadline = time.monotonic() + WALL_LIMIT
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.05)
    assigned_at = sb.now
    assert {tp.partition for tp in consumer.assignment()} == {0, 1}
    consumer.close()
    assert silent_since + 6.0 <= assigned_at < silent_since + 20.0  # its session, not the 20 s rebalance timeout
    gone = roundtrip(port, HbReq(group_id=group, generation_id=1, member_id=first.member_id), 3)
    assert gone.error_code == codes.UNKNOWN_MEMBER_ID


def test_group_apis_on_a_broker_that_is_not_the_coordinator(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    sb = _start(sandbox_factory, ["t:1:1:1MB:0"], brokers=3)
    coordinator = coordinator_for("some-group", [1, 2, 3])
    other = next(b for b in (1, 2, 3) if b != coordinator)
    FindReq, HbReq = APIS[10][0], APIS[12][0]
    found = roundtrip(sb.ports[other], FindReq(key="some-group", key_type=0), 3)
    assert (found.error_code, found.node_id, found.port) == (codes.NONE, coordinator, sb.ports[coordinator])
    batched = roundtrip(sb.ports[other], FindReq(key_type=0, coordinator_keys=["some-group", "other"]), 4)
    assert [(c.key, c.node_id) for c in batched.coordinators] == [
        ("some-group", coordinator), ("other", coordinator_for("other", [1, 2, 3]))]
    hb = roundtrip(sb.ports[other], HbReq(group_id="some-group", generation_id=1, member_id="m"), 4)
    assert hb.error_code == codes.NOT_COORDINATOR
    hb = roundtrip(sb.ports[coordinator], HbReq(group_id="some-group", generation_id=1, member_id="m"), 4)
    assert hb.error_code == codes.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [2, 5, 7, 8, 9, 10])
def test_simple_offset_commit_and_fetch_at_each_version(sandbox_factory: Callable[..., SandboxCluster],
                                                        version: int) -> None:
    """assign()-style commits (generation -1, no member) by topic name, or by topic id from v10,
    read back through OffsetFetch in its single-group (v1-7) or batched (v8+) shape."""
    sb = _start(sandbox_factory, ["t:2:1:1MB:0"], brokers=2)
    group = f"simple-{version}"
    coordinator = coordinator_for(group, [1, 2])
    assert coordinator is not None
    port = sb.ports[coordinator]
    with sb.lock:
        topic_id = sb.engine.topics["t"].topic_id
    CommitReq = APIS[8][0]
    T, P = CommitReq.OffsetCommitRequestTopic, CommitReq.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    by_id = version >= 10
    parts = [P(version=version, partition_index=0, committed_offset=17, committed_leader_epoch=0,
               committed_metadata="m"),
             P(version=version, partition_index=5, committed_offset=1, committed_leader_epoch=-1,
               committed_metadata=None)]
    topic = T(version=version, name=None if by_id else "t", topic_id=topic_id if by_id else None, partitions=parts)
    committed = roundtrip(port, CommitReq(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                          group_instance_id=None, retention_time_ms=-1, topics=[topic]), version)
    assert [(p.partition_index, p.error_code) for t in committed.topics for p in t.partitions] == [
        (0, codes.NONE), (5, codes.UNKNOWN_TOPIC_OR_PARTITION)]
    FetchReq = APIS[9][0]
    fetch_version = min(version, 10)
    if fetch_version < 8:
        FT = FetchReq.OffsetFetchRequestTopic
        got = roundtrip(port, FetchReq(group_id=group, topics=[FT(version=fetch_version, name="t",
                                                                   partition_indexes=[0, 1])]), fetch_version)
        rows = [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                for t in got.topics for p in t.partitions]
    else:
        G = FetchReq.OffsetFetchRequestGroup
        GT = G.OffsetFetchRequestTopics
        wanted = GT(version=fetch_version, name=None if by_id else "t", topic_id=topic_id if by_id else None,
                    partition_indexes=[0, 1])
        got = roundtrip(port, FetchReq(groups=[G(version=fetch_version, group_id=group, member_id=None,
                                                 member_epoch=-1, topics=[wanted])], require_stable=False),
                        fetch_version)
        assert [g.error_code for g in got.groups] == [codes.NONE]
        rows = [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                for g in got.groups for t in g.topics for p in t.partitions]
    assert rows == [(0, 17, "m", codes.NONE), (1, -1, "", codes.NONE)]
    elsewhere = sb.ports[next(b for b in (1, 2) if b != coordinator)]
    wrong = roundtrip(elsewhere, CommitReq(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                           group_instance_id=None, retention_time_ms=-1, topics=[topic]), version)
    assert {p.error_code for t in wrong.topics for p in t.partitions} == {codes.NOT_COORDINATOR}


def test_client_quota_apis_roundtrip_at_every_version(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    sb = _start(sandbox_factory, ["t:1:1:1MB:0"], brokers=2)
    AlterReq, DescReq = APIS[49][0], APIS[48][0]
    E, O = AlterReq.EntryData, AlterReq.EntryData.OpData
    for v in (0, 1):
        entries = [
            E(version=v, entity=[E.EntityData(version=v, entity_type="user", entity_name=None),
                                 E.EntityData(version=v, entity_type="client-id", entity_name=f"app{v}")],
              ops=[O(version=v, key="producer_byte_rate", value=2048.0, remove=False)]),
            E(version=v, entity=[E.EntityData(version=v, entity_type="client-id", entity_name="bad")],
              ops=[O(version=v, key="producer_byte_rate", value=1.5, remove=False)]),
        ]
        altered = roundtrip(sb.ports[1], AlterReq(entries=entries, validate_only=False), v)
        assert [(e.error_code, e.error_message) for e in altered.entries] == [
            (codes.NONE, None), (codes.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")]
        C = DescReq.ComponentData
        described = roundtrip(sb.ports[2], DescReq(components=[C(version=v, entity_type="client-id", match_type=0,
                                                                 match=f"app{v}")], strict=False), v)
        assert described.error_code == codes.NONE
        assert [([(e.entity_type, e.entity_name) for e in entry.entity], [(x.key, x.value) for x in entry.values])
                for entry in described.entries] == [
            ([("client-id", f"app{v}"), ("user", None)], [("producer_byte_rate", 2048.0)])]
    bad = roundtrip(sb.ports[1], DescReq(components=[DescReq.ComponentData(
        version=1, entity_type="user", match_type=0, match=None)], strict=False), 1)
    assert (bad.error_code, bad.error_message) == (
        codes.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.")


@pytest.mark.slow
def test_a_producer_over_its_quota_is_throttled_and_converges_to_it(
        sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """librdkafka reports the broker's throttle time in its statistics (brokers[].throttle), and the
    throughput it gets, in sandbox time, is the quota within 10%."""
    from confluent_kafka import Producer

    quota, speed = 20_000, 30.0  # 600 KB/s of wall time: far below what the sandbox serves
    sb = _start(sandbox_factory, ["q:1:1:1MB:0"], brokers=1, speed=speed,
                default_client_quotas={"producer_byte_rate": quota})
    stats: list[dict[str, Any]] = []
    delivered: list[tuple[float, int]] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            delivered.append((sb.now, len(msg.value())))

    producer = Producer({"bootstrap.servers": sb.bootstrap, "acks": "all", "client.id": "over-quota",
                         "linger.ms": 5, "batch.size": 10_000, "statistics.interval.ms": 100,
                         "stats_cb": lambda s: stats.append(json.loads(s))})
    value = b"x" * 1000
    while sb.now < 150.0:  # sandbox seconds; about 5 s of wall time at 30x
        try:
            for _ in range(100):
                producer.produce("q", value, on_delivery=report)
        except BufferError:
            pass
        producer.poll(0.01)
    producer.flush(0)
    start, end = 30.0, max(t for t, _ in delivered)
    rate = sum(n for t, n in delivered if start < t <= end) / (end - start)
    throttles = [b["throttle"]["avg"] for s in stats for b in s["brokers"].values() if b["nodeid"] >= 0]
    assert max(throttles) > 0
    assert rate == pytest.approx(quota, rel=0.10)


@pytest.mark.slow
def test_a_group_consumer_over_its_quota_gets_empty_throttled_fetches_and_stays_below_it(
        sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """A fetch over consumer_byte_rate is answered at once without records and its bytes are not
    counted; librdkafka reports the throttle and reads just below the quota. It stays further below
    than a producer, as with Kafka: a throttled fetch's silence counts the bytes it then does not
    deliver (about -4% in the pure model with these sizes), and each round trip costs wall time that
    the sandbox multiplies by its speed (bench/bench_client_quotas.py: -8% to -10% at 30x)."""
    from confluent_kafka import Consumer

    quota, speed, fetch = 20_000, 30.0, 5_000
    sb = _start(sandbox_factory, ["c:1:1:1MB:0"], brokers=1, speed=speed,
                default_client_quotas={"consumer_byte_rate": quota})
    # small batches: a fetch always returns its first batch whole (KIP-74), and a batch bigger than
    # the quota allows in its window would be throttled, unrecorded and fetched again forever
    _produce_confluent(sb.bootstrap, "c", [b"y" * 1000] * 4000, **{"batch.size": fetch})
    stats: list[dict[str, Any]] = []
    received: list[tuple[float, int]] = []
    consumer = Consumer({"bootstrap.servers": sb.bootstrap, "group.id": "g-quota", "client.id": "over-quota-c",
                         "auto.offset.reset": "earliest", "heartbeat.interval.ms": 200, "fetch.max.bytes": fetch,
                         "message.max.bytes": fetch, "max.partition.fetch.bytes": fetch, "statistics.interval.ms": 100,
                         "stats_cb": lambda s: stats.append(json.loads(s))})
    consumer.subscribe(["c"])
    first: float | None = None
    deadline = time.monotonic() + WALL_LIMIT
    while (first is None or sb.now < first + 150.0) and time.monotonic() < deadline:  # ~5 s of wall time
        msg = consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            first = sb.now if first is None else first
            received.append((sb.now, len(msg.value())))
    consumer.close()
    assert first is not None
    start, end = first + 30.0, max(t for t, _ in received)
    rate = sum(n for t, n in received if start < t <= end) / (end - start)
    throttles = [b["throttle"]["avg"] for s in stats for b in s["brokers"].values() if b["nodeid"] >= 0]
    assert max(throttles) > 0
    assert 0.8 * quota <= rate <= 1.02 * quota


@pytest.mark.slow
def test_sandbox_start_client_quota_option_in_the_daemon(tmp_path: Path) -> None:
    state = tmp_path / "sb"

    def kreassign(*argv: str) -> subprocess.CompletedProcess[str]:
        return KREASSIGN.subprocess("sandbox", *argv, timeout=60)

    started = kreassign("start", "--daemon", "--state-dir", str(state), "--brokers", "1", "--topics", "t:1:1:1MB:0",
                        "--client-quota", "producer_byte_rate=1MB/s", "--client-quota", "consumer_byte_rate=2MB/s")
    try:
        assert started.returncode == 0, started.stderr
        port = int(started.stdout.strip().rsplit(":", 1)[1])
        DescReq = APIS[48][0]
        described = roundtrip(port, DescReq(components=[], strict=False), 1)
        assert [([(e.entity_type, e.entity_name) for e in entry.entity], sorted((x.key, x.value) for x in entry.values))
                for entry in described.entries] == [
            ([("client-id", None)], [("consumer_byte_rate", 2_000_000.0), ("producer_byte_rate", 1_000_000.0)])]
    finally:
        assert kreassign("stop", "--state-dir", str(state)).returncode == 0
    bad = kreassign("start", "--state-dir", str(state), "--client-quota", "fast=1MB/s")
    assert bad.returncode != 0
    assert bad.stderr == ("Error: 'fast=1MB/s' is not a client quota: use producer_byte_rate=RATE or "
                          "consumer_byte_rate=RATE, e.g. producer_byte_rate=1MB/s\n")


def _kafka_cli(bootstrap: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return KREASSIGN.subprocess("--bootstrap-server", bootstrap, *argv, timeout=120,
                                env={"KREASSIGN_JOURNAL_DIR": str(tmp_path / "journal")})


@pytest.mark.slow
@pytest.mark.parametrize("consumer", ["confluent", "kafka-python"])
def test_group_consumer_reads_everything_written_before_and_during_a_throttled_move(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path, consumer: str) -> None:
    """Issue 13's end-to-end test with a group consumer: N messages acks=all, a throttled move with
    the Kafka-compatible --execute --throttle, N more during the move, then 2N consumed in order,
    each client library with its own producer."""
    n = 300
    produce = _produce_confluent if consumer == "confluent" else _produce_kafka_python
    sb = _start(sandbox_factory, ["moving:4:3:200MB:0"])
    before = produce(sb.bootstrap, "moving", [f"a{i}".encode() for i in range(n)])
    with sb.lock:
        current = {p.index: list(p.replicas) for p in sb.engine.topics["moving"].partitions}
    targets = {}
    for index, replicas in current.items():
        spare = next(b for b in range(1, 7) if b not in replicas)
        targets[TopicPartition("moving", index)] = [*replicas[:-1], spare]
    plan = tmp_path / "plan.json"
    plan.write_text(format_reassignment(targets))
    started = _kafka_cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--execute",
                         "--throttle", "5000000")  # 200 MB at 5 MB/s: about 40 sandbox seconds
    assert started.returncode == 0, started.stderr
    during = produce(sb.bootstrap, "moving", [f"b{i}".encode() for i in range(n)])
    with sb.lock:
        assert any(p.reassigning for p in sb.engine.topics["moving"].partitions)  # written while moving
    deadline = time.monotonic() + WALL_LIMIT
    while True:
        verify = _kafka_cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--verify")
        if "still in progress" not in verify.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert verify.stdout.count("is completed.") == 4, verify.stdout
    group = f"g-{uuid.uuid4()}"
    if consumer == "confluent":
        consumed = _consume_confluent(sb.bootstrap, "moving", group, 2 * n)
    else:
        consumed = _consume_kafka_python(sb.bootstrap, "moving", group, 2 * n)
    _assert_same_log(before + during, consumed)
    with sb.lock:
        assert {p.index: p.replicas for p in sb.engine.topics["moving"].partitions} == {
            tp.partition: r for tp, r in targets.items()}


def test_kcat_group_consumer(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed; the group consumer is exercised with confluent-kafka and kafka-python")
    sb = _start(sandbox_factory, ["events:2:3:1MB:0"], brokers=3)
    produced = _produce_confluent(sb.bootstrap, "events", [f"c{i}".encode() for i in range(50)])
    out = subprocess.run([kcat, "-b", sb.bootstrap, "-G", "g-kcat", "-o", "beginning", "-e", "-f", "%p %o %s\\n",
                          "events"], capture_output=True, text=True, timeout=60, check=False)
    consumed = [(int(p), int(o), v.encode()) for p, o, v in (line.split(" ", 2) for line in out.stdout.splitlines())]
    _assert_same_log(produced, consumed)
