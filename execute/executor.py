"""Execute a reassignment: Kafka's checks and steps, journaled, with rollback on failure.

`prepare_execute` runs Kafka's checks in Kafka's order (reference §5 steps 4-6) and works out
the throttle configs; it changes nothing, so it also serves `--dry-run`. `apply_execute` then
records the throttle values already in place, and runs Kafka's steps (§3.4): topic throttles,
broker rates, log-dir rates, submission, log-dir moves. Each step is written to the journal as
an intent before and as done (or failed) after. If the submission fails as a whole, the throttles
just set are restored; if the process dies, `resume` or `abort` finish the job from the journal.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kreassign.cluster.authorization import ALTER, ALTER_CONFIGS, require_cluster_operations
from kreassign.cluster.errors import AdminCommandFailed, KreassignError, UnknownTopicError, clip
from kreassign.cluster.kafka_json import ParsedReassignment
from kreassign.cluster.model import (
    PartitionInfo,
    PartitionTarget,
    Reassignment,
    TopicPartition,
    TopicPartitionReplica,
)
from kreassign.cluster.port import ApiError, ClusterPort
from kreassign.cluster.source import replica_log_dirs
from kreassign.throttle.configs import (
    FOLLOWER_RATE,
    LEADER_RATE,
    LOG_DIR_RATE,
    ThrottlePlan,
    clear_targets,
    compute_move_map,
    only_keys,
    throttle_plan,
)
from kreassign.execute.errors import ExecuteFailed, ReassignmentInProgress, RetargetRefused
from kreassign.execute.journal import BrokerConfigs, Journal, JournalStore, State, TopicConfigs, journaled
from kreassign.execute.logdir_moves import MoveStart, explicit_log_dirs, start_log_dir_moves
from kreassign.execute.throttle_io import (
    ApplyOutcome,
    apply_throttles,
    Confirm,
    ConfigsRefused,
    ThrottleSnapshot,
    apply_configs,
    inherit_previous,
    read_throttles,
    restore_ops,
)

CANNOT_EXECUTE_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment.")
UNKNOWN_TOPIC_OR_PARTITION = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


@dataclass(frozen=True)
class ExecuteRequest:
    """What to execute and with which throttles (None leaves a throttle untouched)."""

    targets: tuple[PartitionTarget, ...]
    additional: bool = False
    leader_rate: int | None = None
    follower_rate: int | None = None
    log_dir_rate: int | None = None
    log_dir_timeout_s: float = 10.0
    retarget_in_flight: bool = False
    """re-target partitions whose reassignment in flight this plan's journal did not start"""
    allow_rf_change: bool = True
    """False: refuse each partition whose target changes its replication factor (Kafka 4.1's
    --disallow-replication-factor-change, KIP-860)"""

    @classmethod
    def from_parsed(cls, parsed: ParsedReassignment, **options: Any) -> ExecuteRequest:
        return cls(targets=tuple(parsed.entries), **options)

    @property
    def replica_log_dirs(self) -> dict[TopicPartitionReplica, str]:
        """Replicas given an explicit (non-"any") log dir, with that dir."""
        return explicit_log_dirs(self.targets)

    @property
    def throttled(self) -> bool:
        return any(r is not None for r in (self.leader_rate, self.follower_rate, self.log_dir_rate))


@dataclass(frozen=True)
class ExecutePlan:
    """Everything `apply_execute` will do, worked out without changing the cluster."""

    request: ExecuteRequest
    cluster_id: str | None
    live_brokers: tuple[int, ...]
    current: Mapping[TopicPartition, tuple[int, ...]]
    """replicas now, for the partitions of the plan (the rollback plan)"""
    current_dirs: Mapping[TopicPartitionReplica, str]
    """the log dir of each current replica its broker reported (printed in the rollback plan)"""
    leaders: Mapping[TopicPartition, int | None]
    """leaders now, for the partitions of the plan (a move whose leader missed its throttle waits)"""
    in_flight: Mapping[TopicPartition, Reassignment]
    throttles: ThrottlePlan
    previous: ThrottleSnapshot
    warnings: tuple[str, ...] = ()
    refused: Mapping[TopicPartition, ApiError] = field(default_factory=dict)
    """partitions not to submit, with the error the controller would give (RF changes under
    `allow_rf_change=False`)"""

    @property
    def inter_broker_ops(self) -> dict[int, dict[str, str]]:
        return only_keys(self.throttles.broker_rates, (LEADER_RATE, FOLLOWER_RATE))

    @property
    def log_dir_ops(self) -> dict[int, dict[str, str]]:
        return only_keys(self.throttles.broker_rates, (LOG_DIR_RATE,))

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "partitions": [{"topic": t.topic, "partition": t.partition, "current": list(self.current[t.tp]),
                            "target": list(t.replicas), "log_dirs": list(t.dirs())}
                           for t in sorted(self.request.targets, key=lambda t: t.tp)],
            "throttles": {"topics": self.throttles.topic_configs,
                          "brokers": {str(b): v for b, v in self.throttles.broker_rates.items()}},
            "previous_throttles": {"brokers": {str(b): v for b, v in self.previous.brokers.items()},
                                   "topics": self.previous.topics},
            "unreachable_brokers": sorted(self.previous.unreadable),
            "other_reassignments_in_flight": len(set(self.in_flight) - {t.tp for t in self.request.targets}),
            "warnings": list(self.warnings),
        }


EventKind = Literal["topic-throttles-set", "broker-throttles-set", "log-dir-throttles-set",
                    "throttles-unconfirmed", "submitted", "log-dir-moves-started"]


@dataclass(frozen=True)
class ExecuteEvent:
    """Progress while applying, so a front end can print lines as Kafka's tool does."""

    kind: EventKind
    outcome: ApplyOutcome = field(default_factory=ApplyOutcome)
    moves: tuple[tuple[TopicPartitionReplica, str], ...] = ()
    partitions: tuple[TopicPartition, ...] = ()
    """the partitions submitted ("submitted")"""


@dataclass(frozen=True)
class ExecuteResult:
    """What `apply_execute` did."""

    plan: ExecutePlan
    journal_path: Path | None
    submitted: tuple[TopicPartition, ...] = ()
    submit_errors: Mapping[TopicPartition, ApiError] = field(default_factory=dict)
    skipped_brokers: Mapping[int, ApiError] = field(default_factory=dict)
    """brokers that did not answer: their throttles were not set (the journal keeps them pending)"""
    rolled_back: bool = False
    log_dir_moves: MoveStart = field(default_factory=lambda: MoveStart(()))
    held_back: tuple[TopicPartition, ...] = ()
    """moves not submitted because their leader or a new replica is on a skipped broker
    (`waits_for_throttle`); `resume` submits them once that broker has its throttle"""
    unconfirmed_brokers: tuple[int, ...] = ()
    """brokers that took their rate but had not applied it when the moves were submitted"""

    @property
    def ok(self) -> bool:
        return not self.submit_errors and not self.log_dir_moves.timed_out and not self.held_back

    def as_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.as_dict(),
            "journal": str(self.journal_path) if self.journal_path else None,
            "submitted": [str(tp) for tp in self.submitted],
            "errors": {str(tp): {"error": e.name, "message": e.message} for tp, e in self.submit_errors.items()},
            "skipped_brokers": {str(b): e.message for b, e in self.skipped_brokers.items()},
            "rolled_back": self.rolled_back,
            "held_back": [str(tp) for tp in self.held_back],
            "unconfirmed_brokers": list(self.unconfirmed_brokers),
            "log_dir_moves_started": [str(r) for r, _ in self.log_dir_moves.started],
            "log_dir_moves_timed_out": [str(r) for r in self.log_dir_moves.timed_out],
        }


# ---- checks ----------------------------------------------------------------------------------
def planned_partitions(port: ClusterPort, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionInfo]:
    """These partitions as the cluster describes them, with Kafka's messages for unknown topics
    and partitions.

    Raises:
        AdminCommandFailed: a topic or partition does not exist.
    """
    wanted = sorted(set(partitions))
    try:
        infos = port.describe_topics(sorted({tp.topic for tp in wanted}))
    except UnknownTopicError as exc:
        # Kafka's text; a name longer than any legal topic (249) is cut rather than echoed in full.
        raise AdminCommandFailed(f"{UNKNOWN_TOPIC_OR_PARTITION}: Topic {clip(exc.topics[0], 255)} not found.") from None
    known = {p.tp: p for p in infos}
    missing = [tp for tp in wanted if tp not in known]
    if missing:
        raise AdminCommandFailed(f"{UNKNOWN_TOPIC_OR_PARTITION}: Unable to find partition: "
                                 + ", ".join(clip(tp, 260) for tp in missing))
    return {tp: known[tp] for tp in wanted}


def current_replicas(port: ClusterPort, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, ...]]:
    """The replicas of these partitions (see `planned_partitions` for the errors)."""
    return {tp: p.replicas for tp, p in planned_partitions(port, partitions).items()}


def waits_for_throttle(leader: int | None, adding: Iterable[int], missing: Collection[int]) -> bool:
    """Whether a move must wait because its leader or one of its new replicas is on a broker
    that missed its throttle (it did not answer): once that broker answers it would copy
    unthrottled, and if this process died first nothing would set the throttle. `resume` (or
    the pacing loop) sets the throttle first, then submits the move."""
    return bool(missing) and (leader in missing or any(b in missing for b in adding))


def check_retarget(request: ExecuteRequest, in_flight: Mapping[TopicPartition, Reassignment],
                   owned: Collection[TopicPartition]) -> None:
    """Refuse to re-target a reassignment in flight that this plan's journal did not submit:
    another run (or another tool) owns it, and its throttles and rollback are not ours."""
    if request.retarget_in_flight:
        return
    foreign = sorted(t.tp for t in request.targets if t.tp in in_flight and t.tp not in owned
                     and tuple(in_flight[t.tp].target) != tuple(t.replicas))
    if foreign:
        shown = ", ".join(f"{tp} (moving to {','.join(map(str, in_flight[tp].target))})" for tp in foreign[:5])
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        raise RetargetRefused(
            f"{len(foreign)} partition(s) of the plan are being reassigned by another run: {shown}{more}. "
            "Re-targeting them would override that run; wait for it or cancel it, or add --retarget-in-flight")


def execute_needs(throttled: bool) -> dict[str, str]:
    """The operations on the CLUSTER a run that submits moves needs (and sets throttles, when
    `throttled`), and what each is for."""
    needed = {ALTER: "to submit the reassignment"}
    if throttled:
        needed[ALTER_CONFIGS] = "to set the throttles"
    return needed


def prepare_execute(port: ClusterPort, request: ExecuteRequest, *,
                    owned: Collection[TopicPartition] = ()) -> ExecutePlan:
    """Check the request against the cluster in Kafka's order and plan the throttles.

    Args:
        owned: partitions this plan's journal submitted (re-targeting them is not refused).

    Raises:
        ReassignmentInProgress: a reassignment runs and `additional` is False.
        NotAuthorized: the login may not submit reassignments (or set the throttles).
        RetargetRefused: the plan re-targets a reassignment in flight that it did not start.
        AdminCommandFailed: `Unknown broker id N`, an unknown topic or partition.
        ClusterError: the cluster could not be read.
    """
    in_flight = port.list_reassignments()
    if in_flight and not request.additional:
        raise ReassignmentInProgress(CANNOT_EXECUTE_MESSAGE)
    check_retarget(request, in_flight, owned)
    info = port.describe_brokers()
    require_cluster_operations(info, execute_needs(request.throttled))
    live = tuple(b.id for b in info.brokers)
    unknown = sorted({b for t in request.targets for b in t.replicas} - set(live))
    if unknown:
        down = [b for b in unknown if b in info.fenced]
        # Kafka's words first; a registered broker that is down (fenced) is named as such
        raise AdminCommandFailed(f"Unknown broker id {unknown[0]}" + (
            f" (broker {down[0]} is registered but down or restarting: start it, or leave it out of the plan)"
            if down and down[0] == unknown[0] else ""))
    described = planned_partitions(port, [t.tp for t in request.targets])
    current = {tp: p.replicas for tp, p in described.items()}
    proposed = [(t.tp, t.replicas) for t in request.targets]
    move_map = compute_move_map(current, proposed, in_flight)
    log_dirs = request.replica_log_dirs
    throttles = throttle_plan(move_map, rate=None, leader_rate=request.leader_rate,
                              follower_rate=request.follower_rate, log_dir_rate=request.log_dir_rate,
                              replica_log_dirs=log_dirs)
    clear_brokers, clear_topics = clear_targets(live, proposed)
    previous = read_throttles(port, set(clear_brokers) | set(throttles.broker_rates),
                              set(clear_topics) | set(throttles.topic_configs))
    warnings = [f"broker {b} did not answer ({e.message}); its throttles cannot be set now and will "
                "be retried by `kreassign resume` once it is back" for b, e in sorted(previous.unreadable.items())]
    refused = {} if request.allow_rf_change else replication_factor_changes(request.targets, current, in_flight)
    return ExecutePlan(request=request, cluster_id=info.cluster_id, live_brokers=live, current=current,
                       current_dirs=replica_log_dirs(port, current, live=live),
                       leaders={tp: p.leader for tp, p in described.items()}, in_flight=in_flight,
                       throttles=throttles, previous=previous, warnings=tuple(warnings), refused=refused)


INVALID_REPLICATION_FACTOR = 38


def replication_factor_changes(targets: Iterable[PartitionTarget], current: Mapping[TopicPartition, Sequence[int]],
                               in_flight: Mapping[TopicPartition, Reassignment]) -> dict[TopicPartition, ApiError]:
    """The partitions whose target has another replication factor than the replica set they are
    headed for (their replicas, less those a reassignment in flight removes), with the message a
    Kafka 4.1+ controller gives when a reassignment disallows the change (KIP-860)."""
    out = {}
    for t in targets:
        replicas = set(current.get(t.tp, ()))
        moving = in_flight.get(t.tp)
        if moving is not None:
            replicas = (replicas | set(moving.adding)) - set(moving.removing)
        if len(replicas) != len(t.replicas):
            out[t.tp] = ApiError(code=INVALID_REPLICATION_FACTOR, name="INVALID_REPLICATION_FACTOR",
                                 message=f"The replication factor is changed from {len(replicas)} to {len(t.replicas)}")
    return out


# ---- applying --------------------------------------------------------------------------------
def journal_for_plan(store: JournalStore, plan: ExecutePlan, *, command: str, options: Mapping[str, Any],
                     planned: ThrottlePlan | None = None, reopen_as: State | None = "running") -> Journal:
    """The execution journal of this plan on this cluster: its open journal, reused, or a new one.

    The throttle values found before the run are `plan.previous`, except that a value another
    open run set is replaced by what that run found (`inherit_previous`). A reused journal (a
    re-run of the same plan, e.g. --additional to change the rate, or a paced run taken up
    again) keeps the values found before its first run and records only resources seen for the
    first time.

    Args:
        planned: the configs the run SETs up front (a paced run plans them wave by wave instead).
        reopen_as: the state a reused journal takes; None keeps its state.
    """
    targets = list(plan.request.targets)
    found = store.find(plan.cluster_id, targets)
    existing = found if found is not None and found.is_open else None
    others = [j for j in store.journals(plan.cluster_id, open_only=True)
              if existing is None or j.path != existing.path]
    previous = inherit_previous(plan.previous, others)
    planned_brokers: BrokerConfigs = {b: dict(v) for b, v in planned.broker_rates.items()} if planned else {}
    planned_topics: TopicConfigs = {t: dict(v) for t, v in planned.topic_configs.items()} if planned else {}
    if existing is not None:
        existing.remember_previous(previous.brokers, previous.topics, previous.unreadable)
        existing.plan_configs(planned_brokers, planned_topics)
        changes: dict[str, Any] = {"options": dict(options), "command": command}
        if reopen_as is not None:
            changes["state"] = reopen_as
        existing.update(**changes)
        existing.record("record-previous", "done", reused=True)
        return existing
    journal = store.create(
        cluster_id=plan.cluster_id, targets=targets, command=command,
        original=dict(plan.current), previous_brokers=previous.brokers, previous_topics=previous.topics,
        unreadable_brokers=sorted(previous.unreadable), planned_brokers=planned_brokers,
        planned_topics=planned_topics, options=dict(options))
    journal.record("record-previous", "done", brokers=sorted(previous.brokers), topics=sorted(previous.topics))
    return journal


def _execute_options(request: ExecuteRequest) -> dict[str, Any]:
    """The options of an execute, as its journal records them."""
    return {"additional": request.additional, "leader_rate": request.leader_rate,
            "follower_rate": request.follower_rate, "log_dir_rate": request.log_dir_rate,
            "log_dir_timeout_s": request.log_dir_timeout_s, "retarget_in_flight": request.retarget_in_flight,
            "allow_rf_change": request.allow_rf_change}


def rollback_throttles(port: ClusterPort, journal: Journal | None, plan: ExecutePlan, *,
                       unchanged: ConfigsRefused | None = None) -> bool:
    """Put back the throttle values found before the run on every resource the plan SETs
    (except those that refused the change, which were never changed).

    Returns True when every resource answered (False leaves the journal open for `abort`).
    """
    broker_ops, topic_ops = restore_ops(
        plan.throttles.broker_rates, plan.throttles.topic_configs,
        previous_brokers=journal.previous_brokers if journal else plan.previous.brokers,
        previous_topics=journal.previous_topics if journal else plan.previous.topics)
    # Restore only the keys the plan touched: other keys were never changed.
    broker_ops = {b: {k: v for k, v in ops.items() if k in plan.throttles.broker_rates[b]}
                  for b, ops in broker_ops.items()}
    if unchanged is not None:
        broker_ops = {b: ops for b, ops in broker_ops.items() if b not in unchanged.refused_brokers}
        topic_ops = {t: ops for t, ops in topic_ops.items() if t not in unchanged.refused_topics}
    try:
        with journaled(journal, "rollback-throttles"):
            outcome = apply_configs(port, brokers=broker_ops, topics=topic_ops)
    except (KreassignError, KeyboardInterrupt):
        return False
    if journal is not None:
        journal.pending_brokers = {b: broker_ops[b] for b in outcome.skipped}
        journal.record("rollback-throttles", "done", skipped=sorted(outcome.skipped))
        if not outcome.skipped:
            journal.set_state("rolled-back")
    return not outcome.skipped


def _clause(error: BaseException) -> str:
    """An error's message inside a sentence of ours: without its own full stop ("failed.. " was seen)."""
    return str(error).rstrip().rstrip(".")


def _recovery_hint(journal: Journal | None) -> str:
    if journal is None:
        return ""
    return (f" The journal {journal.path} records what was done: run `kreassign resume --journal "
            f"{journal.path}` to finish, or `kreassign abort --journal {journal.path}` to undo.")


def probe_submitted(port: ClusterPort, targets: Mapping[TopicPartition, Sequence[int]]) -> set[TopicPartition]:
    """Partitions of `targets` that are moving to their target or already have it."""
    running = port.list_reassignments(list(targets))
    done_or_moving = {tp for tp, r in running.items() if tuple(r.target) == tuple(targets[tp])}
    rest = [tp for tp in targets if tp not in running]
    if rest:
        try:
            current = current_replicas(port, rest)
        except AdminCommandFailed:
            current = {}
        done_or_moving |= {tp for tp, r in current.items() if tuple(r) == tuple(targets[tp])}
    return done_or_moving


def apply_execute(
    port: ClusterPort,
    plan: ExecutePlan,
    *,
    store: JournalStore | None = None,
    command: str = "execute",
    progress: Callable[[ExecuteEvent], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[str], None] | None = None,
) -> ExecuteResult:
    """Set the throttles, submit the reassignment and start log-dir moves, journaling each step.
    The moves are submitted once the brokers read their new rates back (`apply_throttles` with a
    `Confirm` over `clock` and `sleep`), or once its wait is over: the run goes on either way.

    Raises:
        ExecuteFailed: a throttle change or the submission failed as a whole; the message says
            whether the throttles were rolled back or how to resume or abort from the journal.
        AdminCommandFailed: a broker refused a log-dir move.
        KeyboardInterrupt: passed on after journaling; `resume`/`abort` continue from there.
    """
    notify = progress or (lambda event: None)
    journal = journal_for_plan(store, plan, command=command, options=_execute_options(plan.request),
                               planned=plan.throttles) if store is not None else None
    if journal is not None:
        journal.guard = guard
    request = plan.request
    try:
        applied = apply_throttles(
            port, journal, topics=plan.throttles.topic_configs or None,
            brokers=plan.inter_broker_ops if request.leader_rate is not None or request.follower_rate is not None
            else None,
            log_dirs=plan.log_dir_ops if request.log_dir_rate is not None else None,
            confirm=Confirm(clock, sleep), notify=lambda kind, out: notify(ExecuteEvent(kind, out)))
        skipped = dict(applied.skipped)
    except KreassignError as exc:
        restored = rollback_throttles(port, journal, plan,
                                      unchanged=exc if isinstance(exc, ConfigsRefused) else None)
        what = ("The throttles set so far were restored and nothing was submitted."
                if restored else "Restoring the previous throttles failed too." + _recovery_hint(journal))
        raise ExecuteFailed(f"setting throttles failed: {_clause(exc)}. {what}") from exc

    held = tuple(sorted(t.tp for t in plan.request.targets if waits_for_throttle(
        plan.leaders.get(t.tp), set(t.replicas) - set(plan.current.get(t.tp, ())), skipped)))
    targets = {t.tp: t.replicas for t in plan.request.targets if t.tp not in held and t.tp not in plan.refused}
    if journal is not None:
        journal.record("submit-reassignments", "intent", partitions=len(targets))
    try:
        results = port.alter_reassignments(targets) if targets else {}
    except KreassignError as exc:
        return _after_failed_submit(port, plan, journal, targets, exc)
    except KeyboardInterrupt:
        if journal is not None:
            journal.record("submit-reassignments", "failed", error="interrupted")
        raise
    errors = dict(sorted({**plan.refused, **{tp: e for tp, e in results.items() if e is not None}}.items()))
    accepted = tuple(sorted(tp for tp in targets if tp not in errors))
    if journal is not None:
        journal.submitted = sorted(set(journal.submitted) | set(accepted))
        # held-back moves leave the step undone, so `resume` submits them after setting the throttle
        journal.record("submit-reassignments", "done" if not errors and not held else "failed",
                       accepted=len(accepted), errors={str(tp): str(e) for tp, e in sorted(errors.items())},
                       held_back=[str(tp) for tp in held])
    if not accepted:
        throttled = bool(plan.throttles.broker_rates or plan.throttles.topic_configs)
        if held and not errors:  # the throttles that were set stay: the held moves need them
            return ExecuteResult(plan, journal.path if journal else None, (), {}, skipped, held_back=held,
                                 unconfirmed_brokers=applied.unconfirmed)
        rolled = rollback_throttles(port, journal, plan) if throttled else False  # nothing was set
        if journal is not None and not throttled:
            journal.set_state("rolled-back")
        return ExecuteResult(plan, journal.path if journal else None, (), errors, skipped, rolled_back=rolled)
    if journal is not None:
        journal.set_state("submitted")
    if errors:
        return ExecuteResult(plan, journal.path if journal else None, accepted, errors, skipped, held_back=held,
                             unconfirmed_brokers=applied.unconfirmed)
    notify(ExecuteEvent("submitted", partitions=accepted))

    moves = MoveStart(())
    log_dirs = {r: d for r, d in plan.request.replica_log_dirs.items()
                if TopicPartition(r.topic, r.partition) not in held}
    waiting = len(plan.request.replica_log_dirs) - len(log_dirs)  # the held moves' dirs: `resume` starts them
    if log_dirs:
        if journal is not None:
            journal.record("start-log-dir-moves", "intent", replicas=len(log_dirs))
        moves = start_log_dir_moves(
            port, log_dirs, timeout_s=plan.request.log_dir_timeout_s, clock=clock, sleep=sleep,
            on_started=lambda batch: notify(ExecuteEvent("log-dir-moves-started", moves=tuple(batch))))
        if journal is not None:
            journal.record("start-log-dir-moves", "failed" if moves.timed_out or waiting else "done",
                           timed_out=[str(r) for r in moves.timed_out], waiting=waiting)
    return ExecuteResult(plan, journal.path if journal else None, accepted, {}, skipped, log_dir_moves=moves,
                         held_back=held, unconfirmed_brokers=applied.unconfirmed)


def _after_failed_submit(port: ClusterPort, plan: ExecutePlan, journal: Journal | None,
                         targets: Mapping[TopicPartition, Sequence[int]], error: KreassignError) -> ExecuteResult:
    """The submission raised (e.g. timed out): find out what the controller took, then decide."""
    try:
        accepted = probe_submitted(port, targets)
        changed = {tp for tp in accepted if tuple(plan.current[tp]) != tuple(targets[tp])}
    except KreassignError:
        if journal is not None:
            journal.record("submit-reassignments", "failed", error=str(error), outcome="unknown")
        raise ExecuteFailed(f"submitting the reassignment failed ({error}) and the cluster cannot say "
                            "whether it was accepted; the throttles stay in place." + _recovery_hint(journal)) from error
    if journal is not None:
        journal.submitted = sorted(set(journal.submitted) | accepted)
        journal.record("submit-reassignments", "failed", error=str(error), accepted=len(accepted))
    if not changed:
        restored = rollback_throttles(port, journal, plan)
        what = ("The throttles just set were restored; the cluster is as it was."
                if restored else "Restoring the previous throttles failed too." + _recovery_hint(journal))
        raise ExecuteFailed(f"submitting the reassignment failed: {_clause(error)}. Nothing was submitted. {what}") from error
    if journal is not None:
        journal.set_state("submitted")
    raise ExecuteFailed(f"submitting the reassignment failed: {_clause(error)}. {len(accepted)} of {len(targets)} "
                        "partitions were accepted and are moving, so the throttles stay in place."
                        + _recovery_hint(journal)) from error
