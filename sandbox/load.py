"""`kreassign sandbox load`: real clients (kafka-python's KafkaProducer and KafkaConsumer, over
TCP, not the sandbox's internals) producing at a given byte rate per topic and consuming it in a
group, reporting per interval what an operator watches during a move: produce latency
percentiles (send to acknowledgement, acks=all), the throttle time brokers gave the clients, and
the consumer group's lag.

Latencies are the clients' own, in wall time (at `--speed 1` that is also sandbox time).
`LoadStats` is the pure part: what one interval's numbers are.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.errors import ClusterUnreachable, InputError
from kreassign.cluster.producers import close_producer
from kreassign.cluster.units import parse_rate


@dataclass(frozen=True)
class TopicLoad:
    topic: str
    bytes_per_s: float


def parse_topic_load(text: str) -> TopicLoad:
    """`orders:200kB/s` -> TopicLoad("orders", 200000.0).

    Raises:
        InputError: not TOPIC:RATE, or a rate below 1 byte/s.
    """
    topic, sep, rate = text.rpartition(":")
    if not sep or not topic:
        raise InputError(f"'{text}' is not a topic load: use TOPIC:RATE, e.g. orders:200kB/s")
    value = float(parse_rate(rate))
    if value < 1:
        raise InputError(f"'{text}': the rate must be at least 1 byte/s")
    return TopicLoad(topic, value)


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted `values` by nearest rank (0 when empty)."""
    if not values:
        return 0.0
    return float(values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))])


@dataclass(frozen=True)
class LoadSample:
    """One interval of the load: `at` seconds since the start."""

    at: float
    sent: int
    acked: int
    failed: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    produce_throttle_ms: float
    fetch_throttle_ms: float
    consumed: int
    lag: int

    def line(self) -> str:
        return (f"{self.at:7.1f}s  sent {self.sent:6d}  acked {self.acked:6d}  failed {self.failed:3d}  "
                f"produce p50 {self.p50_ms:7.1f} ms  p99 {self.p99_ms:7.1f} ms  max {self.max_ms:7.1f} ms  "
                f"throttle {self.produce_throttle_ms:6.1f}/{self.fetch_throttle_ms:6.1f} ms  "
                f"consumed {self.consumed:6d}  lag {self.lag:6d}")


HEADER = "   time  per interval: sent, acked, failed, produce latency, throttle produce/fetch, consumed, lag"


@dataclass
class LoadStats:
    """What happened since the last sample; `take` closes the interval."""

    sent: int = 0
    failed: int = 0
    consumed: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    outstanding: int = 0
    """writes sent and neither acknowledged nor failed, over the whole run"""
    last_answer: float | None = None
    """when the cluster last acknowledged or refused a write (the generator's clock)"""

    def answered(self, now: float) -> None:
        with self.lock:
            self.outstanding -= 1
            self.last_answer = now

    def acked(self, latency_ms: float) -> None:
        with self.lock:
            self.latencies_ms.append(latency_ms)

    def failure(self) -> None:
        with self.lock:
            self.failed += 1

    def take(self, at: float, produce_throttle_ms: float, fetch_throttle_ms: float, lag: int) -> LoadSample:
        with self.lock:
            lat = sorted(self.latencies_ms)
            sample = LoadSample(at, self.sent, len(lat), self.failed, nearest_rank(lat, 0.5), nearest_rank(lat, 0.99),
                                lat[-1] if lat else 0.0, produce_throttle_ms, fetch_throttle_ms, self.consumed, lag)
            self.sent = self.failed = self.consumed = 0
            self.latencies_ms = []
        return sample


def _metric(metrics: dict[str, dict[str, Any]], name: str) -> float:
    """The largest value of `name` in any metric group (kafka-python groups them per client and node)."""
    values = [float(group[name]) for group in metrics.values() if isinstance(group.get(name), (int, float))]
    values = [v for v in values if math.isfinite(v)]
    return max(values, default=0.0)


class LoadGenerator:
    """Producers and a consumer group over real kafka-python clients (see the module docstring)."""

    def __init__(self, bootstrap: str, loads: Sequence[TopicLoad], *, message_bytes: int = 1000,
                 client_id: str = "kreassign-load", group: str = "kreassign-load",
                 request_timeout_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not loads:
            raise InputError("give at least one --topic TOPIC:RATE to load")
        if message_bytes < 1:
            raise InputError("--message-size must be at least 1 byte")
        self.bootstrap = bootstrap
        self.loads = list(loads)
        self.message_bytes = message_bytes
        self.client_id = client_id
        self.group = group
        self.request_timeout_ms = int(request_timeout_s * 1000)
        self.clock = clock
        self.stats = LoadStats()

    def run(self, duration: float, interval: float, stop: threading.Event | None = None) -> Iterator[LoadSample]:
        """Produce and consume for `duration` seconds (until `stop`), yielding a sample every `interval`."""
        from kafka import KafkaConsumer, KafkaProducer
        from kafka.errors import KafkaError

        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, client_id=self.client_id, acks="all",
                                     linger_ms=5, request_timeout_ms=self.request_timeout_ms,
                                     max_block_ms=min(10_000, self.request_timeout_ms))
            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id=f"{self.client_id}-consumer",
                                     group_id=self.group, auto_offset_reset="latest", enable_auto_commit=True,
                                     metadata_max_age_ms=5_000,
                                     request_timeout_ms=max(self.request_timeout_ms, 30_001))
        except KafkaError as exc:
            raise InputError(f"cannot connect the load clients to {self.bootstrap}: {exc}") from exc
        try:
            self._learn_topics(producer, consumer)
        except BaseException:
            close_producer(producer, 5.0)
            consumer.close(autocommit=False)
            raise
        consumer.subscribe([load.topic for load in self.loads])
        payload = b"k" * self.message_bytes
        start = self.clock()
        self.stats.last_answer = start
        due = dict.fromkeys((load.topic for load in self.loads), 0.0)
        next_sample = start + interval
        try:
            while (now := self.clock()) - start < duration and not (stop is not None and stop.is_set()):
                for load in self.loads:
                    # messages owed at this rate since the start, sent as they fall due
                    owed = (now - start) * load.bytes_per_s / self.message_bytes - due[load.topic]
                    for _ in range(int(owed)):
                        self._send(producer, load.topic, payload)
                    due[load.topic] += int(owed)
                records = consumer.poll(timeout_ms=10)
                with self.stats.lock:
                    self.stats.consumed += sum(len(batch) for batch in records.values())
                if now >= next_sample:
                    next_sample += interval
                    yield self._sample(now - start, producer, consumer)
                self._check_answering(now)
            try:
                producer.flush(timeout=10)
            except KafkaError:
                self._check_answering(float("inf"))
            yield self._sample(self.clock() - start, producer, consumer)
        finally:
            close_producer(producer, 5.0)
            consumer.close(autocommit=False)

    def _learn_topics(self, producer: Any, consumer: Any) -> None:
        """Both clients know every topic's partitions before the consumer joins its group.

        A consumer that joins before its metadata holds the topic is assigned nothing, and
        rejoins when the metadata arrives; kafka-python 3.0.12 can then drop that second
        assignment: when a poll's timeout ends while SyncGroup is in flight, the leader's own
        assignment clears its need to rejoin, and the answer is never applied. The consumer
        stays in the group with no partitions for the whole run (seen on Kafka 3.9.2).

        Raises:
            InputError: a topic the cluster does not have.
        """
        from kafka.errors import KafkaError

        for load in self.loads:
            try:
                producer.partitions_for(load.topic)  # waits up to max_block_ms for the metadata
            except KafkaError as exc:
                raise InputError(f"topic '{load.topic}' not found on {self.bootstrap} ({exc}): create it "
                                 f"first (kafka-topics.sh --create); the load does not create topics") from exc
            deadline = self.clock() + self.request_timeout_ms / 1000
            # the consumer asks a broker of its own, which may learn of a new topic a moment later
            while not consumer.partitions_for_topic(load.topic):
                if self.clock() >= deadline:
                    raise InputError(f"topic '{load.topic}': the broker the consumer asked does not "
                                     f"know it after {self.request_timeout_ms / 1000:.0f}s")
                time.sleep(0.2)

    def _check_answering(self, now: float) -> None:
        """Raises ClusterUnreachable once writes have waited a request timeout with no answer."""
        silent = now - (self.stats.last_answer or now)
        if self.stats.outstanding > 0 and silent > self.request_timeout_ms / 1000:
            waited = f"{silent:.0f}s" if silent != float("inf") else "to the end of the run"
            raise ClusterUnreachable(f"the cluster at {self.bootstrap} stopped answering: no write was acknowledged "
                                     f"for {waited} ({self.stats.outstanding} waiting); the load stopped")

    def _send(self, producer: Any, topic: str, payload: bytes) -> None:
        sent_at = self.clock()
        with self.stats.lock:
            self.stats.sent += 1
            self.stats.outstanding += 1
        future = producer.send(topic, payload)
        future.add_callback(lambda _md: (self.stats.answered(self.clock()),
                                         self.stats.acked((self.clock() - sent_at) * 1000.0)))
        future.add_errback(lambda _exc: (self.stats.answered(self.clock()), self.stats.failure()))

    def _sample(self, at: float, producer: Any, consumer: Any) -> LoadSample:
        lag = 0
        for tp in consumer.assignment():
            high, position = consumer.highwater(tp), consumer.position(tp, timeout_ms=100)
            if high is not None and position is not None:
                lag += max(int(high) - int(position), 0)
        return self.stats.take(at, _metric(producer.metrics(), "throttle-time-avg"),
                               _metric(consumer.metrics(), "throttle-time-avg"), lag)

