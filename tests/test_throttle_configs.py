from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.errors import AdminCommandFailed, InputError
from kreassign.cluster.model import Reassignment, TopicPartition, TopicPartitionReplica
from kreassign.throttle.configs import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LOG_DIR_RATE,
    PartitionMove,
    ThrottlePlan,
    clear_targets,
    compute_move_map,
    format_throttled_replicas,
    parse_throttled_replicas,
    throttle_plan,
    validate_throttled_replicas,
)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def lists(current: dict[TopicPartition, tuple[int, ...]], proposed: dict[TopicPartition, tuple[int, ...]],
          in_flight: dict[TopicPartition, Reassignment] | None = None,
          rate: int | None = 1000) -> ThrottlePlan:
    move_map = compute_move_map(current, proposed.items(), in_flight or {})
    return throttle_plan(move_map, rate=rate, log_dir_rate=None, replica_log_dirs=())


# ---- reference §3.2 worked cases ------------------------------------------------------------
def test_docs_case_my_topic() -> None:
    plan = lists({tp("my-topic", 0): (101, 102)}, {tp("my-topic", 0): (102, 103)})
    assert plan.topic_configs == {"my-topic": {LEADER_REPLICAS: "0:101,0:102", FOLLOWER_REPLICAS: "0:103"}}
    assert plan.reassigning_brokers == (101, 102, 103)
    assert plan.broker_rates == {b: {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"} for b in (101, 102, 103)}


def test_integration_test_case_foo_and_baz() -> None:
    plan = lists({tp("foo", 0): (0, 1, 2), tp("baz", 2): (0, 2, 1)},
                 {tp("foo", 0): (0, 3, 2), tp("baz", 2): (3, 2, 1)})
    assert plan.topic_configs == {
        "baz": {LEADER_REPLICAS: "2:0,2:1,2:2", FOLLOWER_REPLICAS: "2:3"},
        "foo": {LEADER_REPLICAS: "0:0,0:1,0:2", FOLLOWER_REPLICAS: "0:3"},
    }
    # Broker 4 exists in that cluster but takes no part, so it gets no rate.
    assert sorted(plan.broker_rates) == [0, 1, 2, 3]


def test_reorder_only_sets_an_empty_follower_list() -> None:
    plan = lists({tp("foo", 0): (0, 1, 2)}, {tp("foo", 0): (2, 1, 0)})
    assert plan.topic_configs == {"foo": {LEADER_REPLICAS: "0:0,0:1,0:2", FOLLOWER_REPLICAS: ""}}
    assert sorted(plan.broker_rates) == [0, 1, 2]


def test_entries_sort_as_strings() -> None:
    plan = lists({tp("t", 2): (100, 101), tp("t", 10): (100, 101)},
                 {tp("t", 2): (101, 102), tp("t", 10): (101, 102)})
    assert plan.topic_configs["t"] == {LEADER_REPLICAS: "10:100,10:101,2:100,2:101",
                                       FOLLOWER_REPLICAS: "10:102,2:102"}
    assert plan.reassigning_brokers == (100, 101, 102)


def test_string_order_puts_10_before_2_within_a_partition_too() -> None:
    plan = lists({tp("t", 0): (2, 10)}, {tp("t", 0): (2, 10, 3)})
    assert plan.topic_configs["t"][LEADER_REPLICAS] == "0:10,0:2"


# ---- in-flight reassignments -----------------------------------------------------------------
def test_kafka_10779_resubmitted_partition_keeps_original_sources() -> None:
    # foo-0 is moving [0,1,2] -> [0,1,3] (replicas [0,1,3,2], adding 3, removing 2); resubmitted
    # to [0,1,4]: the adding replica 3 is not a source, so it is not leader-throttled.
    in_flight = {tp("foo", 0): Reassignment(replicas=(0, 1, 3, 2), adding=(3,), removing=(2,))}
    move_map = compute_move_map({tp("foo", 0): (0, 1, 3, 2)}, [(tp("foo", 0), (0, 1, 4))], in_flight)
    assert move_map == {"foo": {0: PartitionMove(frozenset({0, 1, 2}), frozenset({4}))}}
    plan = throttle_plan(move_map, rate=10, log_dir_rate=None, replica_log_dirs=())
    assert plan.topic_configs["foo"] == {LEADER_REPLICAS: "0:0,0:1,0:2", FOLLOWER_REPLICAS: "0:4"}
    assert plan.reassigning_brokers == (0, 1, 2, 4)


def test_unrelated_in_flight_reassignments_are_throttled_too() -> None:
    in_flight = {tp("other", 5): Reassignment(replicas=(7, 8, 9), adding=(9,), removing=(7,))}
    plan = lists({tp("foo", 0): (0, 1)}, {tp("foo", 0): (0, 2)}, in_flight)
    assert plan.topic_configs["other"] == {LEADER_REPLICAS: "5:7,5:8", FOLLOWER_REPLICAS: "5:9"}
    assert plan.reassigning_brokers == (0, 1, 2, 7, 8, 9)


def test_in_flight_partition_of_a_planned_topic_stays_in_that_topic_list() -> None:
    in_flight = {tp("foo", 1): Reassignment(replicas=(3, 4, 5), adding=(5,), removing=(3,))}
    plan = lists({tp("foo", 0): (0, 1)}, {tp("foo", 0): (0, 2)}, in_flight)
    assert plan.topic_configs["foo"] == {LEADER_REPLICAS: "0:0,0:1,1:3,1:4", FOLLOWER_REPLICAS: "0:2,1:5"}


def test_partition_without_replicas_or_move_is_refused_with_kafka_text() -> None:
    with pytest.raises(AdminCommandFailed) as err:
        compute_move_map({}, [(tp("foo", 3), (1, 2))], {})
    assert str(err.value) == "Trying to reassign a topic partition foo-3 with 0 replicas"


# ---- rates -------------------------------------------------------------------------------------
def test_no_rate_means_no_inter_broker_configs() -> None:
    plan = lists({tp("foo", 0): (0, 1)}, {tp("foo", 0): (0, 2)}, rate=None)
    assert plan.is_empty()
    assert plan.reassigning_brokers == (0, 1, 2)


def test_zero_is_a_valid_rate() -> None:
    plan = lists({tp("foo", 0): (0, 1)}, {tp("foo", 0): (0, 2)}, rate=0)
    assert plan.broker_rates[2] == {LEADER_RATE: "0", FOLLOWER_RATE: "0"}


def test_leader_and_follower_rates_can_differ() -> None:
    move_map = compute_move_map({tp("foo", 0): (0, 1)}, [(tp("foo", 0), (0, 2))], {})
    plan = throttle_plan(move_map, rate=None, log_dir_rate=None, replica_log_dirs=(),
                         leader_rate=50, follower_rate=70)
    assert plan.broker_rates == {b: {LEADER_RATE: "50", FOLLOWER_RATE: "70"} for b in (0, 1, 2)}
    only_leader = throttle_plan(move_map, rate=None, leader_rate=5)
    assert only_leader.broker_rates[0] == {LEADER_RATE: "5"}
    assert only_leader.topic_configs["foo"] == {LEADER_REPLICAS: "0:0,0:1", FOLLOWER_REPLICAS: "0:2"}
    override = throttle_plan(move_map, rate=100, follower_rate=30)
    assert override.broker_rates[1] == {LEADER_RATE: "100", FOLLOWER_RATE: "30"}


def test_log_dir_rate_goes_only_on_brokers_with_explicit_dirs() -> None:
    move_map = compute_move_map({tp("foo", 0): (0, 1)}, [(tp("foo", 0), (0, 2))], {})
    dirs = {TopicPartitionReplica("foo", 0, 2): "/data/b", TopicPartitionReplica("bar", 1, 5): "/data/c"}
    plan = throttle_plan(move_map, rate=100, log_dir_rate=7, replica_log_dirs=dirs)
    assert plan.log_dir_brokers == (2, 5)
    assert plan.broker_rates == {
        0: {LEADER_RATE: "100", FOLLOWER_RATE: "100"},
        1: {LEADER_RATE: "100", FOLLOWER_RATE: "100"},
        2: {LEADER_RATE: "100", FOLLOWER_RATE: "100", LOG_DIR_RATE: "7"},
        5: {LOG_DIR_RATE: "7"},
    }
    only_dirs = throttle_plan(move_map, rate=None, log_dir_rate=7, replica_log_dirs=dirs)
    assert only_dirs.topic_configs == {}
    assert only_dirs.broker_rates == {2: {LOG_DIR_RATE: "7"}, 5: {LOG_DIR_RATE: "7"}}


@pytest.mark.parametrize("kwargs", [{"rate": -1}, {"rate": 5, "follower_rate": -2},
                                    {"rate": None, "log_dir_rate": -3}])
def test_negative_rates_are_refused(kwargs: dict[str, int | None]) -> None:
    move_map = compute_move_map({tp("foo", 0): (0, 1)}, [(tp("foo", 0), (0, 2))], {})
    with pytest.raises(InputError, match="at least 0 bytes/s"):
        throttle_plan(move_map, **kwargs)  # type: ignore[arg-type]


# ---- clearing ---------------------------------------------------------------------------------
def test_clear_targets_union_of_cluster_and_file_brokers_and_only_file_topics() -> None:
    # in the order Kafka adds them to its sets: the cluster's brokers, then the file's, in file order
    brokers, topics = clear_targets([2, 0, 1], [(tp("foo", 0), (1, 7)), (tp("bar", 3), (9, 2)),
                                                (tp("foo", 1), (0, 1))])
    assert brokers == (0, 1, 2, 7, 9)
    assert topics == ("foo", "bar")


# ---- the broker's validator and parser ----------------------------------------------------------
@pytest.mark.parametrize("value", ["", "  ", "0:1", "0:1,1:2", " 0:1 , 1:2 ", "*", " * ", "0:1,,2:3",
                                   "10:100,2:100", "*,"])
def test_values_a_broker_accepts(value: str) -> None:
    assert validate_throttled_replicas(value)


@pytest.mark.parametrize("value", ["0", "0:", ":1", "a:1", "0:1:2", "-1:2", "*,0:1", "**", "0:1;1:2",
                                   "* 0:1"])
def test_values_a_broker_rejects(value: str) -> None:
    assert not validate_throttled_replicas(value)


def test_parse_throttled_replicas() -> None:
    assert parse_throttled_replicas("") == set()
    assert parse_throttled_replicas(" * ") == "*"
    assert parse_throttled_replicas("0:101, 10:3,0:101") == {(0, 101), (10, 3)}
    with pytest.raises(InputError, match=r"must be the literal '\*'"):
        parse_throttled_replicas("0:x")


@given(st.sets(st.tuples(st.integers(0, 10**4), st.integers(0, 10**6)), max_size=30))
def test_format_and_parse_round_trip(pairs: set[tuple[int, int]]) -> None:
    text = format_throttled_replicas(pairs)
    assert validate_throttled_replicas(text)
    assert parse_throttled_replicas(text) == pairs
    assert text.split(",") == sorted(text.split(","))


@given(st.dictionaries(st.integers(0, 50), st.tuples(st.lists(st.integers(0, 20), min_size=1, max_size=4,
                                                               unique=True),
                                                      st.lists(st.integers(0, 20), min_size=1, max_size=4,
                                                               unique=True)), max_size=10))
def test_generated_lists_are_always_valid_and_cover_the_moves(
        parts: dict[int, tuple[list[int], list[int]]]) -> None:
    current = {tp("t", p): tuple(c) for p, (c, _) in parts.items()}
    proposed = [(tp("t", p), tuple(t)) for p, (_, t) in parts.items()]
    plan = throttle_plan(compute_move_map(current, proposed, {}), rate=1)
    if not parts:
        assert plan.is_empty()
        return
    leader = parse_throttled_replicas(plan.topic_configs["t"][LEADER_REPLICAS])
    follower = parse_throttled_replicas(plan.topic_configs["t"][FOLLOWER_REPLICAS])
    assert leader == {(p, b) for p, (c, _) in parts.items() for b in c}
    assert follower == {(p, b) for p, (c, t) in parts.items() for b in t if b not in c}
    assert set(plan.broker_rates) == {b for c, t in parts.values() for b in (*c, *t)}
