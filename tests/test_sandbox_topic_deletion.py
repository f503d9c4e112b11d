"""DeleteTopics (API key 20): the controller's answers (`topic_deletion`), what a deletion removes
from the engine, the logs, the groups and the metrics, parked requests on the deleted topic, and
the API over TCP with kafka-python and confluent-kafka (librdkafka), across a restart."""
from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kafka.errors as Errors
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.protocol.admin import DeleteTopicsRequest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceResponse

from kreassign.sandbox import codes
from kreassign.sandbox.topics import INTERNAL_TOPICS
from kreassign.sandbox.acl import TOPIC_AUTHORIZATION_FAILED, Principal
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.codes import AlterOp
from kreassign.sandbox.configs import FOLLOWER_REPLICAS, LEADER_REPLICAS
from kreassign.sandbox.dataplane import DataPlane
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.groups import Committed, GroupCoordinator
from kreassign.sandbox.handlers_data import fetch, produce
from kreassign.sandbox.purgatory import Delayed
from kreassign.sandbox.rawclient import roundtrip
from kreassign.sandbox.topic_deletion import ZERO_UUID, TopicResult, delete_topics, remove_topic
from kreassign.sandbox.topics import TopicSpec
from tests.test_sandbox_data import ctx, fetch_req, part_result, produce_req
from tests.test_sandbox_data_wire import parked, produce_values, receive, send
from tests.test_sandbox_log import batch

MB = 1_000_000
UNKNOWN = "This server does not host this topic-partition."
VIEWER = Principal("viewer")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Engine, DataPlane]]:
    """Four brokers with two log dirs each; `t` (two partitions on 1-3) and `u` (one on 4), with
    logs under tmp_path."""
    eng = Engine({1: None, 2: None, 3: None, 4: None}, seed=3, log_dirs_per_broker=2)
    assert eng.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]}) == (codes.NONE, None)
    assert eng.create_topic("u", assignments={0: [4]}, sizes=[5 * MB], rates=[1000.0]) == (codes.NONE, None)
    data = DataPlane(eng, tmp_path / "logs")
    yield eng, data
    data.close()


def by_name(*names: str) -> list[tuple[str | None, uuid.UUID]]:
    return [(n, ZERO_UUID) for n in names]


# ---- the controller's answers ------------------------------------------------------------------------
def test_deleting_removes_partitions_moves_configs_and_closes_up_the_rows(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    t_id = eng.topics["t"].topic_id
    assert eng.alter_reassignment("t", 0, [4, 2, 3]) == (codes.NONE, None)  # a move in flight
    assert eng.configs.incremental_alter_topic("t", [(LEADER_REPLICAS, AlterOp.SET, "0:1"),
                                                     (FOLLOWER_REPLICAS, AlterOp.SET, "0:4")], False) == (0, None)
    eng.advance(0.5)
    u = eng.partition("u", 0)
    assert u is not None
    u_size = float(eng.log_end[u.row])
    assert delete_topics(eng, by_name("t"), 30000, None, data=data) == [TopicResult("t", t_id, codes.NONE)]
    assert list(eng.topics) == ["u"] and eng.rows == [u] and u.row == 0
    assert eng.list_reassignments() == [] and "t" not in eng.configs.topic
    # broker 4 held the move's adding replica of t-0: DescribeLogDirs now lists only u-0 there
    assert [(r.topic, r.partition) for rs in eng.describe_log_dirs(4, None).values() for r in rs] == [("u", 0)]
    assert eng.log_end.tolist() == [u_size] and eng.produce_bps.tolist() == [1000.0]
    eng.advance(1.0)  # the replication step rebuilds on the closed-up rows
    assert eng.log_end.tolist() == [pytest.approx(u_size + 1000.0)]
    assert eng.partition("t", 0) is None and eng.to_cluster_state().topics == ("u",)


def test_missing_duplicate_and_malformed_entries_get_kafkas_errors(world: tuple[Engine, DataPlane]) -> None:
    eng, _ = world
    t_id, u_id = eng.topics["t"].topic_id, eng.topics["u"].topic_id
    stranger = uuid.UUID(int=99)
    results = delete_topics(eng, [("nope", ZERO_UUID), ("t", ZERO_UUID), ("t", ZERO_UUID), (None, ZERO_UUID),
                                  ("u", u_id), (None, stranger), (None, t_id)], 30000, None)
    assert results == [
        TopicResult(None, ZERO_UUID, codes.INVALID_REQUEST, "Neither topic name nor id were specified."),
        TopicResult("u", u_id, codes.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        TopicResult("t", ZERO_UUID, codes.INVALID_REQUEST, "Duplicate topic name."),
        TopicResult(None, stranger, codes.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        TopicResult("nope", ZERO_UUID, codes.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN),
        TopicResult("t", t_id, codes.NONE),  # named by id, once
    ]
    assert list(eng.topics) == ["u"]
    # a name whose id is given too: neither is deleted (Kafka answers for the name only)
    assert delete_topics(eng, [(None, u_id), ("u", ZERO_UUID)], 30000, None) == [
        TopicResult("u", u_id, codes.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")]
    assert list(eng.topics) == ["u"]


def test_a_passed_deadline_times_out_every_entry_and_deletes_nothing(world: tuple[Engine, DataPlane]) -> None:
    eng, _ = world
    u_id = eng.topics["u"].topic_id
    entries = [("t", ZERO_UUID), (None, u_id), ("x", ZERO_UUID), ("x", ZERO_UUID)]
    assert delete_topics(eng, entries, 0, None) == [TopicResult(n, i, codes.REQUEST_TIMED_OUT) for n, i in entries]
    assert sorted(eng.topics) == ["t", "u"]
    # nothing to look up: the malformed entries are answered without waiting
    assert delete_topics(eng, [("x", ZERO_UUID), ("x", ZERO_UUID)], -1, None) == [
        TopicResult("x", ZERO_UUID, codes.INVALID_REQUEST, "Duplicate topic name.")]


def test_a_login_without_delete_is_refused_per_topic_after_the_lookup(world: tuple[Engine, DataPlane]) -> None:
    eng, _ = world
    t_id = eng.topics["t"].topic_id
    results = delete_topics(eng, [("u", ZERO_UUID), ("nope", ZERO_UUID), (None, t_id)], 30000, VIEWER)
    assert results == [TopicResult("t", t_id, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                       TopicResult("u", ZERO_UUID, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                       TopicResult("nope", ZERO_UUID, codes.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN)]
    assert sorted(eng.topics) == ["t", "u"]
    assert delete_topics(eng, by_name("u"), 30000, Principal("ops", admin=True))[0].code == codes.NONE


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 3)), min_size=1, max_size=12))
def test_rows_stay_aligned_through_any_creates_and_deletes(steps: list[tuple[str, int]]) -> None:
    """Creating a topic that exists deletes it instead: whatever the order, every partition's row
    is its place in `rows`, and its size and write rate stay its own."""
    eng = Engine({1: None, 2: None}, seed=1)
    sizes: dict[tuple[str, int], float] = {}
    for name, partitions in steps:
        if name in eng.topics:
            remove_topic(eng, name)
            sizes = {k: v for k, v in sizes.items() if k[0] != name}
        else:
            own = [float(len(sizes) * 10 + i) for i in range(partitions)]
            assert eng.create_topic(name, partitions, 1, sizes=own, rates=own) == (codes.NONE, None)
            sizes.update({(name, i): v for i, v in enumerate(own)})
    assert [p.row for p in eng.rows] == list(range(len(eng.rows)))
    assert {(p.topic, p.index): float(eng.log_end[p.row]) for p in eng.rows} == sizes
    assert eng.produce_bps.tolist() == eng.log_end.tolist()


# ---- what else a deletion removes ----------------------------------------------------------------------
def test_logs_offsets_metrics_and_log_dir_moves_go_and_the_name_comes_back_empty(
        world: tuple[Engine, DataPlane], tmp_path: Path) -> None:
    eng, data = world
    for partition in (0, 1):
        assert not isinstance(produce(ctx(eng, data, partition + 1, 0.0), 9,
                                      produce_req(partition, batch([b"a", b"b"]), acks=1)), Delayed)
    assert data.log_dir_moves.start(1, "/var/lib/kafka/data-1", "t", 0) == codes.NONE
    assert data.log_dir_moves.start(4, "/var/lib/kafka/data-1", "u", 0) == codes.NONE
    groups = GroupCoordinator()
    assert groups.commit_check("g", "", -1, 0.0) == codes.NONE
    for tp in (("t", 0), ("t", 1), ("u", 0)):
        assert groups.store_offset("g", *tp, Committed(2, 0, "", 0.0)) == codes.NONE
    eng.traffic.fetched(1, "t", 10)
    totals = dict(eng.traffic.all_topics)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["t-0", "t-1"]
    delete_topics(eng, by_name("t"), 30000, None, data=data, groups=groups)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["checkpoint.json"]
    assert list(groups.fetch_offsets("g", None, 0.0)) == [("u", 0)]
    assert list(data.log_dir_moves.moves) == [(4, "u", 0)]
    assert not any(topic == "t" for table in (eng.traffic.bytes_in, eng.traffic.messages_in, eng.traffic.bytes_out)
                   for _, topic in table)
    assert dict(eng.traffic.all_topics) == totals  # the all-topics meters never go down
    assert eng.create_topic("t", assignments={0: [3, 4]}) == (codes.NONE, None)
    p = eng.partition("t", 0)
    assert p is not None and data.log(p).leo == 0 and eng.log_end[p.row] == 0
    assert part_result(fetch(ctx(eng, data, 3, 1.0), 12, fetch_req(0, 0, wait_ms=0))).error_code == codes.NONE


def test_parked_produce_and_fetch_answer_unknown_topic_once_it_is_gone(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    waiting_produce = produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a"])))
    waiting_fetch = fetch(ctx(eng, data, 2, 0.0), 12, fetch_req(1, 0, wait_ms=5000))
    assert isinstance(waiting_produce, Delayed) and isinstance(waiting_fetch, Delayed)
    delete_topics(eng, by_name("t"), 30000, None, data=data)
    # ready at once: DelayedProduce and DelayedFetch find no partition (the server pokes them)
    assert waiting_produce.ready(0.0) and waiting_fetch.ready(0.0)
    f = part_result(waiting_fetch.complete(0.0, False))
    assert (f.error_code, f.high_watermark, f.records) == (codes.UNKNOWN_TOPIC_OR_PARTITION, -1, b"")
    # a topic created again under the name is not the one the produce appended to
    assert eng.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]}) == (codes.NONE, None)
    p = part_result(waiting_produce.complete(0.0, False))
    assert (p.error_code, p.base_offset) == (codes.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert data.log(eng.partition("t", 0)).leo == 0  # type: ignore[arg-type]


def test_fetch_by_id_of_a_topic_deleted_and_created_again_is_unknown_topic_id(
        world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    old_id = eng.topics["t"].topic_id
    delete_topics(eng, by_name("t"), 30000, None, data=data)
    assert eng.create_topic("t", assignments={0: [1, 2, 3]}) == (codes.NONE, None)
    req = fetch_req(0, 0, wait_ms=0, v=13)
    req.topics[0].topic_id = old_id
    assert part_result(fetch(ctx(eng, data, 1, 0.0), 13, req)).error_code == codes.UNKNOWN_TOPIC_ID


# ---- over TCP --------------------------------------------------------------------------------------------
def admin_of(sb: SandboxCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000, client_id="deleter")


@pytest.mark.e2e
def test_api_versions_advertise_delete_topics_and_old_versions_work(sandbox: SandboxCluster) -> None:
    resp = roundtrip(sandbox.ports[1], ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}[20] == (1, 6)
    for v, name in ((1, "orders"), (4, "payments")):  # classic and flexible headers
        got = roundtrip(sandbox.ports[1], DeleteTopicsRequest(topic_names=[name, "nope"], timeout_ms=5000), v)
        assert [(r.name, r.error_code) for r in got.responses] == [
            ("nope", codes.UNKNOWN_TOPIC_OR_PARTITION), (name, codes.NONE)]
    # any broker deletes: KRaft brokers forward the request to the quorum
    elsewhere = roundtrip(sandbox.ports[4], DeleteTopicsRequest(topic_names=["inventory"], timeout_ms=5000), 5)
    assert [(r.name, r.error_code, r.error_message) for r in elsewhere.responses] == [("inventory", codes.NONE, None)]
    with sandbox.locked() as eng:
        assert sorted(eng.topics) == ["audit-log", "clickstream"]


@pytest.mark.e2e
def test_kafka_python_deletes_by_name_and_id_and_reports_a_missing_topic(sandbox: SandboxCluster) -> None:
    admin = admin_of(sandbox)
    try:
        with sandbox.locked() as eng:
            payments_id = eng.topics["payments"].topic_id
        assert admin.delete_topics(["orders"])["topics"][0]["error_code"] == 0
        assert admin.delete_topics([payments_id])["topics"][0]["name"] == "payments"
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            admin.delete_topics(["orders"])
        assert admin.delete_topics(["orders"], raise_errors=False)["topics"] == [
            {"name": "orders", "topic_id": None, "error_code": 3, "error_message": UNKNOWN}]
        assert sorted(admin.list_topics()) == ["audit-log", "clickstream", "inventory"]
        (gone,) = admin.describe_topics(["orders"])
        assert gone["error_code"] == codes.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        admin.close()


@pytest.mark.e2e
def test_confluent_kafka_deletes_and_reports_a_missing_topic(sandbox: SandboxCluster) -> None:
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    rd = confluent_admin.AdminClient({"bootstrap.servers": sandbox.bootstrap})
    futures = rd.delete_topics(["clickstream", "nope"], operation_timeout=5)
    assert futures["clickstream"].result(timeout=10) is None
    with pytest.raises(Exception) as missing:
        futures["nope"].result(timeout=10)
    assert missing.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
    assert sorted(rd.list_topics(timeout=10).topics) == ["audit-log", "inventory", "orders", "payments"]
    assert {t.api_version for t in sandbox.timings.of("DeleteTopics")} <= {1, 2, 3, 4, 5, 6}


@pytest.mark.e2e
def test_in_flight_acks_all_produce_gets_unknown_topic_when_the_topic_goes(
        sandbox_factory: Callable[..., SandboxCluster]) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 1, 3, 0, 0.0)])
    with sb.locked() as eng:
        leader = eng.partition("t", 0).leader  # type: ignore[union-attr]
    with socket.create_connection(("127.0.0.1", sb.ports[leader]), timeout=5) as produce_conn, \
            socket.create_connection(("127.0.0.1", sb.ports[leader]), timeout=5) as fetch_conn:
        send(produce_conn, produce_req(0, batch([b"a"])), 9)  # waits for the followers: time stands still
        send(fetch_conn, fetch_req(0, 1, wait_ms=60000), 12)
        parked(sb, 2)
        admin = admin_of(sb)
        try:
            admin.delete_topics(["t"])
        finally:
            admin.close()
        produced = receive(produce_conn, ProduceResponse, 9).responses[0].partition_responses[0]
        fetched = receive(fetch_conn, FetchResponse, 12).responses[0].partitions[0]
    assert (produced.error_code, produced.base_offset) == (codes.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert (fetched.error_code, fetched.high_watermark) == (codes.UNKNOWN_TOPIC_OR_PARTITION, -1)


@pytest.mark.e2e
def test_deleted_topic_stays_gone_across_a_restart_and_comes_back_empty(tmp_path: Path) -> None:
    state = tmp_path / "state"

    def start() -> SandboxCluster:
        return SandboxCluster(brokers=3, racks=0, topics=[TopicSpec("t", 2, 3, 0, 0.0), TopicSpec("keep", 1, 1)],
                              clock=ScaledClock(1.0), state_dir=state).start()

    sb = start()
    try:
        produce_values(sb.bootstrap, "t", 10)
        consumer = KafkaConsumer(bootstrap_servers=sb.bootstrap, group_id="g", enable_auto_commit=False)
        consumer.commit({KTP("t", 0): _meta(5), KTP("keep", 0): _meta(0)})
        consumer.close()
        admin = admin_of(sb)
        try:
            assert set(admin.list_group_offsets("g")["g"]) == {KTP("t", 0), KTP("keep", 0)}
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "t", {
                LEADER_REPLICAS: (AlterConfigOp.SET, "0:1,1:2")})], incremental=True, raise_on_unknown=False)
            assert set(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")])["topic"]["t"]) == {
                LEADER_REPLICAS}
            admin.delete_topics(["t"])
            assert set(admin.list_group_offsets("g")["g"]) == {KTP("keep", 0)}
        finally:
            admin.close()
        # acknowledged once saved: the state file already lacks the topic
        assert '"name":"t"' not in (state / "state.json").read_text()
    finally:
        sb.stop()
    assert sorted(p.name for p in (state / "logs").iterdir()) == ["checkpoint.json"]
    sb = start()
    try:
        admin = admin_of(sb)
        try:
            assert sorted(set(admin.list_topics()) - INTERNAL_TOPICS) == ["keep"]  # the lock created __consumer_offsets
            assert set(admin.list_group_offsets("g")["g"]) == {KTP("keep", 0)}
            admin.create_topics([NewTopic("t", 2, 3)])
            # no override came back with the name (kafka-python lists only the modified keys)
            assert admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")])["topic"]["t"] == {}
        finally:
            admin.close()
        consumer = KafkaConsumer(bootstrap_servers=sb.bootstrap, enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=500)
        tps = [KTP("t", 0), KTP("t", 1)]
        consumer.assign(tps)
        assert consumer.end_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert list(consumer) == []
        consumer.close()
    finally:
        sb.stop()


def _meta(offset: int) -> Any:
    from kafka.structs import OffsetAndMetadata

    return OffsetAndMetadata(offset, "", -1)

