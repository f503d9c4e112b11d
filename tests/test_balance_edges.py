"""The planner at its edges: byte-aware decommission, infeasible plans, rack diversity when RF
exceeds the racks, and the warnings about limits no plan can lift.

Property tests draw clusters with uneven racks (a rack may have one broker), brokers without a
rack, zero-sized partitions, RF above the number of racks, and decommissions that leave fewer
brokers than RF. The rack rule is recomputed here independently of `planner.balance.racks`.
"""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import ExitStatus, InfeasiblePlanError
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, TopicPartition
from kreassign.planner.balance import decommission, rebalance, replace_broker, set_replication_factor
from kreassign.planner.balance.values import BalanceOptions, BalancePlan
from kreassign.simulate.synthetic_state import synthetic_cluster

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BYTES_ONLY = BalanceOptions(goals=("replicas", "disk", "leaders"))


@st.composite
def edge_clusters(draw: st.DrawFn, racks: bool = True, max_rf: int = 5) -> ClusterState:
    rack_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    rackless = draw(st.integers(0, 2))
    brokers = [Broker(10 + i, rack=f"r{r}") for i, r in
               enumerate(r for r, k in enumerate(rack_sizes) for _ in range(k))]
    if not racks or draw(st.booleans()):  # a cluster without racks
        brokers = [Broker(b.id) for b in brokers]
    brokers += [Broker(50 + i) for i in range(rackless if all(b.rack for b in brokers) else 0)]
    ids = [b.id for b in brokers]
    parts = []
    for topic in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, min(max_rf, len(ids))))
        for p in range(draw(st.integers(1, 10))):
            replicas = draw(st.permutations(ids))[:rf]
            size = draw(st.one_of(st.just(0), st.integers(0, 10**6)))
            parts.append(PartitionInfo(f"t{topic}", p, tuple(replicas), size_bytes=size, produce_bps=1.0))
    return ClusterState.from_partitions(brokers, parts)


def final_assignment(state: ClusterState, plan: BalancePlan) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    out.update({(t.topic, t.partition): t.replicas for t in plan.targets})
    return out


def rack_of(state: ClusterState) -> dict[int, str]:
    """Rack per broker; a broker without one is a rack of its own (as the planner counts it)."""
    return {b.id: b.rack if b.rack is not None else f"own-{b.id}" for b in state.brokers}


def deviation(replicas: tuple[int, ...], racks: dict[int, str], live: set[str]) -> int:
    """Replicas above ceil(RF/K) plus replicas missing below floor(RF/K), over the K live racks."""
    k = len(live)
    rf = len(replicas)
    per = Counter(racks[b] for b in replicas if racks.get(b) in live)
    return sum(max(per[r] - -(-rf // k), 0) + max(rf // k - per[r], 0) for r in live)


def live_racks(state: ClusterState, gone: frozenset[int] = frozenset()) -> set[str]:
    racks = rack_of(state)
    return {racks[b] for b in state.broker_ids if b not in gone}


def check_rack_diversity(state: ClusterState, plan: BalancePlan, gone: frozenset[int] = frozenset()) -> None:
    """No partition's rack deviation grows, and the reported violations are the partitions off
    the rule (counted only where some broker has a rack)."""
    racks = rack_of(state)
    live = live_racks(state, gone)
    before = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    racked = any(b.rack is not None for b in state.brokers) and len(live) > 1
    off = 0
    for key, replicas in final_assignment(state, plan).items():
        dev = deviation(replicas, racks, live)
        assert dev <= deviation(before[key], racks, live), (key, before[key], replicas)
        off += dev > 0
    assert plan.after.rack_violations == (off if racked else 0)


@SETTINGS
@given(edge_clusters())
def test_rebalance_never_narrows_rack_spread(state: ClusterState) -> None:
    check_rack_diversity(state, rebalance(state))


@SETTINGS
@given(edge_clusters(), st.data())
def test_decommission_is_complete_or_refused(state: ClusterState, data: st.DataObject) -> None:
    ids = list(state.broker_ids)
    if len(ids) < 2:
        return
    gone = frozenset(data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids) - 1, unique=True)))
    rest = rebalance_rest = data.draw(st.booleans())
    try:
        plan = decommission(state, sorted(gone), rebalance_rest=rest)
    except InfeasiblePlanError as err:
        assert "have no broker" in str(err) and "nothing was written" in str(err)
        partial = decommission(state, sorted(gone), BalanceOptions(allow_partial=True), rebalance_rest=rest)
        assert any("have no broker" in w for w in partial.warnings)
        check_rack_diversity(state, partial, gone)
        return
    assert not any(set(r) & gone for r in final_assignment(state, plan).values())
    check_rack_diversity(state, plan, gone)
    assert rebalance_rest is rest


@SETTINGS
@given(edge_clusters(), st.data())
def test_fewer_brokers_left_than_rf_is_refused(state: ClusterState, data: st.DataObject) -> None:
    ids = list(state.broker_ids)
    top = max(len(r) for r in state.assignment().values())
    if top < 2:
        return
    keep = data.draw(st.integers(1, top - 1))
    gone = sorted(ids[keep:])
    stuck = [tp for tp, r in state.assignment().items() if len(r) > keep and set(r) & set(gone)]
    if not stuck:
        return
    with pytest.raises(InfeasiblePlanError) as err:
        decommission(state, gone)
    assert err.value.exit_code == ExitStatus.INFEASIBLE_PLAN
    assert f"larger than the {keep} broker(s)" in str(err.value)
    first = sorted(stuck, key=lambda tp: (tp.topic, tp.partition))[0]
    named = str(err.value).split("(", 1)[1]
    assert f"{first.topic}-{first.partition}" in named or "more)" in named


@SETTINGS
@given(edge_clusters(racks=False, max_rf=1), st.data())
def test_decommission_places_by_bytes(state: ClusterState, data: st.DataObject) -> None:
    """Without racks or a second replica to avoid (RF 1), each replica goes largest first to the
    broker with the fewest bytes, so no receiving broker ends above the mean after the plan plus
    the largest replica moved, and no other broker gains anything."""
    ids = list(state.broker_ids)
    if len(ids) < 2:
        return
    gone = frozenset(data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids) - 1, unique=True)))
    try:
        plan = decommission(state, sorted(gone), BYTES_ONLY)
    except InfeasiblePlanError:
        return
    before = {b.broker: b.bytes for b in plan.before.brokers}
    after = {b.broker: b.bytes for b in plan.after.brokers if b.broker not in gone}
    sizes = {(tp.topic, tp.partition): z for tp, z in zip(state.assignment(), state.size_bytes.tolist())}
    moved = [sizes[(t.topic, t.partition)] for t in plan.targets]
    mean = sum(after.values()) / len(after)
    bound = mean + max(moved, default=0)
    for b, x in after.items():
        assert x <= before[b] or x <= bound + 1, (b, before[b], x, bound)


def test_removing_two_of_four_brokers_at_rf3_is_refused_with_names() -> None:
    brokers = [Broker(i) for i in (1, 2, 3, 4)]
    parts = [PartitionInfo("orders", p, (1 + p % 4, 1 + (p + 1) % 4, 1 + (p + 2) % 4), size_bytes=10)
             for p in range(4)]
    state = ClusterState.from_partitions(brokers, parts)
    with pytest.raises(InfeasiblePlanError) as err:
        decommission(state, [1, 2])
    assert str(err.value) == (
        "decommission: 4 replica(s) of 4 partition(s) (orders-0, orders-1, orders-2, orders-3) have no "
        "broker: replication factor 3 is larger than the 2 broker(s) that may hold it; nothing was "
        "written. Keep more brokers or relax the constraint, or give --allow-partial to write the rest")
    partial = decommission(state, [1, 2], BalanceOptions(allow_partial=True))
    assert partial.warnings[0].startswith("4 replica(s) of 4 partition(s)")
    assert "broker(s) 1, 2 still hold replicas after the plan" in partial.warnings


def rf4_on_three_racks() -> ClusterState:
    """RF 4 over racks a, b, c of three brokers each: half the partitions start 2+2 on two racks."""
    brokers = [Broker(i, rack="abc"[i % 3]) for i in range(9)]
    parts = []
    for p in range(24):
        if p % 2:  # two racks only: a a b b
            replicas = (0 + 3 * (p % 3), 3 + 3 * ((p + 1) % 2), 1, 4 + 3 * (p % 2))
        else:  # all three racks: a a b c
            replicas = (3 * (p % 3), 3 * ((p + 1) % 3), 1 + 3 * (p % 3), 2 + 3 * (p % 3))
        parts.append(PartitionInfo("t", p, replicas, size_bytes=1000 + p))
    return ClusterState.from_partitions(brokers, parts)


def spans(state: ClusterState, plan: BalancePlan) -> Counter[tuple[int, ...]]:
    racks = rack_of(state)
    return Counter(tuple(sorted(Counter(racks[b] for b in r).values()))
                   for r in final_assignment(state, plan).values())


def test_rf_above_racks_spreads_over_every_rack() -> None:
    state = rf4_on_three_racks()
    plan = rebalance(state)
    assert plan.before.rack_violations == 12
    assert plan.after.rack_violations == 0
    assert spans(state, plan) == Counter({(1, 1, 2): 24})


def test_targeted_commands_never_narrow_the_spread_at_rf_above_racks() -> None:
    state = rf4_on_three_racks()
    for plan in (decommission(state, [0]), replace_broker(state, 0, 3),
                 set_replication_factor(state, "t", 5)):
        check_rack_diversity(state, plan, frozenset([0]) if plan.command == "decommission" else frozenset())
        assert plan.after.rack_violations <= plan.before.rack_violations
    grown = set_replication_factor(rebalance_applied(state), "t", 5)
    assert grown.after.rack_violations == 0


def rebalance_applied(state: ClusterState) -> ClusterState:
    plan = rebalance(state)
    return state.with_assignment({TopicPartition(t.topic, t.partition): t.replicas for t in plan.targets})


def test_decommission_of_a_balanced_cluster_stays_byte_balanced() -> None:
    """Where moving only the removed brokers' replicas can reach it, bytes end within 1.05 of
    the fair share (and no worse than before)."""
    state = rebalance_applied(synthetic_cluster(brokers=60, partitions=6_000, rack_sizes=[18, 20, 22],
                                                seed=5))
    plan = decommission(state, [3, 25, 47])
    assert plan.before.bytes_over_target < 1.05
    assert plan.after.bytes_over_target <= 1.05
    assert plan.replica_moves == plan.lower_bounds.replica_moves
    assert plan.after.rack_violations == 0


def test_decommission_with_rebalance_rest_reaches_balance() -> None:
    state = synthetic_cluster(brokers=60, partitions=6_000, rack_sizes=[18, 20, 22], seed=5)
    plan = decommission(state, [3, 25, 47], rebalance_rest=True)
    assert plan.after.bytes_over_target <= 1.05
    assert plan.after.replicas.spread <= plan.after.replica_spread_allowed
    assert plan.after.leaders.spread <= 1
    assert plan.after.rack_violations == 0


def test_a_one_broker_rack_is_named_as_a_hotspot() -> None:
    brokers = [Broker(1, rack="a", disk_bytes=10**6)] + [
        Broker(i, rack="b" if i < 6 else "c", disk_bytes=10**6) for i in range(2, 10)]
    parts = [PartitionInfo("big", p, (1, 2 + p % 4, 6 + p % 4), size_bytes=60_000) for p in range(20)]
    plan = rebalance(ClusterState.from_partitions(brokers, parts))
    assert ("rack a has 1 broker(s) but rack diversity puts at least 33% of the data on it: its "
            "brokers hold 3.00x the mean bytes per broker; add brokers to that rack (or drop the rack "
            "goal)") in plan.warnings
    assert ("1 topic(s) cannot be balanced within their racks, as rack diversity puts more of their "
            "replicas on a small rack's brokers: big (rack a: up to 20 per broker, even share 7)") in plan.warnings
    assert "1 broker(s) hold more than their disk capacity after the plan: 1 (1.20x)" in plan.warnings


@SETTINGS
@given(edge_clusters(), st.integers(1, 5))
def test_set_rf_never_narrows_rack_spread(state: ClusterState, rf: int) -> None:
    if rf > len(state.brokers):
        return
    try:
        plan = set_replication_factor(state, "t0", rf)
    except InfeasiblePlanError:
        return
    racks = rack_of(state)
    before = {(tp.topic, tp.partition): r for tp, r in state.assignment().items()}
    for key, replicas in final_assignment(state, plan).items():
        spanned = len({racks[b] for b in replicas})
        assert spanned >= min(len({racks[b] for b in before[key]}), len(replicas)), (key, before[key], replicas)
        assert len(replicas) == (rf if key[0] == "t0" else len(before[key]))


def test_hotspot_warning_starts_past_five_percent() -> None:
    import numpy as np

    from kreassign.planner.balance.hints import rack_hotspots

    def warn(sizes: list[int]) -> list[str]:
        rack = np.repeat(np.arange(len(sizes)), sizes)
        names = tuple(f"r{r}" for r in rack.tolist())
        return rack_hotspots(np.full(100, 10**9), np.full(100, 3), len(sizes), rack,
                             np.ones(len(rack), dtype=bool), names, np.arange(len(rack)), 0.03)

    assert warn([10, 10, 10]) == []
    assert warn([10, 10, 11]) == []  # 31/30 = 1.03x
    assert warn([9, 10, 11]) == [
        "rack r0 has 9 broker(s) but rack diversity puts at least 33% of the data on it: its brokers hold "
        "1.11x the mean bytes per broker; add brokers to that rack (or drop the rack goal)"]


def test_nearly_balanced_start_moves_at_most_a_tenth_above_the_byte_lower_bound() -> None:
    # The bench's random start (issue 16): bytes within about 15% of the mean before the plan.
    # The byte phase levels every broker to where over-loaded ones were shed, so the movement
    # buys the balance the bound is computed for.
    state = synthetic_cluster(brokers=300, partitions=150_000, rf=3, rack_sizes=[90, 100, 110], seed=11,
                              skew_sigma=0.0)
    tol = BalanceOptions().disk_tolerance
    for plan in (decommission(state, [173, 186, 204, 233, 268, 279], rebalance_rest=True), rebalance(state)):
        assert plan.bytes_moved <= 1.1 * plan.lower_bounds.bytes_moved
        assert plan.after.bytes_over_target <= 1 + tol / 2 + 1e-9
        assert plan.after.replicas.spread == plan.after.replica_spread_allowed
        assert plan.after.leaders.spread <= 1


@pytest.mark.parametrize("seed", [1, 10, 11, 13])
def test_small_random_start_moves_at_most_a_tenth_above_the_byte_lower_bound(seed: int) -> None:
    # 60 brokers, 30k partitions placed without skew. Seeds 1 and 10 moved 1.8x and 2.5x the
    # bound in rebalance (swaps gave up on partners whose smallest replicas were all of a topic
    # at its cap); in seed 13 one topic holds 99% of the partitions, every broker sits at its
    # cap, and only swaps within that topic can move bytes (the plan stopped at 1.04 of the
    # target). Seed 11 with two brokers removed moved 1.11x (replicas of the removed brokers
    # landed on brokers that had bytes enough and were swapped back out).
    import numpy as np

    state = synthetic_cluster(brokers=60, partitions=30_000, rf=3, rack_sizes=[18, 20, 22], seed=seed,
                              skew_sigma=0.0)
    ids = np.array(state.broker_ids)
    tol = BalanceOptions().disk_tolerance
    plans = [decommission(state, sorted(np.random.default_rng(7).choice(ids, k, replace=False).tolist()),
                          rebalance_rest=True) for k in (1, 2)] + [rebalance(state)]
    for plan in plans:
        assert plan.bytes_moved <= 1.1 * plan.lower_bounds.bytes_moved
        assert 1 - tol - 1e-9 <= plan.after.bytes_under_target
        assert plan.after.bytes_over_target <= 1 + tol / 2 + 1e-9
        assert plan.after.replicas.spread == plan.after.replica_spread_allowed
        assert plan.after.leaders.spread <= 1
        assert plan.after.rack_violations == 0


@pytest.mark.parametrize("rf, rack_sizes, seed", [(2, [18, 20, 22], 3), (3, None, 8)])
def test_decommission_with_rebalance_rest_stays_at_the_count_floor(rf: int, rack_sizes: list[int] | None,
                                                                  seed: int) -> None:
    # RF 2 on three racks: 146 replicas of a removed broker found no broker short of replicas
    # that the rack rule let them go to; placed on brokers at their count, they left a count
    # spread of 30 where 1 is allowed. Without racks, the last replica of a removed broker was
    # of a partition the one broker still short of replicas holds (spread 2). The goals now run
    # again after such replicas.
    import numpy as np

    state = synthetic_cluster(brokers=60, partitions=20_000, rf=rf, rack_sizes=rack_sizes, seed=seed,
                              skew_sigma=0.0)
    gone = sorted(np.random.default_rng(7).choice(np.array(state.broker_ids), 2, replace=False).tolist())
    plan = decommission(state, gone, rebalance_rest=True)
    assert plan.after.replicas.spread == plan.after.replica_spread_allowed == 1
    assert plan.after.leaders.spread <= 1
    assert plan.after.rack_violations == 0
    assert plan.bytes_moved <= 1.1 * plan.lower_bounds.bytes_moved
    assert plan.after.bytes_over_target <= 1.0151


@SETTINGS
@given(st.lists(st.one_of(st.integers(1, 100), st.integers(1_000, 5_000)), min_size=2, max_size=6),
       st.lists(st.integers(0, 3), min_size=6, max_size=6), st.booleans())
def test_the_byte_lower_bound_holds_against_every_assignment(sizes: list[int], start: list[int],
                                                             remove: bool) -> None:
    """Brute force over every RF 1 layout on the brokers left: none reaching the balance the
    plan reaches moves fewer bytes than the bound. That balance is the plan's count band, its
    min and max bytes ratio to the even share, and, where the plan's worst brokers are forced
    there by one replica larger than the next broker's ratio allows, that next ratio r' for
    every broker not holding a replica larger than r' times the share. Sizes mix small and
    huge replicas, so a replica of a removed broker can be larger than any other broker's room
    (the bound's overflow term) and a broker can be forced above the others."""
    from itertools import product

    brokers = [Broker(i) for i in range(4)]
    parts = [PartitionInfo("t", p, (start[p],), size_bytes=z) for p, z in enumerate(sizes)]
    state = ClusterState.from_partitions(brokers, parts)
    gone = {0} if remove else set()
    plan = decommission(state, sorted(gone), rebalance_rest=True) if remove else rebalance(state)
    left = [b for b in range(4) if b not in gone]
    final = final_assignment(state, plan)
    share = sum(sizes) / len(left)

    def loads(layout: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
        return ([sum(1 for b in layout if b == x) for x in left],
                [sum(z for z, b in zip(sizes, layout) if b == x) for x in left],
                [max([z for z, b in zip(sizes, layout) if b == x], default=0) for x in left])

    counts, nbytes, largest = loads(tuple(final[("t", p)][0] for p in range(len(sizes))))
    lo_c, hi_c = min(counts), max(counts)
    lo_r, hi_r = min(nbytes) / share, max(nbytes) / share
    ranked = sorted(range(len(left)), key=lambda i: -nbytes[i])
    k = 0
    while k + 1 < len(ranked) and largest[ranked[k]] > nbytes[ranked[k + 1]]:
        k += 1
    top = nbytes[ranked[k]] / share

    def same_balance(c: list[int], y: list[int], big: list[int]) -> bool:
        return (min(c) >= lo_c and max(c) <= hi_c and min(y) >= lo_r * share - 1e-6
                and max(y) <= hi_r * share + 1e-6
                and all(v <= top * share + 1e-6 or g > top * share for v, g in zip(y, big)))

    best = min((sum(z for z, a, b in zip(sizes, start, layout) if a != b)
                for layout in product(left, repeat=len(sizes)) if same_balance(*loads(layout))), default=None)
    assert best is not None  # the plan's own layout qualifies
    assert plan.lower_bounds.bytes_moved <= best


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_heavy_tailed_sizes_move_at_most_a_tenth_above_the_byte_lower_bound(seed: int) -> None:
    # Log-normal sizes with sigma 2.0 (the largest partition is ~0.16x a broker's share). Seed 7
    # from a balanced start moved 1.14x the bound and seed 3 from the skewed one 1.09x: replicas
    # of the removed brokers larger than any broker's room below the band push as many bytes
    # back out, which the bound did not count, and the count phase moved replicas that lifted
    # their sink above the band. (Seed 6 has a partition of 1.08x a broker's mean bytes, 1.19x
    # the share of a broker in the 22-broker rack, which holds one of its replicas: no plan
    # reaches 1.05 there and the bound is loose, see docs/lower-bounds.md.)
    import numpy as np

    skewed = synthetic_cluster(brokers=60, partitions=30_000, rf=3, rack_sizes=[18, 20, 22], seed=seed,
                               size_sigma=2.0)
    random = synthetic_cluster(brokers=60, partitions=30_000, rf=3, rack_sizes=[18, 20, 22], seed=seed,
                               size_sigma=2.0, skew_sigma=0.0)
    gone = sorted(np.random.default_rng(7).choice(np.array(skewed.broker_ids), 2, replace=False).tolist())
    tol = BalanceOptions().disk_tolerance
    for state in (skewed, rebalance_applied(skewed), random):
        for plan in (decommission(state, gone, rebalance_rest=True), rebalance(state)):
            assert plan.bytes_moved <= 1.1 * plan.lower_bounds.bytes_moved
            assert plan.after.bytes_over_target <= 1 + tol / 2 + 1e-9
            assert plan.after.replicas.spread == plan.after.replica_spread_allowed
            assert plan.after.leaders.spread <= 1
            assert plan.after.rack_violations == 0
