"""Topics and records on a real local cluster: the topic specs of `sandbox start --topics`
created with the same rack-aware assignment the emulator gives them (same seed, same layout),
their partitions filled to their sizes, and their write rates kept up by a background producer.

Real bytes take real time to write, so the default topic set is the emulator's with sizes and
rates a hundredth as large (`scaled_defaults`).
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kreassign.cluster.errors import ClusterError, InputError
from kreassign.cluster.model import TopicPartition
from kreassign.cluster.producers import close_producer
from kreassign.sandbox.topics import DEFAULT_TOPICS, TopicSpec, assign_replicas, partition_loads, spec_names_unique

DEFAULT_SCALE = 0.01
CHUNK = 64 * 1024
"""bytes per record when filling: large records keep the client's per-record cost small"""
FILL_BATCH_BYTES = 983_266
"""the record batches `fill` writes by default: fifteen CHUNK records in a 1 MiB producer batch
(a sixteenth would not fit with the records' headers), as every fetch of a real broker's
throttled copy of filled data showed"""


def scaled_defaults(scale: float = DEFAULT_SCALE) -> tuple[TopicSpec, ...]:
    return tuple(replace(s, median_size_bytes=int(s.median_size_bytes * scale),
                         median_produce_bps=s.median_produce_bps * scale) for s in DEFAULT_TOPICS)


@dataclass(frozen=True)
class PartitionLoad:
    replicas: tuple[int, ...]
    size_bytes: int
    produce_bps: float


def plan_topics(specs: Sequence[TopicSpec], racks: Mapping[int, str | None],
                seed: int) -> dict[str, dict[int, PartitionLoad]]:
    """Each topic's partitions: replicas, size to fill and write rate, drawn as the emulator
    draws them (`partition_loads`, `assign_replicas`) from one generator seeded with `seed`.

    Raises:
        InputError: a name given twice, or a replication factor above the broker count.
    """
    spec_names_unique(specs)
    rng = np.random.default_rng(seed)
    out: dict[str, dict[int, PartitionLoad]] = {}
    for spec in specs:
        if spec.replication_factor > len(racks):
            raise InputError(f"topic {spec.name} wants {spec.replication_factor} replicas but the cluster has "
                             f"only {len(racks)} brokers")
        sizes, rates = partition_loads(spec, rng)
        replicas = assign_replicas(racks, spec.partitions, spec.replication_factor, rng)
        out[spec.name] = {p: PartitionLoad(tuple(replicas[p]), int(sizes[p]), float(rates[p]))
                          for p in range(spec.partitions)}
    return out


def create_topics(port: Any, topics: Mapping[str, Mapping[int, PartitionLoad]]) -> None:
    """CreateTopics with explicit assignments, through the cluster port.

    Raises:
        ClusterError: the cluster refused one.
    """
    for name, parts in topics.items():
        error = port.create_topic(name, {p: list(load.replicas) for p, load in parts.items()})
        if error is not None:
            raise ClusterError(f"could not create topic {name}: {error}")


def _producer(bootstrap: str, client_kwargs: Mapping[str, Any], batch_bytes: int = 1024 * 1024,
              acks: int | str = 1) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=20, batch_size=batch_bytes,
                         max_request_size=2 * 1024 * 1024,
                         client_id="kreassign-sandbox-writer", **client_kwargs)


def fill(bootstrap: str, sizes: Mapping[TopicPartition, int], *,
         client_kwargs: Mapping[str, Any] | None = None, record_bytes: int = CHUNK,
         batch_bytes: int = 1024 * 1024) -> int:
    """Write records until every partition holds at least its size; returns the bytes written.
    Records of `record_bytes` in producer batches of at most `batch_bytes` (the defaults fill
    fast, in batches of 983,266 bytes; 4,000 and 16,384, the producer's default `batch.size`,
    give the batches of ordinary producers).

    acks=all: what a partition holds is committed, so a move or a leader change right after
    finds it on every in-sync replica (after acks=1 a new replica may join the ISR at a high
    watermark of 0, and a new leader truncates what it never had).

    Raises:
        ClusterError: a record was not written (the cluster refused it or timed out).
    """
    todo = {tp: n for tp, n in sizes.items() if n > 0}
    if not todo:
        return 0
    producer = _producer(bootstrap, client_kwargs or {}, batch_bytes, acks="all")
    payload = os.urandom(record_bytes)  # incompressible, as most production data is after compression
    written = 0
    sent = []
    try:
        for tp, size in sorted(todo.items()):
            for offset in range(0, size, record_bytes):
                chunk = payload[:min(record_bytes, size - offset)]
                sent.append((tp, producer.send(tp.topic, value=chunk, partition=tp.partition)))
                written += len(chunk)
        producer.flush(timeout=300)
    finally:
        close_producer(producer, 10.0)
    failed = [(tp, f.exception) for tp, f in sent if f.failed()]
    if failed:
        tp, error = failed[0]
        raise ClusterError(f"could not fill the sandbox's topics: {len(failed)} records were not written "
                           f"(first: {tp.topic}-{tp.partition}: {error})")
    return written


class Writer:
    """A background producer that keeps each partition's write rate (bytes per second), in
    records of at most `record_bytes`, until `stop`."""

    def __init__(self, bootstrap: str, rates: Mapping[TopicPartition, float], *,
                 client_kwargs: Mapping[str, Any] | None = None, record_bytes: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rates = {tp: r for tp, r in rates.items() if r > 0}
        self.record_bytes = record_bytes
        self._bootstrap = bootstrap
        self._kwargs = dict(client_kwargs or {})
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    def start(self) -> Writer:
        if self.rates:
            self._thread = threading.Thread(target=self._run, name="kafka-sandbox-writer", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _run(self) -> None:
        producer = _producer(self._bootstrap, self._kwargs)
        payload = os.urandom(self.record_bytes)
        owed = {tp: 0.0 for tp in self.rates}
        last = self._clock()
        try:
            while not self._stop.wait(0.1):
                now = self._clock()
                step, last = now - last, now
                for tp, rate in self.rates.items():
                    owed[tp] += rate * step
                    while owed[tp] >= 1:
                        n = int(min(owed[tp], self.record_bytes))
                        try:
                            producer.send(tp.topic, value=payload[:n], partition=tp.partition)
                        except Exception:  # noqa: BLE001 - a broker going away must not end the writer
                            self.errors += 1
                        owed[tp] -= n
        finally:
            close_producer(producer, 5.0)
