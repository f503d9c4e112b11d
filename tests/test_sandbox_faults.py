"""Fault injection: stopped brokers, held responses, dropped connections, injected errors."""
from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, TypeVar

import kafka.errors as Errors
import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsRequest

from kreassign.sandbox import codes
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.rawclient import encode, read_frame

T = TypeVar("T")


def admin_for(sb: SandboxCluster, **kwargs: Any) -> Any:
    kwargs.setdefault("request_timeout_ms", 5000)
    return KafkaAdminClient(bootstrap_servers=sb.bootstrap, **kwargs)


def asked(call: Callable[[], T]) -> T:
    """A call of kafka-python's admin client, again when it went to a killed broker: a broker
    killed but not yet fenced is still in the metadata (and may be named controller), as on a
    real KRaft cluster, and the client does not move on to another one by itself."""
    from kafka.errors import KafkaConnectionError

    for _ in range(10):
        try:
            return call()
        except KafkaConnectionError:
            continue
    return call()


def isr(admin: Any, topic: str, index: int) -> list[int]:
    (t,) = asked(lambda: admin.describe_topics([topic]))
    return next(p["isr_nodes"] for p in t["partitions"] if p["partition_index"] == index)


def unfenced(admin: Any) -> list[int]:
    return [b["broker_id"] for b in asked(admin.describe_cluster)["brokers"] if not b["is_fenced"]]


def test_stopped_broker_leaves_metadata_and_isr_then_rejoins(sandbox: SandboxCluster) -> None:
    port = sandbox.ports[4]
    sandbox.stop_broker(4)
    # a fresh client: an old one may still pick the stopped broker for its next request
    admin = admin_for(sandbox)
    try:
        assert unfenced(admin) == [1, 2, 3, 5, 6]
        hosted = [(t["name"], p["partition_index"]) for t in admin.describe_topics()
                  for p in t["partitions"] if 4 in p["replica_nodes"]]
        assert hosted and all(4 not in isr(admin, t, i) for t, i in hosted)
    finally:
        admin.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    sandbox.advance(30)
    sandbox.start_broker(4)
    assert sandbox.ports[4] == port
    sandbox.advance(30)
    admin = admin_for(sandbox)
    try:
        assert all(4 in isr(admin, t, i) for t, i in hosted)
    finally:
        admin.close()


def test_killed_broker_is_fenced_when_its_session_times_out(sandbox: SandboxCluster) -> None:
    """kill -9 as a KRaft controller sees it (found on real Kafka 4.4): the broker stops answering
    at once but stays registered, a leader and in its ISRs for broker.session.timeout.ms (9 s),
    and copies nothing meanwhile; then it is fenced. Started again, it serves again."""
    with sandbox.locked() as engine:
        led = [(p.topic, p.index) for p in engine.rows if p.leader == 4]
        followed = [p for p in engine.rows if 4 in p.isr and p.leader != 4]
        lagging_before = {(p.topic, p.index): dict(p.lagging) for p in followed}
    sandbox.stop_broker(4, kill=True)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", sandbox.ports[4]), timeout=5).close()
    sandbox.advance(8.9)
    admin = admin_for(sandbox)
    try:
        assert unfenced(admin) == [1, 2, 3, 4, 5, 6]
        assert led and all(4 in isr(admin, t, i) for t, i in led)
        with sandbox.locked() as engine:
            assert all(engine.partition(t, i).leader == 4 for t, i in led)  # type: ignore[union-attr]
            assert {(p.topic, p.index): dict(p.lagging) for p in followed} == lagging_before
        sandbox.advance(0.2)
        assert unfenced(admin) == [1, 2, 3, 5, 6]
        assert all(4 not in isr(admin, t, i) for t, i in led)
    finally:
        admin.close()
    sandbox.start_broker(4)
    sandbox.advance(30)
    admin = admin_for(sandbox)
    try:
        assert unfenced(admin) == [1, 2, 3, 4, 5, 6]
        assert all(4 in isr(admin, t, i) for t, i in led)
    finally:
        admin.close()


def test_held_response_times_out_the_client_then_recovers(sandbox: SandboxCluster) -> None:
    admin = admin_for(sandbox, request_timeout_ms=300)
    try:
        sandbox.delay_responses(api="ListPartitionReassignments")
        with pytest.raises((Errors.KafkaTimeoutError, Errors.RequestTimedOutError)):
            admin.list_partition_reassignments()
        sandbox.release_responses()
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


def test_dropped_request_closes_the_connection(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    sandbox.drop_requests("Metadata", count=1)
    with pytest.raises(Errors.KafkaConnectionError):
        sandbox_admin.describe_topics(["orders"])
    assert sandbox_admin.describe_topics(["orders"])[0]["name"] == "orders"


def test_drop_connections_closes_open_sockets(sandbox: SandboxCluster) -> None:
    with socket.create_connection(("127.0.0.1", sandbox.ports[2]), timeout=5) as sock:
        sock.sendall(encode(ApiVersionsRequest(), 0, 1))
        read_frame(sock)
        sandbox.drop_connections(broker=2)
        with pytest.raises(ConnectionError):
            sock.sendall(encode(ApiVersionsRequest(), 0, 2))
            read_frame(sock)


def test_injected_errors(sandbox: SandboxCluster, sandbox_admin: Any) -> None:
    sandbox.inject_error("ListPartitionReassignments", 31, count=1, message="no")  # CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(Errors.ClusterAuthorizationFailedError):
        sandbox_admin.list_partition_reassignments()
    assert sandbox_admin.list_partition_reassignments() == {}
    sandbox.inject_error("ListPartitionReassignments", codes.NOT_CONTROLLER, count=1)
    assert sandbox_admin.list_partition_reassignments() == {}  # kafka-python refreshes and retries once
    # any broker: KRaft brokers all accept the controller's requests (and name a random one)
    sandbox.inject_error(45, codes.INVALID_REPLICA_ASSIGNMENT, per_item=True)
    result = sandbox_admin.alter_partition_reassignments({TopicPartition("orders", 0): [1, 2, 3]})
    assert result == {TopicPartition("orders", 0): Errors.InvalidReplicationAssignmentError}
    sandbox.clear_faults()
    assert sandbox_admin.alter_partition_reassignments({TopicPartition("orders", 0): [1, 2, 3]}) == {
        TopicPartition("orders", 0): None}


def test_unknown_fault_targets_are_refused(sandbox: SandboxCluster) -> None:
    with pytest.raises(ValueError, match="unknown API name"):
        sandbox.inject_error("EndTxn", 1)
    from kreassign.cluster.errors import InputError

    with pytest.raises(InputError, match="broker 9 is not part of the sandbox"):
        sandbox.stop_broker(9)
