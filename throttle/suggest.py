"""`throttle suggest`: the highest throttles that keep client impact bounded, and the deadline.

Impact is measured against each broker's network capacity. With `max_impact` P, catch-up
traffic may take at most P of a broker's capacity, and never more than what client traffic
(produce into leaders, follower replication, consumers reading from leaders) leaves free:

    catch-up budget = max(0, min(P x capacity, capacity - client traffic))    per direction

A quota also counts the in-sync replication of the partitions in the throttle lists (Kafka
counts every byte of a listed partition), which is already part of client traffic, so the
suggested leader rate is the send budget plus that in-sync share; the follower rate is the
receive budget (new replicas are not in sync). The replication model then says when the plan
finishes at those rates, and, when that misses the deadline, what would reach it: a higher
rate (and the impact it implies), more concurrency, or nothing but a different plan, naming the
brokers that bound the finish.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import ClusterState, PartitionTarget, WriteRates
from kreassign.cluster.units import format_duration, format_rate
from kreassign.cluster.write_sample import rates_to_dict
from kreassign.planner.diff import diff_plan
from kreassign.throttle.replication_model import (
    INF,
    Admission,
    Critical,
    FetchLimits,
    ModelInput,
    client_traffic,
    from_moves,
    simulate,
)

_SEARCH_STEPS = 14


@dataclass(frozen=True)
class SuggestRequest:
    """What the operator allows: impact share, optional deadline and concurrency."""

    max_impact: float
    deadline_s: float | None = None
    max_moves_per_broker: int | None = None
    network_capacity: tuple[float, float] | None = None
    """(in, out) bytes/s for brokers whose capacity the state does not know"""
    fetch: FetchLimits | None = None
    tolerance: float = 0.01

    def __post_init__(self) -> None:
        if not 0 < self.max_impact <= 1:
            raise InputError("--max-impact must be above 0% and at most 100%")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise InputError("--deadline must be in the future")


@dataclass(frozen=True)
class BrokerSuggestion:
    """One broker's capacities, client traffic, the bytes it moves, and its suggested rates."""

    broker: int
    capacity_in: float
    capacity_out: float
    client_in: float
    client_out: float
    sends: float
    receives: float
    leader_rate: int
    follower_rate: int
    in_sync_base: float
    """in-sync replication of moving partitions that the leader quota counts"""

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "capacity_in_bps": self.capacity_in, "capacity_out_bps": self.capacity_out,
                "client_in_bps": round(self.client_in, 3), "client_out_bps": round(self.client_out, 3),
                "sends_bytes": int(self.sends), "receives_bytes": int(self.receives),
                "leader_rate": self.leader_rate, "follower_rate": self.follower_rate,
                "in_sync_base_bps": round(self.in_sync_base, 3)}


@dataclass(frozen=True)
class Remedy:
    """One way to reach the deadline, or why none exists."""

    kind: str
    """"rate", "concurrency", "bottleneck" or "unreachable"."""
    text: str
    value: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "value": self.value}


@dataclass(frozen=True)
class Suggestion:
    """The suggested rates and what they mean for the deadline."""

    brokers: tuple[BrokerSuggestion, ...]
    leader_rate: int
    """one leader rate for every sender (the smallest per-broker one), for Kafka's --throttle"""
    follower_rate: int
    eta_s: float
    """finish with the per-broker rates"""
    eta_uniform_s: float
    """finish with the single leader and follower rate on every broker"""
    max_impact: float
    deadline_s: float | None = None
    critical: tuple[Critical, ...] = ()
    remedies: tuple[Remedy, ...] = ()
    warnings: tuple[str, ...] = ()
    write_rates: WriteRates | None = None
    """where the write rates behind client traffic and the ETAs came from; None: unknown"""

    @property
    def reachable(self) -> bool | None:
        return None if self.deadline_s is None else self.eta_s <= self.deadline_s

    def to_dict(self) -> dict[str, Any]:
        def secs(v: float) -> float | None:
            return None if math.isinf(v) else round(v, 3)

        return {"max_impact": self.max_impact, "leader_rate": self.leader_rate, "follower_rate": self.follower_rate,
                "eta_s": secs(self.eta_s), "eta_uniform_s": secs(self.eta_uniform_s),
                "deadline_s": self.deadline_s, "reachable": self.reachable,
                "brokers": [b.to_dict() for b in self.brokers],
                "critical": [c.to_dict() for c in self.critical],
                "remedies": [r.to_dict() for r in self.remedies], "warnings": list(self.warnings),
                "write_rates": rates_to_dict(self.write_rates)}


def _capacities(state: ClusterState, request: SuggestRequest) -> tuple[np.ndarray, np.ndarray]:
    fallback = request.network_capacity
    cap_in, cap_out, missing = [], [], []
    for b in state.brokers:
        cin = b.network_in_bps if b.network_in_bps is not None else (fallback[0] if fallback else None)
        cout = b.network_out_bps if b.network_out_bps is not None else (fallback[1] if fallback else None)
        if cin is None or cout is None:
            missing.append(b.id)
        cap_in.append(cin or 0.0)
        cap_out.append(cout or 0.0)
    if missing:
        raise InputError(f"the network capacity of broker(s) {','.join(map(str, missing))} is unknown: give "
                         "--network-capacity 125MB/s, or a snapshot with network_in_bps/network_out_bps")
    return np.asarray(cap_in, dtype=np.float64), np.asarray(cap_out, dtype=np.float64)


def impact_budgets(cap_in: np.ndarray, cap_out: np.ndarray, client_in: np.ndarray, client_out: np.ndarray,
                   max_impact: float) -> tuple[np.ndarray, np.ndarray]:
    """Catch-up bytes/s each broker may receive and send: within P of capacity and what clients leave."""
    budget_in = np.maximum(np.minimum(max_impact * cap_in, cap_in - client_in), 0.0)
    budget_out = np.maximum(np.minimum(max_impact * cap_out, cap_out - client_out), 0.0)
    return budget_in, budget_out


def _admission(inp: ModelInput, max_moves: int | None) -> Admission | None:
    if max_moves is None:
        return None
    # The order the pacer uses by default: the plan's.
    return Admission(np.arange(len(inp)), max_moves_per_broker=max_moves)


def suggest_throttle(state: ClusterState, targets: Sequence[PartitionTarget], request: SuggestRequest) -> Suggestion:
    """Suggest leader and follower rates for a plan, and check a deadline with the model.

    Raises:
        InputError: the plan does not fit the cluster, or broker capacities are unknown.
    """
    moves = diff_plan(state, list(targets)).moves
    cap_in, cap_out = _capacities(state, request)
    client_in, client_out = client_traffic(state)
    budget_in, budget_out = impact_budgets(cap_in, cap_out, client_in, client_out, request.max_impact)
    base_inp = from_moves(state, moves, fetch=request.fetch)
    base_inp = replace(base_inp, network_in=cap_in, network_out=cap_out, client_in=client_in, client_out=client_out)
    leader_rates = np.floor(budget_out + base_inp.leader_base)
    follower_rates = np.floor(budget_in + base_inp.follower_base)
    ids = [b.id for b in state.brokers]
    pos = np.searchsorted(np.asarray(base_inp.broker_ids), ids)
    known = base_inp.source >= 0
    sends = np.bincount(base_inp.source[known], weights=base_inp.bytes[known], minlength=len(ids))
    receives = np.bincount(base_inp.dest, weights=base_inp.bytes, minlength=len(ids))
    involved = [i for i in range(len(ids)) if sends[pos[i]] > 0 or receives[pos[i]] > 0]
    brokers = tuple(BrokerSuggestion(
        ids[i], float(cap_in[i]), float(cap_out[i]), float(client_in[i]), float(client_out[i]),
        float(sends[pos[i]]), float(receives[pos[i]]), int(leader_rates[pos[i]]), int(follower_rates[pos[i]]),
        float(base_inp.leader_base[pos[i]])) for i in involved)
    senders = [b.leader_rate for b in brokers if b.sends > 0]
    receivers = [b.follower_rate for b in brokers if b.receives > 0]
    uniform_l = min(senders, default=0)
    uniform_f = min(receivers, default=0)
    per_broker = base_inp.with_rates(leader_rate=leader_rates, follower_rate=follower_rates)
    admission = _admission(base_inp, request.max_moves_per_broker)
    result = simulate(per_broker, admission=admission, tolerance=request.tolerance)
    uniform = simulate(base_inp.with_rates(leader_rate=float(uniform_l), follower_rate=float(uniform_f)),
                       admission=admission, tolerance=request.tolerance) if len(moves) else result
    warnings = _warnings(brokers, result.makespan)
    remedies: tuple[Remedy, ...] = ()
    if request.deadline_s is not None and result.makespan > request.deadline_s:
        remedies = _remedies(base_inp, admission, request, result.makespan, result.critical)
    return Suggestion(brokers, uniform_l, uniform_f, result.makespan, uniform.makespan, request.max_impact,
                      request.deadline_s, result.critical, remedies, warnings, state.rates_origin())


def _warnings(brokers: Sequence[BrokerSuggestion], makespan: float) -> tuple[str, ...]:
    out = []
    for b in brokers:
        if b.sends > 0 and b.leader_rate <= b.in_sync_base:
            out.append(f"broker {b.broker} has no send capacity left for moves: its client traffic already "
                       f"uses {format_rate(b.client_out)} of {format_rate(b.capacity_out)}")
        if b.receives > 0 and b.follower_rate <= 0:
            out.append(f"broker {b.broker} has no receive capacity left for moves: its client traffic already "
                       f"uses {format_rate(b.client_in)} of {format_rate(b.capacity_in)}")
    if math.isinf(makespan):
        out.append("at these rates some moves never finish: their partitions take more writes than their "
                   "share of the throttle")
    return tuple(out)


def finish_at_rate(inp: ModelInput, rate: float, admission: Admission | None, tolerance: float) -> float:
    """When the plan finishes with `rate` of catch-up on every broker (plus the in-sync share)."""
    return simulate(inp.with_rates(leader_rate=rate + inp.leader_base, follower_rate=rate + inp.follower_base),
                    admission=admission, tolerance=tolerance).makespan


def rate_for_deadline(inp: ModelInput, deadline_s: float, *, admission: Admission | None = None,
                      low: float = 1.0, high: float | None = None, tolerance: float = 0.01) -> float | None:
    """The smallest catch-up rate (same on every broker) that finishes within `deadline_s`, to
    within 1/2^14 of the searched range in log scale; None if even `high` does not.

    Relies on the model's monotonicity: a higher rate never finishes later.
    """
    top = high if high is not None else float(np.max(np.minimum(inp.network_in, inp.network_out), initial=0.0))
    if not math.isfinite(top) or top <= 0:
        top = 1e12
    if finish_at_rate(inp, top, admission, tolerance) > deadline_s:
        return None
    lo, hi = max(low, 1.0), top
    if finish_at_rate(inp, lo, admission, tolerance) <= deadline_s:
        return lo
    for _ in range(_SEARCH_STEPS):
        mid = math.sqrt(lo * hi)
        if finish_at_rate(inp, mid, admission, tolerance) <= deadline_s:
            hi = mid
        else:
            lo = mid
    return hi


def _remedies(inp: ModelInput, admission: Admission | None, request: SuggestRequest, eta: float,
              critical: Sequence[Critical]) -> tuple[Remedy, ...]:
    assert request.deadline_s is not None
    deadline = request.deadline_s
    out: list[Remedy] = []
    bottlenecks = ", ".join(f"broker {c.broker} ({c.limit.label}, {c.moves} move(s))" for c in critical[:3]
                            if c.broker is not None)
    unthrottled = simulate(inp, admission=admission, tolerance=request.tolerance).makespan
    if unthrottled > deadline:
        if admission is not None and simulate(inp, tolerance=request.tolerance).makespan <= deadline:
            out.append(_concurrency(inp, request, deadline))
        else:
            out.append(Remedy("unreachable", f"not reachable at any throttle: even unthrottled the plan takes "
                                             f"{format_duration(unthrottled)}, bound by the network and fetch limits",
                              unthrottled))
    else:
        rate = rate_for_deadline(inp, deadline, admission=admission, tolerance=request.tolerance)
        if rate is not None:
            cap = np.minimum(inp.network_in, inp.network_out)
            worst = float(np.max(np.where(cap > 0, rate / cap, 0.0), initial=0.0))
            out.append(Remedy("rate", f"a catch-up rate of {format_rate(math.ceil(rate))} on every broker would "
                                      f"finish in time, using up to {_share(worst, request.max_impact)} of a broker's capacity "
                                      f"(above the allowed {request.max_impact:.0%})", float(math.ceil(rate))))
        if admission is not None:
            out.append(_concurrency(inp, request, deadline))
    if bottlenecks:
        out.append(Remedy("bottleneck", f"the finish is bound by {bottlenecks}: move fewer bytes through these "
                                        "brokers, or allow them a higher rate"))
    return tuple(r for r in out if r is not None)


def _concurrency(inp: ModelInput, request: SuggestRequest, deadline: float) -> Remedy:
    start = request.max_moves_per_broker or 1
    for n in (start * 2, start * 4, start * 8, start * 16):
        adm = Admission(np.arange(len(inp)), max_moves_per_broker=n)
        eta = simulate(inp, admission=adm, tolerance=request.tolerance).makespan
        if eta <= deadline:
            return Remedy("concurrency", f"--max-moves-per-broker {n} would finish in {format_duration(eta)} at "
                                         "the network limit", float(n))
    return Remedy("concurrency", "no --max-moves-per-broker below "
                                 f"{start * 16} reaches the deadline; run the moves without a limit", None)


__all__ = ["INF", "BrokerSuggestion", "Remedy", "SuggestRequest", "Suggestion", "finish_at_rate",
           "impact_budgets", "rate_for_deadline", "suggest_throttle"]


def _share(value: float, limit: float) -> str:
    """`value` as a percentage with enough decimals to read as above `limit` (20.4%, not 20%)."""
    for decimals in range(0, 4):
        text = f"{value:.{decimals}%}"
        if round(value * 100, decimals) != round(limit * 100, decimals):
            return text
    return f"{value:.3%}"

