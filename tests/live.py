"""One backend for the live tests: the same test runs against the emulator and against real
Apache Kafka brokers (`conftest_kafka.py` provides the `live` fixture, parametrized over both).

Both have 5 brokers (ids 1..5) in 2 racks with 3 log dirs each. A test creates its own topics
(`live.topic`), writes real records (`live.produce`), and lets moves run with `live.finish_moves`:
the emulator's clock is manual (nothing moves until a test says so), real Kafka runs in real
time. A move of `HOLD_BYTES` under a `HOLD_RATE` throttle stays in flight for minutes on real
Kafka (each throttled fetch takes at most replica.fetch.max.bytes, 1 MiB, and the next waits until
the 11 one-second quota windows forget it) and forever on the emulator until time advances.

`live.until(condition)` waits for a condition the way each engine can: the emulator steps its
manual clock a second at a time, real Kafka (and an emulator on the wall clock, which tests whose
clients wait for replication ask for with `@pytest.mark.live_wall_clock`) is polled in real time.

After each test the real cluster is put back: reassignments cancelled, the test's topics and
every client-metrics subscription deleted, every broker's throttle rates removed, the execution
lock's markers cleared, stopped brokers started again.
"""
from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
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

    def until(self, done: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None: ...

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


def wait_until(done: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Poll `done` in real time until it holds (at most `timeout_s`): a real cluster's state
    follows a change a moment later."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s:.0f}s"
        time.sleep(0.2)


def write_batches(bootstrap: str, topic: str, partition: int, count: int, value_bytes: int) -> None:
    """`count` records of `value_bytes` into one partition, each its own batch (acks=1; a batch
    has no room for a second record), so the log grows by exactly `count * batch_bytes(value_bytes)`."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0, batch_size=batch_bytes(value_bytes),
                             max_request_size=2 * 1024 * 1024, client_id="kreassign-tests")
    try:
        for _ in range(count):
            producer.send(topic, value=b"\x07" * value_bytes, partition=partition)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=10)


def batch_bytes(value_bytes: int) -> int:
    """The size on disk of a v2 record batch holding one record (no key, no headers, no
    compression): the 61-byte batch header, the record's length and its fields."""
    def varint(n: int) -> int:
        zigzag, size = (n << 1) ^ (n >> 63), 1
        while zigzag >= 0x80:
            zigzag >>= 7
            size += 1
        return size

    # attributes, timestamp delta 0, offset delta 0, key length -1, value length and value, 0 headers
    record = 1 + varint(0) + varint(0) + varint(-1) + varint(value_bytes) + value_bytes + varint(0)
    return 61 + varint(record) + record


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

    def until(self, done: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
        wait_until(done, what, timeout_s)


class EmulatorLive(_Base):
    """A fresh 5-broker emulator per test, on a manual clock."""

    engine = "emulator"

    def __init__(self, sandbox: Any, *, wall_clock: bool = False) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.bootstrap = sandbox.bootstrap
        self.wall_clock = wall_clock

    def until(self, done: Callable[[], bool], what: str, timeout_s: float = 120.0, *, step_s: float = 1.0,
              limit_s: float = 3_600.0) -> None:
        """Advance sandbox time `step_s` at a time until `done` holds (at most `limit_s`); on the
        wall clock, poll in real time."""
        if self.wall_clock:
            super().until(done, what, timeout_s)
            return
        advanced = 0.0
        while not done():
            assert advanced < limit_s, f"{what}: not after {limit_s:.0f} sandbox seconds"
            self.sandbox.advance(step_s)
            advanced += step_s

    def finish_moves(self, timeout_s: float = 120.0, *, step_s: float = 10.0, limit_s: float = 36_000.0) -> None:
        """Advance sandbox time until no reassignment is in flight (at most `limit_s`)."""
        if self.wall_clock:
            self.until(lambda: not self.reassigning(), "moves still in flight", timeout_s)
            return
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
        """Until every broker's metadata has the topic with its leaders (CreateTopics returns
        when the controller has it; brokers learn it a moment later)."""
        from kafka.protocol.metadata import MetadataRequest

        from kreassign.sandbox.rawclient import roundtrip

        deadline = time.monotonic() + 30
        for b in self.cluster.brokers:
            while True:
                response = roundtrip(self.cluster.ports[b], MetadataRequest(topics=[name],
                                                                            allow_auto_topic_creation=False), 4)
                topic = response.topics[0]
                if topic.error_code == 0 and len(topic.partitions) == partitions and all(
                        p.leader_id >= 0 for p in topic.partitions):
                    break
                assert time.monotonic() < deadline, f"broker {b} does not know topic {name}"
                time.sleep(0.05)

    def finish_moves(self, timeout_s: float = 120.0) -> None:
        """Wait (real time) until no reassignment is in flight."""
        self.until(lambda: not self.reassigning(), "moves still in flight", timeout_s)

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)

    def stop_broker(self, broker: int) -> None:
        self.cluster.stop_broker(broker)

    def start_broker(self, broker: int) -> None:
        self.cluster.start_broker(broker)

    def reset(self) -> None:
        """Put the shared cluster back as the next test expects it."""
        from kreassign.cluster.client_metrics import DELETE_ALL
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
            configs = port.describe_broker_configs(self.cluster.brokers, THROTTLE_KEYS).configs
            ops = {b: {k: None for k, e in entries.items() if e.value is not None and e.is_override}
                   for b, entries in configs.items()}
            ops = {b: o for b, o in ops.items() if o}
            if ops:
                assert port.incremental_alter_configs(ops).ok
            for name in self.created:
                port.delete_topic(name)
            for name in port.list_client_metrics() or ():
                assert port.alter_client_metrics(name, DELETE_ALL) is None
            port.write_markers({LOCK_KEY: None, STOP_KEY: None})
        self.created.clear()
