"""The pacing loop: submit a plan in waves, at most N moves per broker and B bytes in flight.

`next_wave` (pure) picks, in the plan's order, the partitions whose moves fit in the free slots:
a move takes one send slot on the partition's leader and one receive slot on its destination,
as the replication model's `Admission` counts them, so the model's paced ETA and the loop agree.
A partition that does not fit lets later ones pass for broker slots but not for bytes, so big
partitions are not starved, and one larger than the byte budget runs alone.

`Pacer` applies waves through the cluster port: Kafka's checks on the whole plan first
(`prepare_execute`), one execution journal for the whole plan (so `verify`, `resume`, `abort`
and `throttle clear` find it), and for each wave the topic throttle lists recomputed from the
moves in flight plus the wave (Kafka's rules), rates on brokers that join, a wait until those
brokers read their rates back (`throttle_io.confirm_broker_configs`), then the submission, each
step journaled.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import numpy as np

from kreassign.cluster.errors import ClusterError, InputError, KreassignError
from kreassign.cluster.model import PartitionInfo, PartitionTarget, Reassignment, TopicPartition
from kreassign.cluster.port import ApiError, ClusterPort
from kreassign.throttle.configs import compute_move_map, rate_configs, throttle_plan
from kreassign.execute.errors import ExecuteFailed
from kreassign.execute.journal import Journal, JournalStore, journaled
from kreassign.execute.executor import (
    ExecutePlan,
    ExecuteRequest,
    journal_for_plan,
    prepare_execute,
    probe_submitted,
    waits_for_throttle,
)
from kreassign.execute.throttle_io import (
    Confirm,
    ThrottleSteps,
    apply_configs,
    apply_throttles,
    confirmed_step,
    inherit_previous,
    journaled_step,
    read_throttles,
)
from kreassign.predict.schedule import Order, start_order

SUBMIT_ATTEMPTS = 3
"""a wave's submission that fails (or times out) this many times in a row stops the run"""


@dataclass(frozen=True)
class PaceLimits:
    """How many moves may run at once, and in which order partitions start."""

    max_moves_per_broker: int | None = None
    max_inflight_bytes: int | None = None
    order: Order = "plan"

    def __post_init__(self) -> None:
        if self.max_moves_per_broker is not None and self.max_moves_per_broker < 1:
            raise InputError("--max-moves-per-broker must be at least 1")
        if self.max_inflight_bytes is not None and self.max_inflight_bytes <= 0:
            raise InputError("--max-inflight-bytes must be positive")
        if self.order not in get_args(Order):
            raise InputError(f"--order must be one of {', '.join(get_args(Order))}")

    def to_dict(self) -> dict[str, Any]:
        return {"max_moves_per_broker": self.max_moves_per_broker,
                "max_inflight_bytes": self.max_inflight_bytes, "order": self.order}


@dataclass(frozen=True)
class PendingPartition:
    """A partition of the plan not yet submitted: its leader (the source), the replicas it adds
    and its size."""

    target: PartitionTarget
    leader: int | None
    adding: tuple[int, ...]
    size: int
    position: int = 0
    """index in the plan file, for `--order plan`"""

    @property
    def tp(self) -> TopicPartition:
        return self.target.tp

    @property
    def bytes(self) -> int:
        return self.size * len(self.adding)


def order_pending(pending: Iterable[PendingPartition], order: Order) -> list[PendingPartition]:
    """Partitions in start order, by the same rule as the model's schedules; ties keep the
    plan's order."""
    items = sorted(pending, key=lambda p: p.position)
    sizes = np.array([p.bytes for p in items], dtype=np.int64)
    sources = np.array([-1 if p.leader is None else p.leader for p in items], dtype=np.int64)
    return [items[i] for i in start_order(sizes, sources, order)]


@dataclass(frozen=True)
class Slots:
    """Moves in flight now: per broker sending (as leader) and receiving, and their bytes."""

    out: Mapping[int, int] = field(default_factory=dict)
    into: Mapping[int, int] = field(default_factory=dict)
    bytes: int = 0

    @property
    def empty(self) -> bool:
        return not any(self.out.values()) and not any(self.into.values())


def in_flight_slots(in_flight: Mapping[TopicPartition, Reassignment],
                    leaders: Mapping[TopicPartition, int | None],
                    sizes: Mapping[TopicPartition, int]) -> Slots:
    """Count the moves of every reassignment in flight (ours or not: they all use the brokers)."""
    out: dict[int, int] = {}
    into: dict[int, int] = {}
    total = 0
    for tp, r in in_flight.items():
        leader = leaders.get(tp)
        for b in r.adding:
            into[b] = into.get(b, 0) + 1
            if leader is not None:
                out[leader] = out.get(leader, 0) + 1
        total += sizes.get(tp, 0) * len(r.adding)
    return Slots(out, into, total)


def next_wave(ordered: Sequence[PendingPartition], slots: Slots, limits: PaceLimits) -> list[PendingPartition]:
    """The partitions to submit now, in order, within the free slots and byte budget.

    A broker with nothing in flight takes a partition even if that partition alone exceeds the
    per-broker cap (a replication-factor change adding several replicas), so nothing waits forever.
    """
    cap = limits.max_moves_per_broker
    out, into = dict(slots.out), dict(slots.into)
    budget = None if limits.max_inflight_bytes is None else limits.max_inflight_bytes - slots.bytes
    idle = slots.empty
    chosen: list[PendingPartition] = []
    for p in ordered:
        if not p.adding:
            chosen.append(p)  # reorders and shrinks copy nothing
            continue
        if cap is not None:
            if p.leader is not None and not _fits(out.get(p.leader, 0), len(p.adding), cap):
                continue
            if any(not _fits(into.get(b, 0), 1, cap) for b in p.adding):
                continue
        if budget is not None and p.bytes > budget:
            if not (idle and not any(c.adding for c in chosen)):
                break  # bytes are not passed: the next partition waits for this one
        chosen.append(p)
        if budget is not None:
            budget -= p.bytes
        if p.leader is not None:
            out[p.leader] = out.get(p.leader, 0) + len(p.adding)
        for b in p.adding:
            into[b] = into.get(b, 0) + 1
    return chosen


def _fits(now: int, more: int, cap: int) -> bool:
    # An idle broker takes any one partition, even one adding more replicas than the cap.
    return now == 0 or now + more <= cap


# ---- applying ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Wave:
    """One submitted wave."""

    number: int
    partitions: tuple[TopicPartition, ...]
    bytes: int
    errors: Mapping[TopicPartition, ApiError] = field(default_factory=dict)
    throttled_brokers: tuple[int, ...] = ()
    skipped_brokers: Mapping[int, ApiError] = field(default_factory=dict)
    unconfirmed_brokers: tuple[int, ...] = ()
    """brokers that took their rate but had not applied it when the wave was submitted"""

    def to_dict(self) -> dict[str, Any]:
        return {"wave": self.number, "partitions": [str(tp) for tp in self.partitions], "bytes": self.bytes,
                "errors": {str(tp): str(e) for tp, e in sorted(self.errors.items())},
                "throttled_brokers": list(self.throttled_brokers),
                "skipped_brokers": {str(b): e.message for b, e in sorted(self.skipped_brokers.items())},
                "unconfirmed_brokers": list(self.unconfirmed_brokers)}


def _sizes(port: ClusterPort, infos: Mapping[TopicPartition, PartitionInfo]) -> dict[TopicPartition, int]:
    """Partition sizes: the leader's replica, or the largest one when the leader did not answer."""
    report = port.log_dir_sizes(partitions=list(infos))
    out: dict[TopicPartition, int] = {}
    for tp, info in infos.items():
        size = report.size(tp, info.leader) if info.leader is not None else None
        if size is None:
            size = max((s for s in (report.size(tp, b) for b in info.replicas) if s is not None), default=0)
        out[tp] = size
    return out


def _rates_to(rates: Mapping[int, tuple[int | None, int | None]]) -> dict[str, list[int | None]]:
    return {str(b): [lead, fol] for b, (lead, fol) in sorted(rates.items())}


def _rates_from(recorded: Any) -> dict[int, tuple[int | None, int | None]]:
    if not isinstance(recorded, dict):
        return {}
    try:
        return {int(b): (r[0], r[1]) for b, r in recorded.items()}
    except (TypeError, ValueError, IndexError, KeyError):
        return {}


class Pacer:
    """Submits a plan wave by wave as moves complete. Call `start` once, then `step` each poll.

    Args:
        port: the cluster.
        targets: the plan.
        limits: moves per broker, bytes in flight, order.
        leader_rate, follower_rate: throttles for the brokers of each wave (None: unthrottled).
        store: where the plan's journal lives (None: no journal, for dry runs and tests).
        additional: submit although other reassignments are running (Kafka's --additional).
        confirm: wait until the brokers read a rate change back before submitting (None: no wait).
    """

    def __init__(self, port: ClusterPort, targets: Sequence[PartitionTarget], limits: PaceLimits, *,
                 leader_rate: int | None = None, follower_rate: int | None = None,
                 store: JournalStore | None = None, additional: bool = False,
                 command: str = "execute --max-moves-per-broker", interval_s: float | None = None,
                 retarget_in_flight: bool = False, guard: Callable[[str], None] | None = None,
                 confirm: Confirm | None = None) -> None:
        by_tp = {t.tp: t for t in targets}  # a later duplicate wins, as in Kafka's map
        self.port = port
        self.targets = [by_tp[tp] for tp in dict.fromkeys(t.tp for t in targets)]
        self.limits = limits
        self.rates: dict[int, tuple[int | None, int | None]] = {}
        """per-broker (leader, follower) overrides, e.g. from auto-throttle"""
        self.leader_rate, self.follower_rate = leader_rate, follower_rate
        self.store, self.additional, self.command = store, additional, command
        self.interval_s, self.retarget_in_flight, self.guard = interval_s, retarget_in_flight, guard
        self.confirm = confirm
        self.plan: ExecutePlan | None = None
        self.journal: Journal | None = None
        self.pending: list[PendingPartition] = []
        self.applied_brokers: dict[int, dict[str, str]] = {}
        self.applied_topics: dict[str, dict[str, str]] = {}
        """throttle configs this process has set (and the brokers confirmed)"""
        self.sizes: dict[TopicPartition, int] = {}
        self.waves = 0
        self.submit_failures = 0
        """submissions that failed in a row (reset by one that the controller answers)"""

    @property
    def throttled(self) -> bool:
        return self.leader_rate is not None or self.follower_rate is not None or bool(self.rates)

    @property
    def finished(self) -> bool:
        return not self.pending

    @property
    def pending_bytes(self) -> int:
        return sum(p.bytes for p in self.pending)

    def start(self) -> ExecutePlan:
        """Check the whole plan as Kafka would, and open (or reopen) its journal.

        Raises:
            ReassignmentInProgress: reassignments run and `additional` is False.
            AdminCommandFailed: unknown brokers, topics or partitions.
        """
        resuming = False
        owned: list[TopicPartition] = []
        if self.store is not None:
            found = self.store.find(self.port.describe_brokers().cluster_id, self.targets)
            resuming = found is not None and found.is_open and bool(found.submitted)
            owned = list(found.submitted) if found is not None and found.is_open else []
            if found is not None and found.is_open and not self.rates:
                # per-broker rates auto-throttle chose before the run was interrupted
                self.rates = _rates_from(found.options.get("broker_rates"))
        plan = prepare_execute(self.port, ExecuteRequest(
            targets=tuple(self.targets), additional=self.additional or resuming,
            leader_rate=self.leader_rate, follower_rate=self.follower_rate,
            retarget_in_flight=self.retarget_in_flight), owned=owned)
        self.plan = plan
        infos = {p.tp: p for p in self.port.describe_topics(sorted({t.topic for t in self.targets}))}
        self.sizes = _sizes(self.port, {t.tp: infos[t.tp] for t in self.targets})
        if self.store is not None:
            # What `resume` needs to go on exactly as this run would: limits, order, rates, polls.
            options = {"paced": self.limits.to_dict(), "leader_rate": self.leader_rate,
                       "follower_rate": self.follower_rate, "additional": self.additional,
                       "interval_s": self.interval_s, "retarget_in_flight": self.retarget_in_flight,
                       "broker_rates": _rates_to(self.rates)}
            # Rates and lists are planned wave by wave; a journal taken up again keeps its state.
            self.journal = journal_for_plan(self.store, plan, command=self.command, options=options, reopen_as=None)
            self.journal.guard = self.guard
            # A wave whose submission reached the controller but not the journal (a crash between
            # the two) is moving to its target already: it is ours, not pending.
            taken = [t.tp for t in self.targets if t.tp in plan.in_flight
                     and tuple(plan.in_flight[t.tp].target) == tuple(t.replicas)]
            if set(taken) - set(self.journal.submitted):
                self.journal.update(submitted=sorted(set(self.journal.submitted) | set(taken)))
        submitted = set(self.journal.submitted) if self.journal is not None else set()
        pending = []
        for i, t in enumerate(self.targets):
            info = infos[t.tp]
            if t.tp in submitted or (tuple(info.replicas) == tuple(t.replicas) and t.tp not in plan.in_flight):
                continue
            adding = tuple(b for b in t.replicas if b not in plan.in_flight.get(t.tp, Reassignment(info.replicas)).original)
            pending.append(PendingPartition(t, info.leader, adding, self.sizes.get(t.tp, 0), i))
        self.pending = order_pending(pending, self.limits.order)
        return plan

    def set_rates(self, rates: Mapping[int, tuple[int | None, int | None]]) -> None:
        """Per-broker rates for the waves to come (auto-throttle), recorded in the journal so
        that `resume` goes on with them."""
        self.rates.update(rates)
        if self.journal is not None:
            self.journal.update(options={**self.journal.options, "broker_rates": _rates_to(self.rates)})

    def change_rates(self, leader_rate: int | None, follower_rate: int | None, brokers: Sequence[int] | None,
                     *, by: str) -> tuple[tuple[int, ...], dict[int, ApiError]]:
        """`throttle set` through the run: new rates for the brokers of the plan (all, or
        `brokers`; a side given as None keeps its rate), journaled with the run's options so
        `resume` goes on with them, set at once on the brokers this run throttles now, and by
        the later waves on theirs. Returns the brokers set now and those that did not answer
        (pending: set once they are back, before any move of theirs starts)."""
        def merged(b: int | None) -> tuple[int | None, int | None]:
            lead, fol = self.rate_for(b) if b is not None else (self.leader_rate, self.follower_rate)
            return (leader_rate if leader_rate is not None else lead,
                    follower_rate if follower_rate is not None else fol)
        if brokers is None:
            overrides = {b: merged(b) for b in self.rates}
            self.leader_rate, self.follower_rate = merged(None)
            self.rates = overrides
        else:
            self.rates.update({b: merged(b) for b in brokers})
        now = sorted(b for b in self.applied_brokers if brokers is None or b in brokers)
        ops = {b: {k: v for k, v in rate_configs(*self.rate_for(b)).items() if self.applied_brokers[b].get(k) != v}
               for b in now}
        ops = {b: o for b, o in ops.items() if o}
        journal = self.journal
        if journal is not None:
            journal.update(options={**journal.options, "leader_rate": self.leader_rate,
                                    "follower_rate": self.follower_rate, "broker_rates": _rates_to(self.rates)})
            journal.plan_configs(ops, {})
        if not ops:
            return (), {}
        out = journaled_step(journal, "throttle set (through the run)", lambda: apply_configs(self.port, brokers=ops),
                             brokers={str(b): dict(v) for b, v in sorted(ops.items())}, by=by)
        for b in out.brokers:
            self.applied_brokers.setdefault(b, {}).update(ops[b])
        confirmed_step(journal, "throttle set (through the run): confirm", self.port,
                       {b: ops[b] for b in out.brokers}, self.confirm)
        return tuple(out.brokers), dict(out.skipped)

    def rate_for(self, broker: int) -> tuple[int | None, int | None]:
        return self.rates.get(broker, (self.leader_rate, self.follower_rate))

    def next_wave(self, in_flight: Mapping[TopicPartition, Reassignment],
                  partitions: Mapping[TopicPartition, PartitionInfo]) -> list[PendingPartition]:
        """The partitions `step` would submit now, in order (nothing is changed).

        Args:
            in_flight: every reassignment running now.
            partitions: partition infos for the leaders of the running moves and of the plan
                (a partition not in it keeps the leader it had at `start`).
        """
        if not self.pending:
            return []
        leaders = {tp: p.leader for tp, p in partitions.items()}
        slots = in_flight_slots(in_flight, leaders, self.sizes)
        pending = [PendingPartition(p.target, leaders.get(p.tp, p.leader), p.adding, p.size, p.position)
                   for p in self.pending]
        return next_wave(pending, slots, self.limits)

    def retry_pending(self) -> tuple[int, ...]:
        """Set the throttles a broker missed while it was down, once it is back: its moves in
        flight start copying again and must not copy unthrottled. Returns the brokers set."""
        journal = self.journal
        if journal is None or not journal.pending_brokers:
            return ()
        live = {b.id for b in self.port.describe_brokers().brokers}
        ops = {b: dict(v) for b, v in journal.pending_brokers.items() if v and b in live}
        if not ops:
            return ()
        journal.pending_brokers = {b: v for b, v in journal.pending_brokers.items() if b not in ops}
        out = journaled_step(journal, "retry pending throttles", lambda: apply_configs(self.port, brokers=ops),
                             brokers=sorted(ops))
        for b in out.brokers:
            self.applied_brokers.setdefault(b, {}).update({k: v for k, v in ops[b].items() if v is not None})
        confirmed_step(journal, "retry pending throttles: confirm", self.port, {b: ops[b] for b in out.brokers},
                       self.confirm)
        return tuple(out.brokers)

    def step(self, in_flight: Mapping[TopicPartition, Reassignment],
             partitions: Mapping[TopicPartition, PartitionInfo]) -> Wave | None:
        """Submit the next wave if slots are free; None when nothing fits or nothing is left.

        Args:
            in_flight: every reassignment running now.
            partitions: partition infos covering the plan and the running moves (for leaders).
        """
        if self.plan is None:
            raise RuntimeError("call start() first")
        self._adopt_landed(in_flight)
        wave = self.next_wave(in_flight, partitions)
        if not wave:
            return None
        self.waves += 1
        number = self.waves
        throttled, skipped, unconfirmed = self._throttle(number, wave, in_flight, partitions)
        # `retry_pending` sets the missed throttle once the broker is back, then these go.
        wave = [p for p in wave if not waits_for_throttle(p.leader, p.adding, skipped)]
        chosen = {p.tp for p in wave}
        targets = {p.tp: p.target.replicas for p in wave}
        journal = self.journal
        if not targets:
            return Wave(number, (), 0, {}, throttled, skipped, unconfirmed)
        try:
            with journaled(journal, f"wave {number}: submit", partitions=[str(tp) for tp in sorted(targets)]):
                results = self.port.alter_reassignments(targets)
        except ClusterError as exc:
            return self._after_failed_submit(number, wave, targets, exc)
        self.submit_failures = 0
        errors = {tp: e for tp, e in sorted(results.items()) if e is not None}
        accepted = sorted(tp for tp in targets if tp not in errors)
        if journal is not None:
            journal.submitted = sorted(set(journal.submitted) | set(accepted))
            journal.record(f"wave {number}: submit", "failed" if errors else "done", accepted=len(accepted),
                           errors={str(tp): str(e) for tp, e in errors.items()})
            if accepted:
                journal.set_state("submitted")
        self.pending = [p for p in self.pending if p.tp not in chosen]
        return Wave(number, tuple(sorted(targets)), sum(p.bytes for p in wave), errors, throttled, skipped, unconfirmed)

    def _adopt_landed(self, in_flight: Mapping[TopicPartition, Reassignment]) -> None:
        """Waiting partitions found moving to their target: a submission that timed out and
        landed later. They are ours (journaled as submitted), never submitted twice."""
        landed = sorted(p.tp for p in self.pending
                        if p.tp in in_flight and tuple(in_flight[p.tp].target) == tuple(p.target.replicas))
        if not landed:
            return
        self.pending = [p for p in self.pending if p.tp not in set(landed)]
        if self.journal is not None:
            self.journal.submitted = sorted(set(self.journal.submitted) | set(landed))
            self.journal.record("submission landed late", "done", partitions=[str(tp) for tp in landed])

    def _after_failed_submit(self, number: int, wave: Sequence[PendingPartition],
                             targets: Mapping[TopicPartition, Sequence[int]], error: ClusterError) -> Wave:
        """A wave's submission failed or timed out: ask the controller what it took. What it took
        is ours; the rest waits (a late landing is adopted at the next poll) and is submitted
        again; after `SUBMIT_ATTEMPTS` failures in a row the run stops, saying what it left."""
        self.submit_failures += 1
        try:
            taken = probe_submitted(self.port, targets)
        except KreassignError:
            taken = set()
        journal = self.journal
        waiting = sorted(tp for tp in targets if tp not in taken)
        if journal is not None:
            journal.submitted = sorted(set(journal.submitted) | taken)
            journal.record(f"wave {number}: submit", "failed", error=str(error), accepted=len(taken),
                           waiting=[str(tp) for tp in waiting])
            if taken:
                journal.set_state("submitted")
        self.pending = [p for p in self.pending if p.tp not in taken]
        if self.submit_failures >= SUBMIT_ATTEMPTS:
            where = f" --journal {journal.path}" if journal is not None else ""
            raise ExecuteFailed(
                f"submitting wave {number} failed {self.submit_failures} times in a row (the last: {error}); "
                f"{len(journal.submitted) if journal is not None else len(taken)} partition(s) of the plan were "
                f"accepted, {len(self.pending)} wait. The throttles stay and the journal stays open: once the "
                f"controller answers, run `kreassign resume{where}` (it finds what landed late), or "
                f"`kreassign abort{where}` to undo") from error
        failed = {tp: ApiError(-1, "SUBMIT_FAILED", f"{error}; submitted again at the next poll") for tp in waiting}
        return Wave(number, tuple(sorted(taken)), sum(p.bytes for p in wave if p.tp in taken), failed)

    def _throttle(self, number: int, wave: Sequence[PendingPartition], in_flight: Mapping[TopicPartition, Reassignment],
                  partitions: Mapping[TopicPartition, PartitionInfo],
                  ) -> tuple[tuple[int, ...], dict[int, ApiError], tuple[int, ...]]:
        """Lists for the moves in flight plus this wave; rates on brokers whose rate changes.
        Returns the brokers throttled, those that did not answer and those not confirmed."""
        if not self.throttled:
            return (), {}, ()
        current = {p.tp: tuple(partitions[p.tp].replicas) if p.tp in partitions else () for p in wave}
        move_map = compute_move_map(current, [(p.tp, p.target.replicas) for p in wave], in_flight)
        plan = throttle_plan(move_map, rate=0)
        journal = self.journal
        # Only what this process has set itself is skipped: after a crash the journal may plan a
        # change the broker never got (the run died between the two), so a resumed run sets its
        # lists and rates again with its first wave and never submits a move whose throttle is missing.
        done_b, done_t = self.applied_brokers, self.applied_topics
        broker_ops: dict[int, dict[str, str]] = {}
        for b in plan.reassigning_brokers:
            ops = {k: v for k, v in rate_configs(*self.rate_for(b)).items() if done_b.get(b, {}).get(k) != v}
            if ops:
                broker_ops[b] = ops
        topic_ops = {t: dict(v) for t, v in plan.topic_configs.items() if done_t.get(t) != v}
        if journal is not None:
            self._record_previous(journal, broker_ops, topic_ops)
            journal.plan_configs(broker_ops, topic_ops)
        out = apply_throttles(self.port, journal, topics=topic_ops or None, brokers=broker_ops or None,
                              steps=ThrottleSteps.wave(number), confirm=self.confirm)
        self.applied_topics.update({t: topic_ops[t] for t in out.topics})
        for b in out.brokers:
            self.applied_brokers.setdefault(b, {}).update(broker_ops[b])
        return tuple(sorted(broker_ops)), dict(out.skipped), out.unconfirmed

    def _record_previous(self, journal: Journal, broker_ops: Mapping[int, Any], topic_ops: Mapping[str, Any]) -> None:
        new_b = [b for b in broker_ops if b not in journal.previous_brokers]
        new_t = [t for t in topic_ops if t not in journal.previous_topics]
        if not new_b and not new_t:
            return
        assert self.store is not None
        found = inherit_previous(read_throttles(self.port, new_b, new_t),
                                 self.store.journals(journal.cluster_id, open_only=True))
        journal.remember_previous(found.brokers, found.topics)
