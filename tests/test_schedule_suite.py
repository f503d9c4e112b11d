"""Admission orders on the shapes of the schedule benchmark (bench/bench_schedule.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreassign.predict.model import FetchLimits, ModelInput
from kreassign.predict.schedule import ORDERS, admission_order, schedule_waves

MB = 1_000_000


def test_large_first_does_not_end_on_a_long_move_alone() -> None:
    # One partition fetches at most 5 MB/s (whole 16 KiB batches: 4,997,120 B/s); broker 1 sends 10 MB/s to three brokers, two at a
    # time. In plan order the 200 MB move starts last and runs alone at 5 MB/s for 40 s.
    inp = ModelInput.build(broker_ids=[1, 2, 3, 4], source=[1, 1, 1], dest=[2, 3, 4],
                           bytes=[100 * MB, 100 * MB, 200 * MB], leader_rate=10 * MB,
                           fetch=FetchLimits(partition_max_bytes=5 * MB, round_trip_s=1.0))
    # Fetches get q of the 10 MB/s leader throttle (FetchLimits.leader_share): its 0.5 s fetch
    # wait per 11 s span, and half a fetch of whole 16 KiB batches (305 of them, 4,997,120
    # bytes) over the bound per span (LEADER_GRANULARITY, real Kafka 4.4.0), times that fetch
    # over the 5 MB limit (the batch factor).
    plan = schedule_waves(inp, max_moves_per_broker=2, order="plan", tolerance=0)
    large = schedule_waves(inp, max_moves_per_broker=2, order="large-first", tolerance=0)
    q = float(inp.leader_quota[0])
    fetch = 305 * 16384
    assert q == pytest.approx(10 * MB * 11 / 11.5 * (1 + 0.5 * (fetch / (10 * MB)) / 11) * fetch / (5 * MB), rel=1e-9)
    assert plan.makespan == pytest.approx(100 * MB / (q / 2) + 200 * MB / fetch)  # alone: one fetch a second
    assert large.start_s.tolist() == pytest.approx([0, 100 * MB / (q / 2), 0])
    assert large.makespan == pytest.approx(400 * MB / q) and large.ratio_to_lower_bound == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), st.integers(1, 4), st.integers(0, 50), st.integers(0, 3)),
                min_size=0, max_size=15),
       st.sampled_from(ORDERS))
def test_every_order_is_a_permutation(moves: list[tuple[int, int, int, int]], order: str) -> None:
    src = np.array([m[0] for m in moves], dtype=np.int64)
    dst = (np.maximum(src, 0) + np.array([m[1] for m in moves], dtype=np.int64)) % 5
    dst = np.where(dst == src, (dst + 1) % 5, dst)
    inp = ModelInput.build(broker_ids=np.arange(5), source=src, dest=dst, bytes=[m[2] * MB for m in moves],
                           write_bps=[m[3] * 0.1 * MB for m in moves], leader_rate=MB, follower_rate=MB)
    prio = admission_order(inp, order)  # type: ignore[arg-type]
    assert sorted(prio.tolist()) == list(range(len(moves)))


def test_a_paced_schedule_at_the_default_tolerance_agrees_with_the_exact_model() -> None:
    # 100 moves into one broker from 20 others, 5 at a time: exactly the bound (the receiver is
    # always busy); the batched model once reported 1.4x it, starting queued moves late.
    rng = np.random.default_rng(0)
    inp = ModelInput.build(broker_ids=np.arange(21), source=rng.integers(1, 21, 100), dest=np.zeros(100, np.int64),
                           bytes=rng.uniform(50, 150, 100) * MB, leader_rate=10 * MB, follower_rate=10 * MB)
    exact = schedule_waves(inp, max_moves_per_broker=5, tolerance=0)
    assert exact.ratio_to_lower_bound == pytest.approx(1.0)
    assert schedule_waves(inp, max_moves_per_broker=5).makespan == pytest.approx(exact.makespan, rel=0.05)
