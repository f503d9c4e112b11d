"""KIP-714 client-metrics subscriptions as values: which clients (a `match` of selectors) push
which metrics (name prefixes) how often. `kreassign client-metrics` manages them as Kafka's
kafka-client-metrics.sh does, through CLIENT_METRICS config resources (type 16), so an operator
can ask every producer to push its request latency for the duration of a move."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kreassign.cluster.errors import InputError

METRICS, INTERVAL, MATCH = "metrics", "interval.ms", "match"
MATCH_KEYS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
              "client_source_address", "client_source_port")
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
LATENCY_METRICS = ("org.apache.kafka.producer.node.request.latency", "org.apache.kafka.producer.produce.throttle.time",
                   "org.apache.kafka.consumer.node.request.latency", "org.apache.kafka.consumer.fetch.manager.fetch.latency")
"""What a move's client impact is read from (KIP-714's standard producer and consumer metrics)."""


@dataclass(frozen=True)
class Subscription:
    """One CLIENT_METRICS resource."""

    name: str
    metrics: tuple[str, ...] = ()
    """name prefixes; ("*",) or ("",) for every metric, () for none"""
    interval_ms: int | None = None
    match: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_configs(cls, name: str, values: Mapping[str, str | None]) -> Subscription:
        metrics = tuple(m.strip() for m in (values.get(METRICS) or "").split(",") if m.strip())
        interval = values.get(INTERVAL)
        return cls(name, metrics, int(interval) if interval else None, parse_match(values.get(MATCH) or ""))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "metrics": list(self.metrics), "interval_ms": self.interval_ms,
                "match": dict(self.match)}


def parse_match(text: str) -> tuple[tuple[str, str], ...]:
    """`client_id=producer-1,client_software_name=apache-kafka-java` as (key, value) pairs.

    Raises:
        InputError: a selector that is not KEY=VALUE or a key Kafka does not know.
    """
    out = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not value.strip():
            raise InputError(f"'{item}' is not a client selector: use KEY=VALUE, e.g. client_id=orders-producer")
        if key.strip() not in MATCH_KEYS:
            raise InputError(f"'{key.strip()}' is not a client selector; use one of {', '.join(MATCH_KEYS)}")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def set_ops(metrics: str | None, interval_ms: int | None, match: str | None) -> dict[str, str | None]:
    """The IncrementalAlterConfigs SETs for the given options (what is not given stays).

    Raises:
        InputError: nothing to set, an interval out of Kafka's range, or a bad selector.
    """
    ops: dict[str, str | None] = {}
    if metrics is not None:
        ops[METRICS] = ",".join(m.strip() for m in metrics.split(",") if m.strip())
    if interval_ms is not None:
        if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
            raise InputError(f"--interval must be between {MIN_INTERVAL_MS} ms and {MAX_INTERVAL_MS} ms "
                             f"(1 hour), got {interval_ms} ms")
        ops[INTERVAL] = str(interval_ms)
    if match is not None:
        ops[MATCH] = ",".join(f"{k}={v}" for k, v in parse_match(match))
    if not ops:
        raise InputError("nothing to set: give --metrics, --interval and/or --match")
    return ops


DELETE_ALL: dict[str, str | None] = {METRICS: None, INTERVAL: None, MATCH: None}
"""Deleting every key removes the subscription."""
