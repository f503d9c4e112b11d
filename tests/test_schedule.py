"""Batching schedules simulated by the replication model."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.predict.model import NO_FETCH_LIMITS, ModelInput
from kreassign.predict.schedule import admission_order, schedule_waves

MB = 1_000_000


def three_from_one(**kw: object) -> ModelInput:
    return ModelInput.build(broker_ids=[1, 2, 3], source=[1, 1, 1], dest=[2, 3, 2], bytes=[100 * MB] * 3,
                            leader_rate=10 * MB, fetch=NO_FETCH_LIMITS, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit, starts, finishes", [
    (None, [0, 0, 0], [30, 30, 30]),
    (1, [0, 10, 20], [10, 20, 30]),
    (2, [0, 0, 20], [20, 20, 30]),
])
def test_moves_per_broker(limit: int | None, starts: list[float], finishes: list[float]) -> None:
    s = schedule_waves(three_from_one(), max_moves_per_broker=limit, tolerance=0)
    assert s.start_s.tolist() == starts and s.finish_s.tolist() == pytest.approx(finishes)
    assert s.makespan == pytest.approx(30) and s.ratio_to_lower_bound == pytest.approx(1.0)


def test_a_slot_frees_at_the_pacers_next_poll_and_the_next_move_starts_after_its_start_up() -> None:
    # 10 s moves, one at a time: the first finishes at 10 s, a poll (every 4 s) sees it at 12 s,
    # the next copies from 12.5 s to 22.5 s, seen at 24 s, the last copies 24.5-34.5 s
    s = schedule_waves(three_from_one(), max_moves_per_broker=1, tolerance=0, poll_s=4.0, wave_start_s=0.5)
    assert s.start_s.tolist() == pytest.approx([0, 12.5, 24.5])
    assert s.finish_s.tolist() == pytest.approx([10, 22.5, 34.5])
    assert s.makespan == pytest.approx(34.5) and s.ratio_to_lower_bound == pytest.approx(34.5 / 30)
    # a finish on a poll (10 s) is seen by that poll, the next (21 s) by the poll at 30 s; with
    # no poll, only the start-up is added
    on_grid = schedule_waves(three_from_one(), max_moves_per_broker=1, tolerance=0, poll_s=10.0, wave_start_s=1.0)
    assert on_grid.start_s.tolist() == pytest.approx([0, 11, 31])
    assert schedule_waves(three_from_one(), max_moves_per_broker=1, tolerance=0,
                          wave_start_s=1.0).finish_s.tolist() == pytest.approx([10, 21, 32])


def test_a_late_slot_leaves_the_copy_share_of_the_finished_move_to_the_others() -> None:
    # two moves at once out of broker 1 (5 MB/s each); when the first (50 MB) is done at 10 s
    # the second (150 MB, 100 MB left) has the whole 10 MB/s at once, though the third waits for
    # the poll at 15 s: 50 MB left then; the two share 5 MB/s each until the third's 10 MB are
    # in at 17 s, and the second's last 40 MB take 4 s alone
    inp = ModelInput.build(broker_ids=[1, 2, 3], source=[1, 1, 1], dest=[2, 3, 2], bytes=[50 * MB, 150 * MB, 10 * MB],
                           leader_rate=10 * MB, fetch=NO_FETCH_LIMITS)
    s = schedule_waves(inp, max_moves_per_broker=2, tolerance=0, poll_s=15.0)
    assert s.start_s.tolist() == pytest.approx([0, 0, 15])
    assert s.finish_s.tolist() == pytest.approx([10, 21, 17]) and s.makespan == pytest.approx(21)


@pytest.mark.parametrize("poll, start", [(-1.0, 0.0), (0.0, -0.5), (float("inf"), 0.0)])
def test_a_poll_or_start_up_that_is_negative_or_infinite_is_refused(poll: float, start: float) -> None:
    with pytest.raises(InputError, match="poll interval"):
        schedule_waves(three_from_one(), max_moves_per_broker=1, poll_s=poll, wave_start_s=start)


def test_bytes_in_flight_hold_later_moves_back() -> None:
    s = schedule_waves(three_from_one(), max_inflight_bytes=150 * MB, tolerance=0)
    assert s.start_s.tolist() == [0, 10, 20]


def test_a_move_bigger_than_the_byte_budget_runs_alone() -> None:
    s = schedule_waves(three_from_one(), max_inflight_bytes=50 * MB, tolerance=0)
    assert s.start_s.tolist() == [0, 10, 20]


def test_with_heavy_writes_batching_beats_all_at_once_and_meets_its_own_bound() -> None:
    # All at once each gets 5 and gains 1/s: 100 s. One at a time: 100/6 each, since the pacer
    # drops a finished partition from the throttled lists; with one list for the whole plan the
    # first, now in sync, still takes 4 of the leader's 10: 100/6 then 100/2. A schedule's bound
    # charges each move's writes over its shortest copy, (200 + 2 x 4 x 100/6) / 10 = 200/6 s,
    # which one at a time meets (it once charged them from 0 to the end: 100 s, above both).
    inp = ModelInput.build(broker_ids=[1, 2, 3], source=[1, 1], dest=[2, 3], bytes=[100 * MB] * 2,
                           write_bps=[4 * MB] * 2, leader_rate=10 * MB, fetch=NO_FETCH_LIMITS)
    together = schedule_waves(inp, tolerance=0)
    apart = schedule_waves(inp, max_moves_per_broker=1, tolerance=0)
    one_list = schedule_waves(inp, max_moves_per_broker=1, tolerance=0, release_finished=False)
    assert together.makespan == pytest.approx(100.0)
    assert apart.makespan == pytest.approx(2 * 100 / 6)
    assert one_list.makespan == pytest.approx(100 / 6 + 50)
    assert together.lower.seconds == apart.lower.seconds == one_list.lower.seconds == pytest.approx(200 / 6)
    assert apart.ratio_to_lower_bound == pytest.approx(1.0) and one_list.ratio_to_lower_bound == pytest.approx(2.0)


def test_orders() -> None:
    inp = ModelInput.build(broker_ids=[1, 2, 3], source=[1, 1, 2, 1, 2], dest=[3, 3, 3, 2, 1],
                           bytes=[5, 1, 4, 2, 3])
    assert admission_order(inp, "plan").tolist() == [0, 1, 2, 3, 4]
    assert admission_order(inp, "small-first").tolist() == [1, 3, 4, 2, 0]
    assert admission_order(inp, "large-first").tolist() == [0, 2, 4, 3, 1]
    assert admission_order(inp, "broker-balanced").tolist() == [0, 2, 1, 4, 3]
    with pytest.raises(InputError, match="unknown order"):
        admission_order(inp, "random")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="at least 1"):
        schedule_waves(inp, max_moves_per_broker=0)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 3), st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 50)),
                                   min_size=1, max_size=12),
       st.sampled_from(["plan", "small-first", "large-first", "broker-balanced"]), st.sampled_from([0.0, 0.1]))
def test_limits_are_never_exceeded(limit: int, moves: list[tuple[int, int, int]], order: str, tolerance: float) -> None:
    src = np.array([m[0] for m in moves])
    dst = (src + np.array([m[1] for m in moves])) % 4
    inp = ModelInput.build(broker_ids=np.arange(4), source=src, dest=dst, bytes=[m[2] * MB for m in moves],
                           leader_rate=10 * MB, follower_rate=10 * MB)
    s = schedule_waves(inp, max_moves_per_broker=limit, order=order, tolerance=tolerance)  # type: ignore[arg-type]
    assert np.isfinite(s.finish_s).all()
    for t in np.unique(s.start_s):
        running = (s.start_s <= t) & (s.finish_s > t)
        assert np.bincount(src[running], minlength=4).max() <= limit
        assert np.bincount(dst[running], minlength=4).max() <= limit


def test_the_live_pacer_orders_partitions_like_the_model() -> None:
    from kreassign.cluster.model import PartitionTarget
    from kreassign.execute.pacing import PendingPartition, order_pending
    from kreassign.predict.schedule import start_order

    sizes = np.array([30, 10, 20, 10, 50])
    leaders = np.array([1, 1, 2, 3, 2])
    pending = [PendingPartition(PartitionTarget("t", i, (9,)), int(leaders[i]), (9,), int(sizes[i]), position=i)
               for i in range(5)]
    for order in ("plan", "small-first", "large-first", "broker-balanced"):
        live = [p.position for p in order_pending(reversed(pending), order)]  # type: ignore[arg-type]
        assert live == start_order(sizes, leaders, order).tolist()
