"""The KIP-714 client telemetry receiver (broker-semantics Part B §5): which metrics each client
instance is asked for (the CLIENT_METRICS subscriptions that match it), the push-interval rules,
and the pushed payloads, decompressed and decoded as OTLP `MetricsData` with `opentelemetry-proto`.

The receiver keeps the latest value of every pushed data point per client instance: a gauge's
last value; a sum as a running total (the broker asks for delta temporality, as Kafka's does, so
deltas are added up; a cumulative sum replaces the total), which is what a receiver plugin that
exports to Prometheus holds. Times are sandbox seconds.

Subscriptions match on `client_id` and `client_instance_id` (full regex matches, as Kafka's
`match` values are); the sandbox does not keep the software name, version or source address per
connection, so a subscription matching on those matches no client.
"""
from __future__ import annotations

import json
import re
import uuid
import zlib
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from kafka.codec import gzip_decode
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData, NumberDataPoint

from kreassign.sandbox import codes
from kreassign.sandbox.client_metrics import INTERVAL, MATCH, METRICS, ClientMetricsStore

NONE_COMPRESSION, GZIP = 0, 1
ACCEPTED_COMPRESSION = (GZIP,)  # the only codec of Kafka's [ZSTD, LZ4, GZIP, SNAPPY] Python has built in
DEFAULT_INTERVAL_MS = 300_000
TELEMETRY_MAX_BYTES = 1024 * 1024
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Subscription:
    """What a client instance is asked for: `requested` is [] for nothing, [""] for everything."""

    subscription_id: int
    interval_ms: int
    requested: tuple[str, ...]


@dataclass
class ClientInstance:
    """One client instance as the receiver knows it; `metrics` maps (name, labels) to the latest
    value (see the module docstring for sums)."""

    instance_id: uuid.UUID
    client_id: str
    subscription: Subscription
    broker_id: int = -1  # the broker of the last push, whose receiver plugin exports it
    last_get: float | None = None
    last_push: float | None = None
    last_error: int = codes.NONE
    terminated: bool = False
    pushes: int = 0
    resource: dict[str, str] = field(default_factory=dict)
    metrics: dict[tuple[str, Labels], float] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # metric name -> "gauge" or "sum"

    def value(self, name: str, **labels: str) -> float | None:
        """The latest value of `name` whose labels include `labels` (the sum over the matches)."""
        found = [v for (n, lab), v in self.metrics.items() if n == name and set(labels.items()) <= set(lab)]
        return sum(found) if found else None


class TelemetryReceiver:
    """Answers GetTelemetrySubscriptions and PushTelemetry for the whole cluster (Kafka's
    ClientMetricsManager runs per broker; a client pushes to one broker at a time, so one shared
    registry holds the same data)."""

    def __init__(self, store: ClientMetricsStore, *, max_bytes: int = TELEMETRY_MAX_BYTES) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.instances: dict[uuid.UUID, ClientInstance] = {}

    def subscription_for(self, client_id: str, instance_id: uuid.UUID) -> Subscription:
        matched = {name: cfg for name, cfg in self.store.subscriptions.items()
                   if _matches(cfg.get(MATCH, ""), {"client_id": client_id, "client_instance_id": str(instance_id)})}
        prefixes = {p.strip() for cfg in matched.values() for p in cfg.get(METRICS, "").split(",") if p.strip()}
        requested = ("",) if "*" in prefixes else tuple(sorted(prefixes))
        intervals = [int(cfg.get(INTERVAL, DEFAULT_INTERVAL_MS)) for cfg in matched.values()
                     if cfg.get(METRICS, "").strip()]
        interval = min(intervals) if intervals else DEFAULT_INTERVAL_MS
        digest = zlib.crc32(json.dumps([sorted(matched.items()), str(instance_id)], sort_keys=True).encode())
        return Subscription(digest - (1 << 32) if digest >= 1 << 31 else digest, interval, requested)

    def get(self, instance_id: uuid.UUID | None, client_id: str, now: float) -> tuple[int, ClientInstance]:
        """GetTelemetrySubscriptions: (error code, the instance, with a fresh id if it sent zero,
        which kafka-python decodes as None)."""
        if instance_id is None or instance_id.int == 0:
            instance_id = uuid.uuid4()
        sub = self.subscription_for(client_id, instance_id)
        inst = self.instances.get(instance_id)
        if inst is None:
            inst = self.instances[instance_id] = ClientInstance(instance_id, client_id, sub)
        early = (inst.last_get is not None and now * 1000.0 < inst.last_get * 1000.0 + inst.subscription.interval_ms
                 and inst.subscription == sub
                 and inst.last_error not in (codes.UNKNOWN_SUBSCRIPTION_ID, codes.UNSUPPORTED_COMPRESSION_TYPE))
        if early:
            return codes.THROTTLING_QUOTA_EXCEEDED, inst
        inst.subscription, inst.last_get, inst.last_error = sub, now, codes.NONE
        return codes.NONE, inst

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool, compression: int,
             payload: bytes, client_id: str, now: float, broker_id: int = -1) -> int:
        """PushTelemetry to `broker_id`: decode and keep the metrics; returns the error code."""
        inst = self.instances.get(instance_id) if instance_id is not None else None
        code = self._check_push(inst, subscription_id, terminating, compression, payload, client_id, now)
        if inst is not None:
            inst.last_error = code
        if code != codes.NONE or inst is None:
            return code
        try:
            data = MetricsData.FromString(_decompress(compression, payload))
        except (DecodeError, OSError, ValueError, EOFError):
            inst.last_error = codes.INVALID_RECORD
            return codes.INVALID_RECORD
        inst.last_push, inst.pushes, inst.terminated, inst.broker_id = now, inst.pushes + 1, terminating, broker_id
        _keep(inst, data)
        return codes.NONE

    def _check_push(self, inst: ClientInstance | None, subscription_id: int, terminating: bool, compression: int,
                    payload: bytes, client_id: str, now: float) -> int:
        if inst is None or inst.terminated:
            return codes.UNKNOWN_SUBSCRIPTION_ID if inst is None else codes.INVALID_REQUEST
        if subscription_id != self.subscription_for(client_id, inst.instance_id).subscription_id:
            return codes.UNKNOWN_SUBSCRIPTION_ID
        first_after_get = inst.last_get is not None and (inst.last_push is None or inst.last_push < inst.last_get)
        if (not terminating and not first_after_get and inst.last_push is not None
                and now * 1000.0 < inst.last_push * 1000.0 + inst.subscription.interval_ms):
            return codes.THROTTLING_QUOTA_EXCEEDED
        if compression not in (NONE_COMPRESSION, *ACCEPTED_COMPRESSION):
            return codes.UNSUPPORTED_COMPRESSION_TYPE
        if len(payload) > self.max_bytes:
            return codes.TELEMETRY_TOO_LARGE
        return codes.NONE


def _matches(patterns: str, attributes: dict[str, str]) -> bool:
    for pattern in filter(None, (p.strip() for p in patterns.split(","))):
        key, _, regex = pattern.partition("=")
        value = attributes.get(key.strip())
        try:
            if value is None or re.fullmatch(regex.strip(), value) is None:
                return False
        except re.error:
            return False
    return True


def _decompress(compression: int, payload: bytes) -> bytes:
    return gzip_decode(payload) if compression == GZIP else payload


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


def _labels(attributes: list[KeyValue]) -> Labels:
    return tuple(sorted((a.key, _text(a.value)) for a in attributes))


def _number(point: NumberDataPoint) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def _keep(inst: ClientInstance, data: MetricsData) -> None:
    for rm in data.resource_metrics:
        inst.resource.update(dict(_labels(list(rm.resource.attributes))))
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    inst.kinds[metric.name] = "gauge"
                    for p in metric.gauge.data_points:
                        inst.metrics[(metric.name, _labels(list(p.attributes)))] = _number(p)
                elif kind == "sum":
                    inst.kinds[metric.name] = "sum"
                    delta = metric.sum.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
                    for p in metric.sum.data_points:
                        key = (metric.name, _labels(list(p.attributes)))
                        inst.metrics[key] = (inst.metrics.get(key, 0.0) if delta else 0.0) + _number(p)
