"""Properties of the balanced planner over random small clusters (hypothesis)."""
from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreassign.cluster.model import Broker, ClusterState, PartitionInfo
from kreassign.planner.balance import (
    add_brokers,
    balance_leaders,
    decommission,
    rebalance,
    set_replication_factor,
)
from kreassign.planner.balance.values import BalanceOptions, BalancePlan

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw: st.DrawFn, min_brokers: int = 3) -> ClusterState:
    n_brokers = draw(st.integers(min_brokers, 8))
    n_racks = draw(st.integers(0, 4))
    racks = [None] * n_brokers if n_racks == 0 else [
        f"r{draw(st.integers(0, n_racks - 1))}" for _ in range(n_brokers)]
    brokers = [Broker(10 + i, rack=racks[i]) for i in range(n_brokers)]
    parts = []
    for topic in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, min(3, n_brokers)))
        for p in range(draw(st.integers(1, 12))):
            replicas = draw(st.permutations([b.id for b in brokers]))[:rf]
            parts.append(PartitionInfo(
                f"t{topic}", p, tuple(replicas),
                size_bytes=draw(st.integers(0, 10**6)), produce_bps=float(draw(st.integers(0, 1000)))))
    return ClusterState.from_partitions(brokers, parts)


def final_assignment(state: ClusterState, plan: BalancePlan) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    out.update({(t.topic, t.partition): t.replicas for t in plan.targets})
    return out


def crowding(replicas: tuple[int, ...], racks: dict[int, str | None], n_racks: int) -> int:
    """Replicas above the most one rack may hold under an even rack spread."""
    if not replicas:
        return 0
    per_rack = Counter(racks[b] for b in replicas)
    return max(0, max(per_rack.values()) - -(-len(replicas) // n_racks))


def check_valid(state: ClusterState, plan: BalancePlan, *, keep_rf: bool = True,
                gone: frozenset[int] = frozenset()) -> None:
    known = set(state.broker_ids) | {b.broker for b in plan.after.brokers}
    before = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    racks = {b.broker: b.rack for b in plan.after.brokers}
    n_racks = len({r for b, r in racks.items() if b not in gone})
    has_racks = all(r is not None for r in racks.values())
    for key, replicas in final_assignment(state, plan).items():
        assert len(set(replicas)) == len(replicas), (key, replicas)
        assert set(replicas) <= known
        if keep_rf:
            assert len(replicas) == len(before[key])
        if has_racks and n_racks > 1 and replicas:
            # Rack crowding of a partition never gets worse.
            assert crowding(replicas, racks, n_racks) <= crowding(before[key], racks, n_racks), key
    # Rollback restores exactly the original lists of the changed partitions.
    for t in plan.rollback:
        assert before[(t.topic, t.partition)] == t.replicas


def check_summary(state: ClusterState, plan: BalancePlan) -> None:
    final = final_assignment(state, plan)
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    size: Counter[int] = Counter()
    rows = {(state.topic_of(r), int(state.partition[r])): r for r in range(len(state))}
    for key, reps in final.items():
        for b in reps:
            replicas[b] += 1
            size[b] += int(state.size_bytes[rows[key]])
        if reps:
            leaders[reps[0]] += 1
    for b in plan.after.brokers:
        assert (b.replicas, b.leaders, b.bytes) == (replicas[b.broker], leaders[b.broker], size[b.broker])
    moved = sum(len(set(t.replicas) - set(r.replicas)) for t, r in zip(plan.targets, plan.rollback))
    assert plan.replica_moves == moved
    assert plan.lower_bounds.replica_moves <= plan.replica_moves
    assert plan.lower_bounds.bytes_moved <= plan.bytes_moved


@SETTINGS
@given(clusters())
def test_rebalance_plans_are_valid_and_never_worse(state: ClusterState) -> None:
    plan = rebalance(state)
    check_valid(state, plan)
    check_summary(state, plan)
    if all(b.rack is not None for b in state.brokers):
        assert plan.after.rack_violations == 0
    if plan.before.rack_violations == 0:
        assert plan.after.replicas.spread <= max(plan.before.replicas.spread, plan.after.replica_spread_allowed)


@SETTINGS
@given(clusters())
def test_rebalance_is_deterministic(state: ClusterState) -> None:
    plan = rebalance(state, BalanceOptions(seed=3))
    assert plan.to_dict() == rebalance(state, BalanceOptions(seed=3)).to_dict()


@SETTINGS
@given(clusters(min_brokers=4), st.data())
def test_decommissioned_brokers_end_empty(state: ClusterState, data: st.DataObject) -> None:
    ids = list(state.broker_ids)
    gone = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=1, unique=True))
    max_rf = int(state.replication_factors.max())
    if len(ids) - len(gone) < max_rf:
        return
    plan = decommission(state, gone)
    check_valid(state, plan, gone=frozenset(gone))
    check_summary(state, plan)
    for reps in final_assignment(state, plan).values():
        assert not set(reps) & set(gone)


@SETTINGS
@given(clusters())
def test_add_brokers_uses_the_new_brokers(state: ClusterState) -> None:
    new = [Broker(99, rack=state.brokers[0].rack), Broker(98, rack=state.brokers[-1].rack)]
    plan = add_brokers(state, new, only_new=True)
    check_valid(state, plan)
    check_summary(state, plan)
    for t, r in zip(plan.targets, plan.rollback):
        assert set(t.replicas) - set(r.replicas) <= {98, 99}


@SETTINGS
@given(clusters(), st.integers(1, 3))
def test_set_rf_changes_only_that_topic(state: ClusterState, rf: int) -> None:
    if rf > len(state.brokers):
        return
    plan = set_replication_factor(state, "t0", rf)
    check_valid(state, plan, keep_rf=False)
    for key, reps in final_assignment(state, plan).items():
        if key[0] == "t0":
            assert len(reps) == rf
    assert {t.topic for t in plan.targets} <= {"t0"}


@SETTINGS
@given(clusters())
def test_leaders_never_move_data(state: ClusterState) -> None:
    plan = balance_leaders(state)
    assert plan.bytes_moved == 0
    for t, r in zip(plan.targets, plan.rollback):
        assert sorted(t.replicas) == sorted(r.replicas)
    check_summary(state, plan)
    assert plan.after.leaders.spread <= plan.before.leaders.spread
