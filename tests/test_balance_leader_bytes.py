"""Produce bytes/s led per broker: the exchange rounds of `LeaderBalancer.balance_bytes`."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreassign.planner.balance import balance_leaders, rebalance
from kreassign.simulate.synthetic_state import synthetic_cluster
from kreassign.planner.balance.values import BalanceOptions
from kreassign.planner.balance.leaders import LeaderBalancer


def balancer(matrix: list[list[int]], bps: list[float], brokers: int) -> LeaderBalancer:
    F = np.array(matrix, dtype=np.int64)
    lb = LeaderBalancer(F, F[:, 0].copy(), np.ones(len(F), dtype=bool), np.array(bps, dtype=np.float64),
                        brokers, np.arange(brokers))
    lb.set_targets(np.ones(brokers, dtype=bool))
    return lb


def test_a_swap_evens_out_two_brokers_with_fixed_counts() -> None:
    # Broker 0 leads the two busy partitions, broker 1 the two quiet ones; counts must stay 2/2.
    lb = balancer([[0, 1], [0, 1], [1, 0], [1, 0]], [10.0, 10.0, 1.0, 1.0], 2)
    lb.balance_bytes(0.10, np.ones(2, dtype=bool))
    assert lb.L.tolist() == [2, 2]
    assert lb.B.tolist() == [11.0, 11.0]
    assert sorted(lb.lead.tolist()[:2]) == [0, 1]


def test_a_shift_is_used_where_the_count_band_has_room() -> None:
    # Three leaderships over two brokers: counts 1 or 2 are both fine, bytes want one each side.
    lb = balancer([[0, 1], [0, 1], [0, 1]], [5.0, 5.0, 10.0], 2)
    lb.balance_bytes(0.10, np.ones(2, dtype=bool))
    assert sorted(lb.B.tolist()) == [10.0, 10.0]
    assert sorted(lb.L.tolist()) == [1, 2]


def test_nothing_changes_when_already_inside_the_band() -> None:
    lb = balancer([[0, 1], [1, 0]], [10.0, 10.5], 2)
    lb.balance_bytes(0.10, np.ones(2, dtype=bool))
    assert lb.lead.tolist() == [0, 1]


def test_excluded_brokers_are_left_alone() -> None:
    lb = balancer([[0, 2], [0, 1], [1, 2], [2, 0]], [10.0, 10.0, 1.0, 1.0], 3)
    before = lb.lead.copy()
    lb.balance_bytes(0.10, np.array([True, True, False]))
    moved = np.flatnonzero(lb.lead != before)
    assert all(2 not in (before[p], lb.lead[p]) for p in moved.tolist())


@pytest.mark.parametrize("brokers, partitions, new", [(60, 12_000, 0), (54, 9_000, 6)])
def test_busiest_broker_ends_inside_the_tolerance(brokers: int, partitions: int, new: int) -> None:
    state = synthetic_cluster(brokers=brokers, partitions=partitions, rf=3, rack_sizes=[18, 20, brokers - 38],
                              new_brokers=new, seed=21)
    plan = rebalance(state)
    after = plan.after
    assert after.leader_bps.max <= 1.10 * after.leader_bps.mean
    assert after.leader_bps.min >= 0.90 * after.leader_bps.mean
    assert after.leaders.spread <= 1


def test_leader_only_plan_balances_bytes_without_moving_data() -> None:
    state = synthetic_cluster(brokers=30, partitions=6000, rf=3, rack_sizes=[9, 10, 11], seed=2)
    plan = balance_leaders(state, BalanceOptions(leader_bytes_tolerance=0.05))
    assert plan.bytes_moved == 0 and plan.replica_moves == 0
    assert plan.after.leader_bps.max <= 1.05 * plan.after.leader_bps.mean
    assert plan.after.leader_bps.max < plan.before.leader_bps.max


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 7), st.lists(st.tuples(st.integers(0, 6), st.integers(1, 6), st.floats(0.0, 100.0)),
                                     min_size=1, max_size=40))
def test_counts_stay_in_their_band_and_bytes_never_get_worse(brokers: int,
                                                            parts: list[tuple[int, int, float]]) -> None:
    rows = [[a % brokers, (a + d) % brokers] for a, d, _ in parts if d % brokers]
    if not rows:
        return
    lb = balancer(rows, [x for (a, d, x) in parts if d % brokers], brokers)
    in_band = (lb.L >= lb.lo) & (lb.L <= lb.hi)
    eligible = np.ones(brokers, dtype=bool)
    mean = lb.B.sum() / brokers
    excess_before = np.maximum(np.abs(lb.B - mean) - 0.1 * mean, 0).sum()
    lb.balance_bytes(0.10, eligible)
    assert ((lb.L >= lb.lo) & (lb.L <= lb.hi) | ~in_band).all()
    assert np.array_equal(np.bincount(lb.lead, minlength=brokers), lb.L)
    assert np.allclose(np.bincount(lb.lead, weights=lb.bps, minlength=brokers), lb.B)
    assert all(lb.lead[p] in rows[p] for p in range(len(rows)))
    excess_after = np.maximum(np.abs(lb.B - mean) - 0.1 * mean, 0).sum()
    assert excess_after <= excess_before + 1e-6 * max(mean, 1.0)
