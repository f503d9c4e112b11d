"""A Prometheus endpoint per sandbox broker, with the names the Prometheus JMX exporter gives a
real broker under the rules of kafka_engine/jmx_exporter.yaml, which real brokers run with
(lower-cased `kafka_<domain>_<type>_<name>`, histogram percentiles as `quantile` labels,
`...PerSec` meters as `_total` counters, quota sensors as `kafka_server_quota_<sensor>{resource,
clientId[, user]}`, KIP-73's as `kafka_server_{leader,follower}replication_byte_rate`;
tests/test_prometheus_vs_kafka.py compares the two), plus the KIP-714 metrics clients
pushed to that broker, as a receiver plugin exporting to Prometheus names them (dots become
underscores; the client instance and id, and the data point's attributes, become labels).

Every value comes from what the sandbox did: request timings (`timings.py`), produced, fetched
and replicated bytes (`traffic.py`, the replication step), the ISR, the KIP-13 quota sensors and
the telemetry receiver, all in sandbox time (the server's own queue and local work, measured in
wall time, is scaled by the clock's speed). Percentiles are Yammer's (Kafka's histograms) over the requests of the
last `HISTOGRAM_WINDOW_S` sandbox seconds, the span Yammer's decaying reservoir favours.
"""
from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, UnknownMetricFamily

from kreassign.sandbox.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, ClientQuotas
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.telemetry import TelemetryReceiver
from kreassign.sandbox.timings import RequestTiming, RequestTimings

HISTOGRAM_WINDOW_S = 300.0
QUANTILES = (("0.50", 0.5), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
# RequestMetrics histogram -> the timing part(s) it sums (TotalTimeMs leaves out throttle time, KIP-219),
# in sandbox ms: queue and local time are recorded in wall ms and scaled by the clock's speed
PARTS: dict[str, Callable[[RequestTiming, float], float]] = {
    "totaltimems": lambda t, scale: (t.queue_ms + t.local_ms) * scale + t.remote_ms,
    "requestqueuetimems": lambda t, scale: t.queue_ms * scale,
    "localtimems": lambda t, scale: t.local_ms * scale,
    "remotetimems": lambda t, scale: t.remote_ms,
    "throttletimems": lambda t, scale: t.throttle_ms,
}
QUOTA_RESOURCE = {PRODUCER_BYTE_RATE: "Produce", CONSUMER_BYTE_RATE: "Fetch"}


def percentile(values: Sequence[float], q: float) -> float:
    """Yammer's `Snapshot.getValue` over sorted `values` (Kafka's histogram percentiles)."""
    if not values:
        return 0.0
    pos = q * (len(values) + 1)
    index = int(pos)
    if index < 1:
        return float(values[0])
    if index >= len(values):
        return float(values[-1])
    lower, upper = values[index - 1], values[index]
    return float(lower + (pos - math.floor(pos)) * (upper - lower))


@dataclass(frozen=True)
class Sources:
    """What the endpoints read, all under `lock` (the engine's)."""

    lock: Any
    engine: Engine
    timings: RequestTimings
    quotas: ClientQuotas | None
    telemetry: TelemetryReceiver | None


class BrokerCollector:
    """The metrics of one broker, computed at each scrape."""

    def __init__(self, broker_id: int, sources: Sources) -> None:
        self.broker_id = broker_id
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        s = self.sources
        with s.lock:
            now = s.engine.now
            timings = [t for t in list(s.timings.recent)
                       if t.broker_id == self.broker_id and t.at >= now - HISTOGRAM_WINDOW_S]
            counts = [t for t in list(s.timings.recent) if t.broker_id == self.broker_id]
            yield from self._requests(timings, counts)
            yield from self._topics()
            yield from self._replica_manager()
            yield from self._quotas(now)
            yield from self._replication_quotas(now)
            yield from self._telemetry()

    def _requests(self, timings: list[RequestTiming], counts: list[RequestTiming]) -> Iterator[Metric]:
        names = sorted({t.request for t in timings})
        scale = self.sources.engine.time_scale  # sandbox seconds per wall second (1 on a manual clock)
        for metric, part in PARTS.items():
            family = GaugeMetricFamily(f"kafka_network_requestmetrics_{metric}",
                                       f"kafka.network RequestMetrics {metric} percentiles",
                                       labels=["request", "quantile"])
            count = UnknownMetricFamily(f"kafka_network_requestmetrics_{metric}_count",
                                        f"kafka.network RequestMetrics {metric} count", labels=["request"])
            for name in names:
                values = sorted(part(t, scale) for t in timings if t.request == name)
                for label, q in QUANTILES:
                    family.add_metric([name, label], percentile(values, q))
                count.add_metric([name], float(sum(1 for t in counts if t.request == name)))
            yield family
            yield count
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "kafka.network RequestMetrics "
                                       "RequestsPerSec", labels=["request", "version"])
        per: dict[tuple[str, str], int] = {}
        for t in counts:
            per[(t.request, str(t.api_version))] = per.get((t.request, str(t.api_version)), 0) + 1
        for (name, version), n in sorted(per.items()):
            requests.add_metric([name, version], float(n))
        yield requests

    def _topics(self) -> Iterator[Metric]:
        b, traffic = self.broker_id, self.sources.engine.traffic
        for name, table in (("bytesin", traffic.bytes_in), ("messagesin", traffic.messages_in),
                            ("bytesout", traffic.bytes_out)):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                         f"kafka.server BrokerTopicMetrics {name}", labels=["topic"])
            mine = {topic: float(v) for (broker, topic), v in table.items() if broker == b}
            for topic, v in sorted(mine.items()):
                family.add_metric([topic], v)
            family.add_sample(f"{family.name}_total", {}, float(traffic.all_topics.get((name, b), 0.0)))
            yield family
        rep = self.sources.engine.replication
        i = rep.pos[b]
        for name, moved, clients in (("replicationbytesin", rep.received, traffic.replication_in),
                                     ("replicationbytesout", rep.sent, traffic.replication_out)):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                         f"kafka.server BrokerTopicMetrics {name}")
            family.add_metric([], float(moved[i]) + clients.get(b, 0.0))
            yield family

    def _replica_manager(self) -> Iterator[Metric]:
        eng, b = self.sources.engine, self.broker_id
        led = [p for p in eng.rows if p.leader == b]
        values = {"underreplicatedpartitions": sum(len(p.isr) < len(p.replicas) for p in led),
                  "leadercount": len(led),
                  "partitioncount": sum(b in p.replicas for p in eng.rows)}
        for name, value in values.items():
            family = GaugeMetricFamily(f"kafka_server_replicamanager_{name}", f"kafka.server ReplicaManager {name}")
            family.add_metric([], float(value))
            yield family

    def _quotas(self, now: float) -> Iterator[Metric]:
        quotas = self.sources.quotas
        manager = quotas.brokers.get(self.broker_id) if quotas is not None else None
        now_ms = int(round(now * 1000.0))
        for sensor in ("byte_rate", "throttle_time"):
            family = GaugeMetricFamily(f"kafka_server_quota_{sensor}", f"KIP-13 {sensor.replace('_', '-')}")
            table: dict[tuple[str, str, str], Any] = {}
            if manager is not None:
                table = dict(manager.rates if sensor == "byte_rate" else manager.throttles)
            for (key, user, client_id), stat in sorted(table.items()):
                # Kafka's JMX names leave out empty tags (a client-id quota has no user)
                labels = {"resource": QUOTA_RESOURCE[key], **({"user": user} if user else {}), "clientId": client_id}
                family.add_sample(family.name, labels, stat.measure(now_ms))
            yield family

    def _replication_quotas(self, now: float) -> Iterator[Metric]:
        """KIP-73's sensors (`kafka.server:type=LeaderReplication|FollowerReplication`,
        `byte-rate`), measured as a JMX read measures them; a sensor never used has no series
        yet, as Kafka creates it on first use."""
        rep = self.sources.engine.replication
        nb, i = len(rep.broker_ids), rep.pos[self.broker_id]
        for side, row in (("leaderreplication", i), ("followerreplication", nb + i)):
            family = GaugeMetricFamily(f"kafka_server_{side}_byte_rate", f"KIP-73 {side} byte-rate")
            if np.isfinite(rep.rates.start[row]).any():
                which = np.zeros(2 * nb, dtype=bool)
                which[row] = True
                family.add_metric([], float(rep.rates.rates(now, which)[row]))
            yield family

    def _telemetry(self) -> Iterator[Metric]:
        receiver = self.sources.telemetry
        if receiver is None:
            return
        families: dict[tuple[str, tuple[str, ...]], Metric] = {}
        for inst in receiver.instances.values():
            if inst.broker_id != self.broker_id:
                continue
            for (name, labels), value in sorted(inst.metrics.items()):
                kind = inst.kinds.get(name, "gauge")
                prom = _prom_name(name)
                keys = ("client_instance_id", "client_id", *(_prom_name(k) for k, _ in labels))
                fam_key = (prom, keys)
                family = families.get(fam_key)
                if family is None:
                    family = (CounterMetricFamily(prom.removesuffix("_total"), f"KIP-714 {name}", labels=list(keys))
                              if kind == "sum" else GaugeMetricFamily(prom, f"KIP-714 {name}", labels=list(keys)))
                    families[fam_key] = family
                family.add_metric([str(inst.instance_id), inst.client_id, *(v for _, v in labels)], value)
        yield from families.values()


def _prom_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


class MetricsEndpoints:
    """`/metrics` of every broker on 127.0.0.1: broker i on `port_base + i - 1` (0: free ports)."""

    def __init__(self, sources: Sources, broker_ids: Sequence[int], port_base: int = 0) -> None:
        self.sources = sources
        self.broker_ids = list(broker_ids)
        self.port_base = port_base
        self.servers: dict[int, Any] = {}
        self.threads: list[threading.Thread] = []

    def start(self) -> dict[int, int]:
        for i, b in enumerate(self.broker_ids):
            registry = CollectorRegistry(auto_describe=False)
            registry.register(BrokerCollector(b, self.sources))
            server, thread = start_http_server(self.port_base + i if self.port_base else 0, addr="127.0.0.1",
                                               registry=registry)
            self.servers[b] = server
            self.threads.append(thread)
        return self.ports

    @property
    def ports(self) -> dict[int, int]:
        return {b: int(s.server_port) for b, s in self.servers.items()}

    def stop(self) -> None:
        for server in self.servers.values():
            server.shutdown()
            server.server_close()
        for thread in self.threads:
            thread.join(timeout=5)
        self.servers.clear()
        self.threads.clear()
