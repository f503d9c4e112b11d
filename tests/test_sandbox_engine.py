"""The sandbox engine without sockets: KIP-73 timing, KRaft reassignment rules, brokers, state."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kreassign.sandbox import codes
from kreassign.sandbox.codes import AlterOp
from kreassign.sandbox.configs import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    NUM_REPLICA_FETCHERS,
    TIME_SCALE_KEY,
)
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.fetch import NO_FETCH_LIMITS, FetchConfig, fetcher_id, java_string_hash
from kreassign.sandbox.kafka_profiles import profile
from kreassign.sandbox.quota import SampledRates
from kreassign.predict.model import FetchLimits

MB = 1_000_000


def two_brokers(size: float, write_bps: float = 0.0, **kwargs: float) -> Engine:
    engine = Engine({1: "a", 2: "b"}, **kwargs)  # type: ignore[arg-type]
    assert engine.create_topic("t", assignments={0: [1]}, sizes=[size], rates=[write_bps]) == (0, None)
    return engine


def throttle(engine: Engine, rate: float, leader_list: str = "0:1", follower_list: str = "0:2") -> None:
    for b in engine.brokers:
        ops = [(LEADER_RATE, AlterOp.SET, str(int(rate))), (FOLLOWER_RATE, AlterOp.SET, str(int(rate)))]
        assert engine.configs.incremental_alter_broker(b, ops, False) == (0, None)
    ops = [(LEADER_REPLICAS, AlterOp.SET, leader_list), (FOLLOWER_REPLICAS, AlterOp.SET, follower_list)]
    assert engine.configs.incremental_alter_topic("t", ops, False) == (0, None)
    engine.config_changed()


def time_to_finish(engine: Engine, limit: float = 2000.0) -> float:
    start = engine.now
    while engine.rows[0].reassigning and engine.now - start < limit:
        engine.advance(1.0)
    return engine.now - start


@pytest.mark.parametrize("size,rate", [(1000 * MB, 10 * MB), (300 * MB, 5 * MB), (2000 * MB, 40 * MB)])
def test_throttled_move_takes_size_over_rate(size: float, rate: float) -> None:
    engine = two_brokers(size)
    throttle(engine, rate)
    assert engine.alter_reassignment("t", 0, [2]) == (0, None)
    assert time_to_finish(engine) == pytest.approx(size / rate, rel=0.10)
    assert engine.rows[0].replicas == [2] and engine.rows[0].isr == [2] and engine.rows[0].leader == 2


def test_writes_slow_a_throttled_move_to_size_over_rate_minus_writes() -> None:
    engine = two_brokers(1000 * MB, write_bps=4 * MB)
    throttle(engine, 10 * MB)
    engine.alter_reassignment("t", 0, [2])
    # the copy gets what fetches get of the quota (the model's share: about 0.92 with 1 s backoffs)
    share = float(FetchLimits().follower_share(np.array(10 * MB)))
    assert time_to_finish(engine) == pytest.approx(1000 / (10 * share - 4), rel=0.05)


def test_a_move_throttled_below_the_write_rate_never_completes() -> None:
    engine = two_brokers(100 * MB, write_bps=6 * MB)
    throttle(engine, 5 * MB)
    engine.alter_reassignment("t", 0, [2])
    engine.advance(300)
    p = engine.rows[0]
    assert p.reassigning and p.isr == [1]
    lag = engine.log_end[0] - engine.replica_size(p, 2)
    assert lag > 100 * MB + 200 * MB  # the backlog grows: ~1 MB/s more is written than copied


def test_unthrottled_move_is_bounded_by_network_capacity() -> None:
    engine = two_brokers(1000 * MB, network_bps=50 * MB)
    engine.alter_reassignment("t", 0, [2])
    assert time_to_finish(engine) == pytest.approx(1000 / 50, rel=0.10)


def test_throttle_applies_only_to_listed_replicas() -> None:
    engine = two_brokers(1000 * MB, network_bps=100 * MB)
    throttle(engine, 1 * MB, leader_list="5:1", follower_list="5:2")  # other partition listed
    engine.alter_reassignment("t", 0, [2])
    assert time_to_finish(engine) == pytest.approx(10, rel=0.10)


def test_follower_side_throttle_alone_limits_the_move() -> None:
    engine = two_brokers(200 * MB)
    throttle(engine, 10 * MB, leader_list="", follower_list="*")
    engine.alter_reassignment("t", 0, [2])
    assert time_to_finish(engine) == pytest.approx(20, rel=0.10)


def test_in_sync_replication_uses_up_the_leader_quota() -> None:
    # a modest network keeps each inclusion burst small, so the window average sits near the bound
    engine = Engine({1: None, 2: None, 3: None}, network_bps=20 * MB)
    engine.create_topic("t", assignments={0: [1, 2]}, sizes=[300 * MB], rates=[4 * MB])
    for b in engine.brokers:
        ops = [(LEADER_RATE, AlterOp.SET, str(10 * MB))]
        engine.configs.incremental_alter_broker(b, ops, False)
    engine.configs.incremental_alter_topic("t", [(LEADER_REPLICAS, AlterOp.SET, "0:1,0:2")], False)
    engine.config_changed()
    engine.alter_reassignment("t", 0, [1, 3])
    # leader 1 sends 4 MB/s to in-sync follower 2, leaving 6 MB/s; the new replica must also
    # absorb 4 MB/s of writes, so it gains 2 MB/s on a 300 MB backlog
    assert time_to_finish(engine) == pytest.approx(300 / (10 - 4 - 4), rel=0.10)


def test_describe_log_dirs_shows_the_new_replica_growing() -> None:
    engine = two_brokers(100 * MB)
    throttle(engine, 10 * MB)
    engine.alter_reassignment("t", 0, [2])
    sizes = []
    for _ in range(3):
        engine.advance(2.0)
        (info,) = engine.describe_log_dirs(2, None)["/var/lib/kafka/data"]
        sizes.append(info.size)
    assert sizes[0] < sizes[1] < sizes[2] < 100 * MB
    assert engine.describe_log_dirs(1, None)["/var/lib/kafka/data"][0].size == 100 * MB


# ---- KRaft reassignment rules -------------------------------------------------------------------
def six(release: str | None = None) -> Engine:
    engine = Engine({b: None for b in range(1, 7)}, network_bps=1e12, kafka=profile(release))
    engine.create_topic("t", assignments={0: [1, 2, 3], 1: [2]}, sizes=[10 * MB, 10 * MB])
    return engine


def test_union_replica_list_while_moving() -> None:
    engine = six()
    throttle_all(engine)
    assert engine.alter_reassignment("t", 0, [4, 5, 6]) == (0, None)
    assert engine.alter_reassignment("t", 1, [1, 3]) == (0, None)
    assert engine.list_reassignments() == [("t", 0, [4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]),
                                           ("t", 1, [1, 3, 2], [1, 3], [2])]
    p = engine.rows[0]
    assert p.isr == [1, 2, 3] and p.leader == 1


def throttle_all(engine: Engine) -> None:
    """A tiny throttle so moves stay in flight while a test looks at them."""
    for b in engine.brokers:
        ops = [(LEADER_RATE, AlterOp.SET, "1"), (FOLLOWER_RATE, AlterOp.SET, "1")]
        engine.configs.incremental_alter_broker(b, ops, False)
    engine.configs.incremental_alter_topic("t", [(FOLLOWER_REPLICAS, AlterOp.SET, "*")], False)
    engine.config_changed()


def test_completion_drops_removed_replicas_and_elects_first_target_in_isr() -> None:
    engine = six()
    engine.alter_reassignment("t", 0, [4, 5, 6])
    engine.advance(1.0)
    p = engine.rows[0]
    assert (p.replicas, p.isr, p.adding, p.removing) == ([4, 5, 6], [4, 5, 6], [], [])
    assert p.leader == 4 and p.leader_epoch == 1
    assert engine.list_reassignments() == []


def test_leader_is_kept_when_it_stays_in_the_isr() -> None:
    engine = six()
    engine.alter_reassignment("t", 0, [4, 1])
    engine.advance(1.0)
    p = engine.rows[0]
    assert p.replicas == [4, 1] and p.leader == 1 and p.leader_epoch == 1  # bumped: replicas were dropped


def test_pure_removal_and_reorder_apply_at_once() -> None:
    engine = six()
    assert engine.alter_reassignment("t", 0, [3, 1]) == (0, None)
    assert engine.rows[0].replicas == [3, 1] and not engine.rows[0].reassigning
    assert engine.alter_reassignment("t", 0, [1, 3]) == (0, None)
    assert engine.rows[0].replicas == [1, 3] and engine.rows[0].leader == 1


def test_new_target_replaces_an_ongoing_one_against_the_union() -> None:
    # ReplicationControlManager.changePartitionReassignment, as Kafka 3.9.2 and 4.4.0 answer it:
    # nothing is added against the union [4, 5, 6, 1, 2, 3], and an empty adding list leaves the
    # one in flight as it was, so 6 is both adding and removing
    engine = six()
    throttle_all(engine)
    engine.alter_reassignment("t", 0, [4, 5, 6])
    engine.alter_reassignment("t", 0, [4, 5, 1])
    assert engine.list_reassignments() == [("t", 0, [4, 5, 1, 2, 3, 6], [4, 5, 6], [2, 3, 6])]


@pytest.mark.parametrize("release, completes", [("3.9.2", True), ("4.4.0", False)])
def test_a_retarget_that_drops_a_replica_being_added_completes_only_on_3_9(release: str, completes: bool) -> None:
    # 4.x completes a move once the ISR without the removing replicas holds every adding one: 6
    # is in both lists, so the move never completes (measured on Kafka 4.4.0); 3.9 asks only for
    # the target replicas
    engine = six(release)
    engine.create_topic("big", assignments={0: [1, 2, 3]}, sizes=[20 * MB])
    engine.alter_reassignment("big", 0, [4, 5, 6])
    engine.alter_reassignment("big", 0, [4, 5, 1])
    engine.advance(60)
    p = engine.partition("big", 0)
    assert p is not None
    assert (p.replicas, p.reassigning) == (([4, 5, 1], False) if completes else ([4, 5, 1, 2, 3, 6], True))
    assert sorted(p.isr) == ([1, 4, 5] if completes else [1, 2, 3, 4, 5, 6])


def test_cancel_reverts_to_the_original_replicas() -> None:
    engine = six()
    throttle_all(engine)
    engine.alter_reassignment("t", 0, [4, 5, 6])
    assert engine.alter_reassignment("t", 0, None) == (0, None)
    p = engine.rows[0]
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ([1, 2, 3], [1, 2, 3], 1, False)
    assert engine.describe_log_dirs(4, None)["/var/lib/kafka/data"] == []


def test_cancel_after_a_retarget_reverts_to_the_original_replicas() -> None:
    # PartitionReassignmentRevert keeps replicas - adding; the retarget left adding [4, 5, 6]
    # (see above), so the original replicas come back, as on Kafka 3.9.2 and 4.4.0
    engine = six()
    throttle_all(engine)
    engine.alter_reassignment("t", 0, [4, 5, 6])
    engine.alter_reassignment("t", 0, [4, 5, 1])
    assert engine.alter_reassignment("t", 0, None) == (0, None)
    p = engine.rows[0]
    assert (p.replicas, p.isr, p.reassigning) == ([1, 2, 3], [1, 2, 3], False)


@pytest.mark.parametrize("topic,partition,target,expected", [
    ("nope", 0, [1], (codes.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope.")),
    ("t", 9, [1], (codes.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:9.")),
    ("t", 0, None, (codes.NO_REASSIGNMENT_IN_PROGRESS, None)),  # no message from Kafka 3.9.2 or 4.4.0
    ("t", 0, [], (codes.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes an empty replica list.")),
    ("t", 0, [1, 9], (codes.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes broker 9, but no such broker is registered.")),
    ("t", 0, [4, 2, 4], (codes.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes the broker 4 more than once.")),
])
def test_reassignment_errors(topic: str, partition: int, target: list[int] | None,
                             expected: tuple[int, str]) -> None:
    engine = six()
    assert engine.alter_reassignment(topic, partition, target) == expected
    assert engine.list_reassignments() == []


def test_cancel_that_needs_an_unclean_election_is_refused() -> None:
    engine = six()
    engine.stop_broker(5)
    engine.alter_reassignment("t", 1, [4, 5])  # [2] -> [4, 5]; 5 is down, so the move cannot finish
    engine.advance(1.0)
    assert engine.rows[1].isr == [2, 4]
    engine.stop_broker(2)                       # now only an adding replica is in sync
    assert engine.rows[1].isr == [4] and engine.rows[1].leader == 4
    code, msg = engine.alter_reassignment("t", 1, None)
    assert code == codes.INVALID_REPLICA_ASSIGNMENT and "unclean leader election" in (msg or "")
    assert engine.rows[1].reassigning


def test_list_reassignments_omits_unknown_and_idle_partitions() -> None:
    engine = six()
    throttle_all(engine)
    engine.alter_reassignment("t", 0, [4, 5, 6])
    assert engine.list_reassignments({"t": [0, 1, 7], "ghost": [0]}) == [("t", 0, [4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])]


# ---- brokers and elections -------------------------------------------------------------------------
def test_stopped_broker_leaves_the_isr_and_catches_up_after_restart() -> None:
    engine = Engine({1: None, 2: None, 3: None}, network_bps=10 * MB)
    engine.create_topic("t", assignments={0: [1, 2, 3]}, sizes=[50 * MB], rates=[1 * MB])
    engine.stop_broker(1)
    p = engine.rows[0]
    assert p.isr == [2, 3] and p.leader == 2 and p.leader_epoch == 1
    engine.advance(20)
    engine.start_broker(1)
    assert p.isr == [2, 3]
    engine.advance(1)
    assert 1 not in p.isr  # 20 MB behind, copying at ~9 MB/s net of writes
    engine.advance(5)
    assert p.isr == [2, 3, 1] and p.leader == 2


def test_preferred_election() -> None:
    engine = Engine({1: None, 2: None, 3: None})
    engine.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3]}, sizes=[MB, MB])
    engine.stop_broker(1)
    assert engine.elect_leaders(0, {"t": [0]}) == [("t", 0, codes.PREFERRED_LEADER_NOT_AVAILABLE,
                                                     "The preferred leader was not available.")]
    engine.start_broker(1)
    engine.advance(1)
    assert engine.elect_leaders(0, {"t": [0, 1], "x": [0]}) == [
        ("t", 0, codes.NONE, None),
        ("t", 1, codes.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        ("x", 0, codes.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as x")]
    assert engine.elect_leaders(0, {"t": [7]}) == [("t", 7, codes.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-7")]
    assert engine.rows[0].leader == 1
    assert engine.elect_leaders(0, None) == []  # ELECTION_NOT_NEEDED results are omitted for "all"


def test_unclean_election_picks_a_live_replica() -> None:
    engine = Engine({1: None, 2: None})
    engine.create_topic("t", assignments={0: [1, 2]}, sizes=[MB])
    engine.stop_broker(2)
    engine.stop_broker(1)
    assert engine.rows[0].leader == -1 and engine.rows[0].isr == [1]
    engine.start_broker(2)
    assert engine.elect_leaders(1, {"t": [0]}) == [("t", 0, codes.NONE, None)]
    assert engine.rows[0].leader == 2 and engine.rows[0].isr == [2]
    assert engine.elect_leaders(1, {"t": [0]})[0][2] == codes.ELECTION_NOT_NEEDED


def test_the_reported_controller_is_a_random_live_broker() -> None:
    # KRaft brokers name a random live broker (KRaftMetadataCache.getRandomAliveBrokerId)
    engine = Engine({1: None, 2: None, 3: None}, seed=3)
    assert {engine.reported_controller() for _ in range(50)} == {1, 2, 3}
    engine.stop_broker(1)
    assert {engine.reported_controller() for _ in range(50)} == {2, 3}
    engine.stop_broker(2)
    engine.stop_broker(3)
    assert engine.reported_controller() == -1


# ---- topics, state -------------------------------------------------------------------------------
def test_create_topic_errors() -> None:
    engine = Engine({1: None, 2: None})
    assert engine.create_topic("t", 2, 2) == (0, None)
    assert engine.create_topic("t", 1, 1) == (codes.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")
    assert engine.create_topic("u", 1, 3)[0] == codes.INVALID_REPLICATION_FACTOR
    assert engine.create_topic("u", 0, 1)[0] == codes.INVALID_PARTITIONS
    assert engine.create_topic("bad name", 1, 1)[0] == codes.INVALID_TOPIC_EXCEPTION
    assert engine.create_topic("u", 1, 1, configs={"retention.ms": "x"})[0] == codes.INVALID_CONFIG
    assert [len(p.replicas) for p in engine.topics["t"].partitions] == [2, 2]


def test_state_round_trips_through_json_with_a_move_in_flight() -> None:
    engine = two_brokers(100 * MB, write_bps=MB)
    throttle(engine, 10 * MB)
    engine.alter_reassignment("t", 0, [2])
    engine.advance(3)
    restored = Engine.from_json(json.loads(json.dumps(engine.to_json())))
    assert restored.list_reassignments() == engine.list_reassignments()
    assert restored.now == engine.now
    assert restored.replica_size(restored.rows[0], 2) == engine.replica_size(engine.rows[0], 2)
    assert restored.configs == engine.configs
    for e in (engine, restored):
        e.advance(20)
    assert restored.replica_size(restored.rows[0], 2) == engine.replica_size(engine.rows[0], 2)
    assert restored.rows[0].reassigning == engine.rows[0].reassigning


def test_seeded_topics_are_reproducible_and_heavy_tailed() -> None:
    from kreassign.sandbox.topics import DEFAULT_TOPICS

    a, b = Engine({i: None for i in range(1, 7)}, seed=3), Engine({i: None for i in range(1, 7)}, seed=3)
    a.add_topics(DEFAULT_TOPICS)
    b.add_topics(DEFAULT_TOPICS)
    assert np.array_equal(a.log_end, b.log_end) and [p.replicas for p in a.rows] == [p.replicas for p in b.rows]
    assert len(a.rows) == 50 and a.log_end.max() > 5 * np.median(a.log_end)


# ---- quota windows ---------------------------------------------------------------------------------
def test_simple_rate_divides_by_elapsed_with_a_one_window_floor() -> None:
    rates = SampledRates(1)
    rates.record(np.array([5.0]), 0.0)
    assert rates.rates(0.5)[0] == pytest.approx(5.0)      # floor of one window
    rates.record(np.array([5.0]), 2.0)
    assert rates.rates(4.0)[0] == pytest.approx(10.0 / 4.0)
    assert rates.rates(40.0)[0] == 0.0                     # purged after 11 idle windows


# ---- fetch limits (broker-semantics Part B §2.6) -----------------------------------------------------
MiB = 1024 * 1024


def fan_in(partitions: int, size: float, *, fetch: FetchConfig | None = None, leaders: int = 1,
           network_bps: float = 1e12) -> Engine:
    """`partitions` partitions spread over leaders 1..`leaders`, all moving to broker 9, by default
    on a network fast enough that only the fetch limits bound the copying."""
    engine = Engine({**{b: None for b in range(1, leaders + 1)}, 9: None}, network_bps=network_bps, fetch=fetch)
    engine.create_topic("t", assignments={i: [i % leaders + 1] for i in range(partitions)}, sizes=[size] * partitions)
    for i in range(partitions):
        assert engine.alter_reassignment("t", i, [i % leaders + 1, 9]) == (0, None)
    return engine


def seconds_until_done(engine: Engine, limit: float = 600.0) -> float:
    start = engine.now
    while any(p.reassigning for p in engine.rows) and engine.now - start < limit:
        engine.advance(engine.tick)
    return engine.now - start


def test_one_partition_copies_at_most_fetch_max_bytes_per_round() -> None:
    # 1 MiB per 10 ms round: 100 MiB/s, however fast the network
    assert seconds_until_done(fan_in(1, 300 * MiB)) == pytest.approx(3.0, rel=0.05)


def test_many_partitions_on_one_fetcher_share_the_response_limit() -> None:
    # 40 lagging partitions could take 40 MiB per round, but a response carries 10 MiB: 1000 MiB/s
    assert seconds_until_done(fan_in(40, 50 * MiB)) == pytest.approx(40 * 50 / 1000, rel=0.05)


def test_each_leader_is_a_separate_fetcher_session() -> None:
    # one fetcher thread per source broker: two leaders give the follower twice the response bytes
    assert seconds_until_done(fan_in(40, 50 * MiB, leaders=2)) == pytest.approx(40 * 50 / 2000, rel=0.05)


def test_more_fetcher_threads_split_the_partitions_by_kafkas_hash() -> None:
    engine = fan_in(40, 50 * MiB)
    ops = [(NUM_REPLICA_FETCHERS, AlterOp.SET, "2")]
    assert engine.configs.incremental_alter_broker(9, ops, False) == (0, None)
    engine.config_changed()
    threads = [fetcher_id("t", i, 2) for i in range(40)]
    assert threads.count(0) == threads.count(1) == 20
    assert seconds_until_done(engine) == pytest.approx(40 * 50 / 2000, rel=0.05)


def test_fetch_limits_are_configurable_and_reported_as_static_broker_configs() -> None:
    fetch = FetchConfig(partition_max_bytes=2 * MiB, response_max_bytes=4 * MiB, num_fetchers=3, round_s=0.05)
    engine = fan_in(4, 20 * MiB, fetch=fetch)
    static = engine.static_broker_configs(9)
    assert (static["replica.fetch.max.bytes"], static["replica.fetch.response.max.bytes"],
            static[NUM_REPLICA_FETCHERS], static[TIME_SCALE_KEY]) == (str(2 * MiB), str(4 * MiB), "3", "1")
    # 2 MiB per 50 ms round is 40 MiB/s a partition; with 3 threads no response limit binds
    threads = [fetcher_id("t", i, 3) for i in range(4)]
    assert max(threads.count(k) for k in range(3)) * 2 <= 4
    assert seconds_until_done(engine) == pytest.approx(20 / 40, abs=engine.tick)
    assert Engine.from_json(json.loads(json.dumps(engine.to_json()))).fetch == fetch


def test_without_fetch_limits_only_the_network_bounds_catch_up() -> None:
    engine = fan_in(40, 50 * MiB, fetch=NO_FETCH_LIMITS, network_bps=4000 * MiB)
    assert seconds_until_done(engine) == pytest.approx(40 * 50 / 4000, rel=0.05)


@pytest.mark.parametrize("text, expected", [("", 0), ("t", 116), ("hello", 99162322),
                                            ("payments-eu", None), ("żółw", None)])
def test_java_string_hash_and_fetcher_ids_match_the_model(text: str, expected: int | None) -> None:
    from kreassign.cluster.model import Broker, ClusterState, PartitionInfo
    from kreassign.cluster import java_order
    from kreassign.predict import model

    assert java_string_hash(text) == java_order.java_string_hash(text)
    if expected is not None:
        assert java_string_hash(text) == expected
    if text:
        parts = [PartitionInfo(text, i, (1,), 1, (1,), 0, 0.0) for i in range(50)]
        state = ClusterState.from_partitions([Broker(1, None)], parts)
        for n in (1, 3, 7):
            assert [fetcher_id(text, i, n) for i in range(50)] == model.fetcher_ids(state, np.arange(50), n).tolist()


def test_fetch_wait_and_backoff_default_to_kafkas_and_old_states_load() -> None:
    fetch = FetchConfig()
    assert (fetch.wait_max_s, fetch.backoff_s) == (0.5, 1.0)  # replica.fetch.wait.max.ms, .backoff.ms
    old = {k: v for k, v in fetch.to_json().items() if k not in ("wait_max_s", "backoff_s")}
    assert FetchConfig.from_json(old) == fetch
    assert FetchConfig.from_json(FetchConfig(wait_max_s=0.2, backoff_s=3.0).to_json()).backoff_s == 3.0


def test_tick_listeners_hear_every_tick() -> None:
    engine = two_brokers(10 * MB)
    heard: list[float] = []
    engine.tick_listeners.append(heard.append)
    engine.advance(0.35)
    assert heard == pytest.approx([0.1, 0.2, 0.3, 0.35])


def test_caught_up_replicas_leave_the_flow_table_without_a_rebuild() -> None:
    # 1,200 small moves finish first; the table drops them in place and the 300 big ones go on
    engine = fan_in(1500, 0.0, network_bps=1e12)
    for i, p in enumerate(engine.rows):
        engine.log_end[p.row] = 50 * MiB if i % 5 == 0 else 1 * MiB
    engine.config_changed()
    engine.advance(engine.tick)
    table = engine.replication.table
    engine.advance(2.0)  # 1,000 MiB/s shared by 1,500 partitions: the small ones are done by 1.5 s
    assert engine.replication.table is table  # never rebuilt
    assert sum(p.reassigning for p in engine.rows) == 300 and len(table.part) == 300
    big = engine.rows[5]
    size = engine.replica_size(big, 9)
    assert 0 < size < 50 * MiB
    engine.replication.flush()
    assert big.lagging[9] == pytest.approx(size, abs=1.0)
    assert seconds_until_done(engine) < 60


def test_bad_fetch_configs_are_refused() -> None:
    for bad in ({"partition_max_bytes": 0}, {"response_max_bytes": -1}, {"num_fetchers": 0}, {"round_s": -0.1},
                {"wait_max_s": 0}, {"backoff_s": float("inf")}):
        with pytest.raises(ValueError):
            FetchConfig(**bad)  # type: ignore[arg-type]
