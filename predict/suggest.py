"""`throttle suggest`: the highest throttles that keep client impact bounded, and the deadline.

What "impact" means depends on what has been measured, and every suggestion says which bound it
used (`Suggestion.bound`):

* measured (`MeasuredImpact`: a canary run during the move against its baseline from before it):
  a broker whose clients' produce p99 rose by I while it carried catch-up traffic r gets the
  catch-up rate r x P / I, the rate at which the rise reaches the bound P if it grows in
  proportion to the catch-up traffic (the only relation one measured point supports: no rise
  without catch-up, I at r). Where clients were throttled or timed out, no rate above the current
  one is suggested; where the rise is nil or a side is unthrottled, the capacity bound below
  applies to that side;
* otherwise a share of each broker's network capacity: before a move nothing has measured its
  client impact, and latency is not a function of bandwidth share one could extrapolate from an
  idle baseline. `watch --auto-throttle --max-impact` bounds the measured impact while it runs.

With `max_impact` P as a capacity share, catch-up
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kreassign.cluster.client_latency import Impact
from kreassign.cluster.errors import InputError
from kreassign.cluster.model import ClusterState, PartitionTarget, WriteRates
from kreassign.cluster.units import Units, format_duration, format_rate
from kreassign.cluster.write_sample import rates_to_dict
from kreassign.planner.diff import diff_plan
from kreassign.predict.model import (
    INF,
    PACER_POLL_S,
    WAVE_START_S,
    Admission,
    Critical,
    FetchLimits,
    ModelInput,
    client_traffic,
    from_moves,
    simulate,
)

_SEARCH_STEPS = 14
BOUND = "network-capacity-share"
BOUND_NOTE = ("--max-impact bounds the moves' share of each broker's network capacity: no client measurement "
              "of the move exists before it starts (watch --auto-throttle --max-impact bounds measured "
              "produce p99 while it runs)")
MEASURED_BOUND = "measured-impact"
MEASURED_NOTE = ("--max-impact bounds the rise of the canary's produce p99 over its baseline, in proportion to "
                 "the catch-up traffic measured with it; brokers without a measured rise keep the capacity share")


@dataclass(frozen=True)
class MeasuredImpact:
    """Client impact measured while moves ran: per broker, the rise the canary saw over its
    baseline (`Impact`) and the leader and follower throttles in force then (None: unthrottled)."""

    source: str
    impacts: Mapping[int, Impact]
    rates: Mapping[int, tuple[int | None, int | None]]


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
    measured: MeasuredImpact | None = None
    """client impact measured during the move: the bound is on it rather than on capacity share"""
    units: Units = "decimal"
    """the unit system of the rates in the warnings and remedies"""

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
    impact: Impact | None = None
    """the measured impact that bounds its rates, if any"""

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "capacity_in_bps": _finite(self.capacity_in),
                "capacity_out_bps": _finite(self.capacity_out),
                "impact": None if self.impact is None else self.impact.to_dict(),
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
    measured: MeasuredImpact | None = None

    @property
    def bound(self) -> str:
        """What --max-impact bounded: MEASURED_BOUND or BOUND (capacity share)."""
        return MEASURED_BOUND if self.measured is not None else BOUND

    @property
    def bound_note(self) -> str:
        return MEASURED_NOTE if self.measured is not None else BOUND_NOTE

    @property
    def reachable(self) -> bool | None:
        return None if self.deadline_s is None else self.eta_s <= self.deadline_s

    def to_dict(self) -> dict[str, Any]:
        def secs(v: float) -> float | None:
            return None if math.isinf(v) else round(v, 3)

        bound = {"kind": self.bound, "note": self.bound_note}
        if self.measured is not None:
            bound["source"] = self.measured.source
        return {"max_impact": self.max_impact, "bound": bound,
                "leader_rate": self.leader_rate, "follower_rate": self.follower_rate,
                "eta_s": secs(self.eta_s), "eta_uniform_s": secs(self.eta_uniform_s),
                "deadline_s": self.deadline_s, "reachable": self.reachable,
                "brokers": [b.to_dict() for b in self.brokers],
                "critical": [c.to_dict() for c in self.critical],
                "remedies": [r.to_dict() for r in self.remedies], "warnings": list(self.warnings),
                "write_rates": rates_to_dict(self.write_rates)}


def _capacities(inp: ModelInput, fallback: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per broker, network capacity in and out: the cluster's (inf where unknown), else `fallback`."""
    if fallback is None:
        return inp.network_in, inp.network_out
    return (np.where(np.isinf(inp.network_in), fallback[0], inp.network_in),
            np.where(np.isinf(inp.network_out), fallback[1], inp.network_out))


def measured_rates(measured: MeasuredImpact, broker: int, max_impact: float, base: tuple[float, float]
                   ) -> tuple[float | None, float | None]:
    """The leader and follower rates at which the broker's measured impact reaches `max_impact`,
    if it grows in proportion to the catch-up traffic (the throttle less the in-sync replication
    `base` it also counts); at most the current rates where clients were throttled or timed out;
    None for a side with no rate in force or no measured rise."""
    impact = measured.impacts.get(broker)
    current = measured.rates.get(broker, (None, None))
    out: list[float | None] = []
    for rate, in_sync in zip(current, base):
        if impact is None or rate is None:
            out.append(None)
        elif impact.over_everything:
            out.append(float(rate))
        elif impact.p99_increase is None or impact.p99_increase <= 0:
            out.append(None)
        else:
            out.append(in_sync + max(rate - in_sync, 0.0) * max_impact / impact.p99_increase)
    return out[0], out[1]


def impact_budgets(cap_in: np.ndarray, cap_out: np.ndarray, client_in: np.ndarray, client_out: np.ndarray,
                   max_impact: float) -> tuple[np.ndarray, np.ndarray]:
    """Catch-up bytes/s each broker may receive and send: within P of capacity and what clients leave."""
    budget_in = np.maximum(np.minimum(max_impact * cap_in, cap_in - client_in), 0.0)
    budget_out = np.maximum(np.minimum(max_impact * cap_out, cap_out - client_out), 0.0)
    return budget_in, budget_out


def _admission(inp: ModelInput, max_moves: int | None) -> Admission | None:
    if max_moves is None:
        return None
    # The order the pacer uses by default (the plan's), and its default poll.
    return Admission(np.arange(len(inp)), max_moves_per_broker=max_moves, poll_s=PACER_POLL_S, wave_start_s=WAVE_START_S)


def _capacity_unknown(brokers: Sequence[int]) -> InputError:
    return InputError(f"the network capacity of broker(s) {','.join(map(str, brokers))} is unknown: give "
                      "--network-capacity 125MB/s, or a snapshot with network_in_bps/network_out_bps")


def check_capacities(state: ClusterState, targets: Sequence[PartitionTarget],
                     network_capacity: tuple[float, float] | None) -> None:
    """Before anything is measured: without a measured impact, the suggestion needs the network
    capacity of every broker that sends or receives a copy.

    Raises:
        InputError: the plan does not fit the cluster, or such a capacity is unknown.
    """
    moves = diff_plan(state.with_copies_pending(), list(targets)).moves
    inp = from_moves(state, moves)
    cap_in, cap_out = _capacities(inp, network_capacity)
    ids = [b.id for b in state.brokers]
    known = inp.source >= 0
    sends = np.bincount(inp.source[known], minlength=len(ids))
    receives = np.bincount(inp.dest, minlength=len(ids))
    unknown = [b for i, b in enumerate(ids) if (sends[i] and math.isinf(cap_out[i]))
               or (receives[i] and math.isinf(cap_in[i]))]
    if unknown:
        raise _capacity_unknown(unknown)


def suggest_throttle(state: ClusterState, targets: Sequence[PartitionTarget], request: SuggestRequest) -> Suggestion:
    """Suggest leader and follower rates for a plan, and check a deadline with the model.

    Raises:
        InputError: the plan does not fit the cluster, or broker capacities are unknown.
    """
    state = state.with_copies_pending()  # a copy under way still has the rest of its bytes to do
    moves = diff_plan(state, list(targets)).moves
    base_inp = from_moves(state, moves, fetch=request.fetch)  # brokers in state (sorted id) order
    cap_in, cap_out = _capacities(base_inp, request.network_capacity)
    client_in, client_out = client_traffic(state)
    budget_in, budget_out = impact_budgets(cap_in, cap_out, client_in, client_out, request.max_impact)
    base_inp = replace(base_inp, network_in=cap_in, network_out=cap_out, client_in=client_in, client_out=client_out)
    ids = [b.id for b in state.brokers]
    leader_base, follower_base = base_inp.leader_base, base_inp.follower_base
    leader_rates = budget_out + leader_base
    follower_rates = budget_in + follower_base
    known = base_inp.source >= 0
    sends = np.bincount(base_inp.source[known], weights=base_inp.bytes[known], minlength=len(ids))
    receives = np.bincount(base_inp.dest, weights=base_inp.bytes, minlength=len(ids))
    measured = request.measured
    if measured is not None:
        for i, b in enumerate(ids):
            lead, follow = measured_rates(measured, b, request.max_impact,
                                          (float(leader_base[i]), float(follower_base[i])))
            if lead is not None:
                leader_rates[i] = min(lead, cap_out[i] - client_out[i] + leader_base[i])
            if follow is not None:
                follower_rates[i] = min(follow, cap_in[i] - client_in[i] + follower_base[i])
    unknown = [b for i, b in enumerate(ids) if (sends[i] > 0 and math.isinf(leader_rates[i]))
               or (receives[i] > 0 and math.isinf(follower_rates[i]))]
    if unknown:
        raise _capacity_unknown(unknown)
    leader_rates = np.floor(np.maximum(np.where(np.isfinite(leader_rates), leader_rates, 0.0), 0.0))
    follower_rates = np.floor(np.maximum(np.where(np.isfinite(follower_rates), follower_rates, 0.0), 0.0))
    involved = [i for i in range(len(ids)) if sends[i] > 0 or receives[i] > 0]
    brokers = tuple(BrokerSuggestion(
        ids[i], float(cap_in[i]), float(cap_out[i]), float(client_in[i]), float(client_out[i]),
        float(sends[i]), float(receives[i]), int(leader_rates[i]), int(follower_rates[i]), float(leader_base[i]),
        None if measured is None else measured.impacts.get(ids[i])) for i in involved)
    senders = [b.leader_rate for b in brokers if b.sends > 0]
    receivers = [b.follower_rate for b in brokers if b.receives > 0]
    uniform_l = min(senders, default=0)
    uniform_f = min(receivers, default=0)
    per_broker = base_inp.with_rates(leader_rate=leader_rates, follower_rate=follower_rates)
    admission = _admission(base_inp, request.max_moves_per_broker)
    result = simulate(per_broker, admission=admission, tolerance=request.tolerance)
    uniform = simulate(base_inp.with_rates(leader_rate=float(uniform_l), follower_rate=float(uniform_f)),
                       admission=admission, tolerance=request.tolerance) if len(moves) else result
    warnings = _warnings(brokers, result.makespan, request.units)
    remedies: tuple[Remedy, ...] = ()
    if request.deadline_s is not None and result.makespan > request.deadline_s:
        remedies = _remedies(base_inp, admission, request, result.makespan, result.critical)
    return Suggestion(brokers, uniform_l, uniform_f, result.makespan, uniform.makespan, request.max_impact,
                      request.deadline_s, result.critical, remedies, warnings, state.rates_origin(), measured)


def _warnings(brokers: Sequence[BrokerSuggestion], makespan: float, units: Units = "decimal") -> tuple[str, ...]:
    out = []
    for b in brokers:
        if b.impact is not None and b.impact.over_everything:
            out.append(f"broker {b.broker}'s clients were throttled or timed out during the measurement, which "
                       "no rate can be scaled from: its rates stay at the throttles in force; lower them by hand "
                       "if the move caused it")
        if b.sends > 0 and b.leader_rate <= b.in_sync_base:
            out.append(f"broker {b.broker} has no send capacity left for moves: its client traffic already "
                       f"uses {format_rate(b.client_out, units)} of {format_rate(b.capacity_out, units)}")
        if b.receives > 0 and b.follower_rate <= 0:
            out.append(f"broker {b.broker} has no receive capacity left for moves: its client traffic already "
                       f"uses {format_rate(b.client_in, units)} of {format_rate(b.capacity_in, units)}")
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
        if rate is not None and request.measured is not None:
            out.append(Remedy("rate", f"a catch-up rate of {format_rate(math.ceil(rate), request.units)} on every broker would "
                                      f"finish in time, above what the bound allows (the measured impact, or the capacity "
                                      f"share where nothing was measured)", float(math.ceil(rate))))
        elif rate is not None:
            cap = np.minimum(inp.network_in, inp.network_out)
            worst = float(np.max(np.where(cap > 0, rate / cap, 0.0), initial=0.0))
            out.append(Remedy("rate", f"a catch-up rate of {format_rate(math.ceil(rate), request.units)} on every broker would "
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
        eta = simulate(inp, admission=_admission(inp, n), tolerance=request.tolerance).makespan
        if eta <= deadline:
            return Remedy("concurrency", f"--max-moves-per-broker {n} would finish in {format_duration(eta)} at "
                                         "the network limit", float(n))
    return Remedy("concurrency", "no --max-moves-per-broker below "
                                 f"{start * 16} reaches the deadline; run the moves without a limit", None)


__all__ = ["BOUND", "BOUND_NOTE", "INF", "MEASURED_BOUND", "MEASURED_NOTE", "BrokerSuggestion", "MeasuredImpact",
           "measured_rates", "Remedy", "SuggestRequest", "Suggestion", "finish_at_rate",
           "impact_budgets", "rate_for_deadline", "suggest_throttle"]


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else value


def _share(value: float, limit: float) -> str:
    """`value` as a percentage with enough decimals to read as above `limit` (20.4%, not 20%)."""
    for decimals in range(0, 4):
        text = f"{value:.{decimals}%}"
        if round(value * 100, decimals) != round(limit * 100, decimals):
            return text
    return f"{value:.3%}"

