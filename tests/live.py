"""One backend for the live tests: the same test runs against the emulator and against real
Apache Kafka brokers (`conftest_kafka.py` provides the `live` fixture, parametrized over both).

Both have 5 brokers (ids 1..5) in 2 racks with 3 log dirs each. A test creates its own topics
(`live.topic`), writes real records (`live.produce`), and lets moves run with `live.finish_moves`:
the emulator's clock is manual (nothing moves until a test says so), real Kafka runs in real
time. A move of `HOLD_BYTES` under a `HOLD_RATE` throttle stays in flight for minutes on real
Kafka (each throttled fetch takes at most replica.fetch.max.bytes, 1 MiB, and the next waits until
the 11 one-second quota windows forget it) and forever on the emulator until time advances.

After each test the real cluster is put back: reassignments cancelled, the test's topics
deleted, every broker's throttle rates and the cluster-wide ones removed, the execution lock's
markers cleared, stopped brokers started (or woken) again.

Waiting: `live.wait_until(condition)` polls a condition, moving sandbox time on the emulator and
sleeping on real Kafka (the only sleeps the suite allows: waiting for a condition on real
Kafka); `live.runtime()` is the clock and sleeper for an in-process CLI run (`cli.runtime.Runtime`):
sandbox time on the emulator, real time on Kafka.
A test marked `live_wall_clock` gets an emulator on the wall clock (for clients that wait on
replication, such as acks=all producers): its time passes on its own, as real Kafka's does.
"""
from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cli_helpers import KREASSIGN
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
BATCH_RECORDS = 15
"""records per batch: 15 records of CHUNK bytes stay under a broker's message.max.bytes (1 MiB)"""
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 11
"""bytes around a record's value in a v2 batch (no key, no headers, small offset and time deltas)"""


def stored_bytes(nbytes: int) -> int:
    """The bytes a partition holds after `write_records` wrote `nbytes` of values into it: every
    batch has BATCH_RECORDS records (the last fewer) of CHUNK bytes (the last fewer)."""
    records = -(-nbytes // CHUNK)
    return nbytes + RECORD_OVERHEAD * records + BATCH_OVERHEAD * -(-records // BATCH_RECORDS)


class LiveCluster(Protocol):
    engine: str
    bootstrap: str
    brokers: list[int]

    @property
    def ports(self) -> dict[int, int]: ...

    @property
    def metrics_ports(self) -> dict[int, int]: ...

    @property
    def cluster_id(self) -> str: ...

    def topic(self, partitions: int = 1, rf: int = 3, *, assignment: Mapping[int, Sequence[int]] | None = None,
              name: str | None = None) -> str: ...

    def produce(self, topic: str, partition: int, nbytes: int) -> None: ...

    def produce_batches(self, topic: str, partition: int, count: int, value_bytes: int) -> None: ...

    def finish_moves(self, timeout_s: float | None = None) -> None: ...

    def wait_until(self, condition: Callable[[], Any], *, what: str, timeout_s: float | None = None) -> Any: ...

    def tick(self, seconds: float) -> None:
        """Let `seconds` of cluster time pass where it only passes when told (the emulator's
        manual clock); a no-op on real Kafka, whose time moves on its own."""

    def stop_broker(self, broker: int, *, kill: bool = False) -> None: ...

    def start_broker(self, broker: int) -> None: ...

    def pause_broker(self, broker: int) -> None: ...

    def resume_broker(self, broker: int) -> None: ...

    def pause_controller(self) -> None: ...

    def resume_controller(self) -> None: ...

    def admin(self) -> contextlib.AbstractContextManager[Any]: ...

    def runtime(self, before_sleep: Callable[[], None] | None = None) -> Any:
        """The clock and sleeper of an in-process CLI run (`cli.runtime.Runtime`): sandbox time on
        the emulator, real time on Kafka; `before_sleep` runs before each of the run's sleeps."""


def write_records(bootstrap: str, topic: str, partition: int, nbytes: int, acks: int | str = 1) -> None:
    """`nbytes` of incompressible values into one partition (CHUNK-byte records), in batches of
    exactly BATCH_RECORDS records with one timestamp each, so that what a partition holds is
    `stored_bytes(nbytes)` on both engines. `LiveCluster.produce` picks `acks` per engine."""
    from kafka import KafkaProducer

    payload = bytes(range(256)) * (CHUNK // 256)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=60_000, delivery_timeout_ms=300_000,
                             batch_size=1024 * 1024, max_request_size=2 * 1024 * 1024, client_id="kreassign-tests")
    try:
        stamp = int(time.time() * 1000)
        for n, offset in enumerate(range(0, nbytes, CHUNK), start=1):
            producer.send(topic, value=payload[:min(CHUNK, nbytes - offset)], partition=partition,
                          timestamp_ms=stamp)
            if n % BATCH_RECORDS == 0:
                producer.flush(timeout=120)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=10)


def write_plan(folder: Path, targets: Mapping[TopicPartition, Sequence[int]], name: str = "plan.json") -> str:
    """A reassignment JSON file of `targets` (Kafka's format); returns its path."""
    from kreassign.cluster.kafka_json import format_reassignment

    path = folder / name
    path.write_text(format_reassignment({tp: list(r) for tp, r in targets.items()}))
    return str(path)


def rates(live: LiveCluster) -> dict[int, dict[str, str]]:
    """The leader and follower replication rates set on each broker."""
    with live.admin() as admin:
        configs = admin.describe_broker_configs(live.brokers, THROTTLE_KEYS[:2]).configs
    return {b: {k: e.value for k, e in v.items() if e.value} for b, v in configs.items()}


def replicas(live: LiveCluster, topic: str, partition: int = 0) -> tuple[int, ...]:
    with live.admin() as admin:
        return tuple(admin.describe_topics([topic])[partition].replicas)


def set_cluster_defaults(live: LiveCluster, ops: Mapping[str, str | None]) -> None:
    """SET (or DELETE, for None) cluster-wide broker defaults (the BROKER resource ""), which the
    admin adapter does not write: an operator's `kafka-configs --entity-default`."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as Request

    from kreassign.sandbox.rawclient import roundtrip

    resource = Request.AlterConfigsResource(resource_type=4, resource_name="", configs=[
        Request.AlterConfigsResource.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
        for k, v in ops.items()])
    response = roundtrip(live.ports[live.brokers[0]], Request(resources=[resource], validate_only=False), 1)
    assert response.responses[0].error_code == 0, response.responses[0]


@dataclass(frozen=True)
class IndependentView:
    """A cluster as confluent-kafka's AdminClient (librdkafka, not the kafka-python the tool is
    built on) reads it."""

    replicas: dict[TopicPartition, tuple[int, ...]]
    broker_throttles: dict[int, dict[str, str]]
    """the throttle rates set on each broker (DYNAMIC_BROKER_CONFIG)"""
    topic_throttles: dict[str, dict[str, str]]
    """the throttled-replica lists set on each topic"""
    markers: dict[str, str]
    """the execution lock's markers that are set (group offset metadata on __consumer_offsets-0)"""


def independent_view(live: LiveCluster, topics: Sequence[str]) -> IndependentView:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    from kreassign.execute.lock import LOCK_KEY, RATES_KEY, STOP_KEY

    client = AdminClient({"bootstrap.servers": live.bootstrap, "client.id": "kreassign-tests-independent",
                          "log_level": 0})
    metadata = client.list_topics(timeout=30)
    replicas = {TopicPartition(t, p): tuple(m.replicas) for t in topics
                for p, m in sorted(metadata.topics[t].partitions.items())}

    def configs(resource: Any) -> dict[str, Any]:
        (future,) = client.describe_configs([resource], request_timeout=30).values()
        return dict(future.result(timeout=60))

    dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG.value
    brokers = {b: {k: e.value for k, e in configs(ConfigResource(ResourceType.BROKER, str(b))).items()
                   if k in THROTTLE_KEYS and getattr(e.source, "value", e.source) == dynamic and e.value}
               for b in live.brokers}
    lists = {t: {k: e.value for k, e in configs(ConfigResource(ResourceType.TOPIC, t)).items()
                 if k in TOPIC_THROTTLE_KEYS and e.value} for t in topics}
    markers = {}
    for group in (LOCK_KEY, STOP_KEY, RATES_KEY):
        request = ConsumerGroupTopicPartitions(group, [ConfluentPartition("__consumer_offsets", 0)])
        (future,) = client.list_consumer_group_offsets([request], request_timeout=30).values()
        for committed in future.result(timeout=60).topic_partitions:
            if committed.offset >= 0 and committed.metadata:
                markers[group] = committed.metadata
    return IndependentView(replicas, brokers, lists, markers)


class LiveCli:
    """The real CLI in a subprocess against a live cluster, with its own journal dir and client
    timeouts short enough (through --command-config) that a stopped broker is reported within
    seconds.

    `run` waits for the command; `start` returns the running process (its JSON events can be
    followed with `events`); kafka_style puts the cluster options first, as Kafka's tool takes them.
    """

    def __init__(self, live: LiveCluster, folder: Path) -> None:
        self.live = live
        self.config = folder / "client.properties"
        self.config.write_text("request.timeout.ms=1500\ndefault.api.timeout.ms=3000\n")
        self.journals = folder / "journal"
        self.env = {"KREASSIGN_JOURNAL_DIR": str(self.journals)}

    def args(self, *argv: str, kafka_style: bool = False) -> list[str]:
        common = ["--bootstrap-server", self.live.bootstrap, "--command-config", str(self.config)]
        return [*common, *argv] if kafka_style else [*argv, *common]

    def run(self, *argv: str, kafka_style: bool = False, timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
        return KREASSIGN.subprocess(*self.args(*argv, kafka_style=kafka_style), env=self.env, timeout=timeout_s)

    def start(self, *argv: str) -> subprocess.Popen[str]:
        return KREASSIGN.start(*self.args(*argv), env=self.env)


def events(proc: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    """The JSON events a running command prints (`--output json`), as they come."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{"):
            yield json.loads(line)


def wait_until(done: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Poll `done` in real time until it holds (at most `timeout_s`): a real cluster's state
    follows a change a moment later."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s:.0f}s"
        time.sleep(0.2)


def write_batches(bootstrap: str, topic: str, partition: int, count: int, value_bytes: int,
                  acks: int | str = 1) -> None:
    """`count` records of `value_bytes` into one partition, each its own batch (a batch has no
    room for a second record), so the log grows by exactly `count * batch_bytes(value_bytes)`."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0, batch_size=batch_bytes(value_bytes),
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
    wait_step_s = 0.2
    wait_limit_s = 120.0
    """how far wait_until goes by default (sandbox seconds on the emulator, real ones on Kafka)"""

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

    acks: int | str = 1
    """what the tests' writes wait for (`write_records`, `write_batches`)"""

    def produce(self, topic: str, partition: int, nbytes: int) -> None:
        write_records(self.bootstrap, topic, partition, nbytes, self.acks)

    def produce_batches(self, topic: str, partition: int, count: int, value_bytes: int) -> None:
        write_batches(self.bootstrap, topic, partition, count, value_bytes, self.acks)

    def reassigning(self) -> dict[TopicPartition, Any]:
        with self.admin() as port:
            return dict(port.list_reassignments())

    def _pass(self, seconds: float) -> None:
        raise NotImplementedError

    def _clock(self) -> float:
        raise NotImplementedError

    def runtime(self, before_sleep: Callable[[], None] | None = None) -> Any:
        from kreassign.cli.runtime import Runtime

        def sleep(seconds: float) -> None:
            if before_sleep is not None:
                before_sleep()
            self._pass(seconds)

        return Runtime(clock=self._clock, sleep=sleep)

    def _elapsed(self) -> Callable[[], float]:
        """A stopwatch of cluster time, started now."""
        start = self._clock()
        return lambda: self._clock() - start

    def wait_until(self, condition: Callable[[], Any], *, what: str, timeout_s: float | None = None,
                   step_s: float | None = None) -> Any:
        """Poll `condition` until it holds (returns its value), letting cluster time pass in
        between; fails after `timeout_s` of cluster time, naming `what` it waited for."""
        limit = self.wait_limit_s if timeout_s is None else timeout_s
        elapsed = self._elapsed()
        while True:
            value = condition()
            if value:
                return value
            assert elapsed() < limit, f"still waiting for {what} after {limit:.0f}s ({self.engine})"
            self._pass(self.wait_step_s if step_s is None else step_s)

    def finish_moves(self, timeout_s: float | None = None) -> None:
        """Let time pass until no reassignment is in flight, and every broker's metadata shows the
        moves' ends (the controller answers ListPartitionReassignments; the Metadata a broker
        answers follows a moment later: a CI run read (1, 2, 4, 3) after a move to (1, 2, 4))."""
        ends: dict[TopicPartition, set[tuple[int, ...]]] = {}

        def finished() -> bool:
            moving = self.reassigning()
            for tp, r in moving.items():
                ends.setdefault(tp, set()).update({tuple(r.target), tuple(r.original)})
            return not moving

        self.wait_until(finished, what="the moves to finish", timeout_s=timeout_s)
        if ends:
            def settled() -> bool:
                with self.admin() as port:
                    now = {p.tp: tuple(p.replicas) for p in port.describe_topics(sorted({tp.topic for tp in ends}))}
                return all(now.get(tp) in wanted for tp, wanted in ends.items())

            self.wait_until(settled, what="the brokers' metadata to show the moves' ends", timeout_s=timeout_s)


class EmulatorLive(_Base):
    """A fresh 5-broker emulator per test, on a manual clock."""

    engine = "emulator"
    wait_step_s = 10.0
    wait_limit_s = 36_000.0

    def __init__(self, sandbox: Any, *, wall_clock: bool = False) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.bootstrap = sandbox.bootstrap
        self.wall_clock = wall_clock

    @property
    def ports(self) -> dict[int, int]:
        return dict(self.sandbox.ports)

    @property
    def metrics_ports(self) -> dict[int, int]:
        return dict(self.sandbox.metrics_ports)

    @property
    def cluster_id(self) -> str:
        with self.sandbox.locked() as engine:
            return str(engine.cluster_id)

    def _pass(self, seconds: float) -> None:
        if self.wall_clock:
            time.sleep(min(seconds, 0.2))  # its clock runs on its own: poll as on real Kafka
        else:
            self.sandbox.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.sandbox.advance(seconds)

    def tick(self, seconds: float) -> None:
        self.sandbox.advance(seconds)

    def _clock(self) -> float:
        return float(self.sandbox.now)

    def stop_broker(self, broker: int, *, kill: bool = False) -> None:
        self.sandbox.stop_broker(broker, kill=kill)

    def start_broker(self, broker: int) -> None:
        self.sandbox.start_broker(broker)

    def pause_broker(self, broker: int) -> None:
        """The broker keeps its connections and accepts new ones but answers nothing."""
        self.sandbox.delay_responses(None, broker=broker)

    def resume_broker(self, broker: int) -> None:
        self.sandbox.release_responses()

    def pause_controller(self) -> None:
        """What a client sees of a hung KRaft controller: the requests brokers forward to it
        (reassignments, config changes) get no answer; metadata still comes."""
        for api in ("ListPartitionReassignments", "AlterPartitionReassignments", "IncrementalAlterConfigs"):
            self.sandbox.delay_responses(None, api=api)

    def resume_controller(self) -> None:
        self.sandbox.release_responses()


class KafkaLive(_Base):
    """The session's real Kafka cluster, shared by every test and put back after each."""

    engine = "kafka"
    # A move started next must find the writes committed: Kafka adds a new replica to the ISR
    # once its log end reaches the leader's high watermark, so after acks=1 writes a loaded run
    # saw a move of 25 MB finish before a byte was copied. (The emulator's followers copy in its
    # own time, which a ManualClock only moves when a test says: acks=1 there.)
    acks = "all"

    def __init__(self, cluster: Any) -> None:
        super().__init__()
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    @property
    def ports(self) -> dict[int, int]:
        return dict(self.cluster.ports)

    @property
    def metrics_ports(self) -> dict[int, int]:
        return dict(self.cluster.metrics_ports)

    @property
    def cluster_id(self) -> str:
        return str(self.cluster.cluster_id)

    def _await_topic(self, name: str, partitions: int) -> None:
        await_topic([self.cluster.ports[b] for b in self.cluster.brokers], name, partitions)

    def _pass(self, seconds: float) -> None:
        time.sleep(seconds)

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)

    def tick(self, seconds: float) -> None:
        """Real Kafka's time moves on its own."""

    def _clock(self) -> float:
        return time.monotonic()

    def stop_broker(self, broker: int, *, kill: bool = False) -> None:
        self.cluster.stop_broker(broker, kill=kill)

    def start_broker(self, broker: int) -> None:
        self.cluster.start_broker(broker)

    def pause_broker(self, broker: int) -> None:
        """SIGSTOP: the JVM holds its connections, the kernel accepts new ones, nothing answers
        (and the controller fences the broker once broker.session.timeout.ms passes)."""
        self.cluster.pause_broker(broker)

    def resume_broker(self, broker: int) -> None:
        self.cluster.resume_broker(broker)

    def pause_controller(self) -> None:
        """SIGSTOP of the controller JVM (node 0); resume it within 9 s (broker.session.timeout.ms)."""
        self.cluster.pause_controller()

    def resume_controller(self) -> None:
        self.cluster.resume_controller()

    def reset(self) -> None:
        """Put the shared cluster back as the next test expects it."""
        from kreassign.cluster.client_metrics import DELETE_ALL
        from kreassign.execute.lock import LOCK_KEY, RATES_KEY, STOP_KEY

        self.cluster.resume_controller()
        for b in self.cluster.brokers:
            self.cluster.resume_broker(b)
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
            for name in port.list_client_metrics() or ():
                assert port.alter_client_metrics(name, DELETE_ALL) is None
            port.write_markers({LOCK_KEY: None, STOP_KEY: None, RATES_KEY: None})
        set_cluster_defaults(self, dict.fromkeys(THROTTLE_KEYS))
        self.created.clear()
