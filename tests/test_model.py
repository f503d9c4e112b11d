"""The columnar cluster model: construction, lookups, aggregates and derived states."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import (
    Broker,
    ClusterState,
    PartitionInfo,
    Reassignment,
    TopicPartition,
)


def small() -> ClusterState:
    return ClusterState.from_partitions(
        [Broker(1, "a"), Broker(2, "b"), Broker(3, "a")],
        [PartitionInfo("t", 1, (1, 2), size_bytes=10), PartitionInfo("a", 0, (2, 3, 1), leader=3, size_bytes=5),
         PartitionInfo("t", 0, (3,), size_bytes=7)],
    )


def test_rows_are_sorted_and_found() -> None:
    state = small()
    assert state.topics == ("a", "t")
    assert [str(state.tp(r)) for r in range(len(state))] == ["a-0", "t-0", "t-1"]
    assert state.find_row("t", 1) == 2 and state.find_row("t", 9) == -1 and state.find_row("x", 0) == -1
    assert state.find_rows(["t", "a", "x", "t"], [1, 0, 0, 5]).tolist() == [2, 0, -1, -1]


def test_aggregates() -> None:
    state = small()
    assert state.replicas_per_broker() == {1: 2, 2: 2, 3: 2}
    assert state.leaders_per_broker() == {1: 1, 2: 0, 3: 2}
    assert state.bytes_per_broker() == {1: 15, 2: 15, 3: 12}
    assert state.replica_matrix().tolist() == [[2, 3, 1], [3, -1, -1], [1, 2, -1]]


def test_huge_broker_ids_do_not_blow_up_aggregates() -> None:
    state = ClusterState.from_partitions([Broker(1), Broker(2**31 - 1)], [PartitionInfo("t", 0, (2**31 - 1, 1, 7))])
    assert state.replicas_per_broker() == {1: 1, 2**31 - 1: 1}
    assert state.leaders_per_broker() == {1: 0, 2**31 - 1: 1}


def test_leaderless_and_offline_partitions_round_trip() -> None:
    info = PartitionInfo("t", 0, (1, 2), leader=None, isr=())
    state = ClusterState.from_partitions([Broker(1), Broker(2)], [info])
    assert state.partition_info(0) == info
    assert ClusterState.from_partitions(state.brokers, state.iter_partitions()).partition_info(0) == info
    assert ClusterState.from_partitions([Broker(1)], [PartitionInfo("t", 0, (1,))]).partition_info(0).leader == 1


def test_with_assignment_keeps_or_moves_the_leader() -> None:
    state = ClusterState.from_partitions(
        [Broker(i) for i in range(1, 6)],
        [PartitionInfo("t", 0, (1, 2)), PartitionInfo("t", 1, (2, 3), leader=3), PartitionInfo("u", 0, (5, 1, 2), leader=1)],
        reassignments={TopicPartition("t", 0): Reassignment((1, 2, 4), adding=(4,))},
    )
    after = state.with_assignment({TopicPartition("t", 1): (4, 5, 3), TopicPartition("u", 0): (4,)})
    assert after.assignment() == {TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (4, 5, 3),
                                  TopicPartition("u", 0): (4,)}
    assert after.leader.tolist() == [1, 3, 4]
    assert after.isr(1) == (4, 5, 3) and after.reassignments == {}
    with pytest.raises(InputError, match="does not exist"):
        state.with_assignment({TopicPartition("t", 7): (1,)})


@pytest.mark.parametrize(("parts", "message"), [
    ([PartitionInfo("t", 0, (1,)), PartitionInfo("t", 0, (2,))], "t-0 is listed more than once"),
    ([PartitionInfo("t", -1, (1,))], "must not be negative"),
    ([PartitionInfo("t", 0, (1,), size_bytes=-5)], "must not be negative"),
])
def test_bad_input_is_refused(parts: list[PartitionInfo], message: str) -> None:
    with pytest.raises(InputError, match=message):
        ClusterState.from_partitions([Broker(1), Broker(2)], parts)


def test_reassignment_views() -> None:
    r = Reassignment(replicas=(4, 5, 6, 1, 2, 3), adding=(4, 5, 6), removing=(1, 2, 3))
    assert r.target == (4, 5, 6) and r.original == (1, 2, 3)


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 20),
                          st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True)),
                unique_by=lambda x: (x[0], x[1]), max_size=30))
def test_from_partitions_matches_the_value_objects(rows: list[tuple[str, int, list[int]]]) -> None:
    parts = [PartitionInfo(t, p, tuple(r), size_bytes=p) for t, p, r in rows]
    state = ClusterState.from_partitions([Broker(i) for i in range(1, 7)], parts)
    assert state.assignment() == {TopicPartition(t, p): tuple(r) for t, p, r in rows}
    assert int(state.size_bytes.sum()) == sum(p for _, p, _ in rows)
    counts = np.bincount([b for _, _, r in rows for b in r], minlength=7)
    assert state.replicas_per_broker() == {i: int(counts[i]) for i in range(1, 7)}
