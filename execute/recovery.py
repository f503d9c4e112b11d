"""Finish or undo an interrupted run from its execution journal.

`resume` re-applies what the journal shows as not done: throttle changes with an intent but no
"done" (and changes skipped because a broker was down), partitions not yet submitted, log-dir
moves not started, or a clear that did not finish. `abort` cancels the run's reassignments that
are still moving to the journal's targets, sends its log-dir moves back, and restores the
throttle values found before the run. Both check that the journal belongs to this cluster.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreassign.cluster.authorization import ALTER, ALTER_CONFIGS, require_cluster_operations
from kreassign.cluster.errors import AdminCommandFailed, JournalError
from kreassign.cluster.model import TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import ApiError, ClusterPort
from kreassign.throttle.configs import FOLLOWER_RATE, LEADER_RATE, LOG_DIR_RATE, only_keys
from kreassign.execute.journal import UNKNOWN_CLUSTER, Journal
from kreassign.execute.cancel import cancel_partitions
from kreassign.execute.clear import CLEAR_RETRY_S, ClearResult, clear_retrying, clear_throttles
from kreassign.execute.executor import planned_partitions, probe_submitted, waits_for_throttle
from kreassign.execute.logdir_moves import MoveStart, explicit_log_dirs, log_dir_states, start_log_dir_moves
from kreassign.execute.throttle_io import Confirm, ThrottleSteps, apply_configs, confirmed_step, journaled_step
from kreassign.execute.verify import settled_replicas

CLOSED_HINT = {
    "finished": "the run finished and its throttles were cleared",
    "aborted": "the run was aborted",
    "rolled-back": "the run was rolled back before anything moved",
}


# What resume and abort change, for the authorization check before they start.
NEEDED = {"resume": {ALTER: "to submit the reassignment", ALTER_CONFIGS: "to set the throttles"},
          "abort": {ALTER: "to cancel the reassignment", ALTER_CONFIGS: "to restore the throttles"}}


def check_journal(port: ClusterPort, journal: Journal, action: str) -> None:
    """Refuse a closed journal, one written for another cluster, or a login that may not `action`."""
    if not journal.is_open:
        raise JournalError(f"nothing to {action}: {CLOSED_HINT.get(journal.state, journal.state)} "
                           f"(journal {journal.path})")
    info = port.describe_brokers()
    cluster_id = info.cluster_id
    if cluster_id and journal.cluster_id not in (cluster_id, UNKNOWN_CLUSTER):
        raise JournalError(f"the journal {journal.path} belongs to cluster {journal.cluster_id}, but "
                           f"--bootstrap-server reaches cluster {cluster_id}; point at the right cluster")
    require_cluster_operations(info, NEEDED.get(action, {}))


@dataclass(frozen=True)
class ResumeResult:
    journal_path: Path
    state_before: str
    topics: tuple[str, ...] = ()
    """topics whose throttles were (re)applied"""
    brokers: tuple[int, ...] = ()
    """brokers whose throttles were (re)applied"""
    skipped: dict[int, ApiError] = field(default_factory=dict)
    submitted: tuple[TopicPartition, ...] = ()
    submit_errors: dict[TopicPartition, ApiError] = field(default_factory=dict)
    log_dir_moves: MoveStart = field(default_factory=lambda: MoveStart(()))
    clear: ClearResult | None = None
    state_after: str = ""
    held_back: tuple[TopicPartition, ...] = ()
    """moves still waiting for a broker that did not take its throttle (`waits_for_throttle`)"""
    unconfirmed: tuple[int, ...] = ()
    """brokers that took their rate but had not applied it when the moves were submitted"""

    @property
    def nothing_done(self) -> bool:
        return not (self.topics or self.brokers or self.submitted or self.submit_errors
                    or self.log_dir_moves.started or self.clear)

    def as_dict(self) -> dict[str, Any]:
        return {
            "journal": str(self.journal_path), "state_before": self.state_before,
            "state_after": self.state_after, "throttled_topics": list(self.topics),
            "throttled_brokers": list(self.brokers),
            "skipped_brokers": {str(b): e.message for b, e in self.skipped.items()},
            "submitted": [str(tp) for tp in self.submitted],
            "errors": {str(tp): {"error": e.name, "message": e.message} for tp, e in self.submit_errors.items()},
            "held_back": [str(tp) for tp in self.held_back],
            "unconfirmed_brokers": list(self.unconfirmed),
            "log_dir_moves_started": [str(r) for r, _ in self.log_dir_moves.started],
            "log_dir_moves_timed_out": [str(r) for r in self.log_dir_moves.timed_out],
            "throttles_cleared": None if self.clear is None else self.clear.as_dict(),
        }


def resume_preview(journal: Journal) -> list[str]:
    """What `resume` would do, read from the journal alone (for --dry-run)."""
    if not journal.is_open:
        return []
    if journal.state == "clearing":
        last = next((s for s in reversed(journal.steps) if s.step == "clear-throttles" and s.status == "intent"), None)
        brokers = last.detail.get("brokers", []) if last else []
        topics = last.detail.get("topics", []) if last else []
        return [f"clear the throttles again on brokers {','.join(map(str, brokers))} and topics "
                f"{','.join(topics)}, restoring the values recorded before the run"]
    out = []
    if journal.planned_topics and not journal.done("set-topic-throttles"):
        out.append(f"set the throttled-replica lists on topics {','.join(sorted(journal.planned_topics))}")
    for name, keys, what in (("set-broker-throttles", (LEADER_RATE, FOLLOWER_RATE), "inter-broker rates"),
                             ("set-log-dir-throttles", (LOG_DIR_RATE,), "log-dir rates")):
        ops = only_keys(journal.planned_brokers, keys)
        brokers = sorted(ops) if not journal.done(name) else sorted(
            b for b in ops if any(k in keys for k in journal.pending_brokers.get(b, {})))
        if brokers:
            out.append(f"set the {what} on brokers {','.join(map(str, brokers))}")
    if not journal.done("submit-reassignments"):
        out.append(f"submit the partitions of the plan that are not moving or moved yet "
                   f"({len(journal.targets)} in the plan)" + (
                       ", except those whose leader or new replica is on a broker that still misses its throttle"
                       if journal.pending_brokers else ""))
    if explicit_log_dirs(journal.targets) and not journal.done("start-log-dir-moves"):
        out.append("start the log-dir moves that have not started")
    return out


def resume_preview_live(port: ClusterPort, journal: Journal) -> list[str]:
    """What `resume` would do, from the journal and from the plan compared with the cluster now
    (the journal alone misses a run interrupted between its last write and the cluster's answer,
    or a journal closed while its plan was not done). Empty: nothing remains."""
    targets = journal.target_of()
    in_flight = port.list_reassignments(sorted(targets)) if targets else {}
    now = {p.tp: p.replicas for p in port.describe_topics(sorted({tp.topic for tp in targets}))} if targets else {}
    moving = sorted(tp for tp, r in in_flight.items() if tp in targets and tuple(r.target) == tuple(targets[tp]))
    todo = sorted(tp for tp, t in targets.items()
                  if tp not in moving and tp in now and sorted(now[tp]) != sorted(t))
    names = ",".join(map(str, todo[:20])) + (f" and {len(todo) - 20} more" if len(todo) > 20 else "")
    if not journal.is_open:
        return [f"execute the plan again: its journal is {journal.state}, but {len(todo)} partition(s) are not at "
                f"their target ({names})"] if todo else []
    out = [line for line in resume_preview(journal) if not line.startswith("submit ")]
    if todo:
        paced = journal.options.get("paced")
        how = (f" in waves of at most {paced.get('max_moves_per_broker')} move(s) per broker"
               if isinstance(paced, dict) and paced.get("max_moves_per_broker") else "")
        out.append(f"submit {len(todo)} partition(s) that are neither moving to nor at their target{how}: {names}")
    if moving:
        out.append(f"wait for {len(moving)} move(s) of the plan still in flight")
    if (todo or moving) and (journal.planned_brokers or journal.planned_topics):
        if not any(line.startswith("clear ") for line in out):
            out.append("then restore the throttles recorded before the run")
    return out


def resume(port: ClusterPort, journal: Journal, *, clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> ResumeResult:
    """Run the steps of an interrupted run that the journal does not show as done.

    Raises:
        JournalError: the journal is closed or belongs to another cluster.
        ClusterError: the cluster refused a step (the journal records it; run resume again).
    """
    check_journal(port, journal, "resume")
    before = journal.state
    if before == "clearing":
        last = next(s for s in reversed(journal.steps) if s.step == "clear-throttles" and s.status == "intent")
        clear = clear_throttles(port, last.detail.get("brokers", []), last.detail.get("topics", []),
                                journal=journal)
        return ResumeResult(journal.path, before, clear=clear, state_after=journal.state)

    topics: set[str] = set()
    brokers: set[int] = set()
    skipped: dict[int, ApiError] = {}
    set_ops: dict[int, dict[str, str | None]] = {}
    pending = {b: dict(ops) for b, ops in journal.pending_brokers.items()}
    journal.update(pending_brokers={})
    plans = (("set-topic-throttles", None), ("set-broker-throttles", (LEADER_RATE, FOLLOWER_RATE)),
             ("set-log-dir-throttles", (LOG_DIR_RATE,)))
    for name, keys in plans:
        if keys is None:
            if journal.planned_topics and not journal.done(name):
                out = journaled_step(journal, name, lambda: apply_configs(port, topics=journal.planned_topics),
                            topics=sorted(journal.planned_topics), resumed=True)
                topics |= set(out.topics)
            continue
        ops = only_keys(journal.planned_brokers, keys)
        retry = ops if not journal.done(name) else {b: {k: v for k, v in pending.get(b, {}).items() if k in keys}
                                                     for b in ops if b in pending}
        if any(retry.values()):
            out = journaled_step(journal, name, lambda: apply_configs(port, brokers=retry), brokers=sorted(retry), resumed=True)
            brokers |= set(out.brokers)
            skipped.update(out.skipped)
            for b in out.brokers:
                set_ops.setdefault(b, {}).update(retry[b])
    unconfirmed = confirmed_step(journal, ThrottleSteps().confirm, port, set_ops, Confirm(clock, sleep))

    targets = journal.target_of()
    submitted: tuple[TopicPartition, ...] = ()
    errors: dict[TopicPartition, ApiError] = {}
    held: tuple[TopicPartition, ...] = ()
    if not journal.done("submit-reassignments"):
        already = probe_submitted(port, targets)
        todo = {tp: r for tp, r in targets.items() if tp not in already}
        held = _still_waiting(port, todo, set(journal.pending_brokers))
        todo = {tp: r for tp, r in todo.items() if tp not in held}
        journal.record("submit-reassignments", "intent", partitions=len(todo), resumed=True)
        results = port.alter_reassignments(todo) if todo else {}
        errors = {tp: e for tp, e in results.items() if e is not None}
        submitted = tuple(sorted(tp for tp in todo if tp not in errors))
        journal.submitted = sorted(set(journal.submitted) | set(submitted) | already)
        journal.record("submit-reassignments", "failed" if errors or held else "done", accepted=len(submitted),
                       errors={str(tp): str(e) for tp, e in errors.items()}, held_back=[str(tp) for tp in held])

    moves = MoveStart(())
    log_dirs = {r: d for r, d in explicit_log_dirs(journal.targets).items()
                if TopicPartition(r.topic, r.partition) not in held}
    if log_dirs and not errors and not journal.done("start-log-dir-moves"):
        states, _ = log_dir_states(port, log_dirs)
        todo_moves = {r: d for r, d in log_dirs.items() if states[r].state not in ("completed", "in-progress")}
        journal.record("start-log-dir-moves", "intent", replicas=len(todo_moves), resumed=True)
        timeout = float(journal.options.get("log_dir_timeout_s", 10.0))
        moves = start_log_dir_moves(port, todo_moves, timeout_s=timeout, clock=clock, sleep=sleep)
        journal.record("start-log-dir-moves", "failed" if moves.timed_out or held else "done",
                       timed_out=[str(r) for r in moves.timed_out])
    if journal.submitted:
        journal.set_state("submitted")
    return ResumeResult(journal.path, before, tuple(sorted(topics)), tuple(sorted(brokers)), skipped,
                        submitted, errors, moves, state_after=journal.state, held_back=held, unconfirmed=unconfirmed)


def _still_waiting(port: ClusterPort, todo: Mapping[TopicPartition, Sequence[int]],
                   missing: set[int]) -> tuple[TopicPartition, ...]:
    """The moves of `todo` whose leader or new replica is on a broker still missing its throttle."""
    if not todo or not missing:
        return ()
    try:
        described = planned_partitions(port, todo)
    except AdminCommandFailed:  # a partition gone: the submission reports it
        return ()
    return tuple(sorted(tp for tp, p in described.items()
                        if waits_for_throttle(p.leader, set(todo[tp]) - set(p.replicas), missing)))


@dataclass(frozen=True)
class AbortResult:
    journal_path: Path
    cancelled: tuple[TopicPartition, ...] = ()
    cancel_errors: dict[TopicPartition, ApiError] = field(default_factory=dict)
    log_dir_moves: MoveStart = field(default_factory=lambda: MoveStart(()))
    restored: ClearResult | None = None
    rollback: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """partitions not back on their replicas before the run (completed before the abort, or
    keeping extra replicas after a cancel of a re-targeted move), with those replicas: the
    plan to run to move them back"""

    dry_run: bool = False
    kept_brokers: tuple[int, ...] = ()
    kept_topics: tuple[str, ...] = ()
    """throttles left in place because another open run's moves still need them"""
    left: str | None = None
    """when a step failed: what it left behind (moves, throttles, the open journal) and the
    command that finishes the job"""
    finished_first: bool = False
    """the run finished (and restored its throttles) while the abort waited for it to stop"""

    @property
    def ok(self) -> bool:
        return not self.cancel_errors and not self.log_dir_moves.timed_out and (
            self.restored is None or self.restored.complete)

    def as_dict(self) -> dict[str, Any]:
        return {
            "journal": str(self.journal_path), "cancelled": [str(tp) for tp in self.cancelled],
            "errors": {str(tp): {"error": e.name, "message": e.message} for tp, e in self.cancel_errors.items()},
            "log_dir_moves_reverted": [str(r) for r, _ in self.log_dir_moves.started],
            "throttles_restored": None if self.restored is None else self.restored.as_dict(),
            "completed_before_abort": {str(tp): list(r) for tp, r in self.rollback.items()},
            "kept_for_other_runs": {"brokers": list(self.kept_brokers), "topics": list(self.kept_topics)},
            "left": self.left, "finished_first": self.finished_first, "dry_run": self.dry_run,
        }


def needed_by_others(port: ClusterPort, journal: Journal, others: Iterable[Journal]) -> tuple[set[int], set[str]]:
    """Brokers and topics whose throttles the running moves of other open journals still need:
    a throttle is shared, so it goes only when no run's move needs it (reference counting by
    the moves in flight). The last run to finish restores the operator's values, which it
    inherited from the first (`inherit_previous`)."""
    live = [j for j in others if j.path != journal.path and j.is_open and (j.planned_brokers or j.planned_topics)]
    theirs = {tp for j in live for tp in j.submitted}
    running = port.list_reassignments(sorted(theirs)) if theirs else {}
    brokers: set[int] = set()
    topics: set[str] = set()
    for j in live:
        moving = [r for tp, r in running.items() if tp in set(j.submitted)]
        brokers |= {b for r in moving for b in r.replicas} & set(j.planned_brokers)
        topics |= {tp.topic for tp in running if tp in set(j.submitted)} & set(j.planned_topics)
    return brokers, topics


def abort(port: ClusterPort, journal: Journal, *, preserve_throttles: bool = False, timeout_s: float = 10.0,
          dry_run: bool = False, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep, others: Iterable[Journal] = (),
          clear_retry_s: float = CLEAR_RETRY_S,
          on_wait: Callable[[tuple[int, ...], float], None] = lambda brokers, left: None) -> AbortResult:
    """Cancel the run's moves that are still going to its targets and restore the throttles.

    Reassignments someone re-targeted since are left alone. Partitions that already reached
    their target stay there; the result lists them with their replicas before the run.

    Raises:
        JournalError: the journal is closed or belongs to another cluster.
        ClusterError: the cluster could not be read or refused a change.
    """
    check_journal(port, journal, "abort")
    targets = journal.target_of()
    running = port.list_reassignments(list(targets))
    ours = sorted(tp for tp, r in running.items() if tuple(r.target) == tuple(targets[tp]))
    # A broker we never reached was never changed, unless an interrupted step got through;
    # restore only where we changed something or know what to restore.
    brokers = [b for b in journal.planned_brokers
               if b in journal.applied_brokers or b in journal.previous_brokers]
    needed_b, needed_t = needed_by_others(port, journal, others)
    kept_b = tuple(sorted(b for b in brokers if b in needed_b))
    kept_t = tuple(sorted(t for t in journal.planned_topics if t in needed_t))
    brokers = [b for b in brokers if b not in needed_b]
    topics = {t: v for t, v in journal.planned_topics.items() if t not in needed_t}
    moved = {tp for tp in targets if tp not in running and tp in journal.submitted}
    rollback = {tp: journal.original[tp] for tp in sorted(moved)
                if tp in journal.original and journal.original[tp] != targets[tp]}
    if dry_run:
        preview = None if preserve_throttles else clear_throttles(
            port, brokers, topics, journal=journal, dry_run=True)
        return AbortResult(journal.path, tuple(ours), restored=preview, rollback=rollback, dry_run=True,
                           kept_brokers=kept_b, kept_topics=kept_t)
    again = f"`kreassign abort --journal {journal.path}`"
    errors, finished = cancel_partitions(port, ours, journal) if ours else ({}, [])
    if finished:  # they reached their target between the listing and the cancel: they stay there
        ours = [tp for tp in ours if tp not in finished]
        rollback = dict(sorted({**rollback, **{tp: journal.original[tp] for tp in finished
                                               if tp in journal.original and journal.original[tp] != targets[tp]}}.items()))
    if errors:
        # the moves that could not be cancelled still copy: their throttles must stay
        left = (f"{len(errors)} move(s) still run ({', '.join(map(str, sorted(errors)))}); the throttles stay on "
                f"brokers {','.join(map(str, sorted(brokers))) or 'none'} and topics "
                f"{','.join(sorted(topics)) or 'none'}, and the journal stays open: run {again} again")
        return AbortResult(journal.path, tuple(tp for tp in ours if tp not in errors), errors, left=left)
    if ours:
        # A cancel keeps replicas - adding (KRaft): after a re-target that is more than the
        # replicas before the run, so those partitions are listed with the plan back as well.
        after = settled_replicas(port, {tp: targets[tp] for tp in ours}, sleep=sleep)
        rollback.update({tp: journal.original[tp] for tp in ours
                         if tp in journal.original and tuple(after.get(tp, ())) != tuple(journal.original[tp])})
        rollback = dict(sorted(rollback.items()))
    log_dirs = explicit_log_dirs(journal.targets)
    states, _ = log_dir_states(port, log_dirs)
    back: dict[TopicPartitionReplica, str] = {r: s.current_dir for r, s in states.items()
                                              if s.state == "in-progress" and s.current_dir is not None}
    moves = start_log_dir_moves(port, back, timeout_s=timeout_s, clock=clock, sleep=sleep) if back else MoveStart(())
    if moves.timed_out:
        left = (f"log-dir moves back did not start in time ({', '.join(map(str, moves.timed_out))}); the throttles "
                f"stay and the journal stays open: run {again} again")
        return AbortResult(journal.path, tuple(ours), {}, moves, left=left)
    restored = None
    left = None
    if not preserve_throttles:
        restored = clear_retrying(port, brokers, topics, journal=journal, clock=clock, sleep=sleep,
                                  retry_s=clear_retry_s, on_wait=on_wait)
        if not restored.complete:
            left = (f"broker(s) {','.join(map(str, sorted(restored.skipped)))} did not answer, so their throttles "
                    f"are still set (pending in the journal): run {again} again once they are back")
    if restored is None or restored.complete:
        journal.set_state("aborted")
    return AbortResult(journal.path, tuple(ours), {}, moves, restored, rollback,
                       kept_brokers=kept_b, kept_topics=kept_t, left=left)
