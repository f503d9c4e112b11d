from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import AdminCommandFailed, InputError
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, PartitionTarget, TopicPartition
from kreassign.planner.generate import (
    GenerateResult,
    assign_replicas_to_brokers,
    generate_assignment,
    rack_alternated_list,
    replica_index,
)

RACKS_EXAMPLE = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def unaware(*ids: int) -> list[tuple[int, str | None]]:
    return [(i, None) for i in ids]


def aware(racks: dict[int, str]) -> list[tuple[int, str | None]]:
    return [(b, r) for b, r in sorted(racks.items())]


# ---- the algorithm, against Kafka's own test vectors and hand-worked cases -------------------
def test_rack_alternated_list_kafka_example() -> None:
    assert rack_alternated_list(RACKS_EXAMPLE) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in RACKS_EXAMPLE.items() if b != 5}
    assert rack_alternated_list(without_5) == [0, 3, 1, 4, 2]


def test_rack_alternated_list_sorts_racks_by_name_and_brokers_by_id() -> None:
    assert rack_alternated_list({9: "b", 3: "b", 7: "a", 1: "c", 5: "a"}) == [5, 3, 1, 7, 9]


def test_replica_index_skips_the_first_replica() -> None:
    assert [replica_index(2, 0, j, 5) for j in range(4)] == [3, 4, 0, 1]
    assert [replica_index(2, 1, j, 5) for j in range(4)] == [4, 0, 1, 3]


def test_rack_unaware_matches_kafka_admin_test_vector() -> None:
    # AdminZkClientTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed start 0.
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_replicas_to_brokers(unaware(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == expected


def test_rack_aware_matches_kafka_rack_aware_test_vector() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    expected = {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                5: [2, 0, 3], 6: [0, 4, 2]}
    got = assign_replicas_to_brokers(aware(RACKS_EXAMPLE), 7, 3, fixed_start_index=0,
                                     start_partition_id=0)
    assert got == expected


def test_rack_unaware_shift_grows_after_each_round_hand_worked() -> None:
    # n=3, start 1, shift 0: p0 first=1 -> 20, second (1+1+0)%3=2 -> 30; p1 [30,10]; p2 [10,20];
    # p3 is a multiple of 3 so shift=1: first (3+1)%3=1 -> 20, second (1+1+1%2)%3=0 -> 10.
    got = assign_replicas_to_brokers(unaware(10, 20, 30), 4, 2, start_index=1, shift=0)
    assert got == {0: [20, 30], 1: [30, 10], 2: [10, 20], 3: [20, 10]}


def test_start_partition_id_counts_the_first_partition_toward_the_shift() -> None:
    # pid 3 with n=3 raises the shift before it is used: first (3+0)%3=0 -> 10,
    # second (0+1+(1+0)%2)%3=2 -> 30.
    assert assign_replicas_to_brokers(unaware(10, 20, 30), 1, 2, start_index=0, shift=0,
                                      start_partition_id=3) == {3: [10, 30]}
    # Only visited ids count: from pid 4 the shift stays 0 at 4 and 5
    # (4 -> first 1 = 20, second (1+1+0)%3=2 = 30) and becomes 1 at 6 (first 0 = 10,
    # second (0+1+1%2)%3=2 = 30).
    got = assign_replicas_to_brokers(unaware(10, 20, 30), 3, 2, start_index=0, shift=0,
                                     start_partition_id=4)
    assert got == {4: [20, 30], 5: [30, 10], 6: [10, 30]}


def test_rack_aware_skips_brokers_already_used_hand_worked() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned racks; arranged [0,1,2,3,4],
    # 3 racks, fixed start 2 -> shift*racks = 6. p0: leader 2 (c); k=0 -> (3+6%4)%5=0 (a);
    # k=1 -> (3+7%4)%5=1 (b); all racks used, k=2 -> (3+8%4)%5=3 (a, free broker).
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    got = assign_replicas_to_brokers(aware(racks), 6, 4, fixed_start_index=2)
    assert got[0] == [2, 0, 1, 3]
    assert all(len(set(r)) == 4 for r in got.values())


def test_draw_order_is_start_index_then_shift() -> None:
    rng_values = random.Random(7)
    start, shift = rng_values.randrange(5), rng_values.randrange(5)
    by_rng = assign_replicas_to_brokers(unaware(0, 1, 2, 3, 4), 12, 3, rng=random.Random(7))
    injected = assign_replicas_to_brokers(unaware(0, 1, 2, 3, 4), 12, 3, start_index=start, shift=shift)
    assert by_rng == injected


def test_two_partitions_rf3_on_three_brokers_have_six_outcomes() -> None:
    outcomes = {
        tuple(tuple(r) for r in assign_replicas_to_brokers(
            unaware(0, 1, 3), 2, 3, start_index=s, shift=h).values())
        for s in range(3) for h in range(3)
    }
    assert len(outcomes) == 6
    seen = {tuple(tuple(r) for r in assign_replicas_to_brokers(
        unaware(0, 1, 3), 2, 3, rng=random.Random(seed)).values()) for seed in range(200)}
    assert seen == outcomes


@pytest.mark.parametrize(("brokers", "n", "rf", "message"), [
    (unaware(0, 1), 0, 1, "Number of partitions must be larger than 0."),
    (unaware(0, 1), 3, 0, "Replication factor must be larger than 0."),
    (unaware(0, 1), 3, 3, ("The target replication factor of 3 cannot be reached because only 2 broker(s) are registered or "
                             "some brokers have all their log directories cordoned.")),
    ([(0, "a"), (1, None)], 3, 1, "Not all brokers have rack information for replica rack aware assignment."),
])
def test_preconditions_use_kafka_messages(brokers: list[tuple[int, str | None]], n: int, rf: int,
                                          message: str) -> None:
    with pytest.raises(AdminCommandFailed) as err:
        assign_replicas_to_brokers(brokers, n, rf, rng=random.Random(0))
    assert str(err.value) == message


def test_partition_count_is_checked_before_replication_factor() -> None:
    with pytest.raises(AdminCommandFailed, match="Number of partitions"):
        assign_replicas_to_brokers([], 0, 0)


def test_duplicate_broker_ids_are_rejected() -> None:
    with pytest.raises(InputError, match="2"):
        assign_replicas_to_brokers(unaware(1, 2, 2), 3, 2)


# ---- properties ------------------------------------------------------------------------------
@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[tuple[int, str | None]], int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 500), min_size=1, max_size=12, unique=True))
    n_racks = draw(st.integers(0, 4))
    brokers = [(b, None if n_racks == 0 else f"r{draw(st.integers(0, n_racks - 1))}") for b in ids]
    rf = draw(st.integers(1, len(ids)))
    n_partitions = draw(st.integers(1, 40))
    return brokers, n_partitions, rf, draw(st.integers(0, 10**6)), draw(st.integers(-1, 30))


def kafka_rack_unaware_literal(ids: list[int], n_partitions: int, rf: int, start: int, shift: int,
                               start_pid: int) -> dict[int, list[int]]:
    """The pseudo-code of reference §4.2 line by line: the oracle for the vectorised version."""
    n = len(ids)
    out = {}
    pid = max(0, start_pid)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        out[pid] = [ids[first]] + [ids[replica_index(first, shift, j, n)] for j in range(rf - 1)]
        pid += 1
    return out


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_assignment_properties(case: tuple[list[tuple[int, str | None]], int, int, int, int]) -> None:
    brokers, n_partitions, rf, seed, start_pid = case
    got = assign_replicas_to_brokers(brokers, n_partitions, rf, rng=random.Random(seed),
                                     start_partition_id=start_pid)
    first = max(0, start_pid)
    assert list(got) == list(range(first, first + n_partitions))
    ids = {b for b, _ in brokers}
    racks = {b: r for b, r in brokers}
    n_racks = len(set(racks.values()))
    for replicas in got.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= ids
        if racks[brokers[0][0]] is not None:
            assert len({racks[b] for b in replicas}) == min(rf, n_racks)
    again = assign_replicas_to_brokers(brokers, n_partitions, rf, rng=random.Random(seed),
                                       start_partition_id=start_pid)
    assert again == got


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 9), st.integers(1, 30), st.data())
def test_rack_unaware_equals_the_literal_pseudo_code(n: int, n_partitions: int, data: st.DataObject) -> None:
    ids = data.draw(st.permutations(list(range(100, 100 + n))))
    rf = data.draw(st.integers(1, n))
    start, shift = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    start_pid = data.draw(st.integers(-1, 25))
    got = assign_replicas_to_brokers([(b, None) for b in ids], n_partitions, rf, start_index=start,
                                     shift=shift, start_partition_id=start_pid)
    assert got == kafka_rack_unaware_literal(ids, n_partitions, rf, start, shift, start_pid)


def test_rack_aware_spreads_leaders_and_replicas_evenly_when_racks_are_balanced() -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    got = assign_replicas_to_brokers(aware(racks), 6, 3, fixed_start_index=2, start_partition_id=0)
    leaders = [r[0] for r in got.values()]
    assert sorted(leaders) == [0, 1, 2, 3, 4, 5]
    counts = {b: sum(b in r for r in got.values()) for b in racks}
    assert set(counts.values()) == {3}


# ---- the tool-level --generate -------------------------------------------------------------
def cluster(racks: dict[int, str | None] | None = None) -> ClusterState:
    racks = racks if racks is not None else {1: "a", 2: "b", 3: "a", 4: "b"}
    parts = [PartitionInfo("foo", p, (1, 2)) for p in range(4)]
    parts += [PartitionInfo("bar", p, (2, 3, 4)) for p in range(3)]
    parts += [PartitionInfo("mixed", 0, (1, 2)), PartitionInfo("mixed", 1, (1, 2, 3))]
    return ClusterState.from_partitions([Broker(b, r) for b, r in racks.items()], parts)


def test_generate_proposes_whole_topics_with_their_replication_factor() -> None:
    result = generate_assignment(cluster(), ["foo", "bar"], [1, 2, 3, 4], seed=1)
    assert set(result.current) == {TopicPartition("foo", p) for p in range(4)} | {
        TopicPartition("bar", p) for p in range(3)}
    assert result.current[TopicPartition("bar", 1)] == (2, 3, 4)
    assert set(result.proposed) == set(result.current)
    for tp, replicas in result.proposed.items():
        assert len(replicas) == (2 if tp.topic == "foo" else 3)
        assert len({"a" if b in (1, 3) else "b" for b in replicas}) == 2
    assert result.warnings == ()


def test_generate_is_reproducible_for_a_seed_and_each_topic_draws_its_own_numbers() -> None:
    a = generate_assignment(cluster(), ["foo", "bar"], [1, 2, 3, 4], seed=42)
    b = generate_assignment(cluster(), ["bar", "foo"], [4, 3, 2, 1], seed=42)
    assert a == b
    rng = random.Random(42)
    metadata = [(1, "a"), (2, "b"), (3, "a"), (4, "b")]
    bar = assign_replicas_to_brokers(metadata, 3, 3, rng=rng)
    foo = assign_replicas_to_brokers(metadata, 4, 2, rng=rng)
    assert a.proposed == {**{TopicPartition("bar", p): tuple(r) for p, r in bar.items()},
                          **{TopicPartition("foo", p): tuple(r) for p, r in foo.items()}}


def test_generate_takes_rf_from_the_lowest_partition() -> None:
    result = generate_assignment(cluster(), ["mixed"], [1, 2, 3, 4], seed=3)
    assert {len(r) for r in result.proposed.values()} == {2}


def test_generate_drops_unknown_brokers_but_warns() -> None:
    result = generate_assignment(cluster(), ["foo"], [1, 2, 9, 7], seed=0)
    assert {b for r in result.proposed.values() for b in r} <= {1, 2}
    assert result.warnings == (
        "--broker-list names broker(s) the cluster does not have, so they get no replicas: 7,9",)


def test_generate_with_only_unknown_brokers_fails_like_kafka() -> None:
    with pytest.raises(AdminCommandFailed) as err:
        generate_assignment(cluster(), ["foo"], [8, 9])
    assert str(err.value) == ("The target replication factor of 2 cannot be reached because only 0 broker(s) "
                                "are registered or some brokers have all their log directories cordoned.")


def test_generate_checks_broker_duplicates_before_topics() -> None:
    with pytest.raises(AdminCommandFailed) as err:
        generate_assignment(cluster(), ["foo", "foo", "quux"], [1, 2, 1, 3, 3])
    assert str(err.value) == "Broker list contains duplicate entries: [1, 3]"
    with pytest.raises(AdminCommandFailed) as err:
        generate_assignment(cluster(), ["foo", "quux", "foo"], [1, 2])
    assert str(err.value) == "List of topics to reassign contains duplicate entries: [foo]"


def test_generate_unknown_topic_uses_kafka_wrapped_text() -> None:
    with pytest.raises(AdminCommandFailed) as err:
        generate_assignment(cluster(), ["foo", "quux"], [1, 2])
    assert str(err.value) == ("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                              "Topic quux not found.")


def test_generate_unknown_topic_is_checked_before_racks() -> None:
    partial = cluster({1: "a", 2: None, 3: "a", 4: "b"})
    with pytest.raises(AdminCommandFailed, match="Topic quux not found"):
        generate_assignment(partial, ["quux"], [1, 2])


def test_generate_refuses_partial_rack_information_unless_rack_unaware() -> None:
    partial = cluster({1: "a", 2: None, 3: "a", 4: "b"})
    with pytest.raises(AdminCommandFailed) as err:
        generate_assignment(partial, ["foo"], [1, 2, 3])
    assert str(err.value) == (
        "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
        "replica assignment without rack information.")
    # Only the selected brokers count: 1 and 3 both have racks.
    assert generate_assignment(partial, ["foo"], [1, 3], seed=0).proposed
    result = generate_assignment(partial, ["foo"], [1, 2, 3], rack_aware=False, seed=5)
    rng = random.Random(5)
    expected = assign_replicas_to_brokers([(1, None), (2, None), (3, None)], 4, 2, rng=rng)
    assert result.proposed == {TopicPartition("foo", p): tuple(r) for p, r in expected.items()}


def test_generate_with_no_topics_gives_two_empty_plans() -> None:
    assert generate_assignment(cluster(), [], [1, 2]) == GenerateResult(current={}, proposed={})


def test_generate_result_targets_are_sorted_entries() -> None:
    result = generate_assignment(cluster(), ["foo", "bar"], [1, 2, 3, 4], seed=9)
    targets = result.proposed_targets()
    assert [(t.topic, t.partition) for t in targets] == sorted((t.topic, t.partition) for t in targets)
    assert targets[0] == PartitionTarget("bar", 0, result.proposed[TopicPartition("bar", 0)])
    assert result.current_targets()[0] == PartitionTarget("bar", 0, (2, 3, 4))
