"""Real clients write and read through a throttled move (Kafka's
testProduceAndConsumeWithReassignmentInProgress and testHighWaterMarkAfterPartitionReassignment,
on the sandbox over TCP).

Each client produces N messages with acks=all, the Kafka-compatible CLI starts a throttled move
of every partition of the topic (dropping each partition's leader, so leadership changes at
completion), the client produces N more while the move is in progress, sandbox time jumps ahead
until the move completes (verified with the CLI), and assign()-based consumers read everything:
2N messages, each partition in order, none lost or duplicated, high watermarks unchanged by the
move. The sandbox runs on a scaled clock at speed 1 because real clients wait in wall time.
"""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest
from cli_helpers import KREASSIGN

from kreassign.cluster.kafka_json import format_reassignment
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.fetch import FetchConfig
from kreassign.sandbox.topics import TopicSpec

pytestmark = pytest.mark.e2e

TOPIC = "events"
PARTITIONS = 4
N = 400
THROTTLE = 20_000      # B/s: each partition's ~N/2 kB copy takes well over the time clients need
# small follower fetches, so the copy cannot overshoot the throttle by a whole backlog in one fetch
SMALL_FETCHES = FetchConfig(partition_max_bytes=1000, response_max_bytes=4000)
POLL_LIMIT = 400    # bounded consume loops (each poll waits at most 0.1 s)


class Client(Protocol):
    def produce(self, start: int, count: int) -> None: ...

    def consume(self, total: int) -> dict[int, list[str]]: ...

    def high_watermarks(self) -> dict[int, int]: ...


def message(partition: int, seq: int) -> str:
    return f"{partition}:{seq:06d}:" + "x" * 1000  # ~1 kB


class Confluent:
    def __init__(self, bootstrap: str) -> None:
        import confluent_kafka

        self.ck = confluent_kafka
        self.bootstrap = bootstrap

    def produce(self, start: int, count: int) -> None:
        errors: list[Any] = []
        producer = self.ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                                     "linger.ms": 5, "message.timeout.ms": 30000})
        for i in range(start, start + count):
            p = i % PARTITIONS
            producer.produce(TOPIC, value=message(p, i // PARTITIONS).encode(), partition=p,
                             on_delivery=lambda err, _msg: errors.append(err) if err else None)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert errors == []

    def consume(self, total: int) -> dict[int, list[str]]:
        consumer = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "assign-only",
                                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.assign([self.ck.TopicPartition(TOPIC, p, self.ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        try:
            for _ in range(POLL_LIMIT):
                if sum(map(len, got.values())) >= total:
                    break
                for m in consumer.consume(num_messages=1000, timeout=0.1):
                    assert m.error() is None, m.error()
                    got[m.partition()].append(m.value().decode())
        finally:
            consumer.close()
        return got

    def high_watermarks(self) -> dict[int, int]:
        consumer = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "assign-only",
                                     "enable.auto.commit": False})
        try:
            return {p: consumer.get_watermark_offsets(self.ck.TopicPartition(TOPIC, p), timeout=10)[1]
                    for p in range(PARTITIONS)}
        finally:
            consumer.close()


class KafkaPython:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, start: int, count: int) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5)
        futures = [producer.send(TOPIC, value=message(i % PARTITIONS, i // PARTITIONS).encode(),
                                 partition=i % PARTITIONS) for i in range(start, start + count)]
        producer.flush(30)
        assert all(f.get(timeout=1).offset >= 0 for f in futures)
        producer.close()

    def consume(self, total: int) -> dict[int, list[str]]:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                                 auto_offset_reset="earliest")
        consumer.assign([KTP(TOPIC, p) for p in range(PARTITIONS)])
        got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        try:
            for _ in range(POLL_LIMIT):
                if sum(map(len, got.values())) >= total:
                    break
                for tp, records in consumer.poll(timeout_ms=100).items():
                    got[tp.partition].extend(r.value.decode() for r in records)
        finally:
            consumer.close()
        return got

    def high_watermarks(self) -> dict[int, int]:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
        try:
            ends = consumer.end_offsets([KTP(TOPIC, p) for p in range(PARTITIONS)])
            return {tp.partition: off for tp, off in ends.items()}
        finally:
            consumer.close()


class Kcat:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.kcat = shutil.which("kcat") or shutil.which("kafkacat") or "kcat"

    def produce(self, start: int, count: int) -> None:
        for p in range(PARTITIONS):
            lines = "".join(message(p, i // PARTITIONS) + "\n" for i in range(start, start + count)
                            if i % PARTITIONS == p)
            subprocess.run([self.kcat, "-b", self.bootstrap, "-P", "-t", TOPIC, "-p", str(p), "-X", "acks=all"],
                           input=lines, text=True, check=True, timeout=60)

    def consume(self, total: int) -> dict[int, list[str]]:
        got = {}
        for p in range(PARTITIONS):
            out = subprocess.run([self.kcat, "-b", self.bootstrap, "-C", "-t", TOPIC, "-p", str(p), "-o", "beginning",
                                  "-e", "-q"], capture_output=True, text=True, check=True, timeout=60).stdout
            got[p] = out.splitlines()
        return got

    def high_watermarks(self) -> dict[int, int]:
        out = {}
        for p in range(PARTITIONS):  # -Q with timestamp -1: the end offset ("events [0] offset 200")
            line = subprocess.run([self.kcat, "-b", self.bootstrap, "-Q", "-t", f"{TOPIC}:{p}:-1"],
                                  capture_output=True, text=True, check=True, timeout=60).stdout.strip()
            out[p] = int(line.rsplit(" ", 1)[1])
        return out


def kcat_or_skip(bootstrap: str) -> Client:
    if shutil.which("kcat") is None and shutil.which("kafkacat") is None:
        pytest.skip("kcat is not installed (apt-get install -y kcat); the confluent-kafka and kafka-python "
                    "variants cover the same scenario")
    return Kcat(bootstrap)


CLIENTS: dict[str, Callable[[str], Client]] = {"confluent-kafka": Confluent, "kafka-python": KafkaPython,
                                               "kcat": kcat_or_skip}


def cli(bootstrap: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "client.properties"
    config.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n")
    return KREASSIGN.subprocess("--bootstrap-server", bootstrap, "--command-config", str(config), *argv, timeout=120)


@pytest.mark.parametrize("client_name", list(CLIENTS))
def test_produce_and_consume_through_a_throttled_move(
        client_name: str, sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KREASSIGN_JOURNAL_DIR", str(tmp_path / "journal"))
    sb = sandbox_factory(brokers=6, racks=3, topics=[TopicSpec(TOPIC, PARTITIONS, 3, 0, 0.0)],
                         clock=ScaledClock(1.0), fetch=SMALL_FETCHES)
    client = CLIENTS[client_name](sb.bootstrap)
    client.produce(0, N)

    with sb.locked() as eng:
        current = {p.index: list(p.replicas) for p in eng.topics[TOPIC].partitions}
    targets = {TopicPartition(TOPIC, i): [*r[1:], next(b for b in range(1, 7) if b not in r)]
               for i, r in current.items()}
    plan = tmp_path / "plan.json"
    plan.write_text(format_reassignment(targets))
    started = cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--execute",
                  "--throttle", str(THROTTLE))
    assert started.returncode == 0, started.stdout + started.stderr

    client.produce(N, N)
    with sb.locked() as eng:
        in_flight = [p.index for p in eng.topics[TOPIC].partitions if p.reassigning]
    assert in_flight == list(range(PARTITIONS))  # the second half was written during the move
    hw_during = client.high_watermarks()
    assert hw_during == {p: 2 * N // PARTITIONS for p in range(PARTITIONS)}

    sb.advance(600)  # sandbox time: the throttled copies finish
    verified = cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.count("is completed.") == PARTITIONS
    with sb.locked() as eng:
        assert {p.index: p.replicas for p in eng.topics[TOPIC].partitions} == {
            tp.partition: r for tp, r in targets.items()}
        assert all(p.leader != current[p.index][0] for p in eng.topics[TOPIC].partitions)

    assert client.high_watermarks() == hw_during
    got = client.consume(2 * N)
    for p in range(PARTITIONS):
        assert got[p] == [message(p, seq) for seq in range(2 * N // PARTITIONS)]


@pytest.mark.parametrize("client_name", ["confluent-kafka", "kafka-python"])
def test_clients_follow_a_leader_change(client_name: str, sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """The leader of every partition stops between two halves: producers and consumers get
    NOT_LEADER_OR_FOLLOWER or a closed connection, refresh metadata and carry on with the new
    leaders (leader epochs bumped), with nothing lost or duplicated."""
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec(TOPIC, PARTITIONS, 3, 0, 0.0)], clock=ScaledClock(1.0))
    client = CLIENTS[client_name](sb.bootstrap)
    client.produce(0, N)
    with sb.locked() as eng:
        leaders = {p.index: (p.leader, p.leader_epoch) for p in eng.topics[TOPIC].partitions}
    victim = leaders[0][0]
    sb.stop_broker(victim)
    with sb.locked() as eng:
        for p in eng.topics[TOPIC].partitions:
            assert p.leader != victim
            assert p.leader_epoch == leaders[p.index][1] + (1 if leaders[p.index][0] == victim else 0)
    client.produce(N, N)
    got = client.consume(2 * N)
    for p in range(PARTITIONS):
        assert got[p] == [message(p, seq) for seq in range(2 * N // PARTITIONS)]


def test_live_confluent_clients_ride_through_a_leader_change(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """One producer and one consumer stay connected while the leaders' broker stops: librdkafka
    refreshes metadata, validates its fetch positions with OffsetForLeaderEpoch and goes on."""
    import confluent_kafka as ck

    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec(TOPIC, PARTITIONS, 3, 0, 0.0)], clock=ScaledClock(1.0))
    errors: list[Any] = []
    producer = ck.Producer({"bootstrap.servers": sb.bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 5})
    consumer = ck.Consumer({"bootstrap.servers": sb.bootstrap, "group.id": "assign-only", "enable.auto.commit": False,
                            "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 500})
    consumer.assign([ck.TopicPartition(TOPIC, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}

    def produce(start: int) -> None:
        for i in range(start, start + N):
            producer.produce(TOPIC, value=message(i % PARTITIONS, i // PARTITIONS).encode(), partition=i % PARTITIONS,
                             on_delivery=lambda err, _m: errors.append(err) if err else None)
        assert producer.flush(30) == 0

    def consume(total: int) -> None:
        for _ in range(POLL_LIMIT):
            if sum(map(len, got.values())) >= total:
                return
            for m in consumer.consume(num_messages=1000, timeout=0.1):
                assert m.error() is None, m.error()
                got[m.partition()].append(m.value().decode())

    try:
        produce(0)
        consume(N)
        with sb.locked() as eng:
            victim = eng.partition(TOPIC, 0).leader
        sb.stop_broker(victim)
        produce(N)
        consume(2 * N)
    finally:
        consumer.close()
    assert errors == []
    assert sb.timings.count.get("OffsetForLeaderEpoch", 0) > 0  # positions were validated (KIP-320)
    for p in range(PARTITIONS):
        assert got[p] == [message(p, seq) for seq in range(2 * N // PARTITIONS)]


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent(compression: str, sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """The leader checks the batch header and CRC only (no recompression); consumers decompress."""
    import confluent_kafka as ck

    sb = sandbox_factory(brokers=1, racks=0, topics=[TopicSpec(TOPIC, 1, 1, 0, 0.0)], clock=ScaledClock(1.0))
    producer = ck.Producer({"bootstrap.servers": sb.bootstrap, "compression.type": compression, "linger.ms": 20})
    values = [f"{compression}-{i}".encode() * 20 for i in range(200)]
    for v in values:
        producer.produce(TOPIC, value=v, partition=0)
    assert producer.flush(10) == 0
    with sb.locked() as eng:
        p0 = eng.partition(TOPIC, 0)
        assert eng.log_end[p0.row] == sb.data.log(p0).byte_end > 0  # the stored (compressed) bytes count
    consumer = ck.Consumer({"bootstrap.servers": sb.bootstrap, "group.id": "assign-only", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    got: list[bytes] = []
    try:
        for _ in range(POLL_LIMIT):
            if len(got) >= len(values):
                break
            got += [m.value() for m in consumer.consume(num_messages=1000, timeout=0.1) if m.error() is None]
    finally:
        consumer.close()
    assert got == values
