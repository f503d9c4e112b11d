"""kafka-python 3.0.12's KafkaAdminClient against the sandbox: every served API, with errors."""
from __future__ import annotations

import socket
import struct
from typing import Any

import kafka.errors as Errors
import pytest
from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.structs import TopicPartitionReplica

from kreassign.sandbox import codes
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.rawclient import encode, read_frame, roundtrip
from kreassign.sandbox.topics import TopicSpec

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
BROKER = ConfigResourceType.BROKER
TOPIC = ConfigResourceType.TOPIC


def partition_of(admin: Any, topic: str, index: int) -> dict[str, Any]:
    (t,) = admin.describe_topics([topic])
    return next(p for p in t["partitions"] if p["partition_index"] == index)


def outside(replicas: list[int], n: int = 3) -> list[int]:
    return [b for b in range(1, 7) if b not in replicas][:n]


# ---- handshake and metadata ----------------------------------------------------------------------
def test_api_versions_advertise_the_json_ranges(sandbox: SandboxCluster) -> None:
    resp = roundtrip(sandbox.ports[1], ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert resp.error_code == 0
    assert ranges[32] == (1, 4) and ranges[35] == (1, 5) and ranges[45] == (0, 1) and ranges[46] == (0, 0)
    assert ranges[60] == (0, 2) and ranges[3] == (0, 13) and ranges[18] == (0, 4)


def test_unknown_api_versions_version_gets_a_v0_error_body(sandbox: SandboxCluster) -> None:
    client_id = b"future-client"
    header = struct.pack(">hhih", 18, 99, 42, len(client_id)) + client_id + b"\x00\x00"
    with socket.create_connection(("127.0.0.1", sandbox.ports[2]), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        payload = read_frame(sock)
    resp = ApiVersionsResponse.decode(payload, version=4, header=True)
    assert resp.header.correlation_id == 42
    assert resp.error_code == codes.UNSUPPORTED_VERSION
    assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


def test_metadata_lists_brokers_racks_controller_and_partitions(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    cluster = sandbox_admin.describe_cluster()
    assert cluster["controller_id"] in sandbox.ports  # KRaft brokers name a random live broker
    assert [(b["broker_id"], b["rack"], b["port"]) for b in cluster["brokers"]] == [
        (b, f"rack-{(b - 1) % 3 + 1}", sandbox.ports[b]) for b in range(1, 7)]
    assert sorted(sandbox_admin.list_topics()) == ["audit-log", "clickstream", "inventory", "orders", "payments"]
    topics = sandbox_admin.describe_topics()
    assert sum(len(t["partitions"]) for t in topics) == 50
    p = partition_of(sandbox_admin, "orders", 3)
    assert p["leader_id"] == p["replica_nodes"][0] and p["isr_nodes"] == p["replica_nodes"]
    (missing,) = sandbox_admin.describe_topics(["nope"])
    assert missing["error_code"] == codes.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_cluster_v0_only_reproduces_the_kafka_python_pitfall(sandbox_factory: Any) -> None:
    from kafka.admin import KafkaAdminClient

    sb = sandbox_factory(brokers=3, racks=0, topics=[], describe_cluster_v0_only=True)
    admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000)
    try:
        with pytest.raises(KeyError, match="endpoint_type"):
            admin.describe_cluster()
        assert admin.describe_topics() == []  # Metadata, the fallback, still works
    finally:
        admin.close()


def test_describe_topic_partitions_pages_with_a_cursor(sandbox_admin: Any) -> None:
    first = sandbox_admin.describe_topic_partitions(["orders", "payments"], response_partition_limit=10)
    assert [len(t["partitions"]) for t in first["topics"]] == [10]
    assert first["next_cursor"] == {"topic_name": "orders", "partition_index": 10}
    rest = sandbox_admin.describe_topic_partitions(["orders", "payments"], cursor=first["next_cursor"])
    assert [(t["name"], len(t["partitions"])) for t in rest["topics"]] == [("orders", 2), ("payments", 8)]
    assert rest["next_cursor"] is None


def test_create_topics(sandbox_admin: Any) -> None:
    sandbox_admin.create_topics([NewTopic("fresh", 4, 2), NewTopic("placed", replica_assignments={0: [1, 2], 1: [3, 4]})])
    assert len(partition_of(sandbox_admin, "fresh", 3)["replica_nodes"]) == 2
    assert partition_of(sandbox_admin, "placed", 1)["replica_nodes"] == [3, 4]
    with pytest.raises(Errors.TopicAlreadyExistsError):
        sandbox_admin.create_topics([NewTopic("fresh", 1, 1)])
    with pytest.raises(Errors.InvalidReplicationFactorError):
        sandbox_admin.create_topics([NewTopic("too-wide", 1, 7)])
    with pytest.raises(Errors.InvalidConfigurationError):
        sandbox_admin.create_topics([NewTopic("bad-config", 1, 1, topic_configs={"nonsense.key": "1"})])


# ---- configs -----------------------------------------------------------------------------------
def broker_configs(admin: Any, broker: int, filt: str = "all") -> dict[str, Any]:
    return admin.describe_configs([ConfigResource(BROKER, str(broker))], config_filter=filt)["broker"][str(broker)]


def test_throttle_rates_are_absent_until_set_then_dynamic_and_writable(sandbox_admin: Any) -> None:
    assert LEADER_RATE not in broker_configs(sandbox_admin, 2)
    result = sandbox_admin.alter_configs(
        [ConfigResource(BROKER, "2", {LEADER_RATE: "50000000", FOLLOWER_RATE: "50000000"})],
        incremental=True, raise_on_unknown=False)
    assert result == {"broker": {"2": "OK"}}
    entry = broker_configs(sandbox_admin, 2)[LEADER_RATE]
    # not read-only on Kafka 4.x (3.9 reported them read-only: kafka_profiles)
    assert (entry["value"], entry["config_source"], entry["read_only"], entry["config_type"]) == (
        "50000000", "DYNAMIC_BROKER_CONFIG", False, "LONG")  # as Kafka 4.4 reports them
    assert LEADER_RATE in broker_configs(sandbox_admin, 2, "modified")
    sandbox_admin.alter_configs([ConfigResource(BROKER, "2", {LEADER_RATE: (AlterConfigOp.DELETE, None)})],
                                incremental=True, raise_on_unknown=False)
    assert LEADER_RATE not in broker_configs(sandbox_admin, 2)
    assert FOLLOWER_RATE in broker_configs(sandbox_admin, 2)


def test_default_alter_configs_refuses_the_rate_keys(sandbox_admin: Any) -> None:
    with pytest.raises(ValueError, match="Unrecognized configs"):
        sandbox_admin.alter_configs([ConfigResource(BROKER, "1", {LEADER_RATE: "1000"})], incremental=True)


@pytest.mark.parametrize("value,error", [("fast", "Not a number of type LONG"), ("-5", "Value must be at least 0")])
def test_bad_rates_are_invalid_request(sandbox_admin: Any, value: str, error: str) -> None:
    result = sandbox_admin.alter_configs([ConfigResource(BROKER, "3", {LEADER_RATE: value})],
                                         incremental=True, raise_on_unknown=False)
    text = result["broker"]["3"]
    assert text.startswith("[Error 42] InvalidRequestError") and error in text


def test_append_to_a_rate_is_invalid_config(sandbox_admin: Any) -> None:
    result = sandbox_admin.alter_configs([ConfigResource(BROKER, "3", {LEADER_RATE: (AlterConfigOp.APPEND, "1")})],
                                         incremental=True, raise_on_unknown=False)
    assert result["broker"]["3"].startswith("[Error 40] InvalidConfigurationError")


def test_topic_throttle_lists_validate_and_render_like_kafka(sandbox_admin: Any) -> None:
    key = "leader.replication.throttled.replicas"
    before = sandbox_admin.describe_configs([ConfigResource(TOPIC, "orders")], config_filter="all")
    entry = before["topic"]["orders"][key]
    assert (entry["value"], entry["config_source"], entry["read_only"]) == ("", "DEFAULT_CONFIG", False)
    ok = sandbox_admin.alter_configs([ConfigResource(TOPIC, "orders", {key: " 0:1 , 1:2 "})],
                                     incremental=True, raise_on_unknown=False)
    assert ok == {"topic": {"orders": "OK"}}
    entry = sandbox_admin.describe_configs([ConfigResource(TOPIC, "orders")])["topic"]["orders"][key]
    assert (entry["value"], entry["config_source"]) == ("0:1,1:2", "DYNAMIC_TOPIC_CONFIG")
    bad = sandbox_admin.alter_configs([ConfigResource(TOPIC, "orders", {key: "*,0:1"})],
                                      incremental=True, raise_on_unknown=False)
    assert bad["topic"]["orders"] == (
        "[Error 40] InvalidConfigurationError: Invalid value [*, 0:1] for configuration "
        "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' "
        "or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    appended = sandbox_admin.alter_configs([ConfigResource(TOPIC, "orders", {key: (AlterConfigOp.APPEND, "2:3")})],
                                           incremental=True, raise_on_unknown=False)
    assert appended == {"topic": {"orders": "OK"}}
    assert sandbox_admin.describe_configs([ConfigResource(TOPIC, "orders")])["topic"]["orders"][key]["value"] == \
        "0:1,1:2,2:3"
    missing = sandbox_admin.alter_configs([ConfigResource(TOPIC, "ghost", {key: "*"})],
                                          incremental=True, raise_on_unknown=False)
    assert missing["topic"]["ghost"].startswith("[Error 3] UnknownTopicOrPartitionError")


def test_legacy_alter_configs_replaces_the_topic_overrides(sandbox_admin: Any) -> None:
    sandbox_admin.alter_configs([ConfigResource(TOPIC, "payments", {"retention.ms": "1000"})],
                                incremental=False, raise_on_unknown=False)
    sandbox_admin.alter_configs([ConfigResource(TOPIC, "payments", {"segment.ms": "2000"})],
                                incremental=False, raise_on_unknown=False)
    modified = sandbox_admin.describe_configs([ConfigResource(TOPIC, "payments")])["topic"]["payments"]
    assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": "1000", "segment.ms": "2000"}


def test_broker_configs_must_go_to_that_broker(sandbox: SandboxCluster) -> None:
    R = IncrementalAlterConfigsRequest
    res = R.AlterConfigsResource(resource_type=4, resource_name="1", configs=[
        R.AlterConfigsResource.AlterableConfig(name=LEADER_RATE, config_operation=0, value="10")])
    resp = roundtrip(sandbox.ports[2], R(resources=[res], validate_only=False), 1)
    (r,) = resp.responses
    assert (r.error_code, r.error_message) == (codes.INVALID_REQUEST, "Unexpected broker id, expected 2, but received 1")
    D = DescribeConfigsRequest
    resp = roundtrip(sandbox.ports[2], D(resources=[D.DescribeConfigsResource(
        resource_type=4, resource_name="5", configuration_keys=None)], include_synonyms=False), 4)
    assert resp.results[0].error_message == "Unexpected broker id, expected 2 or empty string, but received 5"


def test_cluster_default_rate_shows_as_a_synonym(sandbox: SandboxCluster) -> None:
    R = IncrementalAlterConfigsRequest
    res = R.AlterConfigsResource(resource_type=4, resource_name="", configs=[
        R.AlterConfigsResource.AlterableConfig(name=LEADER_RATE, config_operation=0, value="7000000")])
    assert roundtrip(sandbox.ports[4], R(resources=[res], validate_only=False), 1).responses[0].error_code == 0
    D = DescribeConfigsRequest
    resp = roundtrip(sandbox.ports[4], D(resources=[D.DescribeConfigsResource(
        resource_type=4, resource_name="4", configuration_keys=[LEADER_RATE])], include_synonyms=True), 4)
    (entry,) = resp.results[0].configs
    assert (entry.value, entry.config_source, entry.read_only) == ("7000000", 3, False)
    assert [(s.value, s.source) for s in entry.synonyms] == [("7000000", 3)]
    with sandbox.locked() as engine:
        assert engine.configs.rate(6, LEADER_RATE) == 7_000_000


# ---- reassignments --------------------------------------------------------------------------------
def test_alter_and_list_partition_reassignments(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    sandbox_admin.alter_configs([ConfigResource(BROKER, str(b), {FOLLOWER_RATE: "1000000"}) for b in range(1, 7)],
                                incremental=True, raise_on_unknown=False)
    sandbox_admin.alter_configs([ConfigResource(TOPIC, "orders", {"follower.replication.throttled.replicas": "*"})],
                                incremental=True, raise_on_unknown=False)
    current = partition_of(sandbox_admin, "orders", 0)["replica_nodes"]
    target = outside(current)
    result = sandbox_admin.alter_partition_reassignments({
        TopicPartition("orders", 0): target,
        TopicPartition("orders", 99): target,
        TopicPartition("ghost", 0): target,
        TopicPartition("orders", 1): [1, 42],
        TopicPartition("orders", 2): None,
    })
    assert result == {
        TopicPartition("orders", 0): None,
        TopicPartition("orders", 99): Errors.UnknownTopicOrPartitionError,
        TopicPartition("ghost", 0): Errors.UnknownTopicOrPartitionError,
        TopicPartition("orders", 1): Errors.InvalidReplicationAssignmentError,
        TopicPartition("orders", 2): Errors.NoReassignmentInProgressError,
    }
    expected = {"replicas": target + sorted(current), "adding_replicas": target, "removing_replicas": sorted(current)}
    assert sandbox_admin.list_partition_reassignments() == {TopicPartition("orders", 0): expected}
    assert sandbox_admin.list_partition_reassignments({"orders": [0, 1], "ghost": [0]}) == {
        TopicPartition("orders", 0): expected}
    assert partition_of(sandbox_admin, "orders", 0)["replica_nodes"] == expected["replicas"]
    logs = sandbox_admin.describe_log_dirs({"orders": [0]}, brokers=[target[0]])
    size_before = logs[0]["log_dirs"][0]["topics"][0]["partitions"][0]["partition_size"]
    sandbox.advance(5)
    logs = sandbox_admin.describe_log_dirs({"orders": [0]}, brokers=[target[0]])
    assert logs[0]["log_dirs"][0]["topics"][0]["partitions"][0]["partition_size"] > size_before
    assert sandbox_admin.alter_partition_reassignments({TopicPartition("orders", 0): None}) == {
        TopicPartition("orders", 0): None}
    assert sandbox_admin.list_partition_reassignments() == {}
    assert partition_of(sandbox_admin, "orders", 0)["replica_nodes"] == current


def test_unthrottled_move_completes_and_moves_leadership(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    current = partition_of(sandbox_admin, "inventory", 2)["replica_nodes"]
    target = outside(current, 2)
    sandbox_admin.alter_partition_reassignments({TopicPartition("inventory", 2): target})
    sandbox.advance(60)
    assert sandbox_admin.list_partition_reassignments() == {}
    p = partition_of(sandbox_admin, "inventory", 2)
    assert p["replica_nodes"] == target and sorted(p["isr_nodes"]) == sorted(target) and p["leader_id"] == target[0]


def test_every_broker_serves_the_controller_apis(sandbox: SandboxCluster) -> None:
    # KRaft brokers forward them to the quorum: no NOT_CONTROLLER, whichever broker is asked
    resp = roundtrip(sandbox.ports[3], ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None), 0)
    assert (resp.error_code, resp.error_message, resp.topics) == (codes.NONE, None, [])
    A = AlterPartitionReassignmentsRequest
    req = A(timeout_ms=1000, topics=[A.ReassignableTopic(name="orders", partitions=[
        A.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[1, 2, 3])])])
    resp = roundtrip(sandbox.ports[5], req, 1)
    assert (resp.error_code, resp.responses[0].partitions[0].error_code) == (codes.NONE, codes.NONE)


def test_controller_moves_when_it_stops(sandbox: SandboxCluster) -> None:
    from kafka.admin import KafkaAdminClient

    sandbox.stop_broker(1)
    assert "127.0.0.1:%d" % sandbox.ports[1] not in sandbox.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap, request_timeout_ms=5000)
    try:
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] in set(sandbox.ports) - {1}
        # kafka-python asks for fenced brokers too (DescribeCluster v2): the stopped one is fenced
        assert [(b["broker_id"], b["is_fenced"]) for b in cluster["brokers"]] == [
            (1, True), (2, False), (3, False), (4, False), (5, False), (6, False)]
        partitions = [p for t in admin.describe_topics() for p in t["partitions"]]
        assert all(1 not in p["isr_nodes"] and p["leader_id"] != 1 for p in partitions)
        assert any(1 in p["offline_replicas"] for p in partitions)
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


def test_elect_leaders(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    from kafka.admin import KafkaAdminClient

    preferred = partition_of(sandbox_admin, "payments", 0)["replica_nodes"][0]
    sandbox.stop_broker(preferred)
    sandbox.start_broker(preferred)
    sandbox.advance(30)
    # a fresh client: the old one's connection to the restarted broker was cut
    admin = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap, request_timeout_ms=5000)
    try:
        assert partition_of(admin, "payments", 0)["leader_id"] != preferred
        admin.elect_leaders(0, {"payments": [0, 1]})  # ElectionNotNeeded on 1 is ignored
        assert partition_of(admin, "payments", 0)["leader_id"] == preferred
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            admin.elect_leaders(0, {"ghost": [0]})
    finally:
        admin.close()


def test_describe_log_dirs_totals_and_alter_replica_log_dirs(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    (b1,) = sandbox_admin.describe_log_dirs(brokers=[1])
    (d,) = b1["log_dirs"]
    used = sum(p["partition_size"] for t in d["topics"] for p in t["partitions"])
    assert d["log_dir"] == "/var/lib/kafka/data" and d["total_bytes"] - d["usable_bytes"] == used > 0
    replicas = partition_of(sandbox_admin, "orders", 0)["replica_nodes"]
    elsewhere = outside(replicas, 1)[0]
    result = sandbox_admin.alter_replica_log_dirs({
        TopicPartitionReplica("orders", 0, replicas[0]): "/var/lib/kafka/data",
        TopicPartitionReplica("orders", 0, elsewhere): "/var/lib/kafka/data",
        TopicPartitionReplica("orders", 1, 2): "/mnt/nowhere",
    })
    assert result[TopicPartitionReplica("orders", 0, replicas[0])] is Errors.NoError
    assert result[TopicPartitionReplica("orders", 0, elsewhere)] is Errors.ReplicaNotAvailableError
    assert result[TopicPartitionReplica("orders", 1, 2)] is Errors.LogDirNotFoundError


def test_responses_keep_request_order_when_pipelined(sandbox: SandboxCluster) -> None:
    requests = [(MetadataRequest(topics=None), 12), (ApiVersionsRequest(), 3),
                (ListPartitionReassignmentsRequest(timeout_ms=100, topics=None), 0), (MetadataRequest(topics=[]), 1)]
    with socket.create_connection(("127.0.0.1", sandbox.ports[1]), timeout=5) as sock:
        sock.sendall(b"".join(encode(r, v, 100 + i) for i, (r, v) in enumerate(requests)))
        ids = [struct.unpack_from(">i", read_frame(sock))[0] for _ in requests]
    assert ids == [100, 101, 102, 103]


def test_small_custom_topics(sandbox_factory: Any) -> None:
    from kafka.admin import KafkaAdminClient

    sb = sandbox_factory(brokers=2, racks=0, topics=[TopicSpec("one", 3, 2, 1000, 10.0)])
    admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000)
    try:
        (t,) = admin.describe_topics()
        assert t["name"] == "one" and [len(p["replica_nodes"]) for p in t["partitions"]] == [2, 2, 2]
        assert all(b["rack"] is None for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()
