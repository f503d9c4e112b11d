"""The plan report: diff, per-broker loads and throttles for hand-worked plans."""
from __future__ import annotations

from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, PartitionTarget, Reassignment, TopicPartition
from kreassign.predict.plan_report import build_plan_report

MB = 1_000_000


def docs_cluster() -> ClusterState:
    brokers = [Broker(101, "a"), Broker(102, "b"), Broker(103, "c")]
    return ClusterState.from_partitions(brokers, [
        PartitionInfo("my-topic", 0, (101, 102), leader=101, size_bytes=300 * MB),
        PartitionInfo("my-topic", 1, (102, 103), leader=102, size_bytes=100 * MB),
    ])


def test_kafka_docs_example() -> None:
    report = build_plan_report(docs_cluster(), [PartitionTarget("my-topic", 0, (102, 103))], rate=50 * MB)
    assert report.diff.totals() == {
        "partitions": 1, "partitions_changed": 1, "partitions_moved": 1, "replicas_added": 1,
        "replicas_removed": 1, "bytes_moved": 300 * MB, "leader_changes": 1,
    }
    loads = {b.broker: b for b in report.brokers}
    assert loads[103].bytes_in == 300 * MB and loads[101].bytes_out == 300 * MB
    assert (loads[101].replicas_before, loads[101].replicas_after) == (1, 0)
    assert (loads[103].replicas_before, loads[103].replicas_after) == (1, 2)
    assert report.throttles.topic_configs == {"my-topic": {
        "leader.replication.throttled.replicas": "0:101,0:102",
        "follower.replication.throttled.replicas": "0:103",
    }}
    assert sorted(report.throttles.broker_rates) == [101, 102, 103]
    assert report.warnings == ()


def test_in_flight_partitions_keep_their_throttles_and_are_warned_about() -> None:
    base = docs_cluster()
    state = ClusterState.from_partitions(
        base.brokers, base.iter_partitions(),
        reassignments={TopicPartition("my-topic", 1): Reassignment((101, 102, 103), adding=(101,), removing=(103,))},
    )
    report = build_plan_report(state, [PartitionTarget("my-topic", 0, (102, 103))], rate=1)
    lists = report.throttles.topic_configs["my-topic"]
    assert lists["leader.replication.throttled.replicas"] == "0:101,0:102,1:102,1:103"
    assert lists["follower.replication.throttled.replicas"] == "0:103,1:101"


def test_rf_change_and_rack_crowding_are_warned() -> None:
    report = build_plan_report(docs_cluster(), [PartitionTarget("my-topic", 1, (101,))])
    assert any("replication factor" in w and "my-topic-1 2->1" in w for w in report.warnings)
    brokers = [Broker(1, "a"), Broker(2, "a"), Broker(3, "b")]
    state = ClusterState.from_partitions(brokers, [PartitionInfo("t", 0, (1, 3))])
    report = build_plan_report(state, [PartitionTarget("t", 0, (1, 2))])
    assert any("two replicas in one rack" in w and "t-0" in w for w in report.warnings)


def test_json_form_is_complete() -> None:
    data = build_plan_report(docs_cluster(), [PartitionTarget("my-topic", 0, (102, 103))]).to_dict()
    assert data["partitions"] == [{
        "topic": "my-topic", "partition": 0, "current": [101, 102], "target": [102, 103],
        "adding": [103], "removing": [101], "leader_before": 101, "preferred_leader_after": 102,
        "reorder_only": False,
    }]
    assert data["throttles"] == {"topics": {}, "brokers": {}}
