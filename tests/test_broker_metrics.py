"""Broker metrics from Prometheus: the exposition parser with Strimzi's rule names, a mapping
file, rates between readings, and `watch --metrics-url` against a local prometheus_client server
(127.0.0.1) standing in for the JMX exporter of each broker."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from cli_helpers import Kreassign
from kreassign.cli.runtime import Runtime
from kreassign.cluster.broker_metrics import MetricNames, broker_metrics, missing_note, parse_exposition
from kreassign.cluster.errors import InputError
from kreassign.cluster import metrics_source
from kreassign.cluster.metrics_source import MetricsEndpoints, read_brokers
from test_watch import GrowingCluster, TP

STRIMZI = """\
# TYPE kafka_network_requestmetrics_totaltimems untyped
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.50",} 3.0
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99",} 41.5
kafka_network_requestmetrics_totaltimems{request="Fetch",quantile="0.99",} 500.0
kafka_network_requestmetrics_remotetimems{request="Produce",quantile="0.99",} 30.0
kafka_network_requestmetrics_throttletimems{request="Produce",quantile="0.99",} 0.0
# TYPE kafka_server_brokertopicmetrics_bytesin_total counter
kafka_server_brokertopicmetrics_bytesin_total{topic="orders",} 1000.0
kafka_server_brokertopicmetrics_bytesin_total{topic="clicks",} 50.0
kafka_server_brokertopicmetrics_bytesin_total 1050.0
kafka_server_brokertopicmetrics_replicationbytesin_total 700.0
kafka_server_brokertopicmetrics_replicationbytesout_total 900.0
kafka_server_replicamanager_underreplicatedpartitions 2.0
"""


def test_strimzi_names_are_read_by_default() -> None:
    r = parse_exposition(STRIMZI, MetricNames(), broker=1, at=10.0)
    assert (r.produce_ms, r.remote_ms, r.throttle_ms) == ({"0.5": 3.0, "0.99": 41.5}, {"0.99": 30.0}, {"0.99": 0.0})
    assert r.bytes_in == {"orders": 1000.0, "clicks": 50.0}  # the all-topics total is not a topic
    assert (r.replication_in, r.replication_out, r.under_replicated) == (700.0, 900.0, 2.0)
    assert r.missing == ("client_latency_avg", "client_latency_max")


def test_counters_become_rates_and_missing_metrics_are_named() -> None:
    first = parse_exposition(STRIMZI, MetricNames(), broker=1, at=10.0)
    later = STRIMZI.replace("{topic=\"orders\",} 1000.0", "{topic=\"orders\",} 3000.0").replace(
        "replicationbytesin_total 700.0", "replicationbytesin_total 2700.0")
    m = broker_metrics(first, parse_exposition(later, MetricNames(), broker=1, at=20.0))
    assert m.bytes_in_bps == {"orders": 200.0, "clicks": 0.0}
    assert (m.replication_in_bps, m.replication_out_bps, m.produce_p99_ms, m.remote_p99_ms) == (200.0, 0.0, 41.5, 30.0)
    assert missing_note({1: m}) == "not exported by the brokers: client_latency_avg, client_latency_max"
    with pytest.raises(InputError, match="in time order"):
        broker_metrics(first, first)


def test_a_mapping_file_renames_metrics() -> None:
    names = MetricNames.from_mapping(json.dumps({"under_replicated": "urp"}), "names.json")
    assert parse_exposition("urp 7\n", names, 1, 0.0).under_replicated == 7.0
    with pytest.raises(InputError, match="unknown metric 'latency'"):
        MetricNames.from_mapping('{"latency": "x"}', "names.json")


def test_endpoints_from_options_and_a_file(tmp_path: Path) -> None:
    (tmp_path / "urls").write_text("# broker url\n2 http://b:9404/metrics\n1 http://a:9405/metrics\n",
                                   encoding="utf-8")
    spec = MetricsEndpoints.parse(["1=http://a:9404/metrics", f"@{tmp_path / 'urls'}"],
                                  lambda p: Path(p).read_text(encoding="utf-8"))
    # a broker named again adds an endpoint (its JMX exporter and its client-telemetry receiver)
    assert spec.urls == {1: ("http://a:9404/metrics", "http://a:9405/metrics"), 2: ("http://b:9404/metrics",)}
    with pytest.raises(InputError, match="use ID=URL"):
        MetricsEndpoints.parse(["http://a:9404/metrics"], str)
    with pytest.raises(InputError, match="broker 1 has the metrics URL http://a:9404/metrics twice"):
        MetricsEndpoints.parse(["1=http://a:9404/metrics", "1=http://a:9404/metrics"], str)


class Exporter:
    """A JMX exporter stand-in: Strimzi-named metrics whose values the test sets."""

    def __init__(self) -> None:
        self.p99 = 5.0
        self.bytes_in = 0.0

    def collect(self) -> Iterator[Any]:
        total = GaugeMetricFamily("kafka_network_requestmetrics_totaltimems", "", labels=["request", "quantile"])
        total.add_metric(["Produce", "0.99"], self.p99)
        total.add_metric(["Produce", "0.50"], 1.0)
        yield total
        urp = GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions", "")
        urp.add_metric([], 1.0)
        yield urp
        counter = CounterMetricFamily("kafka_server_brokertopicmetrics_bytesin", "", labels=["topic"])
        counter.add_metric(["t"], self.bytes_in)
        yield counter


@pytest.mark.e2e
def test_watch_shows_client_impact_from_metrics_urls(tmp_path: Path, kreassign: Kreassign) -> None:
    exporter = Exporter()
    registry = CollectorRegistry()
    registry.register(exporter)  # type: ignore[arg-type]
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        fake = GrowingCluster()
        fake.alter_reassignments({TP: [1, 3]})

        def sleep(seconds: float) -> None:
            fake.advance(seconds)
            exporter.bytes_in += 1_000_000 * seconds
            exporter.p99 += 10.0

        url = f"http://127.0.0.1:{server.server_port}/metrics"
        ran = kreassign.run("watch", "--interval", "5s", "--stop-after", "10s", "--sample", "0", "--metrics-url",
                            f"1={url}", "--output", "json", "--journal-dir", str(tmp_path),
                            runtime=Runtime(clock=lambda: fake.now, sleep=sleep), connect=fake, columns=160)
        assert ran.exit_code == 3, ran.output
        progress = [e for e in map(json.loads, ran.stdout.splitlines()) if e["event"] == "progress"]
        assert progress[0]["client"] == []  # one reading is not a rate yet
        (m,) = progress[1]["client"]
        assert (m["broker"], m["produce_p99_ms"], m["produce_p50_ms"], m["under_replicated"]) == (1, 15.0, 1.0, 1.0)
        assert m["bytes_in_bps"] == {"t": 1_000_000.0} and m["window_s"] == 5.0
        assert "client_latency_avg" in progress[1]["client_note"]  # no KIP-714 metrics exported: said so
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_watch_without_metrics_says_what_is_missing(tmp_path: Path, kreassign: Kreassign) -> None:
    fake = GrowingCluster()
    fake.alter_reassignments({TP: [1, 3]})
    ran = kreassign.run("watch", "--interval", "5s", "--stop-after", "5s", "--sample", "0", "--output", "json",
                        "--journal-dir", str(tmp_path),
                        runtime=Runtime(clock=lambda: fake.now, sleep=fake.advance), connect=fake, columns=160)
    first = json.loads(ran.stdout.splitlines()[0])
    assert first["client"] == [] and first["client_note"].startswith("no --metrics-url: client latency is not measured")


class LoadedExporter(Exporter):
    """Broker 1's produce p99 grows with the catch-up it sends: 10 ms idle, +2 ms per MB/s."""

    def __init__(self, fake: GrowingCluster) -> None:
        super().__init__()
        self.fake = fake

    def collect(self) -> Iterator[Any]:
        copying = self.fake.rate(TP, 3) if self.fake.list_reassignments() else 0.0
        self.p99 = 10.0 * (1 + copying / 5_000_000)
        yield from super().collect()


@pytest.mark.e2e
def test_auto_throttle_keeps_the_measured_impact_within_the_bound(tmp_path: Path, kreassign: Kreassign) -> None:
    fake = GrowingCluster()
    fake.size[TP] = 5_000 * 1_000_000  # long enough to steer
    fake.alter_reassignments({TP: [1, 3]})
    # 2 MB/s on the leader, of which its in-sync follower's 1 MB/s of writes takes half: 1 MB/s of catch-up
    fake.broker_configs[1]["leader.replication.throttled.rate"] = "2000000"
    fake.topic_configs["t"] = {"leader.replication.throttled.replicas": "0:1,0:2"}
    exporter = LoadedExporter(fake)
    registry = CollectorRegistry()
    registry.register(exporter)  # type: ignore[arg-type]
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        ran = kreassign.run("watch", "--interval", "10s", "--stop-after", "600s", "--sample", "0", "--metrics-url",
                            f"1={url}", "--auto-throttle", "--max-impact", "20%", "--adjust-every", "30s",
                            "--change-threshold", "5%", "--output", "json", "--journal-dir", str(tmp_path),
                            runtime=Runtime(clock=lambda: fake.now, sleep=fake.advance), connect=fake, columns=160)
        assert ran.exit_code == 3, ran.output[-3000:]
        events = [json.loads(line) for line in ran.stdout.splitlines()]
        changes = [e for e in events if e["event"] == "throttle"]
        assert changes and all(e["journal"] for e in changes)  # every change is journaled
        times = [e["at"] for e in changes]
        assert all(b - a >= 30 for a, b in zip(times, times[1:]))  # rate-limited
        assert all(set(e["rates"]) == {"1"} for e in changes)  # only the sending side of broker 1 moves
        p99 = [m["produce_p99_ms"] for e in events if e["event"] == "progress" for m in e["client"]]
        # baseline 12 ms (1 MB/s of catch-up), bound 14.4 ms: the rate rose while below, then held under it
        assert max(p99) <= 12.0 * 1.2 and p99[-1] > 13.0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_topic_bytes_in_from_metrics_are_the_write_rates_of_the_first_model_eta(tmp_path: Path,
                                                                                kreassign: Kreassign) -> None:
    """Without a sample, the brokers' bytes in per topic are a write-rate source: spread over the
    topic's partitions, for partitions the polls have no estimate of yet (a paced plan's pending
    ones); the progress says where the rates came from."""
    exporter = Exporter()
    registry = CollectorRegistry()
    registry.register(exporter)  # type: ignore[arg-type]
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        fake = GrowingCluster()
        fake.write[TP] = 2_000_000.0
        fake.alter_reassignments({TP: [1, 3]})

        def sleep(seconds: float) -> None:
            fake.advance(seconds)
            exporter.bytes_in += 4_000_000 * seconds  # topic t: 2 partitions, 2 MB/s each

        url = f"http://127.0.0.1:{server.server_port}/metrics"
        ran = kreassign.run("watch", "--interval", "5s", "--stop-after", "5s", "--sample", "0", "--metrics-url",
                            f"1={url}", "--output", "json", "--journal-dir", str(tmp_path),
                            runtime=Runtime(clock=lambda: fake.now, sleep=sleep), connect=fake, columns=160)
        progress = [e for e in map(json.loads, ran.stdout.splitlines()) if e["event"] == "progress"]
        second = progress[1]
        assert second["client"][0]["bytes_in_bps"] == {"t": 4_000_000.0}
        assert (second["write_rates"]["known"], second["write_rates"]["method"]) == (True, "metrics")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_brokers_endpoints_are_read_as_one_and_a_silent_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = {"http://a:9404/metrics": 'kafka_server_replicamanager_underreplicatedpartitions 2\n',
             "http://a:9405/metrics": 'org_apache_kafka_producer_node_request_latency_avg{client_id="p",node_id="1"} 4\n'
                                      'org_apache_kafka_producer_node_request_latency_avg{client_id="p",node_id="2"} 6',
             "http://b:9404/metrics": 'kafka_server_replicamanager_underreplicatedpartitions 0\n'}

    def scrape(url: str, timeout_s: float) -> str:
        if url not in pages:
            raise OSError("connection refused")
        return pages[url]

    monkeypatch.setattr(metrics_source, "scrape", scrape)
    notes: list[str] = []
    endpoints = MetricsEndpoints({1: ("http://a:9404/metrics", "http://a:9405/metrics"),
                                  2: ("http://b:9404/metrics", "http://b:9405/metrics"), 3: ("http://c:9404/metrics",)})
    readings = read_brokers(endpoints, MetricNames(), 0.0, warn=notes.append)
    assert sorted(readings) == [1, 2]
    assert (readings[1].under_replicated, readings[1].client_latency_avg_ms) == (2.0, 5.0)
    assert (readings[2].under_replicated, readings[2].client_latency_avg_ms) == (0.0, None)
    assert notes == ["broker 2: its metrics at http://b:9405/metrics did not answer (connection refused)",
                     "broker 3: its metrics at http://c:9404/metrics did not answer (connection refused)"]
