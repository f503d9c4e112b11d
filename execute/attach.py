"""`watch` attached to the run in flight: the whole plan, read only, the end left to the owner.

While a run (a paced `execute`, `resume` or `watch --pace`) holds the cluster's execution lock,
`kreassign watch` does not run a loop of its own over the moves it happens to see: it follows
the run's plan, read from the run's journal and the cluster. Each poll gives the plan's
partitions done, moving and waiting, the waves submitted so far, one percentage of the plan's
bytes that never goes backwards, and one ETA for the rest of the plan (the bytes left over the
rate observed since attaching). It changes nothing: the throttles are the owner's to restore,
and the watch ends when the owner gives the lock back (or `--stop-after`), reporting the state
the run left.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.errors import ExitStatus
from kreassign.cluster.model import PartitionInfo, PartitionTarget, Reassignment, TopicPartition
from kreassign.cluster.port import ClusterPort, LogDirReport
from kreassign.cluster.time_scale import cluster_timing, read_time_scale
from kreassign.execute.journal import Journal, JournalStore
from kreassign.execute.live_eta import build_live_model, diagnose
from kreassign.execute.live_throttle import read_throttle_view
from kreassign.execute.lock_owner import Owner
from kreassign.execute.pacing import PaceLimits, PendingPartition
from kreassign.execute.progress import ProgressTracker, ProgressView, json_number, sample_moves
from kreassign.predict.model import PACER_POLL_S

_CLOCK_SLACK = 1e-6


@dataclass(frozen=True)
class RunProgressEvent:
    """One poll of an attached watch: the run's whole plan."""

    at: float
    owner: str
    done: int
    moving: int
    waiting: int
    waves: int
    copied_bytes: int
    total_bytes: int
    fraction: float
    """of the plan's bytes, never lower than at an earlier poll"""
    eta_s: float | None
    """for the rest of the plan, from the rate observed since attaching (None before two polls)"""
    eta_model_s: float | None = None
    """for the rest of the plan, from the replication model run from this poll: the moves in
    flight and the waves still to come under the run's limits (from the first poll on)"""
    time_scale: float = 1.0
    """cluster seconds per wall second of the times and rates (not 1 on an accelerated sandbox)"""
    kind: str = "run-progress"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "run": self.owner, "partitions_done": self.done,
                "partitions_moving": self.moving, "partitions_waiting": self.waiting, "waves": self.waves,
                "copied_bytes": self.copied_bytes, "total_bytes": self.total_bytes,
                "fraction": round(self.fraction, 6), "eta_s": json_number(self.eta_s),
                "eta_model_s": json_number(self.eta_model_s), "time_scale": self.time_scale}



@dataclass(frozen=True)
class RunEndedEvent:
    """The owner gave the lock back (or died): the state it left."""

    at: float
    owner: str
    state: str
    """the journal's state (finished, aborted, ...), or `unknown` without the journal"""
    not_at_target: tuple[TopicPartition, ...] = ()
    journal: str | None = None
    kind: str = "run-ended"

    @property
    def next_step(self) -> str | None:
        if self.state == "finished" and not self.not_at_target:
            return None
        where = f" --journal {self.journal}" if self.journal else ""
        if self.state in ("running", "submitted", "clearing"):
            return f"kreassign resume{where}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "run": self.owner, "state": self.state,
                "not_at_target": [str(tp) for tp in self.not_at_target], "journal": self.journal,
                "next_step": self.next_step}


AttachEvent = RunProgressEvent | RunEndedEvent


@dataclass
class _Attached:
    port: ClusterPort
    targets: dict[TopicPartition, tuple[int, ...]]
    bytes_of: dict[TopicPartition, int]
    tracker: ProgressTracker = field(default_factory=ProgressTracker)
    best: float = 0.0
    first: tuple[float, int] | None = None
    limits: PaceLimits | None = None
    """the run's pacing limits (from its journal), which the model's later waves follow"""
    poll_s: float = PACER_POLL_S
    """how often the run polls for finished moves (its journal's `--interval`)"""
    broker_ids: list[int] = field(default_factory=list)
    time_scale: float = 1.0

    def poll(self, now: float, journal: Journal | None, owner: Owner) -> RunProgressEvent:
        port = self.port
        in_flight = {tp: r for tp, r in port.list_reassignments(sorted(self.targets)).items() if tp in self.targets}
        infos = {p.tp: p for p in port.describe_topics(sorted({tp.topic for tp in self.targets}))}
        brokers = sorted({b for r in in_flight.values() for b in r.adding}
                         | {infos[tp].leader for tp in in_flight if tp in infos and infos[tp].leader is not None})
        report = port.log_dir_sizes(brokers, partitions=sorted(in_flight)) if in_flight else LogDirReport()
        view = self.tracker.update(sample_moves(now, in_flight, infos, report))
        done = {tp for tp, target in self.targets.items()
                if tp not in in_flight and tp in infos and sorted(infos[tp].replicas) == sorted(target)}
        copied_moving: dict[TopicPartition, int] = {}
        for m in view.active:
            tp = TopicPartition(m.key.topic, m.key.partition)
            if tp in in_flight:
                copied_moving[tp] = copied_moving.get(tp, 0) + m.copied
        total = sum(self.bytes_of.values())
        copied = sum(self.bytes_of[tp] for tp in done) + sum(min(c, self.bytes_of.get(tp, c))
                                                             for tp, c in copied_moving.items())
        fraction = (copied / total if total else len(done) / max(len(self.targets), 1))
        self.best = max(self.best, min(fraction, 1.0))
        shown = int(round(self.best * total)) if total else copied
        if self.first is None:
            self.first = (now, shown)
        eta = None
        start, at_start = self.first
        if now > start:
            rate = (shown - at_start) / (now - start)
            left = total - shown
            eta = 0.0 if left <= 0 else (left / rate if rate > 0 else math.inf)
        waves = 0 if journal is None else len({s.step for s in journal.steps if s.step.endswith(": submit")})
        return RunProgressEvent(now, owner.describe(), len(done), len(in_flight),
                                len(self.targets) - len(done) - len(in_flight), waves, shown, total, self.best, eta,
                                self.model_eta(view, in_flight, infos, done), self.time_scale)

    def model_eta(self, view: ProgressView, in_flight: Mapping[TopicPartition, Reassignment],
                  infos: Mapping[TopicPartition, PartitionInfo], done: set[TopicPartition]) -> float:
        """The replication model's ETA for the rest of the plan: the moves in flight (their lag)
        and the partitions still waiting (their size, in waves under the run's limits)."""
        pending = []
        for i, (tp, target) in enumerate(self.targets.items()):  # plan order, for --order plan
            info = infos.get(tp)
            if tp in done or tp in in_flight or info is None:
                continue
            adding = tuple(sorted(set(target) - set(info.replicas)))
            if adding:
                size = self.bytes_of.get(tp, 0) // len(adding)
                pending.append(PendingPartition(PartitionTarget(tp.topic, tp.partition, target), info.leader,
                                                adding, size, position=i))
        if not view.active and not pending:
            return 0.0
        brokers = sorted({b for r in in_flight.values() for b in r.replicas} | {b for p in pending for b in p.adding}
                         | {p.leader for p in infos.values() if p.leader is not None})
        throttles = read_throttle_view(self.port, brokers=brokers, topics=sorted({tp.topic for tp in self.targets}),
                                       in_flight=in_flight)
        live = build_live_model(view, infos, throttles, self.broker_ids, write_rates=self.tracker.write_rates(),
                                pending=pending, limits=self.limits, poll_s=self.poll_s)
        return diagnose(live).seconds


def plan_bytes(port: ClusterPort, targets: Mapping[TopicPartition, tuple[int, ...]],
               original: Mapping[TopicPartition, tuple[int, ...]]) -> dict[TopicPartition, int]:
    """Bytes each partition of the plan copies: its size times the replicas it adds (from the
    replicas before the run; a partition done already counts its whole move)."""
    infos = {p.tp: p for p in port.describe_topics(sorted({tp.topic for tp in targets}))}
    report = port.log_dir_sizes(partitions=sorted(tp for tp in targets if tp in infos))
    out: dict[TopicPartition, int] = {}
    for tp, target in targets.items():
        info = infos.get(tp)
        before = original.get(tp, info.replicas if info is not None else ())
        sizes = [s for s in (report.size(tp, b) for b in (info.replicas if info is not None else ())) if s is not None]
        out[tp] = max(sizes, default=0) * len(set(target) - set(before))
    return out


def attach(port: ClusterPort, owner: Owner, *, store: JournalStore, journal: Journal | None,
           targets: tuple[PartitionTarget, ...] | None, interval_s: float, timeout_s: float | None,
           clock: Callable[[], float], sleep: Callable[[float], None], current_owner: Callable[[], Owner | None],
           emit: Callable[[AttachEvent], None], limits: PaceLimits | None = None,
           time_scale: float | None = None, pace_poll_s: float = PACER_POLL_S) -> ExitStatus:
    """Follow the run of `owner` until it gives the lock back; changes nothing.

    Returns OK when the run finished with every partition at its target, ERROR when it ended
    otherwise (the event names the next step), IN_PROGRESS when `timeout_s` passed first.
    """
    plan = {t.tp: tuple(t.replicas) for t in (journal.targets if journal is not None else targets or ())}
    original = dict(journal.original) if journal is not None else {}
    broker_ids = sorted(b.id for b in port.describe_brokers().brokers)
    # rates and times in cluster seconds, as the run's own screen (an accelerated sandbox's writes
    # measured per wall second would look `scale` times faster than the throttles allow)
    scale = time_scale if time_scale is not None else read_time_scale(port, broker_ids)
    clock, sleep = cluster_timing(clock, sleep, scale)
    state = _Attached(port, plan, plan_bytes(port, plan, original), limits=limits, broker_ids=broker_ids,
                      time_scale=scale, poll_s=pace_poll_s)
    start = clock()
    while True:
        now = clock() - start
        fresh = store.load(journal.path) if journal is not None else None
        holder = current_owner()
        if holder is None or holder.token != owner.token:
            return _ended(port, now, owner, fresh, plan, emit)
        emit(state.poll(now, fresh, owner))
        if timeout_s is not None and now >= timeout_s - _CLOCK_SLACK:
            return ExitStatus.IN_PROGRESS
        sleep(interval_s)


def _ended(port: ClusterPort, now: float, owner: Owner, journal: Journal | None,
           plan: Mapping[TopicPartition, tuple[int, ...]], emit: Callable[[AttachEvent], None]) -> ExitStatus:
    in_flight = port.list_reassignments(sorted(plan))
    infos = {p.tp: p for p in port.describe_topics(sorted({tp.topic for tp in plan}))}
    off = tuple(sorted(tp for tp, target in plan.items()
                       if tp in in_flight or tp not in infos or sorted(infos[tp].replicas) != sorted(target)))
    state = journal.state if journal is not None else "unknown"
    event = RunEndedEvent(now, owner.describe(), state, off, str(journal.path) if journal is not None else None)
    emit(event)
    return ExitStatus.OK if state in ("finished", "unknown") and not off else ExitStatus.ERROR
