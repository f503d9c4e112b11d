"""KIP-714 on the sandbox: subscriptions as CLIENT_METRICS configs, a real librdkafka producer
pushing OTLP metrics, the receiver's decoding, and the APIs advertised only with the receiver on."""
from __future__ import annotations

import gzip
import time
import urllib.request
import uuid
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality, Gauge, Metric, MetricsData, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
)
from prometheus_client.parser import text_string_to_metric_families

from kreassign.sandbox import codes
from kreassign.sandbox.client_metrics import ClientMetricsStore
from kreassign.sandbox.telemetry import GZIP, TelemetryReceiver
from kreassign.sandbox.topics import TopicSpec

PRODUCER = "org.apache.kafka.producer"


def _payload(total: float, temporality: int = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA) -> bytes:
    gauge = Metric(name=f"{PRODUCER}.node.request.latency.avg",
                   gauge=Gauge(data_points=[NumberDataPoint(as_double=2.5)]))
    total_m = Metric(name=f"{PRODUCER}.record.send.total",
                     sum=Sum(aggregation_temporality=temporality, data_points=[NumberDataPoint(as_int=int(total))]))
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[gauge, total_m])])])
    return gzip.compress(data.SerializeToString())


def _receiver() -> TelemetryReceiver:
    store = ClientMetricsStore()
    assert store.alter("producers", [("metrics", 0, PRODUCER), ("interval.ms", 0, "1000"),
                                     ("match", 0, "client_id=app-.*")], False) == (codes.NONE, None)
    assert store.alter("everything", [("metrics", 0, "*"), ("interval.ms", 0, "5000"),
                                      ("match", 0, "client_id=ops")], False) == (codes.NONE, None)
    return TelemetryReceiver(store)


def test_subscriptions_match_by_client_id_and_take_the_lowest_interval() -> None:
    r = _receiver()
    some = uuid.uuid4()
    assert r.subscription_for("app-1", some).requested == (PRODUCER,)
    assert r.subscription_for("app-1", some).interval_ms == 1000
    assert r.subscription_for("ops", some).requested == ("",)  # "*": all metrics
    assert r.subscription_for("other", some).requested == ()   # no match: nothing requested


def test_pushes_keep_the_latest_gauge_and_add_up_delta_sums() -> None:
    r = _receiver()
    code, inst = r.get(None, "app-1", 0.0)
    assert code == codes.NONE and inst.instance_id.int != 0
    sub = inst.subscription.subscription_id
    assert r.push(inst.instance_id, sub, False, GZIP, _payload(10), "app-1", 0.1) == codes.NONE
    # early (before the interval) and not the first push after a Get: throttled, as Kafka does
    assert r.push(inst.instance_id, sub, False, GZIP, _payload(5), "app-1", 0.5) == codes.THROTTLING_QUOTA_EXCEEDED
    assert r.push(inst.instance_id, sub, False, GZIP, _payload(7), "app-1", 1.2) == codes.NONE
    assert inst.value(f"{PRODUCER}.record.send.total") == 17.0
    assert inst.value(f"{PRODUCER}.node.request.latency.avg") == 2.5
    assert r.push(inst.instance_id, sub + 1, False, GZIP, _payload(1), "app-1", 9.0) == codes.UNKNOWN_SUBSCRIPTION_ID
    assert r.push(inst.instance_id, sub, False, 4, _payload(1), "app-1", 9.0) == codes.UNSUPPORTED_COMPRESSION_TYPE
    assert r.push(inst.instance_id, sub, False, GZIP, b"not gzip", "app-1", 9.0) == codes.INVALID_RECORD
    # a cumulative sum replaces the total; a terminating push is never early
    cumulative = _payload(40, AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE)
    assert r.push(inst.instance_id, sub, True, GZIP, cumulative, "app-1", 9.0) == codes.NONE
    assert inst.value(f"{PRODUCER}.record.send.total") == 40.0 and inst.terminated
    assert r.push(inst.instance_id, sub, False, GZIP, cumulative, "app-1", 99.0) == codes.INVALID_REQUEST


def test_an_early_get_is_throttled_unless_the_subscription_changed() -> None:
    r = _receiver()
    _, inst = r.get(None, "app-1", 0.0)
    assert r.get(inst.instance_id, "app-1", 0.5)[0] == codes.THROTTLING_QUOTA_EXCEEDED
    assert r.get(inst.instance_id, "app-1", 1.0)[0] == codes.NONE
    r.store.alter("producers", [("interval.ms", 0, "2000")], False)
    assert r.get(inst.instance_id, "app-1", 1.1)[0] == codes.NONE


@pytest.mark.e2e
def test_telemetry_apis_are_advertised_only_with_the_receiver(sandbox_factory: Any) -> None:
    assert not {71, 72} & set(sandbox_factory(brokers=1, racks=0, topics=[]).ranges)
    assert {71, 72} <= set(sandbox_factory(brokers=1, racks=0, topics=[], telemetry=True).ranges)


@pytest.mark.e2e
def test_a_librdkafka_producer_pushes_its_metrics_and_the_sandbox_decodes_them(sandbox_factory: Any) -> None:
    import confluent_kafka
    from kafka.admin import ConfigResource, KafkaAdminClient
    from kafka.admin._configs import ConfigResourceType

    assert confluent_kafka.libversion()[1] >= 0x020500ff
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 3, 3)], telemetry=True, metrics_port=0)
    admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000)
    try:  # what kafka-client-metrics.sh --alter --name producers --metrics ... --interval 100 sends
        admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers",
                                            {"metrics": PRODUCER, "interval.ms": "100"})])
    finally:
        admin.close()
    producer = confluent_kafka.Producer({"bootstrap.servers": sb.bootstrap, "client.id": "telemetry-test",
                                         "linger.ms": 5})
    latency = f"{PRODUCER}.node.request.latency.avg"
    deadline = time.monotonic() + 20
    inst = None
    while time.monotonic() < deadline:
        for i in range(20):
            producer.produce("t", b"x" * 100, partition=i % 3)
        producer.poll(0.05)
        sb.advance(0.2)  # sandbox time moves past each push interval
        inst = next(iter(sb.telemetry.instances.values()), None)
        if inst is not None and inst.pushes >= 2 and (inst.value(latency) or 0) > 0:
            break
    producer.flush(5)
    assert inst is not None and inst.client_id == "telemetry-test" and inst.pushes >= 2
    assert inst.last_error == codes.NONE
    names = {name for name, _ in inst.metrics}
    assert {latency, f"{PRODUCER}.node.request.latency.max", f"{PRODUCER}.produce.throttle.time.avg",
            f"{PRODUCER}.record.queue.time.avg"} <= names
    assert all(n.startswith(PRODUCER) for n in names)  # only what the subscription asked for
    assert inst.value(latency) > 0
    nodes = {dict(labels)["node.id"] for name, labels in inst.metrics if name == latency}
    assert nodes <= {"1", "2", "3"} and nodes
    assert inst.value(f"{PRODUCER}.produce.throttle.time.avg") == 0.0  # no quota set
    # exported on the endpoint of the broker it pushed to, as a receiver plugin would
    text = urllib.request.urlopen(f"http://127.0.0.1:{sb.metrics_ports[inst.broker_id]}/metrics", timeout=5).read()
    exported = {s.name: s for f in text_string_to_metric_families(text.decode()) for s in f.samples
                if s.name == "org_apache_kafka_producer_record_queue_time_avg"}
    sample = exported["org_apache_kafka_producer_record_queue_time_avg"]
    assert sample.labels["client_id"] == "telemetry-test"
    assert sample.labels["client_instance_id"] == str(inst.instance_id)


def test_subscriptions_survive_a_restart(tmp_path: Any) -> None:
    from kreassign.sandbox.clock import ManualClock
    from kreassign.sandbox.cluster import SandboxCluster

    with SandboxCluster(1, 0, [], clock=ManualClock(), state_dir=tmp_path, telemetry=True) as sb:
        with sb.locked() as engine:
            engine.client_metrics.alter("producers", [("metrics", 0, PRODUCER), ("interval.ms", 0, "1000")], False)
    with SandboxCluster(1, 0, [], clock=ManualClock(), state_dir=tmp_path, telemetry=True) as sb:
        assert sb.telemetry is not None
        assert sb.telemetry.subscription_for("any", uuid.uuid4()).requested == (PRODUCER,)
