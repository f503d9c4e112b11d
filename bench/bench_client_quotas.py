"""KIP-13 client quotas on the sandbox: how close a real client over its quota gets to it.

A one-broker sandbox at `SPEED`x sets a `<default>` client-id quota. A confluent-kafka producer
writes 1 kB messages as fast as it can (10 kB batches), or a group consumer reads a preloaded
topic (5 kB batches and fetches); both run for `SANDBOX_SECONDS` of sandbox time. Reported per run: the
payload rate after a 30 s warm-up, in sandbox time, against the quota (the quota also counts
batch overhead, so the payload rate sits a few percent below it), and the largest mean throttle
time librdkafka's statistics saw. Kafka's window: 11 samples of 1 s. A consumer stays further
below its quota than a producer, as with Kafka: the throttle of a fetch over the quota counts the
bytes that fetch then does not deliver (they are unrecorded after the throttle is computed), so
each throttled fetch costs about fetch size / quota of extra silence.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from bench.common import record

SPEED = 30.0
SANDBOX_SECONDS = 180.0
WARM_UP = 30.0
MESSAGE = 1000
FETCH_BYTES = 5000


def _cluster(key: str, quota: int) -> Any:
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import parse_topic_spec

    return SandboxCluster(1, 0, [parse_topic_spec("q:1:1:1MB:0")], speed=SPEED,
                          default_client_quotas={key: quota}).start()


def _throttle(stats: list[dict[str, Any]]) -> float:
    return max((b["throttle"]["avg"] for s in stats for b in s["brokers"].values() if b["nodeid"] >= 0), default=0)


def produce(quota: int) -> dict[str, float]:
    from confluent_kafka import Producer

    sb = _cluster("producer_byte_rate", quota)
    stats: list[dict[str, Any]] = []
    delivered: list[tuple[float, int]] = []
    try:
        producer = Producer({"bootstrap.servers": sb.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 10_000,
                             "statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s))})
        value = b"x" * MESSAGE
        while sb.now < SANDBOX_SECONDS:
            try:
                for _ in range(100):
                    producer.produce("q", value, on_delivery=lambda e, m: delivered.append((sb.now, len(m.value()))))
            except BufferError:
                pass
            producer.poll(0.01)
        producer.flush(0)
    finally:
        sb.stop()
    end = max(t for t, _ in delivered)
    rate = sum(n for t, n in delivered if WARM_UP < t <= end) / (end - WARM_UP)
    return {"rate": round(rate), "throttle_avg_ms": _throttle(stats)}


def consume(quota: int) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer

    sb = _cluster("consumer_byte_rate", quota)
    stats: list[dict[str, Any]] = []
    received: list[tuple[float, int]] = []
    try:
        producer = Producer({"bootstrap.servers": sb.bootstrap, "batch.size": FETCH_BYTES})
        for _ in range(int(quota * SANDBOX_SECONDS * 1.5 / MESSAGE)):
            producer.produce("q", b"y" * MESSAGE)
            producer.poll(0)
        producer.flush(30)
        consumer = Consumer({"bootstrap.servers": sb.bootstrap, "group.id": "bench", "auto.offset.reset": "earliest",
                             "fetch.max.bytes": FETCH_BYTES, "message.max.bytes": FETCH_BYTES,
                             "max.partition.fetch.bytes": FETCH_BYTES, "statistics.interval.ms": 200,
                             "stats_cb": lambda s: stats.append(json.loads(s))})
        consumer.subscribe(["q"])
        start = sb.now
        while sb.now < start + SANDBOX_SECONDS:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                received.append((sb.now, len(msg.value())))
        consumer.close()
    finally:
        sb.stop()
    first, end = received[0][0], received[-1][0]
    rate = sum(n for t, n in received if first + WARM_UP < t <= end) / (end - first - WARM_UP)
    return {"rate": round(rate), "throttle_avg_ms": _throttle(stats)}


def main() -> None:
    load = os.getloadavg()
    runs = []
    for side, fn in (("produce", produce), ("consume", consume)):
        for quota in (10_000, 20_000):
            wall = time.perf_counter()
            result = fn(quota)
            runs.append({"side": side, "quota": quota, **result, "wall_s": round(time.perf_counter() - wall, 1),
                         "error_pct": round(100 * (result["rate"] / quota - 1), 1)})
    record("bench_client_quotas", speed=SPEED, sandbox_seconds=SANDBOX_SECONDS, fetch_bytes=FETCH_BYTES,
           load_before=load, load_after=os.getloadavg(), runs=runs)


if __name__ == "__main__":
    main()
