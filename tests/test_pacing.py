"""Waves: per-broker slots, byte budget, order, and the Pacer's journaled submissions."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_cluster import FakeCluster
from kreassign.cluster.errors import InputError
from kreassign.cluster.model import PartitionTarget, Reassignment, TopicPartition
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kreassign.execute.journal import JournalStore
from kreassign.execute.pacing import (
    PaceLimits,
    Pacer,
    PendingPartition,
    Slots,
    in_flight_slots,
    next_wave,
    order_pending,
)


def pending(p: int, leader: int, adding: tuple[int, ...], size: int = 100) -> PendingPartition:
    return PendingPartition(PartitionTarget("t", p, (leader, *adding)), leader, adding, size, p)


def names(wave: list[PendingPartition]) -> list[int]:
    return [p.target.partition for p in wave]


def test_order() -> None:
    items = [pending(0, 1, (2,), 300), pending(1, 1, (2,), 100), pending(2, 1, (2,), 200)]
    assert names(order_pending(items, "small-first")) == [1, 2, 0]
    assert names(order_pending(items, "large-first")) == [0, 2, 1]
    assert names(order_pending(items, "plan")) == [0, 1, 2]


def test_one_move_per_broker_lets_later_partitions_pass() -> None:
    items = [pending(0, 1, (3,)), pending(1, 1, (4,)), pending(2, 2, (4,)), pending(3, 2, (3,))]
    wave = next_wave(items, Slots(), PaceLimits(max_moves_per_broker=1))
    # 0: 1->3 fits; 1: broker 1 already sends; 2: 2->4 fits; 3: 2 sends and 3 receives already.
    assert names(wave) == [0, 2]


def test_in_flight_moves_hold_slots() -> None:
    tp = TopicPartition("x", 0)
    slots = in_flight_slots({tp: Reassignment((5, 3, 6), adding=(3,), removing=(6,))}, {tp: 5}, {tp: 1000})
    assert slots == Slots({5: 1}, {3: 1}, 1000)
    wave = next_wave([pending(0, 1, (3,)), pending(1, 2, (4,))], slots, PaceLimits(max_moves_per_broker=1))
    assert names(wave) == [1]


def test_byte_budget_is_not_passed_and_a_big_partition_runs_alone() -> None:
    items = [pending(0, 1, (3,), 60), pending(1, 2, (4,), 60), pending(2, 5, (6,), 10)]
    assert names(next_wave(items, Slots(), PaceLimits(max_inflight_bytes=100))) == [0]
    big = [pending(0, 1, (3,), 500), pending(1, 2, (4,), 10)]
    assert names(next_wave(big, Slots(), PaceLimits(max_inflight_bytes=100))) == [0]
    assert names(next_wave(big, Slots({7: 1}, {8: 1}, 50), PaceLimits(max_inflight_bytes=100))) == []


def test_rf_change_above_the_cap_starts_on_an_idle_broker() -> None:
    wave = next_wave([pending(0, 1, (3, 4)), pending(1, 1, (5,))], Slots(), PaceLimits(max_moves_per_broker=1))
    assert names(wave) == [0]


def test_reorders_always_go() -> None:
    wave = next_wave([pending(0, 1, (3,)), pending(1, 1, ())], Slots({1: 1}, {}, 0), PaceLimits(max_moves_per_broker=1))
    assert names(wave) == [1]


def test_limits_are_validated() -> None:
    with pytest.raises(InputError, match="at least 1"):
        PaceLimits(max_moves_per_broker=0)
    with pytest.raises(InputError, match="positive"):
        PaceLimits(max_inflight_bytes=0)


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster((1, 2, 3, 4))
    fake.add_topic("t", [[1, 2], [1, 2], [2, 1]])
    fake.broker_configs[3][LEADER_RATE] = "777"  # the operator's own value, to be restored later
    return fake


def run_step(pacer: Pacer, fake: FakeCluster) -> object:
    return pacer.step(fake.list_reassignments(), {p.tp: p for p in fake.describe_topics()})


def test_pacer_submits_in_waves_and_journals(cluster: FakeCluster, tmp_path: Path) -> None:
    targets = [PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (1, 4)), PartitionTarget("t", 2, (2, 3))]
    store = JournalStore(tmp_path)
    pacer = Pacer(cluster, targets, PaceLimits(max_moves_per_broker=1), leader_rate=5000, follower_rate=6000,
                  store=store)
    pacer.start()
    wave = run_step(pacer, cluster)
    # t-0 (1->3) goes; t-1 waits for broker 1; t-2 (2->3) waits for broker 3.
    assert wave.partitions == (TopicPartition("t", 0),)  # type: ignore[attr-defined]
    assert cluster.topic_configs["t"] == {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}
    assert cluster.broker_configs[3] == {LEADER_RATE: "5000", FOLLOWER_RATE: "6000"}
    assert run_step(pacer, cluster) is None  # nothing fits while t-0 moves
    cluster.complete(TopicPartition("t", 0))
    wave = run_step(pacer, cluster)
    assert wave.partitions == (TopicPartition("t", 1), TopicPartition("t", 2))  # type: ignore[attr-defined]
    # Lists follow the moves in flight: t-0 is done, so only t-1 and t-2 are listed.
    assert cluster.topic_configs["t"] == {LEADER_REPLICAS: "1:1,1:2,2:1,2:2", FOLLOWER_REPLICAS: "1:4,2:3"}
    assert pacer.finished
    journal = store.find(cluster.cluster_id, targets)
    assert journal is not None and journal.state == "submitted"
    assert journal.submitted == [TopicPartition("t", p) for p in range(3)]
    assert journal.previous_brokers[3][LEADER_RATE] == "777"
    steps = [(s.step, s.status) for s in journal.steps]
    assert ("wave 1: submit", "done") in steps and ("wave 2: submit", "done") in steps


def test_pacer_resumes_from_its_journal(cluster: FakeCluster, tmp_path: Path) -> None:
    targets = [PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (1, 4))]
    store = JournalStore(tmp_path)
    first = Pacer(cluster, targets, PaceLimits(max_moves_per_broker=1), store=store)
    first.start()
    run_step(first, cluster)
    again = Pacer(cluster, targets, PaceLimits(max_moves_per_broker=1), store=store)
    again.start()  # the first wave is still running: no "existing assignment" refusal
    assert [p.tp for p in again.pending] == [TopicPartition("t", 1)]


def test_unthrottled_pacer_sets_no_configs(cluster: FakeCluster) -> None:
    pacer = Pacer(cluster, [PartitionTarget("t", 0, (1, 3))], PaceLimits(max_moves_per_broker=2))
    pacer.start()
    run_step(pacer, cluster)
    assert cluster.topic_configs["t"] == {} and cluster.list_reassignments()


def test_next_wave_previews_what_step_submits(cluster: FakeCluster) -> None:
    targets = [PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (1, 4)), PartitionTarget("t", 2, (2, 3))]
    pacer = Pacer(cluster, targets, PaceLimits(max_moves_per_broker=1))
    pacer.start()
    cluster.calls.clear()
    preview = pacer.next_wave(cluster.list_reassignments(), {p.tp: p for p in cluster.describe_topics()})
    assert [p.tp for p in preview] == [TopicPartition("t", 0)] and "alter_reassignments" not in cluster.calls
    wave = run_step(pacer, cluster)
    assert wave.partitions == (TopicPartition("t", 0),)  # type: ignore[attr-defined]
    infos = {p.tp: p for p in cluster.describe_topics()}
    assert pacer.next_wave(cluster.list_reassignments(), infos) == []  # t-0 holds brokers 1 and 3
    cluster.complete()
    assert [p.tp for p in pacer.next_wave(cluster.list_reassignments(), infos)] == [
        TopicPartition("t", 1), TopicPartition("t", 2)]


def test_pacer_taken_up_again_keeps_its_journal_state_and_first_values(cluster: FakeCluster, tmp_path: Path) -> None:
    targets = [PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (1, 4))]
    store = JournalStore(tmp_path)
    first = Pacer(cluster, targets, PaceLimits(max_moves_per_broker=1), leader_rate=5000, store=store)
    first.start()
    run_step(first, cluster)  # broker 3 now has our 5000
    again = Pacer(cluster, targets, PaceLimits(max_moves_per_broker=1), leader_rate=5000, store=store)
    again.start()
    journal = store.find(cluster.cluster_id, targets)
    assert journal is not None and journal.state == "submitted" and journal.path == again.journal.path  # type: ignore[union-attr]
    assert journal.previous_brokers[3][LEADER_RATE] == "777"  # the operator's, not ours
    assert journal.options["paced"] == {"max_moves_per_broker": 1, "max_inflight_bytes": None, "order": "plan"}
