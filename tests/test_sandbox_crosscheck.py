"""Independent clients decode the sandbox the same way kafka-python does, so a schema mistake
shared by our server and kafka-python's codec would show up (broker-semantics §4.4 item 10)."""
from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.rawclient import read_frame

confluent_admin = pytest.importorskip("confluent_kafka.admin")


def kp_partitions(admin: Any) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    return {(t["name"], p["partition_index"]): (p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for t in admin.describe_topics() for p in t["partitions"]}


@pytest.fixture
def moving(sandbox: SandboxCluster, sandbox_admin: Any) -> SandboxCluster:
    """The default sandbox with three throttled moves in flight (union replica lists in metadata)."""
    sandbox_admin.alter_configs([KpConfigResource(ConfigResourceType.BROKER, str(b),
                                                  {"follower.replication.throttled.rate": "1000"})
                                 for b in range(1, 7)], incremental=True, raise_on_unknown=False)
    sandbox_admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "orders",
                                                  {"follower.replication.throttled.replicas": "*"})],
                                incremental=True, raise_on_unknown=False)
    moves = {}
    for i in range(3):
        replicas = kp_partitions(sandbox_admin)[("orders", i)][1]
        moves[TopicPartition("orders", i)] = [b for b in range(1, 7) if b not in replicas]
    assert set(sandbox_admin.alter_partition_reassignments(moves).values()) == {None}
    sandbox.advance(2)
    return sandbox


def test_confluent_metadata_matches_kafka_python(moving: SandboxCluster, sandbox_admin: Any) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": moving.bootstrap})
    md = admin.list_topics(timeout=10)
    assert md.controller_id in moving.ports  # a random live broker, as KRaft brokers name one
    assert md.cluster_id == sandbox_admin.describe_cluster()["cluster_id"]
    assert {b.id: b.port for b in md.brokers.values()} == moving.ports
    theirs = {(name, p.id): (p.leader, list(p.replicas), list(p.isrs))
              for name, t in md.topics.items() for p in t.partitions.values()}
    ours = kp_partitions(sandbox_admin)
    assert theirs == ours
    assert len(ours[("orders", 0)][1]) == 6  # the union list of a move in flight


def test_confluent_describe_cluster_and_topics(moving: SandboxCluster, sandbox_admin: Any) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": moving.bootstrap})
    cluster = admin.describe_cluster(request_timeout=10).result()
    assert sorted((n.id, n.port, n.rack) for n in cluster.nodes) == sorted(
        (b["broker_id"], b["port"], b["rack"]) for b in sandbox_admin.describe_cluster()["brokers"])
    from confluent_kafka import TopicCollection

    desc = admin.describe_topics(TopicCollection(["orders"]), request_timeout=10)["orders"].result()
    theirs = {p.id: ([r.id for r in p.replicas], [r.id for r in p.isr]) for p in desc.partitions}
    ours = {i: (rep, isr) for (t, i), (_, rep, isr) in kp_partitions(sandbox_admin).items() if t == "orders"}
    assert theirs == ours


def test_confluent_configs_match_kafka_python(moving: SandboxCluster, sandbox_admin: Any) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": moving.bootstrap})
    CR, RT = confluent_admin.ConfigResource, confluent_admin.ResourceType
    (fut,) = admin.describe_configs([CR(RT.BROKER, "3")], request_timeout=10).values()
    theirs = {k: (e.value, e.is_read_only, e.source) for k, e in fut.result().items()}
    ours = sandbox_admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "3")],
                                          config_filter="all")["broker"]["3"]
    assert theirs == {k: (v["value"], v["read_only"], confluent_admin.ConfigSource[v["config_source"]].value)
                      for k, v in ours.items()}
    assert theirs["follower.replication.throttled.rate"] == ("1000", False, 2)  # writable, as on Kafka 4.4
    (fut,) = admin.describe_configs([CR(RT.TOPIC, "orders")], request_timeout=10).values()
    entry = fut.result()["follower.replication.throttled.replicas"]
    assert (entry.value, entry.source, entry.is_read_only) == ("*", 1, False)
    # and a write through librdkafka is seen by kafka-python
    res = CR(RT.TOPIC, "payments", incremental_configs=[confluent_admin.ConfigEntry(
        "leader.replication.throttled.replicas", "0:1,1:2",
        incremental_operation=confluent_admin.AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res], request_timeout=10).values():
        f.result()
    got = sandbox_admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "payments")])
    assert got["topic"]["payments"]["leader.replication.throttled.replicas"]["value"] == "0:1,1:2"


def _list_reassignments_by_hand(port: int) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments v0 (flexible), encoded and decoded with struct only."""
    client = b"hand"
    request = (struct.pack(">hhih", 46, 0, 99, len(client)) + client + b"\x00"   # header v2
               + struct.pack(">i", 5000) + b"\x00" + b"\x00")                     # timeout, topics=null, tags
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        buf = read_frame(sock)
    pos = 0

    def uvarint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def take(fmt: str) -> Any:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return value

    def string() -> str | None:
        nonlocal pos
        n = uvarint() - 1
        if n < 0:
            return None
        text = buf[pos:pos + n].decode()
        pos += n
        return text

    def ints() -> list[int]:
        return [take(">i") for _ in range(uvarint() - 1)]

    assert take(">i") == 99 and uvarint() == 0        # correlation id, header tags
    take(">i")                                         # throttle time
    assert take(">h") == 0 and string() is None        # error code and message
    out = {}
    for _ in range(uvarint() - 1):
        name = string()
        for _ in range(uvarint() - 1):
            index = take(">i")
            out[(str(name), index)] = (ints(), ints(), ints())
            assert uvarint() == 0
        assert uvarint() == 0
    assert uvarint() == 0 and pos == len(buf)
    return out


def test_hand_decoded_reassignment_listing_matches_kafka_python(moving: SandboxCluster, sandbox_admin: Any) -> None:
    by_hand = _list_reassignments_by_hand(moving.ports[1])
    ours = {(tp.topic, tp.partition): (v["replicas"], v["adding_replicas"], v["removing_replicas"])
            for tp, v in sandbox_admin.list_partition_reassignments().items()}
    assert by_hand == ours and len(ours) == 3


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install -y kcat)")
def test_kcat_metadata_matches_kafka_python(moving: SandboxCluster, sandbox_admin: Any) -> None:
    out = subprocess.run(["kcat", "-L", "-J", "-b", moving.bootstrap, "-m", "10"], capture_output=True, text=True,
                         timeout=60, check=True)
    md = json.loads(out.stdout)
    assert md["controllerid"] in moving.ports  # a random live broker, as KRaft brokers name one
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2, 3, 4, 5, 6]
    theirs = {(t["topic"], p["partition"]): (p["leader"], [r["id"] for r in p["replicas"]], [r["id"] for r in p["isrs"]])
              for t in md["topics"] for p in t["partitions"]}
    assert theirs == kp_partitions(sandbox_admin)
