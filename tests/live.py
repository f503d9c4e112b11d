"""One backend for the live tests: the same test runs against the emulator and against real
Apache Kafka brokers (`conftest_kafka.py` provides the `live` fixture, parametrized over both).

Both have 5 brokers (ids 1..5) in 2 racks with 3 log dirs each. A test creates its own topics
(`live.topic`), writes real records (`live.produce`), and lets moves run with `live.finish_moves`:
the emulator's clock is manual (nothing moves until a test says so), real Kafka runs in real
time. A move of `HOLD_BYTES` under a `HOLD_RATE` throttle stays in flight for minutes on real
Kafka (each throttled fetch takes at most replica.fetch.max.bytes, 1 MiB, and the next waits until
the 11 one-second quota windows forget it) and forever on the emulator until time advances.

After each test the real cluster is put back: reassignments cancelled, the test's topics
deleted, every broker's throttle rates removed, the execution lock's markers cleared, stopped
brokers started again.
"""
from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from kreassign.cluster.model import TopicPartition

BROKERS = 5
RACKS = 2
LOG_DIRS = 3
HOLD_RATE = 1
"""a throttle (B/s) under which a move of HOLD_BYTES stays in flight"""
HOLD_BYTES = 24 * 1024 * 1024
RUN_RATE = 100_000_000
"""a throttle (B/s) under which small moves finish at once"""
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
CHUNK = 64 * 1024


class LiveCluster(Protocol):
    engine: str
    bootstrap: str
    brokers: list[int]

    def topic(self, partitions: int = 1, rf: int = 3, *, assignment: Mapping[int, Sequence[int]] | None = None,
              name: str | None = None) -> str: ...

    def produce(self, topic: str, partition: int, nbytes: int) -> None: ...

    def finish_moves(self, timeout_s: float = 120.0) -> None: ...

    def stop_broker(self, broker: int) -> None: ...

    def start_broker(self, broker: int) -> None: ...

    def admin(self) -> contextlib.AbstractContextManager[Any]: ...


def write_records(bootstrap: str, topic: str, partition: int, nbytes: int) -> None:
    """`nbytes` of incompressible values into one partition (acks=1, 64 KiB records)."""
    from kafka import KafkaProducer

    payload = bytes(range(256)) * (CHUNK // 256)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=10, batch_size=1024 * 1024,
                             max_request_size=2 * 1024 * 1024, client_id="kreassign-tests")
    try:
        for offset in range(0, nbytes, CHUNK):
            producer.send(topic, value=payload[:min(CHUNK, nbytes - offset)], partition=partition)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=10)


def await_topic(ports: Iterable[int], name: str, partitions: int) -> None:
    """Until every broker's metadata has the topic with its leaders (CreateTopics returns when the
    controller has it; brokers learn it a moment later)."""
    from kafka.protocol.metadata import MetadataRequest

    from kreassign.sandbox.rawclient import roundtrip

    deadline = time.monotonic() + 30
    for port in ports:
        while True:
            response = roundtrip(port, MetadataRequest(topics=[name], allow_auto_topic_creation=False), 4)
            topic = response.topics[0]
            if topic.error_code == 0 and len(topic.partitions) == partitions and all(
                    p.leader_id >= 0 for p in topic.partitions):
                break
            assert time.monotonic() < deadline, f"the broker on port {port} does not know topic {name}"
            time.sleep(0.05)


def clear_broker_rates(port: Any, brokers: Iterable[int]) -> None:
    """Delete every throttle rate set on these brokers."""
    configs = port.describe_broker_configs(brokers, THROTTLE_KEYS).configs
    ops = {b: {k: None for k, e in entries.items() if e.value is not None and e.is_override}
           for b, entries in configs.items()}
    ops = {b: o for b, o in ops.items() if o}
    if ops:
        assert port.incremental_alter_configs(ops).ok


class _Base:
    engine = ""
    bootstrap = ""
    brokers: list[int] = list(range(1, BROKERS + 1))

    def __init__(self) -> None:
        self.created: list[str] = []

    def _name(self, name: str | None) -> str:
        return name or f"t-{uuid.uuid4().hex[:8]}"

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        from kreassign.cluster.admin import open_admin

        with open_admin(self.bootstrap, timeout_s=30.0) as port:
            yield port

    def topic(self, partitions: int = 1, rf: int = 3, *, assignment: Mapping[int, Sequence[int]] | None = None,
              name: str | None = None) -> str:
        """Create a topic (with `assignment`, else brokers 1..rf, 2..rf+1, ... in turn)."""
        name = self._name(name)
        if assignment is None:
            assignment = {p: [(p + i) % BROKERS + 1 for i in range(rf)] for p in range(partitions)}
        with self.admin() as port:
            error = port.create_topic(name, {p: list(r) for p, r in assignment.items()})
        assert error is None, f"could not create {name}: {error}"
        self.created.append(name)
        self._await_topic(name, len(assignment))
        return name

    def _await_topic(self, name: str, partitions: int) -> None:
        pass

    def produce(self, topic: str, partition: int, nbytes: int) -> None:
        write_records(self.bootstrap, topic, partition, nbytes)

    def reassigning(self) -> dict[TopicPartition, Any]:
        with self.admin() as port:
            return dict(port.list_reassignments())


class EmulatorLive(_Base):
    """A fresh 5-broker emulator per test, on a manual clock."""

    engine = "emulator"

    def __init__(self, sandbox: Any) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.bootstrap = sandbox.bootstrap

    def finish_moves(self, timeout_s: float = 120.0, *, step_s: float = 10.0, limit_s: float = 36_000.0) -> None:
        """Advance sandbox time until no reassignment is in flight (at most `limit_s`)."""
        advanced = 0.0
        while self.reassigning():
            assert advanced < limit_s, f"moves still in flight after {limit_s:.0f} sandbox seconds"
            self.sandbox.advance(step_s)
            advanced += step_s

    def advance(self, seconds: float) -> None:
        self.sandbox.advance(seconds)

    def stop_broker(self, broker: int) -> None:
        self.sandbox.stop_broker(broker)

    def start_broker(self, broker: int) -> None:
        self.sandbox.start_broker(broker)


class KafkaLive(_Base):
    """The session's real Kafka cluster, shared by every test and put back after each."""

    engine = "kafka"

    def __init__(self, cluster: Any) -> None:
        super().__init__()
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def _await_topic(self, name: str, partitions: int) -> None:
        await_topic([self.cluster.ports[b] for b in self.cluster.brokers], name, partitions)

    def finish_moves(self, timeout_s: float = 120.0) -> None:
        """Wait (real time) until no reassignment is in flight."""
        deadline = time.monotonic() + timeout_s
        while self.reassigning():
            assert time.monotonic() < deadline, f"moves still in flight after {timeout_s:.0f}s"
            time.sleep(0.2)

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)

    def stop_broker(self, broker: int) -> None:
        self.cluster.stop_broker(broker)

    def start_broker(self, broker: int) -> None:
        self.cluster.start_broker(broker)

    def reset(self) -> None:
        """Put the shared cluster back as the next test expects it."""
        from kreassign.execute.lock import LOCK_KEY, STOP_KEY

        for b in self.cluster.brokers:
            self.cluster.start_broker(b, wait=False)
        self.cluster.wait_ready(self.cluster.brokers)
        with self.admin() as port:
            moving = list(port.list_reassignments())
            if moving:
                port.alter_reassignments({tp: None for tp in moving})
            deadline = time.monotonic() + 60
            while port.list_reassignments():
                assert time.monotonic() < deadline, "could not cancel the test's reassignments"
                time.sleep(0.2)
            clear_broker_rates(port, self.cluster.brokers)
            for name in self.created:
                port.delete_topic(name)
            port.write_markers({LOCK_KEY: None, STOP_KEY: None})
        self.created.clear()
