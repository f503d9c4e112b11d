from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, PartitionTarget, TopicPartition
from kreassign.planner.diff import Moves, PartitionChange, diff_plan, diff_rows

GB = 10**9


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


@pytest.fixture
def state() -> ClusterState:
    brokers = [Broker(b) for b in (1, 2, 3, 4, 5)]
    parts = [
        PartitionInfo("foo", 0, (1, 2, 3), leader=1, size_bytes=10 * GB, produce_bps=1e6),
        PartitionInfo("foo", 1, (2, 3, 4), leader=3, size_bytes=20 * GB, produce_bps=2e6),
        PartitionInfo("foo", 2, (3, 4, 1), leader=3, size_bytes=30 * GB),
        PartitionInfo("bar", 0, (4, 5), leader=4, size_bytes=5 * GB, produce_bps=5e5),
        PartitionInfo("bar", 1, (5, 1), leader=-1, size_bytes=7 * GB),
    ]
    return ClusterState.from_partitions(brokers, parts)


def test_one_replica_swap(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 0): (1, 2, 5)})
    assert diff.totals() == {"partitions": 1, "partitions_changed": 1, "partitions_moved": 1,
                             "replicas_added": 1, "replicas_removed": 1, "bytes_moved": 10 * GB,
                             "leader_changes": 0}
    m = diff.moves
    assert len(m) == 1
    assert (m.row.tolist(), m.dest.tolist(), m.source.tolist(), m.bytes.tolist(), m.write_bps.tolist()) == (
        [state.find_row("foo", 0)], [5], [1], [10 * GB], [1e6])
    assert diff.bytes_in_per_broker == {1: 0, 2: 0, 3: 0, 4: 0, 5: 10 * GB}
    assert diff.bytes_out_per_broker == {1: 10 * GB, 2: 0, 3: 0, 4: 0, 5: 0}
    assert diff.partition_changes == (PartitionChange(
        tp=tp("foo", 0), current=(1, 2, 3), target=(1, 2, 5), adding=(5,), removing=(3,),
        leader_before=1, preferred_leader_after=1, reorder_only=False),)


def test_source_is_the_current_leader_not_the_first_replica(state: ClusterState) -> None:
    diff = diff_plan(state, [PartitionTarget("foo", 1, (2, 3, 5))])
    assert diff.moves.source.tolist() == [3]
    assert diff.bytes_out_per_broker[3] == 20 * GB
    assert diff.bytes_out_per_broker[2] == 0


def test_full_move_adds_every_replica_and_changes_the_leader(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("bar", 0): (1, 2)})
    assert diff.moves.dest.tolist() == [1, 2]
    assert diff.moves.source.tolist() == [4, 4]
    assert diff.bytes_moved == 10 * GB
    assert diff.bytes_out_per_broker[4] == 10 * GB
    assert diff.leader_changes == 1
    assert diff.leaders_before == {1: 1, 2: 0, 3: 2, 4: 1, 5: 0}
    assert diff.leaders_after == {1: 2, 2: 0, 3: 2, 4: 0, 5: 0}
    assert diff.replicas_before == {1: 3, 2: 2, 3: 3, 4: 3, 5: 2}
    assert diff.replicas_after == {1: 4, 2: 3, 3: 3, 4: 2, 5: 1}
    change = diff.change(tp("bar", 0))
    assert (change.adding, change.removing, change.leader_changes) == ((1, 2), (4, 5), True)


def test_reorder_only_moves_nothing_but_changes_the_preferred_leader(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 0): (2, 1, 3)})
    assert len(diff.moves) == 0
    assert diff.partitions_moved == 0
    assert diff.partitions_changed == 1
    assert diff.reorder_only.tolist() == [True]
    assert diff.leader_changes == 1
    assert diff.leaders_after[2] == diff.leaders_before[2] + 1
    assert diff.partition_changes[0].reorder_only


def test_unchanged_entries_are_counted_but_not_listed(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 2): (3, 4, 1), tp("foo", 0): (1, 2, 5)})
    assert diff.partitions_in_plan == 2
    assert diff.partitions_changed == 1
    assert [c.tp for c in diff.partition_changes] == [tp("foo", 0)]
    unchanged = diff.change(tp("foo", 2))
    assert unchanged.unchanged and not unchanged.reorder_only and unchanged.adding == ()


def test_shrink_and_grow_replication_factor(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 1): (2, 3), tp("bar", 0): (4, 5, 1)})
    assert diff.replicas_added == 1
    assert diff.replicas_removed == 1
    assert diff.moves.dest.tolist() == [1]
    assert diff.change(tp("foo", 1)).removing == (4,)
    assert diff.change(tp("bar", 0)).adding == (1,)
    assert not diff.change(tp("foo", 1)).reorder_only


def test_leaderless_partition_moves_have_no_source(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("bar", 1): (5, 2)})
    assert diff.moves.source.tolist() == [-1]
    assert sum(diff.bytes_out_per_broker.values()) == 0
    assert diff.moves.bytes_out() == {}
    assert diff.moves.bytes_in() == {2: 7 * GB}
    change = diff.change(tp("bar", 1))
    assert change.leader_before is None
    assert diff.leaders_after[5] == diff.leaders_before[5] + 1


def test_results_are_in_topic_partition_order_whatever_the_input_order(state: ClusterState) -> None:
    plan = {tp("foo", 2): (5, 4, 1), tp("bar", 0): (4, 2), tp("foo", 0): (1, 2, 5)}
    diff = diff_plan(state, plan)
    assert [state.tp(int(r)) for r in diff.rows] == [tp("bar", 0), tp("foo", 0), tp("foo", 2)]
    assert diff.moves.topic_partitions(state) == [tp("bar", 0), tp("foo", 0), tp("foo", 2)]
    assert diff.moves.dest.tolist() == [2, 5, 5]
    assert diff.moves.brokers() == (1, 2, 3, 4, 5)


def test_plan_naming_a_broker_outside_the_cluster_is_reported(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 0): (1, 2, 9)})
    assert diff.unknown_brokers == (9,)
    assert diff.bytes_in_per_broker[9] == 10 * GB
    assert diff.replicas_before[9] == 0 and diff.replicas_after[9] == 1


def test_moves_select_and_totals(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 0): (1, 2, 5), tp("foo", 1): (5, 1, 4)})
    big = diff.moves.select(diff.moves.bytes > 15 * GB)
    assert big.dest.tolist() == [5, 1]
    assert big.total_bytes == 40 * GB
    assert diff.moves.bytes_in() == {1: 20 * GB, 5: 30 * GB}
    assert len(Moves.empty()) == 0


@pytest.mark.parametrize(("plan", "message"), [
    ({tp("quux", 0): (1, 2)}, "The plan names 1 partition the cluster does not have: quux-0 (no topic quux)"),
    ({tp("foo", 7): (1, 2, 3)}, "foo-7 (topic foo has 3 partitions)"),
    ({tp("foo", 0): ()}, "empty replica list: foo-0"),
    ({tp("foo", 0): (1, 2, 1)}, "lists a broker twice in the replicas of: foo-0"),
    ({tp("foo", 0): (1, -2, 3)}, "negative broker ids for: foo-0"),
])
def test_invalid_plans_raise_input_error(state: ClusterState, plan: dict[TopicPartition, tuple[int, ...]],
                                         message: str) -> None:
    with pytest.raises(InputError) as err:
        diff_plan(state, plan)
    assert message in str(err.value)


def test_duplicate_entries_are_rejected(state: ClusterState) -> None:
    with pytest.raises(InputError, match="more than once: foo-0"):
        diff_plan(state, [PartitionTarget("foo", 0, (1, 2, 5)), PartitionTarget("foo", 0, (1, 2, 4))])


def test_many_unknown_partitions_are_summarised(state: ClusterState) -> None:
    with pytest.raises(InputError, match=r"names 8 partitions .* and 3 more\. Check"):
        diff_plan(state, {tp("zz", p): (1,) for p in range(8)})


def test_change_for_a_partition_not_in_the_plan_is_a_key_error(state: ClusterState) -> None:
    diff = diff_plan(state, {tp("foo", 0): (1, 2, 5)})
    with pytest.raises(KeyError):
        diff.change(tp("foo", 1))


def test_empty_plan(state: ClusterState) -> None:
    diff = diff_plan(state, {})
    assert diff.totals()["partitions"] == 0
    assert diff.replicas_after == diff.replicas_before
    assert diff.partition_changes == ()


# ---- agreement with a plain per-partition computation --------------------------------------
@st.composite
def cluster_and_plan(draw: st.DrawFn) -> tuple[ClusterState, dict[TopicPartition, tuple[int, ...]]]:
    n_brokers = draw(st.integers(1, 8))
    ids = draw(st.lists(st.integers(0, 3000), min_size=n_brokers, max_size=n_brokers, unique=True))
    parts = []
    for i in range(draw(st.integers(1, 12))):
        rf = draw(st.integers(1, n_brokers))
        replicas = tuple(draw(st.permutations(ids))[:rf])
        leader = draw(st.sampled_from([*replicas, -1]))
        parts.append(PartitionInfo(f"t{i % 3}", i, replicas, leader=leader,
                                   size_bytes=draw(st.integers(0, 10**12)),
                                   produce_bps=draw(st.floats(0, 1e7))))
    state = ClusterState.from_partitions([Broker(b) for b in ids], parts)
    plan = {}
    for p in parts:
        if draw(st.booleans()):
            rf = draw(st.integers(1, n_brokers))
            plan[p.tp] = tuple(draw(st.permutations(ids))[:rf])
    return state, plan


@settings(max_examples=120, deadline=None)
@given(cluster_and_plan())
def test_vectorised_diff_matches_a_plain_computation(case: tuple[ClusterState, dict[TopicPartition, tuple[int, ...]]]) -> None:
    state, plan = case
    diff = diff_plan(state, plan)
    added = removed = moved_bytes = leader_changes = 0
    bytes_in: dict[int, int] = {}
    for key, target in sorted(plan.items()):
        row = state.find_row(key.topic, key.partition)
        current = state.replicas(row)
        change = diff.change(key)
        assert change.adding == tuple(b for b in target if b not in current)
        assert change.removing == tuple(b for b in current if b not in target)
        assert change.reorder_only == (set(current) == set(target) and current != target)
        added += len(change.adding)
        removed += len(change.removing)
        moved_bytes += len(change.adding) * int(state.size_bytes[row])
        leader_changes += state.leader_of(row) != target[0]
        for b in change.adding:
            bytes_in[b] = bytes_in.get(b, 0) + int(state.size_bytes[row])
    assert (diff.replicas_added, diff.replicas_removed, diff.bytes_moved, diff.leader_changes) == (
        added, removed, moved_bytes, leader_changes)
    assert {b: v for b, v in diff.bytes_in_per_broker.items() if v} == {
        b: v for b, v in bytes_in.items() if v}
    after = state.with_assignment(plan)
    assert {b: v for b, v in diff.replicas_after.items()} == after.replicas_per_broker()
    assert sum(diff.leaders_after.values()) == sum(diff.leaders_before.values()) + sum(
        state.leader_of(state.find_row(k.topic, k.partition)) is None for k in plan)


def test_diff_rows_accepts_columns_directly(state: ClusterState) -> None:
    rows = np.array([state.find_row("foo", 1), state.find_row("bar", 0)])
    diff = diff_rows(state, rows, np.array([0, 3, 5]), np.array([2, 3, 5, 4, 1]))
    assert diff.moves.dest.tolist() == [1, 5]
    with pytest.raises(InputError, match="outside the cluster state"):
        diff_rows(state, np.array([99]), np.array([0, 1]), np.array([1]))
    with pytest.raises(InputError, match="offsets"):
        diff_rows(state, rows, np.array([0, 3]), np.array([1, 2, 3]))


def test_large_broker_ids_take_the_sorted_lookup_path() -> None:
    big = [2_000_000_000, 2_000_000_001, 7, 2_147_483_647]
    state = ClusterState.from_partitions(
        [Broker(b) for b in big],
        [PartitionInfo("t", 0, (big[0], big[1]), size_bytes=3), PartitionInfo("t", 1, (7, big[0]), size_bytes=5)])
    diff = diff_plan(state, {tp("t", 0): (big[3], big[1]), tp("t", 1): (7, big[3])})
    assert diff.bytes_in_per_broker == {7: 0, big[0]: 0, big[1]: 0, big[3]: 8}
    assert diff.bytes_out_per_broker == {7: 5, big[0]: 3, big[1]: 0, big[3]: 0}
    assert diff.replicas_after == {7: 1, big[0]: 0, big[1]: 1, big[3]: 2}
    assert diff.leaders_after == {7: 1, big[0]: 0, big[1]: 0, big[3]: 1}


def test_current_assignment_covers_unchanged_partitions_too() -> None:
    from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, TopicPartition
    from kreassign.planner.diff import diff_plan

    state = ClusterState.from_partitions([Broker(i) for i in (1, 2, 3)],
                                         [PartitionInfo("t", 0, (1, 2)), PartitionInfo("t", 1, (2, 3))])
    diff = diff_plan(state, {TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (3, 1)})
    assert diff.current_assignment() == {TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (2, 3)}
