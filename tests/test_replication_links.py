"""The replication links of a local Kafka cluster (sandbox/kafka_engine/link.py): which follower a
connection serves, how bytes queue on a link, and that the bytes cross intact and are counted on
the leader's way out and the follower's way in."""
from __future__ import annotations

import socket
import struct
import threading

import pytest

from kreassign.sandbox.kafka_engine.cluster import free_ports
from kreassign.sandbox.kafka_engine.link import ReplicationLinks, Wire, fetcher_of, reserve
from kreassign.sandbox.kafka_engine.node_config import Listener


def request(client_id: bytes | None, body: bytes = b"") -> bytes:
    """A Kafka request: size, api key, version, correlation id, client id (None: null), body."""
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    payload = struct.pack(">hhi", 1, 16, 7) + cid + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(("first", "broker"), [
    (request(b"broker-3-fetcher-0"), 3),
    (request(b"broker-12-fetcher-4", b"\x00" * 40), 12),
    (request(b"kreassign-canary"), None),
    (request(b"broker-3-fetcher-0x"), None),
    (request(None), None),
    (request(b"broker-3-fetcher-0")[:12], None),  # ends before the client id
])
def test_a_connection_serves_the_broker_its_replica_fetcher_names(first: bytes, broker: int | None) -> None:
    assert fetcher_of(first) == broker


def test_bytes_queue_on_every_wire_they_cross() -> None:
    out, into, other = Wire(1000.0), Wire(1000.0), Wire(500.0)
    assert reserve([out, into], 500, now=10.0) == 10.5
    # the leader's way out is busy until 10.5: the next bytes start then, whoever they go to
    assert reserve([out], 1000, now=10.2) == 11.5
    # the slower wire sets the pace, and both are held until the bytes have crossed
    assert reserve([into, other], 500, now=12.0) == 13.0
    assert (out.bytes, into.bytes, other.bytes) == (1500, 1000, 500)
    assert (out.free_at, into.free_at, other.free_at) == (11.5, 13.0, 13.0)


def test_a_late_wake_keeps_the_links_rate_a_pause_does_not_bank_it() -> None:
    wire = Wire(1000.0)
    reserve([wire], 1000, now=0.0)  # busy until 1.0
    # woken 10 ms late: the bytes go as if sent on time
    assert reserve([wire], 1000, now=1.01) == 2.0
    # idle for a second: no credit, the bytes take their time from now
    assert reserve([wire], 1000, now=3.0) == 4.0


def test_responses_cross_intact_and_count_on_the_leader_and_the_follower() -> None:
    """A stand-in broker answers each request with `size` bytes; a 'follower' connects through
    broker 1's link as broker 2's replica fetcher would."""
    upstream, link_port, idle_upstream, idle_link = free_ports(4)
    size = 300_000
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    server = socket.create_server(("127.0.0.1", upstream))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            got = b""
            while len(got) < len(request(b"broker-2-fetcher-0", b"x" * 10)):
                got += conn.recv(65536)
            conn.sendall(payload)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    links = ReplicationLinks({1: upstream, 2: idle_upstream}, {1: link_port, 2: idle_link}, rate_bps=10e6).start()
    try:
        with socket.create_connection(("127.0.0.1", link_port), timeout=10) as c:
            c.sendall(request(b"broker-2-fetcher-0", b"x" * 10))
            got = b""
            while len(got) < size:
                chunk = c.recv(65536)
                assert chunk, "the link closed early"
                got += chunk
        assert got == payload
        thread.join(timeout=10)
        assert links.sent() == {1: size, 2: 0}
        assert links.received() == {1: 0, 2: size}
    finally:
        links.stop()
        server.close()


def test_a_taken_link_port_is_refused_at_start() -> None:
    (port,) = free_ports(1)
    with socket.create_server(("127.0.0.1", port)):
        with pytest.raises(OSError):
            ReplicationLinks({1: 1}, {1: port}, rate_bps=1e6).start()


def test_a_link_port_taken_after_the_check_is_a_port_taken_error() -> None:
    """The cluster looks at its ports before it starts anything; a port taken in between (the
    other test worker's clients) is PortTaken, which the test fixtures answer with new ports."""
    from kreassign.sandbox.errors import PortTaken
    from kreassign.sandbox.kafka_engine import cluster as kafka_cluster

    layout = kafka_cluster.KafkaCluster._new_layout({1: None}, 1, 0, Listener(), {}, links=True)
    with socket.create_server(("127.0.0.1", layout.link_ports[1])):
        probe = object.__new__(kafka_cluster.KafkaCluster)
        probe.network_bps, probe.layout, probe._links = 1e6, layout, None
        with pytest.raises(PortTaken, match="a replication link could not listen on 127.0.0.1"):
            probe._start_links()
