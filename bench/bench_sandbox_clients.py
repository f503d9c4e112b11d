"""Sandbox data path: produce and consume throughput with real clients, and the sandbox's memory
under sustained load.

A 6-broker sandbox runs as a daemon (its own process, as `kreassign sandbox start --daemon`
does) with one client topic (12 partitions, RF 3, no synthetic writes). A confluent-kafka
producer writes 1 kB messages with acks=all and idempotence while an assign()-based consumer
reads the same partitions, both for `SECONDS` of wall time. Reported: MB/s acknowledged,
MB/s consumed, the consumer's lag at the end, and the daemon's RSS sampled every second
(records live in segment files, so RSS should stay flat while the log grows).

Target (issue 13): >= 20 MB/s produced while the same bytes are consumed, on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import record

TARGET_MBPS = 20.0
MESSAGE = 1000
PARTITIONS = 12
TOPIC = "bench"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()

    import confluent_kafka as ck

    from kreassign.sandbox.daemon import SandboxOptions, start_daemon, stop_daemon

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kreassign-bench-") as tmp:
        state = Path(tmp)
        info = start_daemon(SandboxOptions(brokers=6, racks=3, topics=(f"{TOPIC}:{PARTITIONS}:3:0:0",), speed=1.0),
                            state)
        try:
            result = run(ck, info.bootstrap, info.pid, args.seconds)
            log_bytes = sum(f.stat().st_size for f in (state / "logs").rglob("*.log"))
        finally:
            stop_daemon(state)
    record("bench_sandbox_clients", seconds=args.seconds, message_bytes=MESSAGE, partitions=PARTITIONS,
           brokers=6, acks="all", target_mbps=TARGET_MBPS, log_bytes_on_disk=log_bytes,
           loadavg_before=[round(x, 2) for x in load_before],
           loadavg_after=[round(x, 2) for x in os.getloadavg()], **result,
           meets_target=result["produced_mbps"] >= TARGET_MBPS and result["consumed_mbps"] >= TARGET_MBPS)


def run(ck: Any, bootstrap: str, pid: int, seconds: float) -> dict[str, Any]:
    acked = [0]
    consumed = [0]
    errors: list[str] = []
    stop = threading.Event()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += len(msg.value())

    def produce() -> None:
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 65536})
        payload = b"x" * MESSAGE
        i = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, payload, partition=i % PARTITIONS, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(30)

    def consume() -> None:
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-assign",
                                "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.assign([ck.TopicPartition(TOPIC, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not stop.is_set():
            for m in consumer.consume(num_messages=10_000, timeout=0.2):
                if m.error() is None:
                    consumed[0] += len(m.value())
        consumer.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    rss = []
    start = time.monotonic()
    marks = []
    while time.monotonic() - start < seconds:
        time.sleep(1.0)
        rss.append(round(rss_mb(pid), 1))
        marks.append((time.monotonic() - start, acked[0], consumed[0]))
    stop.set()
    for t in threads:
        t.join(60)
    # rates over the steady part: skip the first 2 s of warm-up
    t0, a0, c0 = next((m for m in marks if m[0] >= 2.0), marks[0])
    t1, a1, c1 = marks[-1]
    span = max(t1 - t0, 1e-9)
    return {"produced_mbps": round((a1 - a0) / span / 1e6, 2), "consumed_mbps": round((c1 - c0) / span / 1e6, 2),
            "produced_total_mb": round(acked[0] / 1e6, 1), "consumed_total_mb": round(consumed[0] / 1e6, 1),
            "delivery_errors": len(errors), "rss_mb_samples": rss, "rss_mb_first": rss[0], "rss_mb_last": rss[-1],
            "rss_mb_max": max(rss)}


if __name__ == "__main__":
    main()
