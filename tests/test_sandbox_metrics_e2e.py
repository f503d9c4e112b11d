"""The sandbox's Prometheus endpoints, scraped with prometheus-client's text parser during a
throttled move while a real producer (librdkafka) writes over its KIP-13 quota."""
from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families

from cli_helpers import Kreassign
from kreassign.sandbox.prometheus import percentile
from kreassign.sandbox.topics import TopicSpec

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_percentiles_are_yammers_snapshot_values() -> None:
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 0.5) == 5.5   # pos 5.5: between the 5th and 6th
    assert percentile(values, 0.99) == 10.0  # past the end: the largest
    assert percentile([], 0.99) == 0.0
    assert percentile([3.0], 0.05) == 3.0


@pytest.mark.e2e
def test_metrics_during_a_throttled_move_with_a_producer_over_its_quota(sandbox_factory: Any) -> None:
    import confluent_kafka

    sb = sandbox_factory(brokers=4, racks=0, topics=[TopicSpec("m", 4, 2, 4_000_000, 1000.0)], metrics_port=0,
                         default_client_quotas={"producer_byte_rate": 1000})
    ports = sb.metrics_ports
    assert sorted(ports) == [1, 2, 3, 4]
    admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b),
                                            {"leader.replication.throttled.rate": "200000",
                                             "follower.replication.throttled.rate": "200000"}) for b in ports],
                            incremental=True, raise_on_unknown=False)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "m",
                                            {"leader.replication.throttled.replicas": "*",
                                             "follower.replication.throttled.replicas": "*"})],
                            incremental=True, raise_on_unknown=False)
        (topic,) = admin.describe_topics(["m"])
        p0 = next(p for p in topic["partitions"] if p["partition_index"] == 0)
        leader, replicas = p0["leader_id"], p0["replica_nodes"]
        newcomer = next(b for b in ports if b not in replicas)
        admin.alter_partition_reassignments({TopicPartition("m", 0): [newcomer, leader]})
    finally:
        admin.close()
    leaders = {p["partition_index"]: p["leader_id"] for p in topic["partitions"]}
    producer = confluent_kafka.Producer({"bootstrap.servers": sb.bootstrap, "client.id": "heavy", "acks": "all",
                                         "linger.ms": 2})
    first = scrape(ports[newcomer])
    urp_seen = throttle_seen = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (urp_seen and throttle_seen):
        for i in range(8):
            producer.produce("m", b"x" * 1000, partition=i % 4)
        producer.poll(0.05)
        sb.advance(0.5)
        on_leader = scrape(ports[leader])
        urp_seen |= (value(on_leader, "kafka_server_replicamanager_underreplicatedpartitions") or 0) >= 1
        throttle_seen |= any((value(scrape(ports[b]), "kafka_server_quota_throttle_time",
                                    resource="Produce", clientId="heavy") or 0) > 0 for b in set(leaders.values()))
    while len(producer) and time.monotonic() < deadline:  # throttled connections unmute in sandbox time
        producer.poll(0.05)
        sb.advance(0.5)
    assert urp_seen, "the leader of the moving partition never reported it under-replicated"
    assert throttle_seen, "a producer over its quota was never throttled"
    with sb.locked() as engine:
        assert engine.partition("m", 0).reassigning  # still copying: the checks above ran during the move
    later = scrape(ports[newcomer])
    grew = "kafka_server_brokertopicmetrics_replicationbytesin_total"
    assert value(later, grew) > value(first, grew) > -1  # the moving broker fetches the partition
    assert value(scrape(ports[leader]), "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0
    for b in set(leaders.values()):
        samples = scrape(ports[b])
        for part in ("totaltimems", "remotetimems"):
            for q in ("0.50", "0.99"):
                assert value(samples, f"kafka_network_requestmetrics_{part}", request="Produce", quantile=q) is not None
        assert value(samples, "kafka_network_requestmetrics_remotetimems", request="Produce", quantile="0.99") > 0
        assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic="m") > 0
        rate = value(samples, "kafka_server_quota_byte_rate", resource="Produce", clientId="heavy")
        assert rate is not None and rate > 0


@pytest.mark.e2e
def test_a_daemon_started_with_metrics_port_serves_them_and_status_shows_where(tmp_path: Any,
                                                                               kreassign: Kreassign) -> None:
    import json

    state = str(tmp_path / "sb")
    started = kreassign.run("sandbox", "start", "--daemon", "--state-dir", state, "--brokers", "2", "--racks", "0",
                            "--topics", "a:2:2", "--metrics-port", "0")
    assert started.code == 0, started.err
    try:
        assert "Broker 2 metrics: http://127.0.0.1:" in started.err
        status = kreassign.run("sandbox", "status", "--state-dir", state, "-o", "json")
        urls = json.loads(status.out)["extra"]["metrics"]
        assert sorted(urls) == ["1", "2"]
        for url in urls.values():
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            samples = scrape(port)
            assert value(samples, "kafka_server_replicamanager_partitioncount") == 2.0
        text = kreassign.run("sandbox", "status", "--state-dir", state)
        assert f"metrics:   broker 1 {urls['1']}" in text.out
    finally:
        kreassign.run("sandbox", "stop", "--state-dir", state)


def test_the_collector_computes_each_broker_from_what_it_recorded() -> None:
    import threading

    from prometheus_client import CollectorRegistry, generate_latest

    from kreassign.sandbox.client_quotas import PRODUCER_BYTE_RATE, ClientQuotas
    from kreassign.sandbox.engine import Engine
    from kreassign.sandbox.prometheus import BrokerCollector, Sources
    from kreassign.sandbox.timings import RequestTiming, RequestTimings

    engine = Engine({1: None, 2: None}, seed=1)
    engine.add_topics([TopicSpec("t", 1, 2, 1000, 0.0)])
    engine.time_scale = 2.0
    timings = RequestTimings()
    for remote in (10.0, 20.0, 30.0):  # queue 1 + local 2 wall ms = 6 sandbox ms at 2x
        timings.add(RequestTiming("Produce", 9, "app", 1, 1.0, 2.0, remote, 0.0, 0.0))
    timings.add(RequestTiming("Produce", 9, "app", 2, 1.0, 2.0, 500.0, 0.0, 0.0))  # another broker's
    engine.traffic.produced(1, "t", 300, 3, [1, 2])
    quotas = ClientQuotas()
    quotas.set_default(PRODUCER_BYTE_RATE, 100)
    quotas.for_broker(1).produce_throttle_ms("app", "ANONYMOUS", 5000, 0.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(1, Sources(threading.RLock(), engine, timings, quotas, None)))
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    assert value(samples, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.50") == 26.0
    assert value(samples, "kafka_network_requestmetrics_remotetimems", request="Produce", quantile="0.99") == 30.0
    assert value(samples, "kafka_network_requestmetrics_localtimems", request="Produce", quantile="0.99") == 4.0
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 3.0
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic="t") == 300.0
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total") == 300.0
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 3.0
    assert value(samples, "kafka_server_brokertopicmetrics_replicationbytesout_total") == 300.0
    # 5000 B recorded over a 10 s window = 500 B/s against 100: (500-100)/100 * 10 s
    assert value(samples, "kafka_server_quota_throttle_time", resource="Produce", clientId="app") == 40_000.0
    assert value(samples, "kafka_server_quota_byte_rate", resource="Produce", clientId="app") == 500.0


def test_a_deleted_topics_series_go_and_the_all_topics_meters_keep_counting() -> None:
    import threading

    from prometheus_client import CollectorRegistry, generate_latest

    from kreassign.sandbox.engine import Engine
    from kreassign.sandbox.prometheus import BrokerCollector, Sources
    from kreassign.sandbox.timings import RequestTimings
    from kreassign.sandbox.topic_deletion import remove_topic

    engine = Engine({1: None, 2: None}, seed=1)
    engine.add_topics([TopicSpec("t", 1, 2, 1000, 0.0), TopicSpec("u", 1, 2, 1000, 0.0)])
    engine.traffic.produced(1, "t", 300, 3, [1, 2])
    engine.traffic.produced(1, "u", 100, 1, [1, 2])
    engine.traffic.fetched(1, "t", 50)
    remove_topic(engine, "t")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(1, Sources(threading.RLock(), engine, RequestTimings(), None, None)))
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    assert not [key for key in samples if ("topic", "t") in key[1]]  # BrokerTopicStats.removeMetrics
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic="u") == 100.0
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total") == 400.0
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total") == 4.0
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total") == 50.0
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 1.0
