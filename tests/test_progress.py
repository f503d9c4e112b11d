"""Progress from replica sizes: fitted copy and write rates, lag, observed ETA, stalls."""
from __future__ import annotations

import math

import pytest

from kreassign.cluster.model import PartitionInfo, Reassignment, TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import LogDirReport, ReplicaLogDir
from kreassign.execute.progress import MoveKey, MoveSample, ProgressTracker, Sample, sample_moves

KEY = MoveKey("t", 0, 3)


def sample(at: float, copied: int | None, leader: int | None, key: MoveKey = KEY) -> Sample:
    return Sample(at, (MoveSample(key, 1, copied, leader),))


def test_sample_moves_pairs_new_replica_with_leader() -> None:
    tp = TopicPartition("t", 0)
    report = LogDirReport(replicas={
        TopicPartitionReplica("t", 0, 1): ReplicaLogDir("/d", 500, 0),
        TopicPartitionReplica("t", 0, 3): ReplicaLogDir("/d", 200, 0)})
    s = sample_moves(7.0, {tp: Reassignment((1, 3, 2), adding=(3,), removing=(2,))},
                     {tp: PartitionInfo("t", 0, (1, 3, 2), 1, (1, 2))}, report)
    assert s == Sample(7.0, (MoveSample(KEY, 1, 200, 500),))


def test_rates_lag_and_eta_from_two_samples() -> None:
    tracker = ProgressTracker()
    tracker.update(sample(0, 0, 1000))
    view = tracker.update(sample(10, 300, 1100))  # copies 30 B/s, writes 10 B/s
    (move,) = view.moves
    assert (move.copy_bps, move.write_bps, move.lag) == (30.0, 10.0, 800)
    assert move.eta_s == pytest.approx(800 / 20)
    assert move.fraction == pytest.approx(300 / 1100)
    assert view.throughput_bps == 30.0 and view.eta_s == pytest.approx(40.0)
    assert not move.stalled


def test_first_sample_has_no_rates() -> None:
    view = ProgressTracker().update(sample(0, 10, 100))
    assert view.moves[0].copy_bps is None and view.eta_s is None and view.throughput_bps is None


def test_lag_not_shrinking_is_stalled_after_the_window() -> None:
    tracker = ProgressTracker(stall_after_s=30)
    views = [tracker.update(sample(t, 10 * t, 1000 + 20 * t)) for t in range(0, 50, 10)]
    assert [v.moves[0].stalled for v in views] == [False, False, False, True, True]
    assert math.isinf(views[-1].moves[0].eta_s)  # type: ignore[arg-type]
    assert math.isinf(views[-1].eta_s)  # type: ignore[arg-type]


def test_finished_move_counts_as_copied() -> None:
    tracker = ProgressTracker()
    tracker.update(sample(0, 0, 1000))
    tracker.update(sample(10, 900, 1000))
    view = tracker.update(Sample(20, ()), pending_bytes=500)
    (move,) = view.moves
    assert move.done and move.fraction == 1.0 and move.copied == 1000
    assert (view.copied, view.total) == (1000, 1500)
    assert view.eta_s is None  # only pending bytes: nothing to extrapolate from


def test_unknown_sizes_are_skipped() -> None:
    tracker = ProgressTracker()
    tracker.update(sample(0, 0, 100))
    view = tracker.update(sample(5, None, None))
    assert view.moves[0].copied == 0 and view.moves[0].copy_bps is None


def test_write_rates_per_partition() -> None:
    tracker = ProgressTracker()
    for t in (0, 10, 20):
        tracker.update(sample(t, 5 * t, 100 + 4 * t))
    assert tracker.write_rates() == {TopicPartition("t", 0): pytest.approx(4.0)}
