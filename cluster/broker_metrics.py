"""Broker metrics from the Prometheus text exposition format, as the Prometheus JMX exporter
publishes them: the names of Strimzi's example rules (`kafka-metrics.yaml`) by default, or
others from a mapping file. Pure: text in, values out (`cluster.metrics_source` fetches them).

What kreassign reads, per broker:
* produce request time (TotalTimeMs) and its remote part (RemoteTimeMs: the wait for acks=all
  followers, which a move's replication slows), and the time clients were throttled
  (ThrottleTimeMs), as percentiles;
* bytes in per topic (BrokerTopicMetrics BytesInPerSec: the writes), replication bytes in and
  out, and the under-replicated partition count;
* the clients' own request latency when the cluster exports their KIP-714 metrics.
Counters become rates between two readings.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kreassign.cluster.errors import InputError


@dataclass(frozen=True)
class MetricNames:
    """Exposition sample names of what kreassign reads (a mapping file overrides any of them)."""

    request_time: str = "kafka_network_requestmetrics_totaltimems"
    remote_time: str = "kafka_network_requestmetrics_remotetimems"
    throttle_time: str = "kafka_network_requestmetrics_throttletimems"
    bytes_in: str = "kafka_server_brokertopicmetrics_bytesin_total"
    replication_bytes_in: str = "kafka_server_brokertopicmetrics_replicationbytesin_total"
    replication_bytes_out: str = "kafka_server_brokertopicmetrics_replicationbytesout_total"
    under_replicated: str = "kafka_server_replicamanager_underreplicatedpartitions"
    client_latency_avg: str = "org_apache_kafka_producer_node_request_latency_avg"
    client_latency_max: str = "org_apache_kafka_producer_node_request_latency_max"

    @classmethod
    def from_mapping(cls, text: str, source: str) -> MetricNames:
        """A JSON object of {field: sample name} over the Strimzi defaults."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InputError(f"{source} is not JSON: {exc}") from None
        known = {f.name for f in fields(cls)}
        if not isinstance(doc, dict) or not all(isinstance(v, str) and v for v in doc.values()):
            raise InputError(f"{source} must be a JSON object of metric names, e.g. "
                             '{"request_time": "kafka_network_requestmetrics_totaltimems"}')
        unknown = sorted(set(doc) - known)
        if unknown:
            raise InputError(f"{source}: unknown metric {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**doc)


@dataclass(frozen=True)
class BrokerReading:
    """One scrape of one broker: percentiles in ms by quantile ("0.99"), counters as read."""

    broker: int
    at: float
    produce_ms: Mapping[str, float] = field(default_factory=dict)
    remote_ms: Mapping[str, float] = field(default_factory=dict)
    throttle_ms: Mapping[str, float] = field(default_factory=dict)
    bytes_in: Mapping[str, float] = field(default_factory=dict)
    """counter per topic"""
    replication_in: float | None = None
    replication_out: float | None = None
    under_replicated: float | None = None
    client_latency_avg_ms: float | None = None
    client_latency_max_ms: float | None = None
    missing: tuple[str, ...] = ()
    """the fields of `MetricNames` the exposition did not have"""


def parse_exposition(text: str, names: MetricNames, broker: int, at: float) -> BrokerReading:
    """Read the wanted samples out of one exposition (Prometheus text format).

    Raises:
        InputError: the text is not in the exposition format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    produce: dict[str, float] = {}
    remote: dict[str, float] = {}
    throttle: dict[str, float] = {}
    bytes_in: dict[str, float] = {}
    scalars: dict[str, float] = {}
    latencies: dict[str, list[float]] = {"client_latency_avg": [], "client_latency_max": []}
    seen: set[str] = set()
    by_name = {getattr(names, f.name): f.name for f in fields(names)}
    try:
        samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError) as exc:
        raise InputError(f"broker {broker}: not a Prometheus exposition ({exc})") from None
    for s in samples:
        what = by_name.get(s.name)
        if what is None or not math.isfinite(s.value):
            continue
        seen.add(what)
        if what in ("request_time", "remote_time", "throttle_time"):
            if s.labels.get("request") == "Produce" and "quantile" in s.labels:
                {"request_time": produce, "remote_time": remote, "throttle_time": throttle}[what][
                    _quantile(s.labels["quantile"])] = s.value
        elif what == "bytes_in":
            topic = s.labels.get("topic")
            if topic:
                bytes_in[topic] = bytes_in.get(topic, 0.0) + s.value
        elif what in latencies:
            latencies[what].append(s.value)
        else:
            scalars[what] = scalars.get(what, 0.0) + s.value
    avg, top = latencies["client_latency_avg"], latencies["client_latency_max"]
    return BrokerReading(
        broker=broker, at=at, produce_ms=produce, remote_ms=remote, throttle_ms=throttle, bytes_in=bytes_in,
        replication_in=scalars.get("replication_bytes_in"), replication_out=scalars.get("replication_bytes_out"),
        under_replicated=scalars.get("under_replicated"),
        client_latency_avg_ms=sum(avg) / len(avg) if avg else None, client_latency_max_ms=max(top) if top else None,
        missing=tuple(f.name for f in fields(names) if f.name not in seen))


def _quantile(label: str) -> str:
    """"0.99" and "0.990" are the same quantile."""
    try:
        return f"{float(label):g}"
    except ValueError:
        return label


@dataclass(frozen=True)
class BrokerMetrics:
    """What two readings of one broker say: percentiles now, counters as rates over the window."""

    broker: int
    window_s: float
    produce_p50_ms: float | None
    produce_p99_ms: float | None
    remote_p99_ms: float | None
    throttle_p99_ms: float | None
    bytes_in_bps: Mapping[str, float]
    replication_in_bps: float | None
    replication_out_bps: float | None
    under_replicated: float | None
    client_latency_avg_ms: float | None
    client_latency_max_ms: float | None
    missing: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "window_s": round(self.window_s, 3), "produce_p50_ms": self.produce_p50_ms,
                "produce_p99_ms": self.produce_p99_ms, "remote_p99_ms": self.remote_p99_ms,
                "throttle_p99_ms": self.throttle_p99_ms,
                "bytes_in_bps": {t: round(v, 3) for t, v in sorted(self.bytes_in_bps.items())},
                "replication_in_bps": self.replication_in_bps, "replication_out_bps": self.replication_out_bps,
                "under_replicated": self.under_replicated, "client_latency_avg_ms": self.client_latency_avg_ms,
                "client_latency_max_ms": self.client_latency_max_ms, "missing": list(self.missing)}


def broker_metrics(first: BrokerReading, second: BrokerReading) -> BrokerMetrics:
    """Rates of the counters between two readings of a broker, and its latest percentiles; a
    counter that went down (a broker restart) gives no rate."""
    window = second.at - first.at
    if window <= 0 or first.broker != second.broker:
        raise InputError("broker metrics need two readings of one broker, in time order")

    def rate(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b < a else (b - a) / window

    topics = {t: r for t in second.bytes_in if (r := rate(first.bytes_in.get(t), second.bytes_in[t])) is not None}
    return BrokerMetrics(
        broker=second.broker, window_s=window, produce_p50_ms=second.produce_ms.get("0.5"),
        produce_p99_ms=second.produce_ms.get("0.99"), remote_p99_ms=second.remote_ms.get("0.99"),
        throttle_p99_ms=second.throttle_ms.get("0.99"), bytes_in_bps=topics,
        replication_in_bps=rate(first.replication_in, second.replication_in),
        replication_out_bps=rate(first.replication_out, second.replication_out),
        under_replicated=second.under_replicated, client_latency_avg_ms=second.client_latency_avg_ms,
        client_latency_max_ms=second.client_latency_max_ms, missing=second.missing)


def missing_note(metrics: Mapping[int, BrokerMetrics]) -> str | None:
    """One line naming what no broker exported (e.g. KIP-714 client metrics), or None."""
    if not metrics:
        return None
    absent = set.intersection(*(set(m.missing) for m in metrics.values()))
    if not absent:
        return None
    return "not exported by the brokers: " + ", ".join(sorted(absent))
