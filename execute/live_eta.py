"""The replication model applied to running moves: a model-based ETA and stall diagnosis.

The moves in flight become model moves whose bytes are their remaining lag and whose write
rates are the ones observed; moves a paced plan has not started yet queue behind them under
the same admission limits. Throttle rates apply to a broker only if some of its moves are in
the topic lists, and the in-sync replication of listed partitions counts against the quotas
(as Kafka counts it). A move the model says never completes is stalled: its write rate
exceeds its throttled share, and the model names the limit, the broker, and the value that
limit needs to exceed; the suggestion is that value with a margin, checked by running the
model again with it.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from kreassign.cluster.model import PartitionInfo, TopicPartition
from kreassign.cluster.units import Units, format_duration, format_rate
from kreassign.execute.pacing import PaceLimits, PendingPartition
from kreassign.execute.progress import MoveKey, ProgressView
from kreassign.predict.model import (
    INF,
    PACER_POLL_S,
    WAVE_START_S,
    Admission,
    Critical,
    FetchLimits,
    Limit,
    ModelInput,
    ModelResult,
    session_kinds,
    simulate,
)
from kreassign.execute.live_throttle import ThrottleView
from kreassign.predict.estimate import SUGGESTION_MARGIN, nice_ceil

@dataclass(frozen=True)
class Fix:
    """A throttle change the model says a stalled move needs."""

    side: Literal["leader", "follower"]
    broker: int
    rate: int

    @property
    def option(self) -> str:
        return f"--{self.side}-rate"

    def command(self) -> str:
        return f"kreassign throttle set {self.option} {self.rate} --brokers {self.broker}"

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "broker": self.broker, "rate": self.rate, "option": self.option,
                "command": self.command()}


@dataclass(frozen=True)
class StallDiagnosis:
    """A move that cannot finish, why, and the throttle changes that would let it."""

    key: MoveKey
    reason: Literal["model", "observed"]
    write_bps: float
    limit: str | None = None
    """the model's label of what holds it: leader-throttle, follower-throttle, network-in, ..."""
    broker: int | None = None
    needed_bps: float | None = None
    """the limit must exceed this for the move to progress"""
    fixes: tuple[Fix, ...] = ()
    copy_bps: float | None = None

    @property
    def suggested_bps(self) -> int | None:
        """The suggested value of the binding limit, when it is a throttle."""
        side = {"leader-throttle": "leader", "follower-throttle": "follower"}.get(self.limit or "")
        return next((f.rate for f in self.fixes if f.side == side and f.broker == self.broker), None)

    def message(self, units: Units = "decimal") -> str:
        what = f"{self.key.topic}-{self.key.partition} (new replica on broker {self.key.broker})"
        if self.reason == "observed" or self.limit is None:
            copy = "" if self.copy_bps is None else f" (it copies {format_rate(max(self.copy_bps, 0.0), units)})"
            return (f"{what} makes no progress: its lag has not shrunk{copy} while its partition takes "
                    f"{format_rate(self.write_bps, units)} of writes; raise the throttles of broker "
                    f"{self.key.broker} and of the partition's leader")
        where = f" on broker {self.broker}" if self.broker is not None else ""
        head = (f"{what} cannot finish: its partition takes {format_rate(self.write_bps, units)} of writes, "
                f"more than its share of the {self.limit}{where}")
        if self.needed_bps is not None:
            head += f" (which must exceed {format_rate(self.needed_bps, units)})"
        if self.fixes:
            return head + "; these rates would work: " + "; ".join(f.command() for f in self.fixes)
        return head + "; no throttle change can raise that limit"

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.key.topic, "partition": self.key.partition, "broker": self.key.broker,
                "reason": self.reason, "write_bps": round(self.write_bps, 3), "limit": self.limit,
                "limit_broker": self.broker,
                "needed_bps": None if self.needed_bps is None else round(self.needed_bps, 3),
                "suggested_rate": self.suggested_bps, "fixes": [f.to_dict() for f in self.fixes],
                "copy_bps": None if self.copy_bps is None else round(self.copy_bps, 3), "message": self.message()}


@dataclass(frozen=True)
class ModelEta:
    """What the model says about the moves from now on (seconds from now)."""

    seconds: float
    stalls: tuple[StallDiagnosis, ...] = ()
    critical: tuple[Critical, ...] = ()
    with_suggestions_s: float | None = None
    """when everything would finish with the suggested rates applied"""
    finish: Mapping[MoveKey, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"eta_model_s": None if math.isinf(self.seconds) else round(self.seconds, 3),
                "critical": [c.to_dict() for c in self.critical],
                "eta_with_suggestions_s": None if self.with_suggestions_s is None or math.isinf(self.with_suggestions_s)
                else round(self.with_suggestions_s, 3)}

    def summary(self) -> str:
        return "never (a move is stalled)" if math.isinf(self.seconds) else format_duration(self.seconds)


@dataclass(frozen=True, eq=False)
class LiveModel:
    """The model input for the live moves, and which move each row is."""

    inp: ModelInput
    keys: tuple[MoveKey, ...]
    admission: Admission | None


def build_live_model(view: ProgressView, partitions: Mapping[TopicPartition, PartitionInfo],
                     throttles: ThrottleView, broker_ids: Sequence[int], *,
                     write_rates: Mapping[TopicPartition, float] | None = None,
                     pending: Sequence[PendingPartition] = (), limits: PaceLimits | None = None,
                     pending_throttled: bool = True,
                     capacities: Mapping[int, tuple[float | None, float | None]] | None = None,
                     fetch: FetchLimits | None = None, poll_s: float = PACER_POLL_S) -> LiveModel:
    """Model input for the active moves (bytes = lag) followed by the pending ones (bytes = size).

    Args:
        capacities: broker -> (network in, network out) bytes/s, where known.
        pending_throttled: whether pending moves will be in the throttle lists when they start.
        poll_s: the pacer's poll interval (its next waves start at a poll, `Admission.poll_s`).
    """
    rates = dict(write_rates or {})
    ids = sorted(set(broker_ids) | {m.key.broker for m in view.active}
                 | {b for p in pending for b in p.adding})
    known = set(ids)
    src: list[int] = []
    dst: list[int] = []
    size: list[float] = []
    write: list[float] = []
    keys: list[MoveKey] = []
    leader_listed: set[int] = set()
    follower_listed: set[int] = set()
    for m in view.active:
        tp = m.key.tp
        leader = m.leader if m.leader in known and m.leader != m.key.broker else -1
        src.append(leader if leader is not None else -1)
        dst.append(m.key.broker)
        size.append(float(m.lag))
        write.append(float(m.write_bps if m.write_bps is not None else rates.get(tp, 0.0)))
        keys.append(m.key)
        if leader is not None and leader >= 0 and throttles.leader_throttled(tp, leader):
            leader_listed.add(leader)
        if throttles.follower_throttled(tp, m.key.broker):
            follower_listed.add(m.key.broker)
    for p in pending:
        for b in p.adding:
            leader = p.leader if p.leader in known and p.leader != b else -1
            src.append(leader if leader is not None else -1)
            dst.append(b)
            size.append(float(p.size))
            write.append(float(rates.get(p.tp, 0.0)))
            keys.append(MoveKey(p.tp.topic, p.tp.partition, b))
            if pending_throttled:
                if leader is not None and leader >= 0:
                    leader_listed.add(leader)
                follower_listed.add(b)
    leader_rate = {b: float(r) for b in leader_listed if (r := throttles.broker(b).leader_rate) is not None}
    follower_rate = {b: float(r) for b in follower_listed if (r := throttles.broker(b).follower_rate) is not None}
    leader_base, follower_base = _in_sync_bases(view, partitions, throttles, rates, known)
    session = _sessions(partitions, rates, src, dst)
    caps = capacities or {}
    net_in = {b: float(c[0]) for b, c in caps.items() if b in known and c[0] is not None}
    net_out = {b: float(c[1]) for b, c in caps.items() if b in known and c[1] is not None}
    inp = ModelInput.build(broker_ids=ids, source=src, dest=dst, bytes=size, write_bps=write,
                           leader_rate=leader_rate, follower_rate=follower_rate, network_in=net_in,
                           network_out=net_out, leader_base=leader_base, follower_base=follower_base,
                           fetch=fetch, session=session)
    admission = None
    if limits is not None and (limits.max_moves_per_broker is not None or limits.max_inflight_bytes is not None):
        admission = Admission(np.arange(len(keys)), limits.max_moves_per_broker,
                              None if limits.max_inflight_bytes is None else float(limits.max_inflight_bytes),
                              poll_s=poll_s, wave_start_s=WAVE_START_S)
    return LiveModel(inp, tuple(keys), admission)


def _sessions(partitions: Mapping[TopicPartition, PartitionInfo], rates: Mapping[TopicPartition, float],
              src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """Per move, what else its fetcher session carries (`session_kinds`): the in-sync followers on
    its destination of partitions its leader leads, written or not (one fetcher thread per pair:
    a live view does not know `num.replica.fetchers`)."""
    pairs = [(info.leader, b, rates.get(tp, info.produce_bps) > 0) for tp, info in partitions.items()
             if info.leader is not None and info.leader >= 0
             for b in (info.isr or info.replicas) if b != info.leader]
    key = 1 << 32  # broker ids are int32
    isr_keys = np.array([lead * key + b for lead, b, _ in pairs], dtype=np.int64)
    written = np.array([w for _, _, w in pairs], dtype=bool)
    moves = np.asarray(src, dtype=np.int64) * key + np.asarray(dst, dtype=np.int64)
    return [int(x) for x in session_kinds(isr_keys, written, moves)]


def _in_sync_bases(view: ProgressView, partitions: Mapping[TopicPartition, PartitionInfo], throttles: ThrottleView,
                   rates: Mapping[TopicPartition, float], known: set[int]) -> tuple[dict[int, float], dict[int, float]]:
    """In-sync replication of listed partitions, which the quotas count although it is never held."""
    leader_base: dict[int, float] = {}
    follower_base: dict[int, float] = {}
    moving = {m.key.tp: m for m in view.moves}
    for tp, m in moving.items():
        info = partitions.get(tp)
        w = float(m.write_bps if m.write_bps is not None else rates.get(tp, 0.0))
        if info is None or info.leader is None or info.leader not in known or w <= 0:
            continue
        in_sync = [b for b in (info.isr or info.replicas) if b != info.leader and b in known]
        if throttles.leader_throttled(tp, info.leader):
            leader_base[info.leader] = leader_base.get(info.leader, 0.0) + w * len(in_sync)
        for b in in_sync:
            if throttles.follower_throttled(tp, b):
                follower_base[b] = follower_base.get(b, 0.0) + w
    return leader_base, follower_base


def diagnose(live: LiveModel, *, tolerance: float = 0.01, rounds: int = 4) -> ModelEta:
    """Run the model on the live moves; name the stalled ones and the rates that would let them
    finish. Raising one limit can expose the next (the follower side after the leader side), so
    suggestions are applied and the model rerun until everything finishes or `rounds` run out."""
    if not len(live.keys):
        return ModelEta(0.0)
    result = simulate(live.inp, admission=live.admission, tolerance=tolerance)
    first = _stalls(live, result)
    if not first:
        return ModelEta(result.makespan, (), result.critical, None,
                        {k: float(f) for k, f in zip(live.keys, result.finish_s)})
    leader = live.inp.leader_rate.copy()
    follower = live.inp.follower_rate.copy()
    pos = {int(b): i for i, b in enumerate(live.inp.broker_ids)}
    fixes: dict[tuple[str, int], int] = {}
    stalls = first
    retry = result
    for _ in range(rounds):
        new = False
        for s in stalls:
            side = {"leader-throttle": "leader", "follower-throttle": "follower"}.get(s.limit or "")
            if side is None or s.broker is None or s.needed_bps is None:
                continue
            rate = nice_ceil(s.needed_bps * SUGGESTION_MARGIN)
            if rate > fixes.get((side, s.broker), 0):
                fixes[(side, s.broker)] = rate
                arr = leader if side == "leader" else follower
                arr[pos[s.broker]] = max(arr[pos[s.broker]], float(rate))
                new = True
        if not new:
            break
        retry = simulate(live.inp.with_rates(leader_rate=leader, follower_rate=follower),
                         admission=live.admission, tolerance=tolerance)
        stalls = _stalls(live, retry)
        if not stalls:
            break
    ids = live.inp.broker_ids
    src = live.inp.source
    dst = live.inp.dest
    index = {k: i for i, k in enumerate(live.keys)}
    out = []
    for s in first:
        i = index[s.key]
        ends = {("leader", int(ids[src[i]]) if src[i] >= 0 else None), ("follower", int(ids[dst[i]]))}
        mine = tuple(Fix(side, b, r) for (side, b), r in sorted(fixes.items())  # type: ignore[arg-type]
                     if (side, b) in ends)
        out.append(replace(s, fixes=mine))
    finish = {k: float(f) for k, f in zip(live.keys, result.finish_s)}
    return ModelEta(result.makespan, tuple(out), result.critical, retry.makespan if fixes else None, finish)


def _stalls(live: LiveModel, result: ModelResult) -> tuple[StallDiagnosis, ...]:
    out: list[StallDiagnosis] = []
    ids = live.inp.broker_ids
    for i in np.flatnonzero(result.stalled & (live.inp.source >= 0)):
        limit = Limit(int(result.limit[i]))
        if limit == Limit.QUEUED:
            continue  # waits behind a stalled move; the stalled one is reported
        pos = int(result.limit_broker[i])
        needed = float(result.needed_bps[i])
        out.append(StallDiagnosis(live.keys[i], "model", float(live.inp.write_bps[i]), limit.label,
                                  int(ids[pos]) if pos >= 0 else None, None if math.isnan(needed) else needed))
    return tuple(sorted(out, key=lambda s: s.key))


def observed_stall(key: MoveKey, write_bps: float | None, copy_bps: float | None) -> StallDiagnosis:
    """A move whose lag did not shrink although the model expected progress."""
    return StallDiagnosis(key, "observed", float(write_bps or 0.0), copy_bps=copy_bps)


__all__ = ["INF", "LiveModel", "ModelEta", "StallDiagnosis", "Fix", "build_live_model", "diagnose", "nice_ceil",
           "observed_stall"]
