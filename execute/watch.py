"""The watch loop: progress, ETAs, stall detection, pacing and auto-throttle until moves finish.

Every `interval_s` of the injected clock it reads the reassignments, the partitions' leaders
and DescribeLogDirs of the brokers involved, and emits events:

* `progress`: per move and overall bytes copied, throughput, the ETA extrapolated from the
  observed rates, and the ETA of the replication model run from the current state (per move and
  overall, one run); the first comes at once, while the write-rate sample runs, and a figure a
  poll lacks is held at its last value (`watch_hold`);
* `stalled`: a move whose lag has not shrunk for `stall_after_s`; when the model agrees that its
  partition's writes exceed its throttled share, the event names the rates that would work;
* `wave` (with a pace): partitions submitted as earlier moves freed their brokers;
* `throttle` (with auto-throttle): rates changed toward the target, journaled;
* `complete` (throttles restored from the journal unless kept) or `timeout`.

Nothing here sleeps or reads the wall clock: `clock` and `sleep` are injected, so tests step
simulated time (the sandbox's `advance`) instead of waiting. Every duration and rate is in
cluster seconds: a sandbox running faster than the wall clock says so through the broker config
`kreassign.sandbox.time.scale`, read once at the start (real Kafka does not report it: scale 1).

What it is asked is `watch_request.WatchRequest`; what it emits, `watch_events`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kreassign.cluster.errors import ExitStatus
from kreassign.cluster.broker_metrics import BrokerMetrics, BrokerReading, broker_metrics, missing_note
from kreassign.cluster.capture import take_reading
from kreassign.cluster.client_latency import BrokerLatency, Impact, impact, measure_baseline, steering_impact, summarize
from kreassign.cluster.metrics_source import read_brokers
from kreassign.cluster.model import PartitionInfo, PartitionTarget, Reassignment, TopicPartition, WriteRates
from kreassign.cluster.port import ClusterPort, LogDirReport
from kreassign.cluster.time_scale import cluster_timing, read_time_scale
from kreassign.cluster.write_sample import Reading, sampled_rates
from kreassign.execute.impact_throttle import ImpactBound, impact_step
from kreassign.execute.auto_throttle import (
    AutoThrottlePolicy,
    Rates,
    WriteRateMeter,
    client_traffic_of,
    deadline_rates,
    decide,
    headroom_rates,
    leader_bases,
)
from kreassign.execute.journal import Journal, JournalStore
from kreassign.execute.lock import ExecutionLock
from kreassign.execute.live_eta import LiveModel, ModelEta, StallDiagnosis, build_live_model, diagnose, observed_stall
from kreassign.execute.verify import PartitionStatus, partition_states, settled_replicas
from kreassign.execute.pacing import Pacer
from kreassign.execute.throttle_io import Confirm
from kreassign.execute.progress import MoveKey, ProgressTracker, ProgressView, sample_moves
from kreassign.execute.live_throttle import (
    Retry,
    ThrottleSetRequest,
    ThrottleView,
    apply_throttle_change,
    clear_all_throttles,
    plan_throttle_set,
    read_throttle_view,
)
from kreassign.execute.watch_events import (
    BrokerRow,
    CompleteEvent,
    ProgressEvent,
    RunRatesEvent,
    StallClearedEvent,
    StalledEvent,
    ThrottleEvent,
    TimeoutEvent,
    WaitingEvent,
    WatchEvent,
    WatchResult,
    WaveEvent,
    broker_rows,
)
from kreassign.execute.watch_hold import Held, Keeper, RateSourceTracker
from kreassign.execute.watch_request import WatchRequest

_CLOCK_SLACK = 1e-6  # a clock stepped in float increments may land a hair short of the timeout
_MIN_METRICS_WINDOW_S = 1.0  # counters read closer together than this give no rate yet
STALL_CLEAR_POLLS = 2
"""a reported stall is over once its move progressed in this many polls in a row (hysteresis: a
move that stalls and recovers on alternate polls is reported once, not on every poll)"""


# ---- the loop ---------------------------------------------------------------------------------
@dataclass
class _Poll:
    """What one poll read from the cluster."""

    in_flight: dict[TopicPartition, Reassignment]
    watched: dict[TopicPartition, Reassignment]
    partitions: dict[TopicPartition, PartitionInfo]
    report: LogDirReport
    waiting: dict[TopicPartition, PartitionInfo] = field(default_factory=dict)
    """the partitions of the topics the pacer has yet to submit moves of (their write rates)"""


@dataclass
class _Loop:
    port: ClusterPort
    request: WatchRequest
    store: JournalStore | None
    emit: Callable[[WatchEvent], None]
    broker_ids: list[int]
    pacer: Pacer | None = None
    tracker: ProgressTracker = field(default_factory=ProgressTracker)
    reported: dict[MoveKey, StallDiagnosis] = field(default_factory=dict)
    """stalls reported and not cleared yet"""
    moving_again: dict[MoveKey, int] = field(default_factory=dict)
    """polls in a row in which a reported stall's move progressed"""
    stalls: list[StallDiagnosis] = field(default_factory=list)
    last_change_s: float | None = None
    meter: WriteRateMeter = field(default_factory=WriteRateMeter)
    seen_topics: set[str] = field(default_factory=set)
    sampled: dict[TopicPartition, float] = field(default_factory=dict)
    """write rates of the sample (its window starts before the first poll); the polls' own
    estimates replace them"""
    sample_first: tuple[Reading, LogDirReport, str | None] | None = None
    """the sample's first reading, while its window runs"""
    sample_parts: list[PartitionInfo] = field(default_factory=list)
    source: RateSourceTracker = field(default_factory=RateSourceTracker)
    keeper: Keeper = field(default_factory=Keeper)
    topic_bytes_in: dict[str, float] = field(default_factory=dict)
    """bytes/s written to each topic, from the brokers' metrics at the last poll"""
    guard: Callable[[str], None] | None = None
    lock: ExecutionLock | None = None
    """the run's execution lock (a paced run): rate changes asked through it are taken at each poll"""
    scraped: dict[int, BrokerReading] = field(default_factory=dict)
    baseline_p99: dict[int, float] = field(default_factory=dict)
    """each broker's first measured produce p99: the baseline of --max-impact"""
    canary_baseline: tuple[BrokerLatency, ...] = ()
    canary_worst: float | None = None
    """the canary's worst impact at the last poll (None: no canary)"""

    def canary_now(self) -> tuple[tuple[BrokerLatency, ...], tuple[Impact, ...]]:
        """This poll's canary per broker and its impact against the baseline (a poll's requests
        are judged alone: a window's p99 is nearly its slowest request, which would outlive the
        throttle change that ended it)."""
        if self.request.canary is None:
            return (), ()
        now = summarize(self.request.canary())
        impacts = impact(self.canary_baseline, now)
        auto = self.request.auto
        self.canary_worst = steering_impact(impacts, None if auto is None else auto.max_impact)
        return tuple(now.values()), tuple(impacts.values())

    def client_metrics(self, now: float) -> tuple[tuple[BrokerMetrics, ...], str | None]:
        """Per broker, what its metrics say since the previous poll; and what is missing."""
        endpoints = self.request.metrics
        if endpoints is None:
            return (), "no --metrics-url: client latency is not measured (the admin API shows replication only)"
        notes: list[str] = []
        readings = read_brokers(endpoints, self.request.metric_names, now, warn=notes.append)
        out = {b: broker_metrics(self.scraped[b], r) for b, r in readings.items()
               if b in self.scraped and r.at - self.scraped[b].at >= _MIN_METRICS_WINDOW_S}
        self.scraped.update({b: r for b, r in readings.items() if b in out or b not in self.scraped})
        topics: dict[str, float] = {}
        for m in out.values():
            for topic, rate in m.bytes_in_bps.items():
                topics[topic] = topics.get(topic, 0.0) + rate
        self.topic_bytes_in = topics
        note = missing_note(out)
        return tuple(out[b] for b in sorted(out)), "; ".join(notes + ([note] if note else [])) or None

    def begin_sample(self, clock: Callable[[], float]) -> None:
        """Take the first reading of the write-rate sample; the polls go on meanwhile (the first
        screen shows the model's ETA at once, with the rates known so far)."""
        wanted = self.target_set if self.target_set is not None else set(self.port.list_reassignments())
        topics = sorted({tp.topic for tp in wanted})
        if self.request.sample_s <= 0 or not topics or (self.request.pace is not None and self.request.dry_run):
            return  # (a paced dry run names the first wave and never polls: no sample to wait for)
        self.sample_parts = [p for p in self.port.describe_topics(topics) if p.tp in wanted]
        self.sample_first = take_reading(self.port, self.sample_parts, clock)
        self.source.start_sample(self.request.sample_s)

    def sample_left(self, clock: Callable[[], float]) -> float | None:
        """Cluster seconds until the sample's window is over (None: no sample runs)."""
        if self.sample_first is None:
            return None
        return max(self.sample_first[0].at + self.request.sample_s - clock(), 0.0)

    def end_sample(self, clock: Callable[[], float], now: float) -> None:
        """At a poll at or after the end of the sample's window: the second reading, and the rates."""
        left = self.sample_left(clock)
        if left is None or left > _CLOCK_SLACK or self.sample_first is None:
            return
        first, _, note1 = self.sample_first
        second, _, note2 = take_reading(self.port, self.sample_parts, clock, with_offsets=first.offsets is not None)
        self.sampled, origin = sampled_rates(first, second, (note1, note2), None)
        self.sample_first = None
        self.source.sampled(origin, now)

    def write_rates(self, partitions: Mapping[TopicPartition, PartitionInfo] | None = None) -> dict[TopicPartition, float]:
        """Each partition's write rate: the polls' own estimate, else the sample, else its share of
        its topic's bytes in from the brokers' metrics (spread evenly over the topic's partitions)."""
        spread: dict[TopicPartition, float] = {}
        if self.topic_bytes_in and partitions:
            counts: dict[str, int] = {}
            for tp in partitions:
                counts[tp.topic] = counts.get(tp.topic, 0) + 1
            spread = {tp: self.topic_bytes_in[tp.topic] / counts[tp.topic] for tp in partitions
                      if tp.topic in self.topic_bytes_in}
        return {**spread, **self.sampled, **self.tracker.write_rates()}

    def rates_measured(self, view: ProgressView) -> WriteRates | None:
        """How this poll measured every moving partition's write rate: the brokers' metrics, or
        the polls once every moving partition has two of them; None when it did not."""
        if self.topic_bytes_in:
            return WriteRates("measured", method="metrics", note="bytes in per topic from the brokers' metrics")
        if view.active and all(m.write_bps is not None for m in view.active):
            return WriteRates("measured", method="sizes", note="from successive polls of the log sizes")
        return None

    @property
    def target_set(self) -> set[TopicPartition] | None:
        return None if self.request.targets is None else {t.tp for t in self.request.targets}

    def take_rate_change(self, now: float) -> None:
        """A `throttle set` addressed to this run (seen by the lock's check): apply it through
        the pacer, which journals it, and answer the asker."""
        if self.lock is None or self.pacer is None:
            return
        asked = self.lock.take_rates()
        if asked is None:
            return
        if self.request.dry_run:
            self.lock.answer_rates(asked, applied=(), pending=(), message="a dry run changes nothing", refused=True)
            return
        applied, skipped = self.pacer.change_rates(asked.leader_rate, asked.follower_rate, asked.brokers, by=asked.by)
        self.lock.answer_rates(asked, applied=applied, pending=tuple(sorted(skipped)), message="")
        self.emit(RunRatesEvent(now, asked.leader_rate, asked.follower_rate, asked.brokers, applied,
                                tuple(sorted(skipped)), asked.by))

    def poll(self, now: float) -> _Poll:
        if self.guard is not None and self.pacer is not None:
            self.guard("poll")  # the execution lock: renew the lease, stop when abort asks
        self.take_rate_change(now)
        if self.pacer is not None:
            self.pacer.retry_pending()
        in_flight = self.port.list_reassignments()
        infos: dict[TopicPartition, PartitionInfo] = {}
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
        waiting = self.pacer.pending if self.pacer is not None else []
        waiting_topics = {t.tp.topic for t in waiting}
        return _Poll(in_flight, watched, partitions, report,
                     {tp: p for tp, p in infos.items() if tp.topic in waiting_topics})

    def figures(self, now: float, view: ProgressView, eta: ModelEta | None) -> dict[str, Held]:
        """This poll's throughput and ETAs, each held at its last value when the poll lacks it."""
        done = not view.active and not view.pending_bytes
        model = eta.seconds if eta is not None else (0.0 if done else None)
        return {"throughput": self.keeper.keep("throughput", view.throughput_bps, now),
                "observed": self.keeper.keep("observed", view.eta_s, now, counts_down=True),
                "eta": self.keeper.keep("eta", model, now, counts_down=True)}

    def model(self, view: ProgressView, poll: _Poll, throttles: ThrottleView) -> tuple[LiveModel | None, ModelEta | None]:
        pending = self.pacer.pending if self.pacer is not None else []
        if not view.active and not pending:
            return None, None
        capacities = {b: self.request.capacity(b) for b in self.broker_ids}
        live = build_live_model(view, poll.partitions, throttles, self.broker_ids,
                                # moves not yet submitted take the writes of their topics too
                                write_rates=self.write_rates({**poll.waiting, **poll.partitions}), pending=pending,
                                limits=self.request.pace, pending_throttled=self.pacer.throttled if self.pacer else False,
                                capacities=capacities, poll_s=self.request.interval_s)
        return live, diagnose(live)

    def check_stalls(self, now: float, view: ProgressView, eta: ModelEta | None) -> list[StallDiagnosis]:
        """Stalls that start now, reported once: observed (the lag did not shrink over the window,
        and the move copies no faster than its partition is written, so the message holds), and
        explained by the model when it agrees. A reported stall clears, also once, when its move
        finishes or has progressed for `STALL_CLEAR_POLLS` polls in a row."""
        by_model = {s.key: s for s in (eta.stalls if eta is not None else ())}
        active = {m.key: m for m in view.active}
        for key in sorted(set(self.reported) - set(active)):
            self.emit(StallClearedEvent(now, self.reported.pop(key), finished=True))
            self.moving_again.pop(key, None)
        fresh = []
        for m in view.active:
            if m.key in self.reported:
                if m.stalled:
                    self.moving_again.pop(m.key, None)
                    continue
                self.moving_again[m.key] = self.moving_again.get(m.key, 0) + 1
                if self.moving_again[m.key] >= STALL_CLEAR_POLLS:
                    self.emit(StallClearedEvent(now, self.reported.pop(m.key), finished=False))
                    del self.moving_again[m.key]
                continue
            if not m.stalled:
                continue
            found = by_model.get(m.key)
            if found is None and m.copy_bps is not None and m.write_bps is not None and m.copy_bps > m.write_bps:
                continue  # it copies faster than it is written: the lag will shrink, not a stall yet
            diagnosis = found if found is not None else observed_stall(m.key, m.write_bps, m.copy_bps)
            if found is not None and m.copy_bps is not None:
                diagnosis = StallDiagnosis(found.key, found.reason, found.write_bps, found.limit, found.broker,
                                           found.needed_bps, found.fixes, m.copy_bps)
            self.reported[m.key] = diagnosis
            fresh.append(diagnosis)
            self.emit(StalledEvent(now, diagnosis))
        self.stalls.extend(fresh)
        return fresh

    def read_baselines(self, now: float) -> None:
        """Before the first poll: the canary's p99 per broker and the brokers' first metrics
        reading (the start of the counters' first window, and with --max-impact the p99 baseline)."""
        if self.request.canary is not None:
            self.canary_baseline = tuple(measure_baseline(self.request.canary).values())
        if self.request.metrics is None:
            return
        self.scraped = read_brokers(self.request.metrics, self.request.metric_names, now)
        if self.request.auto is not None and self.request.auto.max_impact is not None:
            self.baseline_p99 = {b: r.produce_ms["0.99"] for b, r in self.scraped.items() if r.produce_ms.get("0.99")}

    def impact_rates(self, policy: AutoThrottlePolicy, sides: Mapping[int, tuple[bool, bool]], current: Rates,
                     client: Sequence[BrokerMetrics], rows: Sequence[BrokerRow], deadline: Rates | None,
                     ) -> tuple[dict[int, tuple[int | None, int | None]], str]:
        """Per broker, one impact step of the sides its moves use (`sides`: sends, receives), by
        the worst broker's produce p99 over its baseline. An unthrottled side gets a throttle only
        when the impact is over the bound (from what it carries now)."""
        assert policy.max_impact is not None
        for m in client:
            if m.produce_p99_ms is not None:
                self.baseline_p99.setdefault(m.broker, m.produce_p99_ms)
        now_p99 = {m.broker: m.produce_p99_ms for m in client if m.produce_p99_ms is not None}
        rises = [p / self.baseline_p99[b] - 1 for b, p in now_p99.items() if self.baseline_p99.get(b, 0) > 0]
        measured = self.canary_worst if self.canary_worst is not None else (max(rises) if rises else None)
        bound = ImpactBound(policy.max_impact)
        seen = {r.broker: r for r in rows}
        out: dict[int, tuple[int | None, int | None]] = {}
        reasons: list[str] = []
        for b, used_sides in sorted(sides.items()):
            row = seen.get(b)
            new: list[int | None] = []
            for i, (rate, used, steer) in enumerate(zip(current.get(b, (None, None)),
                                                        (row.out_bps if row else 0.0, row.in_bps if row else 0.0),
                                                        used_sides)):
                if not steer:
                    new.append(None)
                    continue
                start = rate if rate is not None else policy.clamp(used)
                need = None if deadline is None or b not in deadline else deadline[b][i]
                step = impact_step(bound, start, measured, min_rate=policy.min_rate, max_rate=policy.max_rate,
                                   deadline_rate=need)
                new.append(None if rate is None and step.rate >= start else step.rate)
                reasons.append(step.conflict or step.reason)
            out[b] = (new[0], new[1])
        reason = next((r for r in reasons if "cannot both hold" in r), reasons[0] if reasons else "")
        return out, reason

    def auto_throttle(self, now: float, view: ProgressView, live: LiveModel | None, throttles: ThrottleView,
                      client: Sequence[BrokerMetrics] = (), rows: Sequence[BrokerRow] = ()) -> None:
        policy = self.request.auto
        if policy is None or live is None or (view.active and view.throughput_bps is None) or self.sample_first:
            return  # decide on measured write rates, not on the first sample nor while the sample runs
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
        if policy.max_impact is not None:
            needed = deadline_rates(policy, live, now)[0] if policy.deadline_s is not None else None
            sending = {ids[i] for i in set(live.inp.source[live.inp.source >= 0].tolist())}
            receiving = {ids[i] for i in set(live.inp.dest.tolist())}
            sides = {b: (b in sending, b in receiving) for b in involved_ids}
            proposed, reason = self.impact_rates(policy, sides, current, client, rows, needed)
            if cap is not None:
                proposed = {b: tuple(min(x, c) if x is not None and c is not None else x  # type: ignore[misc]
                                     for x, c in zip(r, cap.get(b, (None, None)))) for b, r in proposed.items()}
        elif policy.deadline_s is not None:
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
            result = apply_throttle_change(self.port, change, store=self.store, command="auto-throttle",
                                           journal=self.pacer.journal if self.pacer is not None else None)
            if self.pacer is not None:
                self.pacer.set_rates(decision.rates)
        self.emit(ThrottleEvent(now, decision, result, self.request.dry_run))

    def finish(self, now: float, view: ProgressView, poll: _Poll, clock: Callable[[], float],
               sleep: Callable[[float], None]) -> CompleteEvent:
        statuses: tuple[PartitionStatus, ...] = ()
        if self.request.targets is not None:
            current = settled_replicas(self.port, {t.tp: t.replicas for t in self.request.targets
                                                   if t.tp not in poll.in_flight}, sleep=sleep)
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
            unfinished = [] if self.pacer is not None or self.store is None else interrupted_runs(self.port, self.store)
            standing = [] if self.store is None else [
                j.path for j in self.store.journals(self.port.describe_brokers().cluster_id, open_only=True) if j.standing]
            if unfinished:
                kept = "; ".join(f"the run of {j.path} was interrupted with {n} partition(s) not at their target: "
                                 f"finish it with `kreassign resume --journal {j.path}` (it restores them at its end)"
                                 for j, n in unfinished)

            def waiting(brokers: tuple[int, ...], left: float) -> None:
                self.emit(WaitingEvent(now, f"broker(s) {','.join(map(str, brokers))} to answer, to restore "
                                            f"their throttles (trying {left:.0f}s more)", brokers))
            # kreassign's own watch never removes a throttle no run of it set (an operator's), nor
            # an operator's standing `throttle set`
            skip = [j.path for j, _ in unfinished] + standing
            clear = clear_all_throttles(self.port, store=self.store, force=True, dry_run=self.request.dry_run,
                                        leftover_topics=topics, foreign=False, skip=skip,
                                        retry=Retry(clock, sleep, self.request.clear_retry_s, min(self.request.interval_s, 5.0),
                                                    waiting))
        return CompleteEvent(now, view, statuses, clear, kept)


def interrupted_runs(port: ClusterPort, store: JournalStore) -> list[tuple[Journal, int]]:
    """Open journals whose plan is not done while nothing moves: runs that were interrupted
    (killed, or stopped by a fault) and that only `resume` finishes. A watch leaves them, and
    their throttles, alone (clearing would close the journal as if the plan were done)."""
    out = []
    for journal in store.journals(port.describe_brokers().cluster_id, open_only=True):
        if journal.state == "clearing":
            continue
        targets = journal.target_of()
        now = {p.tp: p.replicas for p in port.describe_topics(sorted({tp.topic for tp in targets}))} if targets else {}
        off = sum(1 for tp, t in targets.items() if tp in now and sorted(now[tp]) != sorted(t))
        if off:
            out.append((journal, off))
    return out


def watch(port: ClusterPort, request: WatchRequest, *, store: JournalStore | None,
          clock: Callable[[], float], sleep: Callable[[float], None],
          emit: Callable[[WatchEvent], None] = lambda event: None,
          guard: Callable[[str], None] | None = None, lock: ExecutionLock | None = None) -> WatchResult:
    """Watch (and with a pace, submit) reassignments until they finish, stall or time out.

    Returns the exit status: OK when everything finished (throttles restored unless kept),
    CANNOT_COMPLETE when a move stalled and `fail_on_stall`, IN_PROGRESS on timeout.

    Raises:
        ClusterError: the cluster could not be read or refused a change.
        ReassignmentInProgress, AdminCommandFailed: a paced plan failed Kafka's checks.
    """
    broker_ids = sorted(b.id for b in port.describe_brokers().brokers)
    scale = request.time_scale if request.time_scale is not None else read_time_scale(port, broker_ids)
    confirm = Confirm(clock, sleep)  # brokers apply a change in wall time, whatever the cluster's scale
    clock, sleep = cluster_timing(clock, sleep, scale)
    loop = _Loop(port, request, store, emit, broker_ids, tracker=ProgressTracker(stall_after_s=request.stall_window_s),
                 guard=guard, lock=lock)
    start = clock()
    loop.begin_sample(clock)
    loop.read_baselines(0.0)
    if request.pace is not None:
        if request.targets is None:
            from kreassign.cluster.errors import InputError

            raise InputError("pacing needs the plan: give the reassignment JSON file")
        loop.pacer = Pacer(port, request.targets, request.pace, leader_rate=request.leader_rate,
                           follower_rate=request.follower_rate, store=None if request.dry_run else store,
                           additional=request.additional, interval_s=request.interval_s,
                           retarget_in_flight=request.retarget_in_flight, guard=guard, confirm=confirm)
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
        loop.end_sample(clock, now)
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
        client, client_note = loop.client_metrics(now)
        live, eta = loop.model(view, poll, throttles)
        canary, canary_impact = loop.canary_now()
        if canary:
            client_note = None if client else "from the canary (no --metrics-url)"
        rows = broker_rows(view, throttles)
        loop.source.measured(loop.rates_measured(view), now)
        rates = loop.source.now()
        emit(ProgressEvent(now, view, eta, len(poll.in_flight), time_scale=scale, write_rates=rates.origin,
                           rates=rates, **loop.figures(now, view, eta), brokers=rows, client=client, client_note=client_note, canary=canary,
                           canary_impact=canary_impact, stalls=tuple(loop.reported.values()),
                           down=tuple(sorted(poll.report.unreachable))))
        fresh = loop.check_stalls(now, view, eta)
        if fresh and request.fail_on_stall:
            return WatchResult(ExitStatus.CANNOT_COMPLETE, view, tuple(loop.stalls), polls=polls, journal_path=journal)
        loop.auto_throttle(now, view, live, throttles, client, rows)
        if not poll.watched and (loop.pacer is None or loop.pacer.finished):
            done = loop.finish(now, view, poll, clock, sleep)
            emit(done)
            status = ExitStatus.ERROR if done.mismatched or (done.clear and not done.clear.complete) else ExitStatus.OK
            return WatchResult(status, view, tuple(loop.stalls), done.clear, polls, journal_path=journal)
        if request.timeout_s is not None and now >= request.timeout_s - _CLOCK_SLACK:
            emit(TimeoutEvent(now, view))
            return WatchResult(ExitStatus.IN_PROGRESS, view, tuple(loop.stalls), polls=polls, journal_path=journal)
        left = loop.sample_left(clock)  # the poll that ends the sample comes at the end of its window
        sleep(request.interval_s if left is None or left <= _CLOCK_SLACK else min(request.interval_s, left))


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
