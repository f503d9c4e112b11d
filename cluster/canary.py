"""The canary: a real producer (acks=all) and consumer on a topic with one partition led by each
broker, measuring what a client of each broker sees: produce latency, end-to-end latency, the
KIP-13 throttle time brokers put in their responses, and KIP-19 request timeouts. It needs
nothing but an ordinary Kafka client (kafka-python), so it works against any cluster.

Latencies are reported in cluster milliseconds (wall milliseconds x the cluster's time scale),
so an accelerated sandbox reads like the Kafka it stands for."""
from __future__ import annotations

import struct
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.client_config import ClientConfig
from kreassign.cluster.client_latency import BrokerLatency, LatencySample, summarize
from kreassign.cluster.errors import ClusterError, InputError
from kreassign.cluster.port import ClusterPort

CANARY_TOPIC = "__kreassign_canary"
_HEADER = struct.Struct(">d")  # the send time (wall seconds) leads every canary value


def canary_assignment(brokers: Sequence[int], replication_factor: int = 2) -> dict[int, tuple[int, ...]]:
    """Partition i led by the i-th broker, followed by the next ones (acks=all waits on them)."""
    ids = sorted(brokers)
    rf = max(1, min(replication_factor, len(ids)))
    return {i: tuple(ids[(i + k) % len(ids)] for k in range(rf)) for i in range(len(ids))}


@dataclass
class CanaryRun:
    """What one canary run measured (samples per broker) and what it could not."""

    samples: list[LatencySample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_canary(config: ClientConfig, topic: str, leaders: Mapping[int, int], *, rounds: int, interval_s: float,
               scale: float = 1.0, timeout_s: float = 10.0, payload_bytes: int = 256,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time) -> CanaryRun:
    """Produce one record to every partition per round (`leaders`: partition -> its leader),
    wait for each acks=all answer, and read them back with a consumer.

    Raises:
        ClusterError: the clients could not start (no broker reachable).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer, KafkaProducer
        from kafka import TopicPartition as KafkaTopicPartition
        from kafka.errors import KafkaError, KafkaTimeoutError

    common: dict[str, Any] = {k: v for k, v in config.admin_kwargs().items()
                              if k not in ("client_id", "request_timeout_ms", "bootstrap_timeout_ms", "api_version")}
    out = CanaryRun()
    try:
        producer = KafkaProducer(acks="all", linger_ms=0, retries=0, request_timeout_ms=int(timeout_s * 1000),
                                 client_id="kreassign-canary", **common)
        consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, client_id="kreassign-canary",
                                 fetch_max_wait_ms=10, **common)
    except KafkaError as exc:
        raise ClusterError(f"Could not start the canary clients: {exc}") from exc
    try:
        parts = [KafkaTopicPartition(topic, p) for p in sorted(leaders)]
        consumer.assign(parts)
        consumer.seek_to_end(*parts)
        for p in parts:
            consumer.position(p)
        for p in sorted(leaders):  # connections and metadata first: not part of what clients see in steady state
            try:
                producer.send(topic, _HEADER.pack(clock()), partition=p).get(timeout=timeout_s)
            except KafkaError as exc:
                out.notes.append(f"partition {p}: the warm-up record failed: {exc}")
        consumer.poll(timeout_ms=0)
        sent: dict[tuple[int, int], tuple[int, float | None]] = {}
        received: dict[tuple[int, int], float] = {}
        filler = b"\0" * max(payload_bytes - _HEADER.size, 0)
        for n in range(rounds):
            for p, leader in sorted(leaders.items()):
                start = clock()
                try:
                    meta = producer.send(topic, _HEADER.pack(start) + filler, partition=p).get(timeout=timeout_s)
                    sent[(p, meta.offset)] = (leader, (clock() - start) * 1000 * scale)
                except KafkaTimeoutError:
                    out.samples.append(LatencySample(leader, None))
                except KafkaError as exc:
                    out.notes.append(f"partition {p} (leader {leader}): {exc}")
            received.update(_drain(consumer, len(sent) - len(received), 0.0, clock))  # read as we go
            if n + 1 < rounds:
                sleep(interval_s)
        throttle = _throttle_ms(producer.metrics()) * scale
        received.update(_drain(consumer, len(sent) - len(received), timeout_s, clock))
        for key, (leader, produce_ms) in sorted(sent.items()):
            e2e = received.get(key)
            out.samples.append(LatencySample(leader, produce_ms, None if e2e is None else e2e * 1000 * scale,
                                             throttle))
    finally:
        producer.close(timeout=timeout_s)
        consumer.close()
    return out


def _drain(consumer: Any, want: int, timeout_s: float, clock: Callable[[], float]) -> dict[tuple[int, int], float]:
    """Read the canary records back: (partition, offset) -> seconds from send to receipt."""
    got: dict[tuple[int, int], float] = {}
    deadline = clock() + timeout_s
    while True:
        for records in consumer.poll(timeout_ms=0 if timeout_s <= 0 else 200).values():
            now = clock()
            for r in records:
                if len(r.value) >= _HEADER.size:
                    got[(r.partition, r.offset)] = max(now - _HEADER.unpack_from(r.value)[0], 0.0)
        if len(got) >= want or clock() >= deadline:
            return got


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


def canary_session(port: ClusterPort, config: ClientConfig, *, topic: str | None, rounds: int, interval_s: float,
                   scale: float, timeout_s: float = 10.0, sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.time) -> CanaryReport:
    """Run the canary: on the operator's topic, or on one the tool creates (a partition led by
    each broker) and removes afterwards.

    Raises:
        InputError: the named topic does not exist.
        ClusterError: the topic could not be created or the clients could not start.
    """
    created = topic is None
    name = CANARY_TOPIC if topic is None else topic
    notes: list[str] = []
    if created:
        brokers = [b.id for b in port.describe_brokers().brokers]
        error = port.create_topic(name, canary_assignment(brokers))
        if error is not None and error.name != "TOPIC_ALREADY_EXISTS":
            raise ClusterError(f"Could not create the canary topic {name}: {error.message}")
    infos = port.describe_topics([name])
    if not infos:
        raise InputError(f"the canary topic {name} has no partitions")
    leaders = {p.partition: p.leader for p in infos if p.leader is not None}
    missing = sorted({b.id for b in port.describe_brokers().brokers} - set(leaders.values()))
    if missing:
        notes.append(f"no partition of {name} is led by broker(s) {','.join(map(str, missing))}: not measured")
    try:
        run = run_canary(config, name, leaders, rounds=rounds, interval_s=interval_s, scale=scale,
                         timeout_s=timeout_s, sleep=sleep, clock=clock)
    finally:
        if created:
            error = port.delete_topic(name)
            if error is not None:
                notes.append(f"could not remove the canary topic {name} ({error.message}); delete it by hand")
    return CanaryReport(name, summarize(run.samples), tuple(notes + run.notes))
