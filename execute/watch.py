"""The watch loop: progress, ETAs, stall detection, pacing and auto-throttle until moves finish.

Every `interval_s` of the injected clock it reads the reassignments, the partitions' leaders
and DescribeLogDirs of the brokers involved, and emits events:

* `progress`: per move and overall bytes copied, throughput, the ETA extrapolated from the
  observed rates, and the ETA of the replication model run from the current state;
* `stalled`: a move whose lag has not shrunk for `stall_after_s`; when the model agrees that its
  partition's writes exceed its throttled share, the event names the rates that would work;
* `wave` (with a pace): partitions submitted as earlier moves freed their brokers;
* `throttle` (with auto-throttle): rates changed toward the target, journaled;
* `complete` (throttles restored from the journal unless kept) or `timeout`.

Nothing here sleeps or reads the wall clock: `clock` and `sleep` are injected, so tests step
simulated time (the sandbox's `advance`) instead of waiting. Every duration and rate is in
cluster seconds: a sandbox running faster than the wall clock says so through the broker config
`kreassign.sandbox.time.scale`, read once at the start (real Kafka does not report it: scale 1).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreassign.cluster.errors import ClusterError, ExitStatus
from kreassign.cluster.model import PartitionInfo, PartitionTarget, Reassignment, TopicPartition
from kreassign.cluster.port import ClusterPort, LogDirReport
from kreassign.execute.auto_throttle import (
    AutoThrottlePolicy,
    RateDecision,
    WriteRateMeter,
    client_traffic_of,
    deadline_rates,
    decide,
    headroom_rates,
    leader_bases,
)
from kreassign.execute.journal import JournalStore
from kreassign.execute.live_eta import LiveModel, ModelEta, StallDiagnosis, build_live_model, diagnose, observed_stall
from kreassign.execute.verify import PartitionStatus, describe_known, partition_states
from kreassign.execute.pacing import PaceLimits, Pacer, Wave
from kreassign.execute.progress import MoveKey, ProgressTracker, ProgressView, sample_moves
from kreassign.execute.live_throttle import (
    ThrottleClearResult,
    ThrottleSetRequest,
    ThrottleSetResult,
    ThrottleView,
    apply_throttle_change,
    clear_all_throttles,
    plan_throttle_set,
    read_throttle_view,
)

Capacities = Mapping[int, tuple[float | None, float | None]]
_CLOCK_SLACK = 1e-6  # a clock stepped in float increments may land a hair short of the timeout
TIME_SCALE_KEY = "kreassign.sandbox.time.scale"
"""Read-only broker config of a kreassign sandbox: its seconds per wall second."""
_TIME_SCALE_PROBES = 3  # brokers asked before assuming real Kafka time


def read_time_scale(port: ClusterPort, broker_ids: Sequence[int]) -> float:
    """Cluster seconds per wall second: what the first answering broker reports as
    `kreassign.sandbox.time.scale`, else 1 (Kafka brokers, which run on the wall clock)."""
    for broker in broker_ids[:_TIME_SCALE_PROBES]:
        try:
            result = port.describe_broker_configs([broker], [TIME_SCALE_KEY])
        except ClusterError:
            return 1.0  # the loop's own reads report the problem properly
        if broker in result.errors:
            continue
        entry = result.configs.get(broker, {}).get(TIME_SCALE_KEY)
        try:
            scale = float(entry.value) if entry is not None and entry.value is not None else 1.0
        except ValueError:
            return 1.0
        return scale if math.isfinite(scale) and scale > 0 else 1.0
    return 1.0


def cluster_timing(clock: Callable[[], float], sleep: Callable[[float], None], scale: float
                   ) -> tuple[Callable[[], float], Callable[[float], None]]:
    """A clock and a sleeper in cluster seconds over wall-clock ones (`scale` cluster seconds
    per wall second)."""
    if scale == 1.0:
        return clock, sleep
    return (lambda: clock() * scale), (lambda seconds: sleep(seconds / scale))


@dataclass(frozen=True)
class WatchRequest:
    """What to watch and what to do along the way.

    `targets` None watches every reassignment in flight; with targets, only those partitions
    (and, with `pace`, they are submitted in waves by the loop itself).
    """

    targets: tuple[PartitionTarget, ...] | None = None
    interval_s: float = 10.0
    timeout_s: float | None = None
    keep_throttles: bool = False
    fail_on_stall: bool = False
    stall_after_s: float | None = None
    """default: three intervals, at least 30 s"""
    pace: PaceLimits | None = None
    leader_rate: int | None = None
    follower_rate: int | None = None
    additional: bool = False
    retarget_in_flight: bool = False
    auto: AutoThrottlePolicy | None = None
    capacities: Capacities | None = None
    network_capacity: tuple[float, float] | None = None
    """(in, out) for every broker whose capacity is not in `capacities`"""
    dry_run: bool = False
    time_scale: float | None = None
    """cluster seconds per wall second; None reads it from the cluster (see `read_time_scale`)"""

    @property
    def stall_window_s(self) -> float:
        return self.stall_after_s if self.stall_after_s is not None else max(3 * self.interval_s, 30.0)

    def capacity(self, broker: int) -> tuple[float | None, float | None]:
        if self.capacities and broker in self.capacities:
            return self.capacities[broker]
        return self.network_capacity if self.network_capacity is not None else (None, None)


# ---- events -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProgressEvent:
    at: float
    view: ProgressView
    model: ModelEta | None
    in_flight: int
    kind: str = "progress"
    time_scale: float = 1.0
    """cluster seconds per wall second of the times and rates (not 1 on an accelerated sandbox)"""
    down: tuple[int, ...] = ()
    """brokers of the moves that did not answer this poll (their moves cannot progress)"""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.kind, "at": round(self.at, 3), **self.view.to_dict(),
                               "reassignments_in_flight": self.in_flight, "time_scale": self.time_scale,
                               "brokers_not_answering": list(self.down)}
        out.update(self.model.to_dict() if self.model is not None else {"eta_model_s": None})
        out["moves"] = [m.to_dict() for m in self.view.moves]
        return out


@dataclass(frozen=True)
class StalledEvent:
    at: float
    stall: StallDiagnosis
    kind: str = "stalled"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), **self.stall.to_dict()}


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
class TimeoutEvent:
    at: float
    view: ProgressView
    kind: str = "timeout"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "at": round(self.at, 3), "active_moves": len(self.view.active),
                "fraction": round(self.view.fraction, 6)}


WatchEvent = ProgressEvent | StalledEvent | WaveEvent | ThrottleEvent | CompleteEvent | TimeoutEvent


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


# ---- the loop ---------------------------------------------------------------------------------
@dataclass
class _Poll:
    """What one poll read from the cluster."""

    in_flight: dict[TopicPartition, Reassignment]
    watched: dict[TopicPartition, Reassignment]
    partitions: dict[TopicPartition, PartitionInfo]
    report: LogDirReport


@dataclass
class _Loop:
    port: ClusterPort
    request: WatchRequest
    store: JournalStore | None
    emit: Callable[[WatchEvent], None]
    broker_ids: list[int]
    pacer: Pacer | None = None
    tracker: ProgressTracker = field(default_factory=ProgressTracker)
    reported: set[MoveKey] = field(default_factory=set)
    stalls: list[StallDiagnosis] = field(default_factory=list)
    last_change_s: float | None = None
    meter: WriteRateMeter = field(default_factory=WriteRateMeter)
    seen_topics: set[str] = field(default_factory=set)
    guard: Callable[[str], None] | None = None

    @property
    def target_set(self) -> set[TopicPartition] | None:
        return None if self.request.targets is None else {t.tp for t in self.request.targets}

    def poll(self, now: float) -> _Poll:
        if self.guard is not None and self.pacer is not None:
            self.guard("poll")  # the execution lock: renew the lease, stop when abort asks
        if self.pacer is not None:
            self.pacer.retry_pending()
        in_flight = self.port.list_reassignments()
        if self.pacer is not None and not self.pacer.finished:
            topics = sorted({tp.topic for tp in in_flight} | {p.tp.topic for p in self.pacer.pending})
            infos = {p.tp: p for p in self.port.describe_topics(topics)} if topics else {}
            wave = self.pacer.step(in_flight, infos)
            if wave is not None:
                self.emit(WaveEvent(now, wave, len(self.pacer.pending)))
                in_flight = self.port.list_reassignments()
        wanted = self.target_set
        watched = {tp: r for tp, r in in_flight.items() if wanted is None or tp in wanted}
        self.seen_topics |= {tp.topic for tp in watched}
        topics = sorted({tp.topic for tp in watched})
        partitions = {p.tp: p for p in self.port.describe_topics(topics)} if topics else {}
        brokers = sorted({b for r in watched.values() for b in r.adding}
                         | {p.leader for tp, p in partitions.items() if tp in watched and p.leader is not None})
        report = self.port.log_dir_sizes(brokers, partitions=sorted(watched)) if watched else LogDirReport()
        return _Poll(in_flight, watched, partitions, report)

    def model(self, view: ProgressView, poll: _Poll, throttles: ThrottleView) -> tuple[LiveModel | None, ModelEta | None]:
        pending = self.pacer.pending if self.pacer is not None else []
        if not view.active and not pending:
            return None, None
        capacities = {b: self.request.capacity(b) for b in self.broker_ids}
        live = build_live_model(view, poll.partitions, throttles, self.broker_ids,
                                write_rates=self.tracker.write_rates(), pending=pending,
                                limits=self.request.pace, pending_throttled=self.pacer.throttled if self.pacer else False,
                                capacities=capacities)
        return live, diagnose(live)

    def check_stalls(self, now: float, view: ProgressView, eta: ModelEta | None) -> list[StallDiagnosis]:
        """Stalls seen for the first time: observed (the lag did not shrink over the window),
        explained by the model when it agrees."""
        by_model = {s.key: s for s in (eta.stalls if eta is not None else ())}
        fresh = []
        for m in view.active:
            if not m.stalled:
                self.reported.discard(m.key)
                continue
            if m.key in self.reported:
                continue
            found = by_model.get(m.key)
            diagnosis = found if found is not None else observed_stall(m.key, m.write_bps, m.copy_bps)
            if found is not None and m.copy_bps is not None:
                diagnosis = StallDiagnosis(found.key, found.reason, found.write_bps, found.limit, found.broker,
                                           found.needed_bps, found.fixes, m.copy_bps)
            self.reported.add(m.key)
            fresh.append(diagnosis)
            self.emit(StalledEvent(now, diagnosis))
        self.stalls.extend(fresh)
        return fresh

    def auto_throttle(self, now: float, view: ProgressView, live: LiveModel | None, throttles: ThrottleView) -> None:
        policy = self.request.auto
        if policy is None or live is None or (view.active and view.throughput_bps is None):
            return  # decide on measured write rates, not on the first sample
        involved = sorted(int(b) for b in set(live.inp.source[live.inp.source >= 0].tolist())
                          | set(live.inp.dest.tolist()))
        ids = [int(b) for b in live.inp.broker_ids]
        involved_ids = sorted({ids[i] for i in involved})
        current = {b: (throttles.broker(b).leader_rate, throttles.broker(b).follower_rate) for b in involved_ids}
        cap = None
        reason = "to keep the target headroom"
        if policy.target_headroom is not None:
            infos = self.port.describe_topics()
            sizes = self.port.log_dir_sizes(involved_ids)
            leaders = {p.tp: s for p in infos if p.leader is not None
                       and (s := sizes.size(p.tp, p.leader)) is not None}
            self.meter.update(now, leaders)
            rates = self.meter.rates()
            if not rates:
                return  # one more sample is needed before client traffic is known
            brokers = self.port.describe_brokers().brokers
            client_in, client_out = client_traffic_of(brokers, infos, rates, policy.consumer_fanout)
            cap = headroom_rates(policy, involved_ids, {b: self.request.capacity(b) for b in involved_ids},
                                 client_in, client_out, leader_bases(live))
        if policy.deadline_s is not None:
            proposed, reason = deadline_rates(policy, live, now, cap)
            proposed = {b: proposed[b] for b in involved_ids if b in proposed}
        else:
            assert cap is not None
            proposed = cap
        decision = decide(policy, now, self.last_change_s, current, proposed, reason, involved=involved_ids)
        if decision is None:
            return
        self.last_change_s = now
        result = None
        if not self.request.dry_run:
            change = plan_throttle_set(self.port, ThrottleSetRequest(per_broker=decision.rates))
            result = apply_throttle_change(self.port, change, store=self.store, command="auto-throttle")
            if self.pacer is not None:
                self.pacer.set_rates(decision.rates)
        self.emit(ThrottleEvent(now, decision, result, self.request.dry_run))

    def finish(self, now: float, view: ProgressView, poll: _Poll) -> CompleteEvent:
        statuses: tuple[PartitionStatus, ...] = ()
        if self.request.targets is not None:
            current = describe_known(self.port, {t.topic for t in self.request.targets})
            statuses = partition_states(self.request.targets, poll.in_flight, current)
        kept: str | None = None
        clear = None
        if self.request.keep_throttles:
            kept = "--keep-throttles was given"
        elif poll.in_flight:
            kept = (f"{len(poll.in_flight)} other reassignment(s) still run in the cluster; the throttles are "
                    "cleared when nothing moves (run kreassign watch or verify again)")
        else:
            topics = self.seen_topics | {t.topic for t in self.request.targets or ()}
            clear = clear_all_throttles(self.port, store=self.store, force=True, dry_run=self.request.dry_run,
                                        leftover_topics=topics)
        return CompleteEvent(now, view, statuses, clear, kept)


def watch(port: ClusterPort, request: WatchRequest, *, store: JournalStore | None,
          clock: Callable[[], float], sleep: Callable[[float], None],
          emit: Callable[[WatchEvent], None] = lambda event: None,
          guard: Callable[[str], None] | None = None) -> WatchResult:
    """Watch (and with a pace, submit) reassignments until they finish, stall or time out.

    Returns the exit status: OK when everything finished (throttles restored unless kept),
    CANNOT_COMPLETE when a move stalled and `fail_on_stall`, IN_PROGRESS on timeout.

    Raises:
        ClusterError: the cluster could not be read or refused a change.
        ReassignmentInProgress, AdminCommandFailed: a paced plan failed Kafka's checks.
    """
    broker_ids = sorted(b.id for b in port.describe_brokers().brokers)
    scale = request.time_scale if request.time_scale is not None else read_time_scale(port, broker_ids)
    clock, sleep = cluster_timing(clock, sleep, scale)
    start = clock()
    loop = _Loop(port, request, store, emit, broker_ids, tracker=ProgressTracker(stall_after_s=request.stall_window_s),
                 guard=guard)
    if request.pace is not None:
        if request.targets is None:
            from kreassign.cluster.errors import InputError

            raise InputError("pacing needs the plan: give the reassignment JSON file")
        loop.pacer = Pacer(port, request.targets, request.pace, leader_rate=request.leader_rate,
                           follower_rate=request.follower_rate, store=None if request.dry_run else store,
                           additional=request.additional, interval_s=request.interval_s,
                           retarget_in_flight=request.retarget_in_flight, guard=guard)
        loop.pacer.start()
        if request.dry_run:
            in_flight = port.list_reassignments()
            infos = {p.tp: p for p in port.describe_topics(sorted({tp.topic for tp in in_flight}))} if in_flight else {}
            wave = loop.pacer.next_wave(in_flight, infos)
            return WatchResult(ExitStatus.OK, ProgressView(0.0, (), loop.pacer.pending_bytes),
                               first_wave=tuple(p.tp for p in wave))
    journal = loop.pacer.journal.path if loop.pacer is not None and loop.pacer.journal is not None else None
    polls = 0
    view = ProgressView(0.0, ())
    while True:
        now = clock() - start
        poll = loop.poll(now)
        polls += 1
        sample = sample_moves(now, poll.watched, poll.partitions, poll.report)
        view = loop.tracker.update(sample, pending_bytes=loop.pacer.pending_bytes if loop.pacer else 0)
        pending_topics = {p.tp.topic for p in loop.pacer.pending} if loop.pacer else set()
        throttle_brokers = sorted({b for r in poll.in_flight.values() for b in r.replicas}
                                  | {b for p in (loop.pacer.pending if loop.pacer else []) for b in p.adding}
                                  | {p.leader for p in poll.partitions.values() if p.leader is not None})
        throttles = read_throttle_view(port, brokers=throttle_brokers,
                                       topics=sorted({tp.topic for tp in poll.watched} | pending_topics),
                                       in_flight=poll.in_flight)
        live, eta = loop.model(view, poll, throttles)
        emit(ProgressEvent(now, view, eta, len(poll.in_flight), time_scale=scale, down=tuple(sorted(poll.report.unreachable))))
        fresh = loop.check_stalls(now, view, eta)
        if fresh and request.fail_on_stall:
            return WatchResult(ExitStatus.CANNOT_COMPLETE, view, tuple(loop.stalls), polls=polls, journal_path=journal)
        loop.auto_throttle(now, view, live, throttles)
        if not poll.watched and (loop.pacer is None or loop.pacer.finished):
            done = loop.finish(now, view, poll)
            emit(done)
            status = ExitStatus.ERROR if done.mismatched or (done.clear and not done.clear.complete) else ExitStatus.OK
            return WatchResult(status, view, tuple(loop.stalls), done.clear, polls, journal_path=journal)
        if request.timeout_s is not None and now >= request.timeout_s - _CLOCK_SLACK:
            emit(TimeoutEvent(now, view))
            return WatchResult(ExitStatus.IN_PROGRESS, view, tuple(loop.stalls), polls=polls, journal_path=journal)
        sleep(request.interval_s)


def watch_plan(port: ClusterPort, targets: Sequence[PartitionTarget], *, store: JournalStore | None,
               clock: Callable[[], float], sleep: Callable[[float], None],
               emit: Callable[[WatchEvent], None] = lambda event: None, interval_s: float = 10.0,
               timeout_s: float | None = None, keep_throttles: bool = False,
               fail_on_stall: bool = False, dry_run: bool = False) -> WatchResult:
    """`verify --watch`: watch a plan's partitions until they finish, then restore throttles
    (with `dry_run`, say which would be restored)."""
    request = WatchRequest(targets=tuple(targets), interval_s=interval_s, timeout_s=timeout_s,
                           keep_throttles=keep_throttles, fail_on_stall=fail_on_stall, dry_run=dry_run)
    return watch(port, request, store=store, clock=clock, sleep=sleep, emit=emit)
