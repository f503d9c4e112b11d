"""Auto-throttle: headroom and deadline proposals, bounds, hysteresis and pacing of changes."""
from __future__ import annotations

import numpy as np
import pytest

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import Broker, PartitionInfo, TopicPartition
from kreassign.execute.auto_throttle import (
    AutoThrottlePolicy,
    WriteRateMeter,
    client_traffic_of,
    deadline_rates,
    decide,
    headroom_rates,
)
from kreassign.execute.live_eta import build_live_model
from kreassign.execute.progress import MoveKey, MoveSample, ProgressTracker, Sample
from kreassign.execute.live_throttle import BrokerThrottle, ThrottleView, TopicThrottle
from kreassign.predict.model import FetchLimits

MB = 1_000_000


def test_policy_needs_a_goal_and_sane_bounds() -> None:
    with pytest.raises(InputError, match="--target-headroom or --deadline"):
        AutoThrottlePolicy()
    with pytest.raises(InputError, match="--min-rate"):
        AutoThrottlePolicy(target_headroom=0.3, min_rate=10, max_rate=5)
    assert AutoThrottlePolicy(target_headroom=0.3, min_rate=5, max_rate=50).clamp(1) == 5


def test_headroom_rates_by_hand() -> None:
    policy = AutoThrottlePolicy(target_headroom=0.3, min_rate=1 * MB, max_rate=60 * MB)
    rates = headroom_rates(policy, [1, 2], {1: (100 * MB, 100 * MB), 2: (100 * MB, 100 * MB)},
                           client_in={1: 20 * MB, 2: 69.5 * MB}, client_out={1: 50 * MB, 2: 0.0},
                           leader_base={1: 2 * MB})
    # Broker 1: 70 - 50 = 20 MB/s to send, plus 2 of in-sync share; 70 - 20 = 50 to receive.
    # Broker 2: sends 70 but --max-rate caps it at 60; 0.5 MB/s to receive is raised to --min-rate.
    assert rates == {1: (22 * MB, 50 * MB), 2: (60 * MB, 1 * MB)}
    with pytest.raises(InputError, match="--network-capacity"):
        headroom_rates(policy, [3], {}, {}, {}, {})


def test_decide_hysteresis_and_interval() -> None:
    policy = AutoThrottlePolicy(target_headroom=0.3, change_threshold=0.1, min_interval_s=60)
    current = {1: (10 * MB, 10 * MB), 2: (10 * MB, None)}
    proposed = {1: (10.5 * MB, 12 * MB), 2: (9.5 * MB, 8 * MB)}
    decision = decide(policy, 100.0, None, current, proposed, "why")  # type: ignore[arg-type]
    assert decision is not None
    # Leader of 1 (+5%) and 2 (-5%) stay; follower of 1 (+20%) and the unset one of 2 change.
    assert decision.rates == {1: (10 * MB, 12 * MB), 2: (10 * MB, 8 * MB)}
    assert decision.previous == {1: (10 * MB, 10 * MB), 2: (10 * MB, None)}
    assert decide(policy, 130.0, 100.0, current, proposed, "why") is None  # type: ignore[arg-type]
    assert decide(policy, 200.0, 100.0, {1: (10 * MB, 12 * MB)}, {1: (10.5 * MB, 12 * MB)}, "x") is None  # type: ignore[arg-type]


def test_write_rate_meter_and_client_traffic() -> None:
    meter = WriteRateMeter()
    tp = TopicPartition("t", 0)
    meter.update(0, {tp: 0})
    meter.update(10, {tp: 20 * MB})
    assert meter.rates() == {tp: pytest.approx(2 * MB)}
    into, out = client_traffic_of([Broker(1), Broker(2)], [PartitionInfo("t", 0, (1, 2), 1, (1, 2))],
                                  meter.rates(), consumer_fanout=3.0)
    assert into == {1: pytest.approx(2 * MB), 2: pytest.approx(2 * MB)}
    assert out == {1: pytest.approx(8 * MB), 2: 0.0}  # 2 to the follower, 6 to consumers


def live_one_move(lag_at_10s: int) -> object:
    tracker = ProgressTracker()
    key = MoveKey("t", 0, 3)
    tracker.update(Sample(0, (MoveSample(key, 1, 0, 100 * MB),)))
    view = tracker.update(Sample(10, (MoveSample(key, 1, 100 * MB - lag_at_10s + 10 * MB, 110 * MB),)))
    throttles = ThrottleView((BrokerThrottle(1, 5 * MB, 5 * MB), BrokerThrottle(3, 5 * MB, 5 * MB)),
                             (TopicThrottle("t", "0:1", "0:3"),))
    return build_live_model(view, {TopicPartition("t", 0): PartitionInfo("t", 0, (1, 3), 1, (1,))}, throttles, [1, 3])


def test_deadline_rate_finishes_in_time_with_margin() -> None:
    live = live_one_move(lag_at_10s=90 * MB)  # 90 MB left, writes of 1 MB/s
    policy = AutoThrottlePolicy(deadline_s=110.0, min_rate=1 * MB)
    rates, reason = deadline_rates(policy, live, now_s=10.0)  # type: ignore[arg-type]
    # 100 s left, aim at 90 s: 90 MB / 90 s + 1 MB/s of writes = 2 MB/s on both ends, of what
    # fetches get of a throttle (FetchLimits.follower_share: the configured rate is a bit higher)
    got = [r * float(FetchLimits().follower_share(np.array(r))) for r in (rates[1][0], rates[3][1])]
    assert got == pytest.approx([2 * MB, 2 * MB], rel=3e-3)
    assert reason == "to finish by the deadline"
    capped, reason = deadline_rates(AutoThrottlePolicy(deadline_s=20.0, max_rate=3 * MB), live, 10.0)  # type: ignore[arg-type]
    assert capped[1] == (3 * MB, 3 * MB) and "cannot be met within --max-rate" in reason
    held, reason = deadline_rates(policy, live, 10.0, cap={1: (1_500_000, None)})  # type: ignore[arg-type]
    assert held[1][0] == 1_500_000 and "headroom" in reason
