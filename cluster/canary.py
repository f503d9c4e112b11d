"""The canary: a real producer (acks=all) and consumer on a topic with one partition led by each
broker, measuring what a client of each broker sees: produce latency, end-to-end latency, the
KIP-13 throttle time brokers put in their responses, and KIP-19 request timeouts. It needs
nothing but an ordinary Kafka client (kafka-python), so it works against any cluster.

Latencies are reported in cluster milliseconds (wall milliseconds x the cluster's time scale),
so an accelerated sandbox reads like the Kafka it stands for."""
from __future__ import annotations

import struct
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kreassign.cluster.client_config import ClientConfig
from kreassign.cluster.client_latency import CANARY_INTERVAL_S, CANARY_ROUNDS, BrokerLatency, LatencySample, summarize
from kreassign.cluster.errors import ClusterError, InputError
from kreassign.cluster.port import ClusterPort
from kreassign.cluster.time_scale import read_time_scale
from kreassign.cluster.producers import close_producer
from kreassign.cluster.new_topic import wait_until_led

CANARY_TOPIC = "__kreassign_canary"
_CONNECT_S = 4.0  # bootstrap and metadata waits of the canary clients: the admin client reached the cluster already
_HEADER = struct.Struct(">d")  # the send time (wall seconds) leads every canary value


def canary_assignment(brokers: Sequence[int], replication_factor: int = 2) -> dict[int, tuple[int, ...]]:
    """Partition i led by the i-th broker, followed by the next ones (acks=all waits on them)."""
    ids = sorted(brokers)
    rf = max(1, min(replication_factor, len(ids)))
    return {i: tuple(ids[(i + k) % len(ids)] for k in range(rf)) for i in range(len(ids))}


class CanaryProbe:
    """Open producer and consumer on the canary topic; each `measure` sends `rounds` records to
    every partition and reads them back (so `watch --canary` measures at every poll without
    reconnecting). Close it when done."""

    def __init__(self, config: ClientConfig, topic: str, leaders: Mapping[int, int], *, scale: float = 1.0,
                 timeout_s: float = 10.0, payload_bytes: int = 256, clock: Callable[[], float] = time.time) -> None:
        """Raises ClusterError when the clients cannot start (no broker reachable)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaConsumer, KafkaProducer
            from kafka import TopicPartition as KafkaTopicPartition
            from kafka.errors import KafkaError

        self.topic, self.leaders, self.scale, self.timeout_s, self.clock = topic, dict(leaders), scale, timeout_s, clock
        self.notes: list[str] = []
        self.receiver: _Receiver | None = None
        self._filler = b"\0" * max(payload_bytes - _HEADER.size, 0)
        common: dict[str, Any] = {k: v for k, v in config.admin_kwargs().items()
                                  if k not in ("client_id", "request_timeout_ms", "bootstrap_timeout_ms", "api_version")}
        common["bootstrap_timeout_ms"] = int(min(config.timeouts.connect_timeout_s, _CONNECT_S) * 1000)
        try:
            self.producer = KafkaProducer(acks="all", linger_ms=0, retries=0, request_timeout_ms=int(timeout_s * 1000),
                                          max_block_ms=int(min(timeout_s, _CONNECT_S) * 1000),
                                          client_id="kreassign-canary", **common)
            self.consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, client_id="kreassign-canary",
                                          fetch_max_wait_ms=10, **common)
        except (KafkaError, ValueError, OSError) as exc:
            raise ClusterError(f"Could not start the canary clients: {exc}") from exc
        self.consumer.assign([KafkaTopicPartition(topic, p) for p in sorted(leaders)])
        for p in sorted(leaders):  # connections and metadata first: not what clients see in steady state
            try:
                warm = self.producer.send(topic, _HEADER.pack(clock()), partition=p).get(timeout=timeout_s)
            except KafkaError as exc:
                self.close()
                raise ClusterError(f"The canary could not write to {topic}-{p}: {exc}. Check that the brokers "
                                   "are reachable from here with an ordinary client (--command-config).") from exc
            # read from just after the warm-up record: an offset reset (ListOffsets) could fail while
            # brokers learn of a new topic, and resolve only after the first measured record was written
            self.consumer.seek(KafkaTopicPartition(topic, p), warm.offset + 1)
        self.consumer.poll(timeout_ms=0)
        self.receiver = _Receiver(self.consumer, clock)

    def measure(self, rounds: int = 1, *, interval_s: float = 0.0,
                sleep: Callable[[float], None] = time.sleep) -> list[LatencySample]:
        """Send `rounds` records to every partition (acks=all), one at a time, and read them back.
        The end-to-end delay is taken when the receiver thread reads the record, so no record
        waits for the sends after it before anything reads it."""
        from kafka.errors import KafkaError, KafkaTimeoutError

        samples: list[LatencySample] = []
        sent: dict[tuple[int, int], tuple[int, float]] = {}
        for n in range(rounds):
            for p, leader in sorted(self.leaders.items()):
                start = self.clock()
                try:
                    meta = self.producer.send(self.topic, _HEADER.pack(start) + self._filler,
                                              partition=p).get(timeout=self.timeout_s)
                    sent[(p, meta.offset)] = (leader, (self.clock() - start) * 1000 * self.scale)
                except KafkaTimeoutError:
                    samples.append(LatencySample(leader, None))
                except KafkaError as exc:
                    self.notes.append(f"partition {p} (leader {leader}): {exc}")
            if n + 1 < rounds:
                sleep(interval_s)
        throttle = _throttle_ms(self.producer.metrics()) * self.scale
        assert self.receiver is not None, "measure after close"
        received = self.receiver.wait_for(sent, self.timeout_s)
        for key, (leader, produce_ms) in sorted(sent.items()):
            e2e = received.get(key)
            samples.append(LatencySample(leader, produce_ms, None if e2e is None else e2e * 1000 * self.scale,
                                         throttle))
        return samples

    def close(self) -> None:
        close_producer(self.producer, self.timeout_s)
        if self.receiver is not None:
            self.receiver.stop()
            self.receiver = None
        self.consumer.close()


class _Receiver:
    """The canary's consumer, polled by a thread of its own: each record's delay from its send
    time (in its value) to its receipt, taken as it arrives. Only this thread touches the consumer
    until `stop`."""

    def __init__(self, consumer: Any, clock: Callable[[], float]) -> None:
        self.consumer, self.clock = consumer, clock
        self._got: dict[tuple[int, int], float] = {}
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kreassign-canary-receiver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                batches = self.consumer.poll(timeout_ms=50)
            except Exception as exc:  # noqa: BLE001 - any client failure ends the receiver: reads then go missing
                warnings.warn(f"the canary's consumer stopped: {exc}", RuntimeWarning, stacklevel=1)
                return
            if not batches:
                continue
            now = self.clock()
            with self._changed:
                for records in batches.values():
                    for r in records:
                        if len(r.value) >= _HEADER.size:
                            self._got[(r.partition, r.offset)] = max(now - _HEADER.unpack_from(r.value)[0], 0.0)
                self._changed.notify_all()

    def wait_for(self, keys: Mapping[tuple[int, int], Any], timeout_s: float) -> dict[tuple[int, int], float]:
        """The delays of `keys` read so far, waiting up to `timeout_s` for the rest; each is
        handed over once."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not all(k in self._got for k in keys) and self._thread.is_alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.1))
            return {k: self._got.pop(k) for k in keys if k in self._got}

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5.0)


def _throttle_ms(metrics: Mapping[str, Mapping[str, float]]) -> float:
    """The largest produce throttle time (KIP-13) brokers reported to the producer."""
    value = metrics.get("producer-metrics", {}).get("produce-throttle-time-max", 0.0)
    return float(value) if value == value and value not in (float("inf"), float("-inf")) else 0.0


@dataclass(frozen=True)
class CanaryReport:
    """Per broker what its clients saw, and one line per thing that could not be done."""

    topic: str
    brokers: Mapping[int, BrokerLatency]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokers": [b.to_dict() for b in self.brokers.values()],
                "notes": list(self.notes)}


def open_canary(port: ClusterPort, config: ClientConfig, *, topic: str | None, scale: float,
                timeout_s: float = 10.0) -> tuple[CanaryProbe, Callable[[], list[str]]]:
    """A probe on the operator's topic, or on one the tool creates (a partition led by each
    broker); and the function that ends it (removing a created topic) and returns its notes.

    Raises:
        InputError: the named topic does not exist.
        ClusterError: the topic could not be created or the clients could not start.
    """
    created = topic is None
    name = CANARY_TOPIC if topic is None else topic
    notes: list[str] = []
    brokers = [b.id for b in port.describe_brokers().brokers]
    if created:
        assignment = canary_assignment(brokers)
        error = port.create_topic(name, assignment)
        if error is not None and error.name != "TOPIC_ALREADY_EXISTS":
            raise ClusterError(f"Could not create the canary topic {name}: {error.message}")
        infos = wait_until_led(port, name, len(assignment))
    else:
        infos = port.describe_topics([name])
    if not infos:
        raise InputError(f"the canary topic {name} has no partitions")
    leaders = {p.partition: p.leader for p in infos if p.leader is not None}
    missing = sorted(set(brokers) - set(leaders.values()))
    if missing:
        notes.append(f"no partition of {name} is led by broker(s) {','.join(map(str, missing))}: not measured")
    probe = CanaryProbe(config, name, leaders, scale=scale, timeout_s=timeout_s)

    def close() -> list[str]:
        probe.close()
        if created:
            error = port.delete_topic(name)
            if error is not None:
                notes.append(f"could not remove the canary topic {name} ({error.message}); delete it by hand")
        return notes + probe.notes

    return probe, close


def canary_session(port: ClusterPort, config: ClientConfig, *, topic: str | None, rounds: int, interval_s: float,
                   scale: float, timeout_s: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> CanaryReport:
    """Run the canary once (see `open_canary`) and summarize it per broker."""
    probe, close = open_canary(port, config, topic=topic, scale=scale, timeout_s=timeout_s)
    try:
        samples = probe.measure(rounds, interval_s=interval_s, sleep=sleep)
    finally:
        notes = close()
    return CanaryReport(probe.topic, summarize(samples), tuple(notes))


def run_canary(port: ClusterPort, config: ClientConfig, *, topic: str | None, rounds: int = CANARY_ROUNDS,
               interval_s: float = CANARY_INTERVAL_S, sleep: Callable[[float], None] = time.sleep) -> CanaryReport:
    """`canary_session` in the cluster's time: rounds `interval_s` cluster seconds apart, latencies
    in cluster milliseconds (the time scale a sandbox advertises; 1 on Kafka)."""
    scale = read_time_scale(port, [b.id for b in port.describe_brokers().brokers])
    return canary_session(port, config, topic=topic, rounds=rounds, interval_s=interval_s / scale, scale=scale,
                          sleep=sleep)
