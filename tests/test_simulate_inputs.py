"""Handing a cluster state and its plan to Spark: the Arrow tables, built without a JVM."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo
from kreassign.planner.diff import diff_plan
from kreassign.simulate.inputs import PlanFile, brokers_table, moves_table, partitions_table, read_plan_moves
from kreassign.simulate.schemas import BROKERS, MOVES, PARTITIONS


@pytest.fixture()
def state() -> ClusterState:
    brokers = [Broker(1, rack="a", network_in_bps=1e8, network_out_bps=2e8), Broker(2, rack="b"), Broker(3)]
    parts = [
        PartitionInfo("t", 0, replicas=(1, 2), isr=(1, 2), size_bytes=100, produce_bps=10.0, consume_bps=5.0),
        PartitionInfo("t", 1, replicas=(2, 3, 1), leader=3, isr=(3,), size_bytes=200, produce_bps=20.0),
        PartitionInfo("u", 0, replicas=(9,), leader=9, size_bytes=50, produce_bps=1.0),
    ]
    return ClusterState.from_partitions(brokers, parts)


def test_brokers_table_adds_plan_only_brokers_with_unknown_capacity(state: ClusterState) -> None:
    table = brokers_table(state, np.array([2, 4]), default_bps=math.inf)
    assert table.column_names == BROKERS.fieldNames()
    assert table.to_pydict() == {
        "broker": [1, 2, 3, 4], "rack": ["a", "b", None, None],
        "network_in_bps": [1e8, math.inf, math.inf, math.inf],
        "network_out_bps": [2e8, math.inf, math.inf, math.inf],
    }


def test_partitions_table_keeps_rows_replicas_and_isr(state: ClusterState) -> None:
    table = partitions_table(state)
    assert table.column_names == PARTITIONS.fieldNames()
    rows = table.to_pylist()
    assert [(r["topic"], r["partition"], r["leader"], r["replicas"], r["isr_size"]) for r in rows] == [
        ("t", 0, 1, [1, 2], 2), ("t", 1, 3, [2, 3, 1], 1), ("u", 0, 9, [9], 1)]


def test_moves_table_carries_the_partition_facts(state: ClusterState) -> None:
    targets = {state.tp(0): (3, 2), state.tp(1): (1, 3, 2), state.tp(2): (1, 2)}
    moves = diff_plan(state, targets).moves
    table = moves_table(moves, state)
    assert table.column_names == MOVES.fieldNames()
    got = [(r["row"], r["source"], r["dest"], r["leader_base_bps"], r["failover_source"]) for r in table.to_pylist()]
    assert got == [
        (0, 1, 3, 10.0, 2),    # ISR {1, 2}: one in-sync follower; broker 2 takes over from 1
        (2, -1, 1, 0.0, -1),   # leader 9 is not a broker of the cluster: no source; first move of u-0
        (2, -1, 2, 0.0, -1),   # second move of the same partition: counted once
    ]


def test_unreadable_plan_file(state: ClusterState, tmp_path: object) -> None:
    with pytest.raises(InputError, match="cannot read the plan"):
        read_plan_moves(state, PlanFile("/nonexistent/plan.json"))


def test_planner_run_moves_replicas_onto_an_empty_broker() -> None:
    from kreassign.simulate.inputs import PlannerRun

    brokers = [Broker(i, rack=f"r{i % 2}") for i in range(1, 5)]
    parts = [PartitionInfo("t", p, replicas=((p % 3) + 1, ((p + 1) % 3) + 1), size_bytes=1000 + p)
             for p in range(12)]
    skewed = ClusterState.from_partitions(brokers, parts)
    moves = read_plan_moves(skewed, PlannerRun(seed=3))
    assert len(moves) > 0
    assert 4 in set(moves.dest.tolist()) <= {1, 2, 3, 4}
    again = read_plan_moves(skewed, PlannerRun(seed=3))
    assert again.row.tolist() == moves.row.tolist() and again.dest.tolist() == moves.dest.tolist()
