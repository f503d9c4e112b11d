"""What the watch loop reports (`execute/watch.py`): one event per thing that happened (progress,
stalls, waves, throttle changes, the end) with its JSON form, and the run's result."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kreassign.cluster.errors import ExitStatus
from kreassign.cluster.broker_metrics import BrokerMetrics
from kreassign.cluster.client_latency import BrokerLatency, Impact
from kreassign.cluster.model import TopicPartition, WriteRates
from kreassign.execute.auto_throttle import RateDecision
from kreassign.execute.live_eta import ModelEta, StallDiagnosis
from kreassign.execute.verify import PartitionStatus
from kreassign.execute.pacing import Wave
from kreassign.execute.progress import MoveKey, ProgressView, json_number
from kreassign.execute.watch_hold import Held, RateSource
from kreassign.execute.live_throttle import ThrottleClearResult, ThrottleSetResult, ThrottleView


@dataclass(frozen=True)
class BrokerRow:
    """One broker's part in the moves now: catch-up bytes/s sent and received, its throttles, and
    the share of them the catch-up uses (None where unthrottled or idle)."""

    broker: int
    out_bps: float
    in_bps: float
    leader_rate: int | None
    follower_rate: int | None

    @property
    def share_used(self) -> float | None:
        shares = [used / rate for used, rate in ((self.out_bps, self.leader_rate), (self.in_bps, self.follower_rate))
                  if rate]
        return max(shares) if shares else None

    def to_dict(self) -> dict[str, Any]:
        share = self.share_used
        return {"broker": self.broker, "out_bps": round(self.out_bps, 3), "in_bps": round(self.in_bps, 3),
                "leader_rate": self.leader_rate, "follower_rate": self.follower_rate,
                "share_used": None if share is None else round(share, 4)}


def broker_rows(view: ProgressView, throttles: ThrottleView) -> tuple[BrokerRow, ...]:
    """Per broker involved in the active moves: what it sends and receives, against its throttles."""
    out: dict[int, float] = {}
    into: dict[int, float] = {}
    for m in view.active:
        rate = max(m.copy_bps or 0.0, 0.0)
        into[m.key.broker] = into.get(m.key.broker, 0.0) + rate
        if m.leader is not None:
            out[m.leader] = out.get(m.leader, 0.0) + rate
    return tuple(BrokerRow(b, out.get(b, 0.0), into.get(b, 0.0), throttles.broker(b).leader_rate,
                           throttles.broker(b).follower_rate) for b in sorted(set(out) | set(into)))


_JSON_NAMES = {"throughput": "throughput_bps", "observed": "eta_observed_s", "eta": "eta_model_s"}


@dataclass(frozen=True)
class ProgressEvent:
    at: float
    view: ProgressView
    model: ModelEta | None
    in_flight: int
    kind: str = "progress"
    time_scale: float = 1.0
    """cluster seconds per wall second of the times and rates (not 1 on an accelerated sandbox)"""
    write_rates: WriteRates | None = None
    """how the write rates behind the model's ETA were measured; None: not yet known"""
    brokers: tuple[BrokerRow, ...] = ()
    client: tuple[BrokerMetrics, ...] = ()
    """per broker, from its Prometheus endpoint (empty without --metrics-url, or before two reads)"""
    client_note: str | None = None
    """what the metrics could not show (not exported, or no endpoint given)"""
    canary: tuple[BrokerLatency, ...] = ()
    """per broker, what the canary measured at this poll"""
    canary_impact: tuple[Impact, ...] = ()
    """per broker, the canary's p99 against its baseline (before the first poll)"""
    stalls: tuple[StallDiagnosis, ...] = ()
    """the stalls reported before this poll and not cleared (this poll's changes follow as
    `stalled` and `stall-cleared` events)"""
    down: tuple[int, ...] = ()
    """brokers of the moves that did not answer this poll (their moves cannot progress)"""
    rates: RateSource | None = None
    """the write rates' state (unknown, sampling, measured) and age; None: from `write_rates` alone"""
    throughput: Held | None = None
    """bytes/s copied, held at the last poll that had it (None: the view's own)"""
    observed: Held | None = None
    """the ETA from observed rates, held likewise"""
    eta: Held | None = None
    """the model's ETA, held likewise (0 once nothing moves or waits)"""

    @property
    def source(self) -> RateSource:
        if self.rates is not None:
            return self.rates
        return RateSource("unknown") if self.write_rates is None else RateSource("measured", self.write_rates)

    @property
    def figures(self) -> dict[str, Held]:
        """throughput, observed and model ETA as shown: held values where the poll lacked them."""
        model = None if self.model is None else self.model.seconds
        return {"throughput": self.throughput or Held(self.view.throughput_bps, self.at),
                "observed": self.observed or Held(self.view.eta_s, self.at),
                "eta": self.eta or Held(model, self.at)}

    def move_eta(self, key: MoveKey) -> float | None:
        """A move's ETA from the same model run as the overall one (0 for a finished move)."""
        if self.model is None:
            return None
        return self.model.finish.get(key)

    def to_dict(self) -> dict[str, Any]:
        figures = self.figures
        out: dict[str, Any] = {"event": self.kind, "at": round(self.at, 3), **self.view.to_dict(),
                               "throughput_bps": figures["throughput"].json_value(),
                               "eta_observed_s": figures["observed"].json_value(),
                               "held": {_JSON_NAMES[name]: round(h.read_at, 3) for name, h in figures.items()
                                        if h.held and h.read_at is not None},
                               "reassignments_in_flight": self.in_flight, "time_scale": self.time_scale,
                               "write_rates": self.source.to_dict(self.at),
                               "brokers": [b.to_dict() for b in self.brokers],
                               "client": [m.to_dict() for m in self.client], "client_note": self.client_note,
                               "canary": [c.to_dict() for c in self.canary],
                               "canary_impact": [i.to_dict() for i in self.canary_impact],
                               "stalls": [s.to_dict() for s in self.stalls],
                               "brokers_not_answering": list(self.down)}
        out.update(self.model.to_dict() if self.model is not None
                   else {"eta_model_s": None, "critical": [], "eta_with_suggestions_s": None})  # one schema
        out["eta_model_s"] = figures["eta"].json_value()
        out["moves"] = [{**m.to_dict(), "eta_model_s": 0.0 if m.done else json_number(self.move_eta(m.key))}
                        for m in self.view.moves]
        return out



@dataclass(frozen=True)
class StalledEvent:
    at: float
    stall: StallDiagnosis
    kind: str = "stalled"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), **self.stall.to_dict()}


@dataclass(frozen=True)
class StallClearedEvent:
    """A reported stall is over: its move progressed for `STALL_CLEAR_POLLS` polls, or finished."""

    at: float
    stall: StallDiagnosis
    finished: bool
    kind: str = "stall-cleared"

    def message(self) -> str:
        k = self.stall.key
        how = "finished" if self.finished else "makes progress again"
        return f"{k.topic}-{k.partition} (new replica on broker {k.broker}) {how}"

    def to_dict(self) -> dict[str, Any]:
        k = self.stall.key
        return {"event": self.kind, "at": round(self.at, 3), "topic": k.topic, "partition": k.partition,
                "broker": k.broker, "finished": self.finished, "message": self.message()}


@dataclass(frozen=True)
class WaveEvent:
    at: float
    wave: Wave
    pending: int
    kind: str = "wave"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), **self.wave.to_dict(), "pending_partitions": self.pending}


@dataclass(frozen=True)
class ThrottleEvent:
    at: float
    decision: RateDecision
    result: ThrottleSetResult | None
    dry_run: bool = False
    kind: str = "throttle"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), **self.decision.to_dict(), "dry_run": self.dry_run,
                "journal": str(self.result.journal_path) if self.result and self.result.journal_path else None}


@dataclass(frozen=True)
class CompleteEvent:
    at: float
    view: ProgressView
    partitions: tuple[PartitionStatus, ...] = ()
    clear: ThrottleClearResult | None = None
    kept_reason: str | None = None
    """why throttles were left in place, when they were"""
    kind: str = "complete"

    @property
    def mismatched(self) -> tuple[PartitionStatus, ...]:
        return tuple(p for p in self.partitions if p.state == "mismatch")

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "copied_bytes": self.view.copied,
                "moves": len(self.view.moves),
                "mismatched": [{"topic": p.tp.topic, "partition": p.tp.partition, "current": list(p.current),
                                "target": list(p.target)} for p in self.mismatched],
                "throttles_cleared": None if self.clear is None else self.clear.to_dict(),
                "throttles_kept": self.kept_reason}


@dataclass(frozen=True)
class RunRatesEvent:
    """`throttle set` changed this run's rates through it (the run applied and journaled them)."""

    at: float
    leader_rate: int | None
    follower_rate: int | None
    brokers: tuple[int, ...] | None
    applied: tuple[int, ...]
    pending: tuple[int, ...]
    by: str
    kind: str = "rates-changed"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "leader_rate": self.leader_rate,
                "follower_rate": self.follower_rate, "brokers": None if self.brokers is None else list(self.brokers),
                "applied_brokers": list(self.applied), "pending_brokers": list(self.pending), "by": self.by}


@dataclass(frozen=True)
class WaitingEvent:
    """What the run waits for, when that is not a move (at least every 30 s while it waits)."""

    at: float
    what: str
    brokers: tuple[int, ...] = ()
    kind: str = "waiting"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "waiting_for": self.what, "brokers": list(self.brokers)}


@dataclass(frozen=True)
class TimeoutEvent:
    at: float
    view: ProgressView
    kind: str = "timeout"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "active_moves": len(self.view.active),
                "fraction": round(self.view.fraction, 6)}


WatchEvent = (ProgressEvent | StalledEvent | StallClearedEvent | WaveEvent | ThrottleEvent | CompleteEvent
              | TimeoutEvent | WaitingEvent | RunRatesEvent)


@dataclass(frozen=True)
class WatchResult:
    status: ExitStatus
    view: ProgressView
    stalls: tuple[StallDiagnosis, ...] = ()
    clear: ThrottleClearResult | None = None
    polls: int = 0
    first_wave: tuple[TopicPartition, ...] = ()
    """with a pace and `dry_run`: what the first wave would submit"""
    journal_path: Path | None = None
    """with a pace: the plan's execution journal"""
