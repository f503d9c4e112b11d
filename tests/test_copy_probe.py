"""The calibration probe (`sandbox/copy_probe.py`): how a trace becomes copy rate / quota, the
throttle configs a scenario sets, and the emulator's run of a scenario."""
from __future__ import annotations

import pytest

from kreassign.sandbox.copy_probe import MB, Sample, Scenario, Trace, run_emulator, summarize, throttle_ops


def trace(samples: list[tuple[float, int, int, bool]], rate: float = 1 * MB) -> Trace:
    return Trace(Scenario(rate, "both", "idle", 30 * MB), "test", [Sample(*s) for s in samples])


def test_summary_of_a_copy_at_a_steady_rate() -> None:
    # 1.5 MB/s from t=1 s: 30 MB caught between the samples at 20.5 and 21 s (midpoint 20.75 s)
    points = [(t / 2, min(max(int((t / 2 - 1) * 1.5 * MB), 0), 30 * MB), 30 * MB, t / 2 < 21) for t in range(0, 46)]
    summary = summarize(trace(points))
    assert summary["caught_s"] == 20.75
    assert summary["copied_bytes"] == 30 * MB
    assert summary["copy_over_quota"] == round(30 / 20.75, 4)
    assert summary["steady_over_quota"] == pytest.approx(1.5)  # the slope after the first 12 s


def test_a_short_copy_has_no_steady_rate_and_an_unfinished_one_no_rate() -> None:
    short = summarize(trace([(0.0, 0, 30 * MB, True), (5.0, 10 * MB, 30 * MB, True), (10.0, 30 * MB, 30 * MB, False)]))
    assert short["caught_s"] == 7.5 and short["steady_over_quota"] is None
    assert short["copy_over_quota"] == round(30 / 7.5, 4)
    assert summarize(trace([(0.0, 0, 30 * MB, True), (5.0, 10 * MB, 30 * MB, True)]))["copy_over_quota"] is None


def test_a_written_move_is_done_when_the_reassignment_is() -> None:
    # the leader keeps growing; the follower is never seen level with it, the move ends by 10 s
    summary = summarize(trace([(0.0, 0, 30 * MB, True), (5.0, 15 * MB, 31 * MB, True), (10.0, 32 * MB, 33 * MB, False)]))
    assert summary["caught_s"] == 7.5 and summary["copied_bytes"] == 33 * MB  # the leader's log as it completed


def test_a_move_seen_complete_before_its_last_copy_holds_the_leader_log() -> None:
    # the sizes were read just before the reassignment completed, its listing just after
    summary = summarize(trace([(0.0, 0, 30 * MB, True), (10.0, 20 * MB, 30 * MB, False)]))
    assert summary["copied_bytes"] == 30 * MB and summary["copy_over_quota"] == round(30 / 5.0, 4)


def test_throttle_configs_are_the_ones_execute_sets() -> None:
    both = Scenario(2 * MB, "both", "idle", MB)
    assert throttle_ops(both, "t", 1, 2) == (
        {1: {"leader.replication.throttled.rate": "2000000"}, 2: {"follower.replication.throttled.rate": "2000000"}},
        {"t": {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}})
    assert throttle_ops(Scenario(2 * MB, "follower", "idle", MB), "t", 1, 2, clear=True) == (
        {2: {"follower.replication.throttled.rate": None}}, {"t": {"follower.replication.throttled.replicas": None}})
    assert throttle_ops(Scenario(2 * MB, "none", "idle", MB), "t", 1, 2) == ({}, {"t": {}})


def test_written_shapes_write_a_tenth_of_the_throttle() -> None:
    assert Scenario(10 * MB, "leader", "written", MB).write_bps == 1 * MB
    assert Scenario(50_000, "leader", "isr_written", MB).write_bps == 10_000  # at least 10 kB/s
    assert Scenario(10 * MB, "leader", "isr_idle", MB).write_bps == 0
    with pytest.raises(ValueError):
        Scenario(MB, "sideways", "idle", MB)


def test_the_emulator_copies_the_whole_partition_and_reports_it() -> None:
    result = run_emulator(Scenario(10 * MB, "both", "idle", 100 * MB))
    last = result.samples[-1]
    assert not last.reassigning and last.follower_bytes == last.leader_bytes == 100 * MB
    assert all(a.follower_bytes <= b.follower_bytes for a, b in zip(result.samples, result.samples[1:]))
    assert all(s.reassigning for s in result.samples[:-1])
    unthrottled = summarize(run_emulator(Scenario(10 * MB, "none", "idle", 100 * MB)))
    assert unthrottled["caught_s"] < summarize(result)["caught_s"]
