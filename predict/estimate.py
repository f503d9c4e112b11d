"""`kreassign estimate`: how long a reassignment takes at given throttles, and why.

One library call (`estimate_plan`) from a cluster state and a plan to a typed result that the
CLI renders and `--output json` serialises; the numbers come from the replication model.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import ClusterState, PartitionTarget, TopicPartition, WriteRates
from kreassign.cluster.units import Units, format_rate
from kreassign.cluster.write_sample import rates_to_dict
from kreassign.predict.model import (
    DEFAULT_TOLERANCE,
    INF,
    PACER_POLL_S,
    WAVE_START_S,
    Critical,
    FetchLimits,
    Limit,
    LowerBound,
    ModelInput,
    ModelResult,
    from_moves,
    simulate,
)
from kreassign.predict.schedule import Order, schedule_waves
from kreassign.throttle.rates import Rates

SCHEMA = "kreassign.estimate/2"
"""2 added write_rates (where the rates came from; never silently 0) and stalled[].suggested_rate."""
SUGGESTION_MARGIN = 1.25
"""a suggested rate is the needed one plus 25%, so the move finishes in reasonable time"""


def nice_ceil(value: float) -> int:
    """Round up to two significant digits: 2_345_678 -> 2_400_000."""
    if value <= 0 or not math.isfinite(value):
        return 0
    step = 10 ** max(int(math.floor(math.log10(value))) - 1, 0)
    return int(math.ceil(value / step) * step)

EXACT_UP_TO = 2_000
"""plans with at most this many moves are modelled event by event (tolerance 0: milliseconds);
bigger ones batch completions (DEFAULT_TOLERANCE), which can overstate the tail a few percent"""


def tolerance_for(moves: int) -> float:
    """The event batching of the model for a plan this big (see EXACT_UP_TO)."""
    return 0.0 if moves <= EXACT_UP_TO else DEFAULT_TOLERANCE


@dataclass(frozen=True)
class RateRequest:
    """Throttles to estimate with, most specific first: `broker_rates` (both sides of one
    broker), `leader_rate`/`follower_rate`, `throttle` (both sides everywhere), then whatever
    the cluster has configured now; a broker with none of these is unthrottled."""

    throttle: float | None = None
    leader_rate: float | None = None
    follower_rate: float | None = None
    broker_rates: Mapping[int, float] = field(default_factory=dict)


def resolve_rates(state: ClusterState, request: RateRequest) -> tuple[np.ndarray, np.ndarray]:
    """Leader and follower rate of every broker (in `state.brokers` order; inf = none).

    Raises:
        InputError: a negative rate, or a per-broker rate for a broker the cluster lacks.
    """
    asked = Rates.of(request.throttle, leader=request.leader_rate, follower=request.follower_rate)
    per_broker = {b: Rates.of(rate) for b, rate in request.broker_rates.items()}
    unknown = sorted(set(request.broker_rates) - set(state.broker_ids))
    if unknown:
        raise InputError(f"--broker-rate names broker(s) {', '.join(map(str, unknown))}, which the cluster does not have")
    leader, follower = [], []
    for b in state.brokers:
        rates = per_broker.get(b.id, asked)
        configured = Rates.from_configs(state.throttles.broker.get(b.id, {}))
        leader.append(_rate(rates.leader if rates.leader is not None else configured.leader))
        follower.append(_rate(rates.follower if rates.follower is not None else configured.follower))
    return np.array(leader, dtype=np.float64), np.array(follower, dtype=np.float64)


def _rate(value: float | None) -> float:
    """A rate for the model: None (no throttle) is unlimited."""
    return INF if value is None else float(value)


@dataclass(frozen=True)
class StalledMove:
    """A move that never completes, what stops it, and the rate that would let it progress."""

    tp: TopicPartition
    source: int | None
    dest: int
    bytes: int
    write_bps: float
    limit: Limit
    broker: int | None
    needed_bps: float | None

    @property
    def suggested_rate(self) -> int | None:
        """The throttle on `broker` that lets the move finish (the needed rate plus a margin);
        None when the limit is not a throttle."""
        if self.limit not in (Limit.LEADER_THROTTLE, Limit.FOLLOWER_THROTTLE) or self.needed_bps is None:
            return None
        return nice_ceil(self.needed_bps * SUGGESTION_MARGIN)

    def message(self, units: Units = "decimal") -> str:
        """One line for a person: which move never finishes, why, and the throttle that would do."""
        where = f" on broker {self.broker}" if self.broker is not None else ""
        text = (f"{self.tp} (new replica on broker {self.dest}) never finishes: its partition takes "
                f"{format_rate(self.write_bps, units)} of writes, more than its share of the {self.limit.label}{where}")
        if self.suggested_rate is not None and self.broker is not None:
            side = "leader" if self.limit == Limit.LEADER_THROTTLE else "follower"
            return text + f"; --{side}-rate {self.suggested_rate} ({format_rate(self.suggested_rate, units)}) on " \
                          f"broker {self.broker} lifts that limit"
        if self.needed_bps is not None:
            return text + f" (which must exceed {format_rate(self.needed_bps, units)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "source": self.source,
                "dest": self.dest, "bytes": self.bytes, "write_bps": self.write_bps,
                "limit": self.limit.label, "broker": self.broker, "needed_bps": self.needed_bps,
                "suggested_rate": self.suggested_rate}


@dataclass(frozen=True)
class BrokerLoad:
    """One broker's part in the plan: rates, bytes to send and receive, and when it is done."""

    broker: int
    leader_rate: float
    follower_rate: float
    bytes_out: int
    bytes_in: int
    busy_until_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "leader_rate": _finite(self.leader_rate),
                "follower_rate": _finite(self.follower_rate), "bytes_out": self.bytes_out,
                "bytes_in": self.bytes_in, "busy_until_s": _finite(self.busy_until_s)}


def _finite(value: float) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else float(value)


@dataclass(frozen=True, eq=False)
class EstimateResult:
    """The answer to "how long will this take?": ETA, lower bound, bottlenecks, stuck moves."""

    eta_s: float
    completable_eta_s: float
    lower: LowerBound
    critical: tuple[Critical, ...]
    stalled: tuple[StalledMove, ...]
    brokers: tuple[BrokerLoad, ...]
    moves: int
    partitions: int
    bytes: int
    max_moves_per_broker: int | None
    max_inflight_bytes: float | None
    order: str
    fetch: FetchLimits
    tolerance: float
    model: ModelResult
    write_rates: WriteRates | None = None
    """where the partitions' write rates came from; None: unknown (taken as 0)"""
    fix_rate: int | None = None
    """when moves stall: a throttle (leader and follower, on every broker) with which every move
    finishes, found by raising the binding limits and running the model again"""
    fix_eta_s: float | None = None
    poll_s: float = PACER_POLL_S
    """the pacer's poll interval the schedule was modelled with (paced plans only)"""

    @property
    def paced(self) -> bool:
        return self.max_moves_per_broker is not None or self.max_inflight_bytes is not None

    @property
    def completes(self) -> bool:
        return not math.isinf(self.eta_s)

    def to_dict(self) -> dict[str, Any]:
        """The stable `--output json` schema (times in seconds, rates in bytes/s, null = never
        or unlimited)."""
        ratio = self.eta_s / self.lower.seconds if self.lower.seconds > 0 and self.completes else None
        return {
            "schema": SCHEMA,
            "eta_s": _finite(self.eta_s),
            "completes": self.completes,
            "completable_eta_s": _finite(self.completable_eta_s),
            "lower_bound": self.lower.to_dict(),
            "ratio_to_lower_bound": ratio if ratio is None or math.isfinite(ratio) else None,
            "moves": self.moves,
            "partitions": self.partitions,
            "bytes": self.bytes,
            "schedule": {"max_moves_per_broker": self.max_moves_per_broker,
                         "max_inflight_bytes": self.max_inflight_bytes, "order": self.order,
                         "poll_s": self.poll_s if self.paced else None,
                         "wave_start_s": WAVE_START_S if self.paced else None},
            "critical": [c.to_dict() for c in self.critical],
            "stalled": [s.to_dict() for s in self.stalled],
            "write_rates": rates_to_dict(self.write_rates),
            "fix": None if self.fix_rate is None else {"throttle": self.fix_rate, "eta_s": _finite(self.fix_eta_s or 0.0)},
            "brokers": [b.to_dict() for b in self.brokers],
            "model": {"tolerance": self.tolerance, "steps": self.model.steps,
                      "fetch": {"replica_fetch_max_bytes": self.fetch.partition_max_bytes,
                                "replica_fetch_response_max_bytes": self.fetch.response_max_bytes,
                                "num_replica_fetchers": self.fetch.num_fetchers,
                                "round_trip_s": self.fetch.round_trip_s}},
        }


def estimate_moves(
    state: ClusterState,
    moves: Any,
    *,
    rates: RateRequest | None = None,
    max_moves_per_broker: int | None = None,
    max_inflight_bytes: float | None = None,
    order: Order = "plan",
    fetch: FetchLimits | None = None,
    tolerance: float | None = None,
    poll_s: float = PACER_POLL_S,
) -> EstimateResult:
    """Estimate moves given as columns `row`, `dest`, `bytes`, `write_bps` and optionally
    `released_bps` (the planner's Moves). A paced plan (`max_moves_per_broker` or
    `max_inflight_bytes`) starts its next moves as kreassign's pacer does: at its first poll
    (every `poll_s`, `execute --interval`) after a slot frees, `WAVE_START_S` later.

    Raises:
        InputError: bad rates or limits, or moves that do not fit the cluster.
    """
    if tolerance is None:
        tolerance = tolerance_for(len(moves.row))
    leader, follower = resolve_rates(state, rates or RateRequest())
    inp = from_moves(state, moves, leader_rate=leader, follower_rate=follower, fetch=fetch)

    def run(trial: ModelInput) -> ModelResult:
        if max_moves_per_broker is None and max_inflight_bytes is None:
            return simulate(trial, tolerance=tolerance)
        return schedule_waves(trial, max_moves_per_broker=max_moves_per_broker, max_inflight_bytes=max_inflight_bytes,
                              order=order, tolerance=tolerance, poll_s=poll_s, wave_start_s=WAVE_START_S).result

    result = run(inp)
    rows = np.asarray(moves.row, dtype=np.int64)
    stalled = _stalled(state, inp, result, rows)
    fix_rate, fix_eta = _fix(inp, stalled, run)
    return EstimateResult(
        eta_s=result.makespan, completable_eta_s=result.completable_makespan, lower=result.lower,
        critical=result.critical, stalled=stalled,
        brokers=_brokers(inp, result), moves=len(inp), partitions=int(len(np.unique(rows))),
        bytes=int(inp.bytes.sum()), max_moves_per_broker=max_moves_per_broker,
        max_inflight_bytes=max_inflight_bytes, order=order, fetch=inp.fetch, tolerance=tolerance,
        model=result, write_rates=state.rates_origin(), fix_rate=fix_rate, fix_eta_s=fix_eta, poll_s=poll_s,
    )


_FIX_ROUNDS = 4


def _fix(inp: ModelInput, stalled: Sequence[StalledMove], run: Callable[[ModelInput], ModelResult]
         ) -> tuple[int | None, float | None]:
    """One throttle for both sides of every broker with which the stalled moves finish: the
    largest suggested rate, raised again while the model finds another limit (the follower side
    after the leader side); None when no throttle can do it (a NIC or fetch limit binds)."""
    rate = max((s.suggested_rate for s in stalled if s.suggested_rate is not None), default=None)
    for _ in range(_FIX_ROUNDS):
        if rate is None:
            return None, None
        trial = inp.with_rates(leader_rate=np.maximum(inp.leader_rate, rate), follower_rate=np.maximum(inp.follower_rate, rate))
        result = run(trial)
        if not result.stalled.any():
            return rate, result.makespan
        needed = result.needed_bps[result.stalled & np.isin(result.limit, [int(Limit.LEADER_THROTTLE),
                                                                           int(Limit.FOLLOWER_THROTTLE)])]
        needed = needed[~np.isnan(needed)]
        rate = max(rate, nice_ceil(float(needed.max()) * SUGGESTION_MARGIN)) if len(needed) else None
    return None, None


def estimate_plan(
    state: ClusterState,
    targets: Iterable[PartitionTarget] | Mapping[TopicPartition, Sequence[int]],
    **options: Any,
) -> EstimateResult:
    """Estimate a plan (reassignment entries or partition -> replicas); options as for
    `estimate_moves`.

    Raises:
        InputError: the plan names partitions or brokers the cluster lacks, or bad options.
    """
    from kreassign.planner.diff import diff_plan

    state = state.with_copies_pending()  # a copy under way still has the rest of its bytes to do
    return estimate_moves(state, diff_plan(state, targets).moves, **options)


def _stalled(state: ClusterState, inp: ModelInput, result: ModelResult, rows: np.ndarray) -> tuple[StalledMove, ...]:
    ids = inp.broker_ids
    out = []
    for i in np.flatnonzero(result.stalled):
        src, pos = int(inp.source[i]), int(result.limit_broker[i])
        needed = float(result.needed_bps[i])
        out.append(StalledMove(
            tp=state.tp(int(rows[i])), source=int(ids[src]) if src >= 0 else None, dest=int(ids[inp.dest[i]]),
            bytes=int(inp.bytes[i]), write_bps=float(inp.write_bps[i]), limit=Limit(int(result.limit[i])),
            broker=int(ids[pos]) if pos >= 0 else None, needed_bps=None if math.isnan(needed) else needed,
        ))
    return tuple(sorted(out, key=lambda s: (s.tp, s.dest)))


def _brokers(inp: ModelInput, result: ModelResult) -> tuple[BrokerLoad, ...]:
    b = inp.n_brokers
    led = inp.source >= 0
    out = np.bincount(inp.source[led], weights=inp.bytes[led], minlength=b)
    into = np.bincount(inp.dest, weights=inp.bytes, minlength=b)
    involved = np.zeros(b, bool)
    involved[inp.source[led]] = True
    involved[inp.dest] = True
    return tuple(
        BrokerLoad(broker=int(inp.broker_ids[i]), leader_rate=float(inp.leader_rate[i]),
                   follower_rate=float(inp.follower_rate[i]), bytes_out=int(out[i]), bytes_in=int(into[i]),
                   busy_until_s=float(result.busy_until[i]))
        for i in np.flatnonzero(involved)
    )
