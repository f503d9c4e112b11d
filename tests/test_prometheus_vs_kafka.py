"""The emulator's /metrics against the Prometheus JMX exporter on real brokers (issue 27 item 5):
the series kreassign reads (`watch --metrics-url`, auto-throttle, write-rate sampling) carry the
same names and labels on both engines. Real brokers run the exporter's java agent
(io.prometheus.jmx:jmx_prometheus_javaagent, fetched by sandbox/kafka_engine/jmx-exporter-pom.xml)
with the rules in sandbox/kafka_engine/jmx_exporter.yaml; the real broker is the reference."""
from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kreassign.cluster.model import TopicPartition

from live import LiveCluster

QUANTILES = {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
RATE = "1000000"
# sample name -> its label names, on the leader (broker 1) and the follower that joins (broker 3)
LEADER_SERIES: dict[str, frozenset[str]] = {
    "kafka_network_requestmetrics_totaltimems": frozenset({"request", "quantile"}),
    "kafka_network_requestmetrics_remotetimems": frozenset({"request", "quantile"}),
    "kafka_network_requestmetrics_totaltimems_count": frozenset({"request"}),
    "kafka_network_requestmetrics_requests_total": frozenset({"request", "version"}),
    "kafka_server_brokertopicmetrics_replicationbytesout_total": frozenset(),
    "kafka_server_replicamanager_underreplicatedpartitions": frozenset(),
    "kafka_server_leaderreplication_byte_rate": frozenset(),
}
FOLLOWER_SERIES: dict[str, frozenset[str]] = {
    "kafka_server_brokertopicmetrics_replicationbytesin_total": frozenset(),
    "kafka_server_followerreplication_byte_rate": frozenset(),
}


def scrape(port: int) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples, from one broker's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    out: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


def label_names(series: dict[str, list[dict[str, str]]], name: str) -> set[frozenset[str]]:
    return {frozenset(labels) for labels in series.get(name, [])}


@pytest.mark.live_metrics
def test_the_series_kreassign_reads_have_the_exporters_names_and_labels(live: LiveCluster) -> None:
    topic = live.topic(assignment={0: [1, 2]})
    # six fetches' worth: a broker applies the rate a moment after the controller accepts it, and
    # a 2 MiB copy (two fetches) once finished before broker 1's leader sensor saw a throttled one
    live.produce(topic, 0, 6 * 1024 * 1024)
    with live.admin() as port:  # a throttled move 1 -> 3: both replication quota sensors in use
        assert port.incremental_alter_configs(
            {1: {"leader.replication.throttled.rate": RATE}, 3: {"follower.replication.throttled.rate": RATE}},
            {topic: {"leader.replication.throttled.replicas": "0:1,0:2",
                     "follower.replication.throttled.replicas": "0:3"}}).ok
        assert port.alter_reassignments({TopicPartition(topic, 0): [1, 3]}) == {TopicPartition(topic, 0): None}
    live.finish_moves()
    leader, follower = scrape(live.metrics_ports[1]), scrape(live.metrics_ports[3])
    for name, labels in LEADER_SERIES.items():
        assert labels in label_names(leader, name), (live.engine, name, label_names(leader, name))
    for name, labels in FOLLOWER_SERIES.items():
        assert labels in label_names(follower, name), (live.engine, name, label_names(follower, name))
    produce = [s for s in leader["kafka_network_requestmetrics_totaltimems"] if s["request"] == "Produce"]
    assert {s["quantile"] for s in produce} == QUANTILES
    written = leader["kafka_server_brokertopicmetrics_bytesin_total"]
    assert {} in written and {"topic": topic} in written  # all topics, and per topic
