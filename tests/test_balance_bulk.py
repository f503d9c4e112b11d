"""The vectorised first pass of the replica-count phase (`balance_bulk`) and `Layout.apply_moves`."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from kreassign.cluster.model import Broker, ClusterState, PartitionInfo
from kreassign.planner.balance import bulk as balance_bulk
from kreassign.planner.balance import plans as balance
from kreassign.planner.balance import add_brokers, rebalance
from kreassign.planner.balance.engine import Layout, Targets
from kreassign.simulate.synthetic_state import synthetic_cluster
from kreassign.planner.balance.values import BalanceOptions, BalancePlan


@pytest.fixture()
def bulk_moves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run the bulk pass on any size of cluster and record how many moves it makes."""
    made: list[int] = []
    real = balance_bulk.bulk_balance_counts

    def spy(layout: Layout, aim: float | None) -> int:
        made.append(real(layout, aim))
        return made[-1]

    monkeypatch.setattr(balance_bulk, "MIN_MOVES", 0)
    monkeypatch.setattr(balance, "bulk_balance_counts", spy)
    return made


def final(state: ClusterState, plan: BalancePlan) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    out.update({(t.topic, t.partition): t.replicas for t in plan.targets})
    return out


def check_valid(state: ClusterState, plan: BalancePlan) -> None:
    before = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    for key, replicas in final(state, plan).items():
        assert len(set(replicas)) == len(replicas) == len(before[key]), key
    assert plan.after.rack_violations == 0
    assert plan.lower_bounds.bytes_moved <= plan.bytes_moved
    assert plan.lower_bounds.replica_moves <= plan.replica_moves


def per_rack_spread(plan: BalancePlan) -> int:
    racks: dict[str | None, list[int]] = {}
    for b in plan.after.brokers:
        racks.setdefault(b.rack, []).append(b.replicas)
    return max(max(v) - min(v) for v in racks.values())


def test_bulk_pass_balances_a_skewed_cluster(bulk_moves: list[int]) -> None:
    state = synthetic_cluster(brokers=30, partitions=6000, rf=3, rack_sizes=[9, 10, 11], seed=4)
    plan = rebalance(state)
    assert bulk_moves and bulk_moves[0] > 0.8 * plan.replica_moves
    check_valid(state, plan)
    assert per_rack_spread(plan) <= 1
    assert plan.after.bytes_over_target <= 1.03
    assert plan.bytes_moved <= 1.1 * plan.lower_bounds.bytes_moved
    assert plan.after.topic_excess <= plan.before.topic_excess


def test_bulk_pass_fills_new_brokers(bulk_moves: list[int]) -> None:
    state = synthetic_cluster(brokers=90, partitions=30_000, rf=3, rack_sizes=[25, 30, 35], new_brokers=10,
                              skew_sigma=0.0, seed=6)
    plan = add_brokers(state, list(range(91, 101)))
    check_valid(state, plan)
    assert per_rack_spread(plan) <= 1
    assert plan.after.bytes_over_target <= 1.03
    assert plan.bytes_moved <= 1.1 * plan.lower_bounds.bytes_moved
    assert bulk_moves[0] > 0.8 * plan.replica_moves
    assert plan.after.bytes_under_target >= 0.85


def test_bulk_pass_checks_racks_when_they_are_not_fixed(bulk_moves: list[int]) -> None:
    # RF 2 over three racks: each rack's share is not fixed, so moves may cross racks and
    # every one of them must keep the partition's replicas in different racks.
    state = synthetic_cluster(brokers=12, partitions=3000, rf=2, rack_sizes=[3, 4, 5], seed=8)
    plan = rebalance(state)
    assert bulk_moves[0] > 0
    check_valid(state, plan)
    racks = {b.broker: b.rack for b in plan.after.brokers}
    for replicas in final(state, plan).values():
        assert len({racks[b] for b in replicas}) == len(replicas)


def test_bulk_pass_without_racks_or_topics(bulk_moves: list[int]) -> None:
    state = synthetic_cluster(brokers=10, partitions=2000, rf=3, seed=9)
    plan = rebalance(state, BalanceOptions(goals=("replicas",)))
    assert bulk_moves[0] > 0
    check_valid(state, plan)
    assert plan.after.replicas.spread <= 1


def test_bulk_pass_keeps_disk_headroom(bulk_moves: list[int]) -> None:
    brokers = [Broker(i, rack=None, disk_bytes=10_000) for i in range(4)]
    parts = [PartitionInfo("t", p, (0, 1), size_bytes=50 + p % 7) for p in range(60)]
    state = ClusterState.from_partitions(brokers, parts)
    plan = rebalance(state, BalanceOptions(disk_headroom=0.82))
    assert bulk_moves[0] > 0
    for b in plan.after.brokers:
        if b.broker in (2, 3):
            assert b.bytes <= 10_000 * 0.18
    assert plan.after.replicas.spread <= 1


def test_bulk_pass_is_skipped_under_a_budget_or_a_disk_goal_first(bulk_moves: list[int]) -> None:
    state = synthetic_cluster(brokers=12, partitions=600, rf=3, rack_sizes=[3, 4, 5], seed=3)
    capped = rebalance(state, BalanceOptions(max_moves=10))
    assert capped.replica_moves <= 10
    rebalance(state, BalanceOptions(goals=("disk", "replicas")))
    assert bulk_moves == []


def test_small_plans_do_not_use_the_bulk_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(balance, "bulk_balance_counts", lambda layout, aim: calls.append(1) or 0)
    rebalance(synthetic_cluster(brokers=12, partitions=600, rf=3, rack_sizes=[3, 4, 5], seed=3))
    assert calls == []


def test_bulk_plans_are_deterministic(bulk_moves: list[int]) -> None:
    state = synthetic_cluster(brokers=20, partitions=3000, rf=3, rack_sizes=[6, 7, 7], seed=12)
    assert rebalance(state, BalanceOptions(seed=5)).to_dict() == rebalance(state, BalanceOptions(seed=5)).to_dict()


def small_layout(topic_on: bool) -> Layout:
    matrix = np.array([[0, 1], [0, 2], [1, 2], [0, 1], [0, 2]], dtype=np.int64)
    layout = Layout(
        matrix=matrix, size=np.array([5, 3, 8, 1, 2]), topic=np.array([0, 0, 1, 1, 1]), n_topics=2,
        movable=np.ones_like(matrix, dtype=bool), rack=np.zeros(4, dtype=np.int64),
        receivers=np.ones(4, dtype=bool), disk_cap=np.full(4, np.inf), rack_on=False, topic_on=topic_on,
        tiebreak=np.arange(4), max_moves=None, max_bytes=None,
    )
    layout.set_targets(Targets(count=[3] * 4, count_lo=[2] * 4, count_hi=[3] * 4, bytes=[9.0] * 4,
                               bytes_lo=[8.0] * 4, bytes_hi=[10.0] * 4))
    return layout


@pytest.mark.parametrize("topic_on", [True, False])
def test_apply_moves_matches_moving_one_by_one(topic_on: bool) -> None:
    p, s, d = np.array([0, 1, 3]), np.array([0, 0, 1]), np.array([3, 3, 2])
    one, many = small_layout(topic_on), small_layout(topic_on)
    for a, b, c in zip(p.tolist(), s.tolist(), d.tolist()):
        one.move(a, b, c)
    many.apply_moves(p, s, d)
    assert many.rows == one.rows
    assert many.lists == one.lists
    assert many.count == one.count
    assert many.bytes == one.bytes
    if topic_on:
        assert all(many.tcounts.get(t, b) == one.tcounts.get(t, b) for t in range(2) for b in range(4))
    assert many.matrix().tolist() == [[3, 1], [3, 2], [1, 2], [0, 2], [0, 2]]


def test_matrix_reflects_every_kind_of_edit() -> None:
    layout = small_layout(False)
    layout.move(2, 1, 3)
    layout.add_replica(4, 3)
    layout.drop_replica(0, 1)
    assert layout.matrix().tolist() == [[0, -1, -1], [0, 2, -1], [3, 2, -1], [0, 1, -1], [0, 2, 3]]
    counts = Counter(b for r in layout.rows for b in r)
    assert [counts[b] for b in range(4)] == layout.count
