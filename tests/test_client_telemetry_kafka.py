"""KIP-714 on real Kafka (issue 27 item 6): a librdkafka producer subscribed with `kreassign
client-metrics set` pushes its metrics to real brokers, whose receiver (kreassign's
PrometheusClientTelemetry, sandbox/kafka_engine/telemetry, a metric.reporters plugin built by
`make kafka`) serves them with the names and labels the emulator's /metrics gives the same
client's pushes, and `watch --metrics-url` reads a broker's JMX exporter and receiver together."""
from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kreassign.cluster.broker_metrics import MetricNames
from kreassign.cluster.metrics_source import MetricsEndpoints, read_brokers
from kreassign.sandbox.topics import TopicSpec
from cli_helpers import Kreassign

from live import wait_until

PRODUCER = "org.apache.kafka.producer"
LATENCY = "org_apache_kafka_producer_node_request_latency_avg"
Series = dict[str, set[frozenset[str]]]


def _scrape(url: str, client_id: str) -> tuple[Series, list[dict[str, str]]]:
    """Sample name -> label-name sets of `client_id`'s KIP-714 series, and their label sets."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    series: Series = {}
    labels: list[dict[str, str]] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("org_apache_kafka_") and s.labels.get("client_id") == client_id:
                series.setdefault(s.name, set()).add(frozenset(s.labels))
                labels.append(dict(s.labels))
    return series, labels


def _push(bootstrap: str, topic: str, client_id: str, urls: Callable[[], list[str]],
          tick: Callable[[], None]) -> tuple[Series, list[dict[str, str]], str]:
    """Produce with librdkafka (which pushes once the broker offers a subscription) until a
    broker's endpoint shows its request latency; returns that endpoint's series of the client."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                         "enable.metrics.push": True})
    found: list[tuple[Series, list[dict[str, str]], str]] = []

    def pushed() -> bool:
        for _ in range(20):
            producer.produce(topic, b"x" * 100, partition=0)
        producer.poll(0.1)
        tick()
        for url in urls():
            series, labels = _scrape(url, client_id)
            if LATENCY in series:
                found.append((series, labels, url))
                return True
        return False

    try:
        wait_until(pushed, "the producer's pushed metrics on a broker's endpoint", timeout_s=180.0)
    finally:
        producer.flush(30)
    return found[-1]


@pytest.mark.kafka
def test_pushed_metrics_on_real_kafka_have_the_emulators_names_and_labels(kafka_matrix: Any, sandbox_factory: Any,
                                                                          kreassign: Kreassign) -> None:
    """On every release of the matrix (3.9 and 4.x serve KIP-714 alike; the receiver is compiled
    once, against kafka-clients 3.9.2)."""
    client_id = f"telemetry-{uuid.uuid4().hex[:8]}"
    name = f"producers-{client_id}"

    def subscribe(bootstrap: str) -> None:
        ran = kreassign.run("client-metrics", "set", "--name", name, "--metrics", PRODUCER, "--interval", "500ms",
                            "--match", f"client_id={client_id}", "--bootstrap-server", bootstrap)
        assert ran.exit_code == 0, ran.output

    real = kafka_matrix
    assert real.telemetry_ports.keys() == real.metrics_ports.keys() == set(real.brokers)
    topic = f"kip714-{client_id}"
    with real.admin() as port:
        assert port.create_topic(topic, {0: [real.brokers[0]]}) is None
    subscribe(real.bootstrap)
    try:
        on_real, real_labels, url = _push(
            real.bootstrap, topic, client_id,
            lambda: [f"http://127.0.0.1:{p}/metrics" for p in real.telemetry_ports.values()], lambda: None)
        # what watch --metrics-url reads: the broker's JMX exporter and its receiver as one exposition
        broker = next(b for b, p in real.telemetry_ports.items() if url.endswith(f":{p}/metrics"))
        both = MetricsEndpoints({broker: (f"http://127.0.0.1:{real.metrics_ports[broker]}/metrics", url)})
        # a loaded broker's JMX exporter took more than watch's 5 s to render its first page (CI:
        # every series missing); this test is about names and labels, so it waits for the page
        notes: list[str] = []
        reading = read_brokers(both, MetricNames(), time.time(), timeout_s=60.0, warn=notes.append)[broker]
        assert not notes, notes
        assert reading.client_latency_avg_ms is not None and reading.client_latency_avg_ms > 0
        assert "request_time" not in reading.missing and "under_replicated" not in reading.missing
    finally:
        assert kreassign.run("client-metrics", "delete", "--name", name,
                             "--bootstrap-server", real.bootstrap).exit_code == 0
        with real.admin() as port:
            assert port.delete_topic(topic) is None

    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec(topic, 1, 1)], telemetry=True, metrics_port=0)
    subscribe(sb.bootstrap)
    on_emulator, emulator_labels, _ = _push(
        sb.bootstrap, topic, client_id, lambda: [f"http://127.0.0.1:{p}/metrics" for p in sb.metrics_ports.values()],
        lambda: sb.advance(0.6))

    assert on_real == on_emulator  # the same series, each with the same label names
    assert on_real.keys() == {f"org_apache_kafka_producer_{m}" for m in (
        "node_request_latency_avg", "node_request_latency_max", "request_latency_avg", "request_latency_max",
        "record_queue_time_avg", "record_queue_time_max", "produce_throttle_time_avg", "produce_throttle_time_max",
        "connection_creation_rate", "connection_creation_total")}  # librdkafka 2.16's producer metrics
    for labels in (real_labels, emulator_labels):
        assert {lab["client_id"] for lab in labels} == {client_id}
        assert len({lab["client_instance_id"] for lab in labels}) == 1
        assert all(str(uuid.UUID(lab["client_instance_id"])) == lab["client_instance_id"] for lab in labels)
    assert {lab["node_id"] for lab in real_labels if "node_id" in lab} <= {str(b) for b in real.brokers}
