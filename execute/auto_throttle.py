"""Auto-throttle: steer the rates of a running move toward a target headroom or a deadline.

Two goals, one loop (in `watch`):

* headroom H: keep H of each broker's network capacity free. Catch-up may use what client
  traffic leaves below (1 - H) x capacity; the leader rate adds the in-sync replication of the
  listed partitions, which the quota counts (as in `suggest`).
* deadline: the smallest catch-up rate, the same on every broker, with which the replication
  model finishes the remaining moves by the deadline (with a safety margin), capped by the
  headroom rates when both are given.

Changes are bounded (`min_rate`, `max_rate`) and damped: a side of a broker changes only when
the proposal differs from its current rate by more than `change_threshold`, and at most once
per `min_interval_s`. Pure: the watch loop applies decisions through `live_throttle`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, TopicPartition
from kreassign.execute.live_eta import LiveModel
from kreassign.execute.progress import _slope
from kreassign.predict.model import client_traffic
from kreassign.predict.suggest import rate_for_deadline

DEADLINE_MARGIN = 0.9
"""aim to finish by 90% of the time left, so a late slowdown does not miss the deadline"""

Rates = Mapping[int, tuple[int | None, int | None]]
"""broker -> (leader rate, follower rate); None: unthrottled"""


@dataclass(frozen=True)
class AutoThrottlePolicy:
    """What auto-throttle aims for, and how far and how often it may change the rates."""

    target_headroom: float | None = None
    deadline_s: float | None = None
    """seconds on the watch clock (from the start of the watch)"""
    min_rate: int = 1_000_000
    """Kafka's advice: keep replication throttles above 1 MB/s"""
    max_rate: int | None = None
    change_threshold: float = 0.10
    min_interval_s: float = 60.0
    consumer_fanout: float = 1.0
    """bytes read by consumers per byte produced, for the send side of client traffic"""
    max_impact: float | None = None
    """the bound on clients' produce p99 above its baseline (0.2 = 20%), measured by the brokers'
    metrics; steers the rates by `impact_throttle.impact_step`"""

    def __post_init__(self) -> None:
        if self.target_headroom is None and self.deadline_s is None and self.max_impact is None:
            raise InputError("--auto-throttle needs --max-impact, --target-headroom or --deadline")
        if self.target_headroom is not None and not 0 <= self.target_headroom < 1:
            raise InputError("--target-headroom must be at least 0% and below 100%")
        if self.min_rate < 0 or (self.max_rate is not None and self.max_rate < self.min_rate):
            raise InputError("--min-rate must be at least 0 and not above --max-rate")
        if not 0 <= self.change_threshold < 1 or self.min_interval_s < 0:
            raise InputError("the change threshold must be in [0, 1) and the interval not negative")

    def clamp(self, rate: float) -> int:
        top = self.max_rate if self.max_rate is not None else math.inf
        return int(min(max(rate, self.min_rate), top))

    def to_dict(self) -> dict[str, Any]:
        return {"target_headroom": self.target_headroom, "deadline_s": self.deadline_s,
                "max_impact": self.max_impact, "min_rate": self.min_rate,
                "max_rate": self.max_rate, "change_threshold": self.change_threshold,
                "min_interval_s": self.min_interval_s}


@dataclass(frozen=True)
class RateDecision:
    """Rates to set now, per broker, and why."""

    rates: Mapping[int, tuple[int | None, int | None]]
    previous: Mapping[int, tuple[int | None, int | None]]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"rates": {str(b): {"leader": r[0], "follower": r[1]} for b, r in sorted(self.rates.items())},
                "previous": {str(b): {"leader": r[0], "follower": r[1]} for b, r in sorted(self.previous.items())},
                "reason": self.reason}


class WriteRateMeter:
    """Write rates of partitions from successive leader sizes (least squares over a window)."""

    def __init__(self, window_s: float = 120.0) -> None:
        self.window_s = window_s
        self._points: dict[TopicPartition, list[tuple[float, float]]] = {}

    def update(self, at: float, leader_sizes: Mapping[TopicPartition, int]) -> None:
        for tp, size in leader_sizes.items():
            pts = self._points.setdefault(tp, [])
            pts.append((at, float(size)))
            while pts and pts[0][0] < at - self.window_s:
                pts.pop(0)

    def rates(self) -> dict[TopicPartition, float]:
        out = {}
        for tp, pts in self._points.items():
            slope = _slope(pts)
            if slope is not None:
                out[tp] = max(slope, 0.0)
        return out


def client_traffic_of(brokers: Sequence[Broker], partitions: Sequence[PartitionInfo],
                      write_rates: Mapping[TopicPartition, float], consumer_fanout: float
                      ) -> tuple[dict[int, float], dict[int, float]]:
    """Client bytes/s in and out per broker from observed write rates (consumers assumed to
    read `consumer_fanout` bytes per byte written, from the leader)."""
    parts = [PartitionInfo(p.topic, p.partition, p.replicas, p.leader, p.isr,
                           produce_bps=write_rates.get(p.tp, 0.0),
                           consume_bps=consumer_fanout * write_rates.get(p.tp, 0.0)) for p in partitions]
    state = ClusterState.from_partitions(brokers, parts)
    into, out = client_traffic(state)
    ids = state.broker_ids
    return {b: float(into[i]) for i, b in enumerate(ids)}, {b: float(out[i]) for i, b in enumerate(ids)}


def headroom_rates(policy: AutoThrottlePolicy, brokers: Sequence[int],
                   capacities: Mapping[int, tuple[float | None, float | None]],
                   client_in: Mapping[int, float], client_out: Mapping[int, float],
                   leader_base: Mapping[int, float]) -> dict[int, tuple[int | None, int | None]]:
    """Per broker, the rates that leave `target_headroom` of its capacity free.

    Raises:
        InputError: a broker's capacity is unknown.
    """
    assert policy.target_headroom is not None
    keep = 1.0 - policy.target_headroom
    out: dict[int, tuple[int | None, int | None]] = {}
    for b in brokers:
        cap_in, cap_out = capacities.get(b, (None, None))
        if cap_in is None or cap_out is None:
            raise InputError(f"the network capacity of broker {b} is unknown: give --network-capacity "
                             "(e.g. 125MB/s) for --target-headroom")
        send = max(keep * cap_out - client_out.get(b, 0.0), 0.0) + leader_base.get(b, 0.0)
        receive = max(keep * cap_in - client_in.get(b, 0.0), 0.0)
        out[b] = (policy.clamp(send), policy.clamp(receive))
    return out


def deadline_rates(policy: AutoThrottlePolicy, live: LiveModel, now_s: float,
                   cap: Rates | None = None) -> tuple[dict[int, tuple[int | None, int | None]], str]:
    """Per broker, the catch-up rate that finishes by the deadline (plus the in-sync share),
    capped by `cap`; and a sentence saying whether the deadline is still in reach."""
    assert policy.deadline_s is not None
    inp = live.inp
    ids = [int(b) for b in inp.broker_ids]
    left = (policy.deadline_s - now_s) * DEADLINE_MARGIN
    top = float(policy.max_rate) if policy.max_rate is not None else None
    rate = rate_for_deadline(inp, left, admission=live.admission, low=float(policy.min_rate), high=top) \
        if left > 0 else None
    reason = "to finish by the deadline"
    if rate is None:
        rate = top if top is not None else float(max(policy.min_rate, 1))
        reason = ("the deadline cannot be met within --max-rate; running at --max-rate"
                  if top is not None else "the deadline has passed; keeping the minimum rate")
    out: dict[int, tuple[int | None, int | None]] = {}
    for i, b in enumerate(ids):
        leader = policy.clamp(rate + float(inp.leader_base[i]))
        follower = policy.clamp(rate + float(inp.follower_base[i]))
        if cap is not None and b in cap:
            cl, cf = cap[b]
            if (cl is not None and cl < leader) or (cf is not None and cf < follower):
                reason = "the deadline needs more than the target headroom allows; holding the headroom"
            leader = min(leader, cl) if cl is not None else leader
            follower = min(follower, cf) if cf is not None else follower
        out[b] = (leader, follower)
    return out, reason


def _differs(current: int | None, proposed: int | None, threshold: float) -> bool:
    if proposed is None:
        return False
    if current is None or current <= 0:
        return True
    return abs(proposed - current) / current > threshold


def decide(policy: AutoThrottlePolicy, now_s: float, last_change_s: float | None, current: Rates,
           proposed: Rates, reason: str, *, involved: Sequence[int] | None = None) -> RateDecision | None:
    """The changes to make now, or None (too soon since the last change, or all within the
    hysteresis band). Only brokers in `involved` (default: all proposed) change; a side that
    stays within the band keeps its current value."""
    if last_change_s is not None and now_s - last_change_s < policy.min_interval_s:
        return None
    changes: dict[int, tuple[int | None, int | None]] = {}
    previous: dict[int, tuple[int | None, int | None]] = {}
    for b in sorted(involved if involved is not None else proposed):
        if b not in proposed:
            continue
        cur_l, cur_f = current.get(b, (None, None))
        new_l, new_f = proposed[b]
        move_l = _differs(cur_l, new_l, policy.change_threshold)
        move_f = _differs(cur_f, new_f, policy.change_threshold)
        if move_l or move_f:
            changes[b] = (new_l if move_l else cur_l, new_f if move_f else cur_f)
            previous[b] = (cur_l, cur_f)
    return RateDecision(changes, previous, reason) if changes else None


def leader_bases(live: LiveModel) -> dict[int, float]:
    return {int(b): float(v) for b, v in zip(live.inp.broker_ids, live.inp.leader_base) if v > 0}
