"""Running a plan: the one code path behind both front doors (Kafka's `--execute` and
`kreassign execute`), `resume` and `abort`.

Each run that writes first takes the cluster's execution lock (`execute.lock`) and holds it to
the end: every journal intent, and every poll of a paced run, checks it (stop when `abort` asks
or when the lease was lost, renew the lease). A paced run records its limits, order, rates and
poll interval in the journal, and `resume` of a paced journal runs the very same loop with them,
so it goes on exactly as the interrupted run would have: same waves, same throttled-replica
lists, same rates. `abort` of a live run asks its owner to stop, waits until it has let go of
the lock, and only then cancels and restores; it takes over directly when the owner is dead.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kreassign.cluster.authorization import require_cluster_operations
from kreassign.cluster.errors import ClusterError, JournalError
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.cluster.port import ClusterPort
from kreassign.execute.executor import (
    ExecuteEvent, ExecutePlan, ExecuteRequest, ExecuteResult, apply_execute, execute_needs, prepare_execute,
)
from kreassign.execute.journal import Journal, JournalStore, plan_hash
from kreassign.execute.errors import ExecuteFailed, ExecutionLocked, RunRefused, RunStopped
from kreassign.execute.lock import ExecutionLock, LockConfig, RateRequest
from kreassign.execute.lock_owner import Owner
from kreassign.execute.pacing import PaceLimits
from kreassign.execute.recovery import AbortResult, ResumeResult, abort, check_journal, resume
from kreassign.execute.verify import VerifyRequest, VerifyResult, verify
from kreassign.execute.attach import attach
from kreassign.execute.progress import ProgressView
from kreassign.execute.watch import watch
from kreassign.execute.watch_events import WatchEvent, WatchResult
from kreassign.execute.watch_request import WatchRequest
from kreassign.predict.model import PACER_POLL_S

Crash = Callable[[str], None]
"""a hook called before every journal intent (the fault drills inject a crash there)"""


@dataclass(frozen=True)
class RunControl:
    """How a run takes the lock, and the clocks it uses (tests inject them)."""

    lock: LockConfig = field(default_factory=LockConfig)
    force: bool = False
    """take over the lock of a dead owner that ran another journal"""
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    crash: Crash | None = None


@dataclass(frozen=True)
class RunOutcome:
    """What a run did: an unpaced one has `plan` and `result`, a paced one `watched`."""

    plan: ExecutePlan | None = None
    result: ExecuteResult | None = None
    watched: WatchResult | None = None
    took_over: Owner | None = None
    """the dead owner whose lock this run took over"""


def journal_id(cluster_id: str | None, targets: list[PartitionTarget] | tuple[PartitionTarget, ...]) -> str:
    """The id of a plan's journal on a cluster, the same on every host."""
    return f"{cluster_id or 'unknown-cluster'}/{plan_hash(targets)}"


def _lock(port: ClusterPort, store: JournalStore, cluster_id: str | None, targets: Any, command: str,
          control: RunControl) -> ExecutionLock:
    folder = store.path_for(cluster_id, "x").parent
    return control.lock.lock(port, folder, command=command, journal_id=journal_id(cluster_id, targets))


def _guard(lock: ExecutionLock, crash: Crash | None) -> Callable[[str], None]:
    def guard(step: str) -> None:
        if crash is not None:
            crash(step)
        lock.check()
    return guard


def run_execute(port: ClusterPort, request: ExecuteRequest, *, store: JournalStore,
                pace: PaceLimits | None = None, interval_s: float = PACER_POLL_S, dry_run: bool = False,
                command: str = "execute", control: RunControl = RunControl(),
                on_plan: Callable[[ExecutePlan], None] = lambda plan: None,
                progress: Callable[[ExecuteEvent], None] | None = None,
                emit: Callable[[WatchEvent], None] = lambda event: None) -> RunOutcome:
    """Execute a plan, unpaced (Kafka's steps at once) or paced (waves until done).

    `on_plan` sees the checked plan before anything changes (the front doors print Kafka's
    current-assignment text there); `progress` sees unpaced steps, `emit` the paced loop's events.

    Raises:
        ExecutionLocked: another live run holds the cluster's lock (or a dead one and no force).
        StopRequested, LockLost: `abort` stopped the run, or its lease was lost.
        ReassignmentInProgress, RetargetRefused, AdminCommandFailed, ExecuteFailed: as Kafka checks.
    """
    if pace is not None:
        watch_request = WatchRequest(targets=request.targets, interval_s=interval_s, pace=pace,
                                     leader_rate=request.leader_rate, follower_rate=request.follower_rate,
                                     additional=request.additional, retarget_in_flight=request.retarget_in_flight,
                                     dry_run=dry_run)
    if dry_run:
        if pace is not None:
            return RunOutcome(watched=watch(port, watch_request, store=None, clock=control.clock,
                                            sleep=control.sleep, emit=emit))
        plan = prepare_execute(port, request)
        on_plan(plan)
        return RunOutcome(plan=plan)
    info = port.describe_brokers()
    cluster_id = info.cluster_id
    # before the lock: a login without the rights leaves no trace, not even the lock's marker
    require_cluster_operations(info, execute_needs(request.throttled))

    def owned() -> list[TopicPartition]:
        found = store.find(cluster_id, request.targets)
        return found.submitted if found is not None and found.is_open else []

    if pace is None:
        prepare_execute(port, request, owned=owned())  # Kafka's checks fail fast, before the lock
    with _lock(port, store, cluster_id, request.targets, command, control).acquire(force=control.force) as held:
        guard = _guard(held, control.crash)
        if pace is not None:
            try:
                watched = watch(port, watch_request, store=store, clock=control.clock, sleep=control.sleep,
                                emit=emit, guard=guard, lock=held)
            except ClusterError as exc:
                raise stopped(exc, store.find(cluster_id, request.targets)) from exc
            return RunOutcome(watched=watched, took_over=held.took_over)
        plan = prepare_execute(port, request, owned=owned())  # again under the lock: nobody moved in between
        on_plan(plan)
        result = apply_execute(port, plan, store=store, command=command, progress=progress,
                               clock=control.clock, sleep=control.sleep, guard=guard)
        return RunOutcome(plan=plan, result=result, took_over=held.took_over)


def stopped(error: ClusterError, journal: Journal | None) -> ClusterError:
    """The error that stopped a paced run, with what the run left and the way on (issue 29: a run
    stopped by an unanswering controller said only "Could not list partition reassignments")."""
    if journal is None or not journal.is_open or isinstance(error, ExecuteFailed):
        return error  # ExecuteFailed: the pacer's own account, with the way on
    sent = len(journal.submitted)
    waiting = len(journal.targets) - sent
    return RunStopped(f"{error} The run stopped and left {sent} partition(s) submitted (moving or done; its "
                      f"throttles stay on their brokers) and {waiting} not submitted yet, in the journal "
                      f"{journal.path}: finish it with `kreassign resume --journal {journal.path}` once the "
                      f"cluster answers, or undo it with `kreassign abort --journal {journal.path}`.",
                      int(error.exit_code))


def paced_settings(journal: Journal) -> tuple[ExecuteRequest, PaceLimits, float] | None:
    """The request, limits and poll interval a paced run recorded in its journal (None: unpaced)."""
    options = journal.options
    paced = options.get("paced")
    if not isinstance(paced, dict):
        return None
    try:
        limits = PaceLimits(paced.get("max_moves_per_broker"), paced.get("max_inflight_bytes"),
                            paced.get("order", "plan"))
        request = ExecuteRequest(targets=tuple(journal.targets), additional=bool(options.get("additional")),
                                 leader_rate=options.get("leader_rate"), follower_rate=options.get("follower_rate"),
                                 retarget_in_flight=bool(options.get("retarget_in_flight")))
        interval = float(options.get("interval_s") or PACER_POLL_S)
    except (TypeError, ValueError) as exc:
        raise JournalError(f"the journal {journal.path} has damaged pacing options ({exc})") from None
    return request, limits, interval


def resume_run(port: ClusterPort, journal: Journal, *, store: JournalStore, control: RunControl = RunControl(),
               emit: Callable[[WatchEvent], None] = lambda event: None) -> ResumeResult | RunOutcome:
    """Resume an interrupted run under the lock: a paced one by running its loop again with
    the limits, order and rates it recorded; an unpaced one by the steps not done."""
    check_journal(port, journal, "resume")
    paced = paced_settings(journal) if journal.state != "clearing" else None
    if paced is not None:
        request, limits, interval = paced
        return run_execute(port, request, store=store, pace=limits, interval_s=interval, command="resume",
                           control=control, emit=emit)
    with _lock(port, store, journal.cluster_id, journal.targets, "resume", control).acquire(force=control.force) as held:
        fresh = store.load(journal.path)
        fresh.guard = _guard(held, control.crash)
        return resume(port, fresh, clock=control.clock, sleep=control.sleep)


@dataclass(frozen=True)
class AbortOutcome:
    result: AbortResult
    stopped: Owner | None = None
    """the live run this abort asked to stop and waited for"""
    took_over: Owner | None = None


def abort_run(port: ClusterPort, journal: Journal, *, store: JournalStore, control: RunControl = RunControl(),
              preserve_throttles: bool = False, timeout_s: float = 10.0, dry_run: bool = False,
              wait_s: float | None = None, on_wait: Callable[[Owner], None] = lambda owner: None,
              on_clear_wait: Callable[[tuple[int, ...], float], None] = lambda brokers, left: None) -> AbortOutcome:
    """Abort a run: if it is still running, ask it to stop and wait until it let go of the lock
    (so nothing is submitted after the abort), then cancel its moves and restore the throttles.

    Raises:
        ExecutionLocked: another run holds the lock, or the owner did not stop within `wait_s`
            (nothing was cancelled then).
    """
    if journal.state == "finished":
        return AbortOutcome(finished_before(journal))
    check_journal(port, journal, "abort")
    if dry_run:
        return AbortOutcome(abort(port, journal, preserve_throttles=preserve_throttles, timeout_s=timeout_s,
                                  dry_run=True, clock=control.clock, sleep=control.sleep,
                                  others=store.journals(journal.cluster_id, open_only=True)))
    lock = _lock(port, store, journal.cluster_id, journal.targets, "abort", control)
    stopped = None
    try:
        lock.acquire(force=control.force)
    except ExecutionLocked as exc:
        owner = exc.owner
        if owner is None or owner.journal != lock.journal_id or lock.dead(owner):
            raise
        lock.request_stop(owner)
        on_wait(owner)
        limit = wait_s if wait_s is not None else control.lock.lease_s + 30.0
        if not lock.wait_released(owner, limit):
            raise ExecutionLocked(f"asked {owner.describe()} to stop, but it still holds the lock after {limit:g}s; "
                                  "nothing was cancelled. Run the abort again, or stop that process", owner) from None
        stopped = owner
        lock.acquire(force=control.force)
    with lock:
        fresh = store.load(journal.path)
        if fresh.state == "finished":  # it finished while the abort waited for it
            return AbortOutcome(finished_before(fresh), stopped, lock.took_over)
        if not fresh.is_open:
            check_journal(port, fresh, "abort")
        fresh.guard = _guard(lock, control.crash)
        result = abort(port, fresh, preserve_throttles=preserve_throttles, timeout_s=timeout_s,
                       clock=control.clock, sleep=control.sleep,
                       others=store.journals(fresh.cluster_id, open_only=True), on_wait=on_clear_wait)
        return AbortOutcome(result, stopped, lock.took_over)


def finished_before(journal: Journal) -> AbortResult:
    """An abort of a run that finished first: nothing moves and its throttles are restored;
    what moved stays, listed with the plan that moves it back."""
    targets = journal.target_of()
    rollback = {tp: journal.original[tp] for tp in sorted(targets)
                if tp in journal.original and journal.original[tp] != targets[tp]}
    return AbortResult(journal.path, rollback=rollback, finished_first=True)


def live_owner(port: ClusterPort, control: RunControl = RunControl()) -> Owner | None:
    """The holder of the cluster's execution lock, unless it is proven dead (None: no holder)."""
    probe = control.lock.lock(port, Path("."), command="probe", journal_id="")
    owner, _stop = probe.read()
    return owner if owner is not None and not probe.dead(owner) else None


def verify_run(port: ClusterPort, request: VerifyRequest, *, store: JournalStore,
               control: RunControl = RunControl()) -> tuple[VerifyResult, Owner | None]:
    """`verify`, except that while a run holds the execution lock the throttles stay: that run
    may be between two waves (nothing moving for a moment) and restores them itself when done.
    Returns the result and that run, if any."""
    owner = None if request.preserve_throttles or request.dry_run else live_owner(port, control)
    if owner is not None:
        request = replace(request, preserve_throttles=True)
    return verify(port, request, store=store, sleep=control.sleep, clock=control.clock), owner


def refuse_while_running(port: ClusterPort, action: str, control: RunControl = RunControl()) -> None:
    """Refuse a cancel while a run holds the lock: it would go on submitting; abort stops it first.

    Raises:
        ExecutionLocked: a run that is not proven dead holds the lock.
    """
    owner = live_owner(port, control)
    if owner is not None:
        raise ExecutionLocked(f"{owner.describe()} is running on this cluster and would go on submitting after a "
                              f"{action}; stop it with `kreassign abort` on its journal (it cancels and restores "
                              "the throttles), or wait for it", owner)


@dataclass(frozen=True)
class RunRates:
    """A rate change made through the run in flight (`throttle set` during a paced run)."""

    owner: Owner
    answer: RateRequest
    journal_path: Path | None

    def to_dict(self) -> dict[str, Any]:
        a = self.answer
        return {"through_run": self.owner.describe(), "leader_rate": a.leader_rate, "follower_rate": a.follower_rate,
                "brokers": None if a.brokers is None else list(a.brokers), "applied_brokers": list(a.applied),
                "pending_brokers": list(a.pending), "journal": str(self.journal_path) if self.journal_path else None}


def run_journal(store: JournalStore, owner: Owner) -> Journal | None:
    """The journal of the run `owner` holds the lock for, if it is on this host's journal dir."""
    cluster, _, digest = owner.journal.rpartition("/")
    path = store.path_for(cluster, digest)
    try:
        return store.load(path) if path.exists() else None
    except JournalError:
        return None


def throttle_through_run(port: ClusterPort, leader_rate: int | None, follower_rate: int | None,
                         brokers: tuple[int, ...] | None, *, store: JournalStore, control: RunControl = RunControl(),
                         wait_s: float | None = None) -> RunRates | None:
    """`throttle set` while a run is in flight: the run's owner, the one writer of its journal,
    changes its rates (every broker of the plan, the waves not yet submitted too) and journals
    them; this waits for its answer. None when no live run holds the lock.

    Raises:
        RunRefused: the run in flight cannot take a rate change (not a paced run: an abort, or
            a run between its steps), its journal is not in this journal dir, or it did not
            answer in time (nothing was changed then).
    """
    owner = live_owner(port, control)
    if owner is None:
        return None
    journal = run_journal(store, owner)
    if journal is None:  # another journal dir, or another host: its options cannot be read here
        raise RunRefused(f"{owner.describe()} is running on this cluster, and its journal is not in {store.root}: "
                         "run throttle set with the --journal-dir that run uses (on its host)", owner)
    if not isinstance(journal.options.get("paced"), dict):
        raise RunRefused(f"{owner.describe()} is running on this cluster and does not take rate changes (it is not "
                         "a paced run); wait for it, then run throttle set again", owner)
    assert journal is not None
    interval = float(journal.options.get("interval_s") or PACER_POLL_S)
    limit = wait_s if wait_s is not None else 3 * interval + 30.0
    probe = control.lock.lock(port, Path("."), command="throttle set", journal_id=owner.journal)
    asked = probe.ask_rates(owner, leader_rate, follower_rate, brokers)
    answer = probe.await_answer(asked, owner, limit)
    if answer is None:
        raise RunRefused(f"{owner.describe()} did not take the rate change within {limit:g}s (it polls every "
                         f"{interval:g}s); nothing was changed. Run throttle set again", owner)
    if answer.state != "applied":
        raise RunRefused(f"{owner.describe()} refused the rate change: {answer.message}", owner)
    return RunRates(owner, answer, journal.path)


def refuse_clear_while_running(port: ClusterPort, control: RunControl = RunControl()) -> None:
    """`throttle clear` while a run is in flight would let its moves (and its next waves) copy
    unthrottled; the run restores the throttles itself when it ends.

    Raises:
        RunRefused: a run that is not proven dead holds the lock.
    """
    owner = live_owner(port, control)
    if owner is not None:
        raise RunRefused(f"{owner.describe()} is running on this cluster and restores the throttles itself when it "
                         "ends; clearing them now would let its moves copy unthrottled. Change its rates with "
                         "`kreassign throttle set`, stop it with `kreassign abort` on its journal, or wait for it",
                         owner)


def watch_run(port: ClusterPort, request: WatchRequest, *, store: JournalStore, control: RunControl = RunControl(),
              emit: Callable[[WatchEvent], None] = lambda event: None) -> WatchResult:
    """`kreassign watch`: with `--pace` it submits waves, so it is a run like a paced execute and
    holds the execution lock. Watching alone, while a run holds the lock, attaches to that run
    (`execute.attach`: its whole plan, read only, the end left to its owner); with no run in
    flight it follows the moves and restores the throttles kreassign's runs set, no others."""
    if request.pace is None:
        owner = live_owner(port, control)
        if owner is not None:
            return attach_run(port, owner, request, store=store, control=control, emit=emit)
    if request.pace is None or request.dry_run or request.targets is None:
        return watch(port, request, store=store, clock=control.clock, sleep=control.sleep, emit=emit)
    info = port.describe_brokers()
    cluster_id = info.cluster_id
    # before the lock: a login without the rights leaves no trace, not even the lock's marker
    require_cluster_operations(info, execute_needs(request.throttled))
    with _lock(port, store, cluster_id, request.targets, "watch --pace", control).acquire(force=control.force) as held:
        return watch(port, request, store=store, clock=control.clock, sleep=control.sleep, emit=emit,
                     guard=_guard(held, control.crash), lock=held)


def attach_run(port: ClusterPort, owner: Owner, request: WatchRequest, *, store: JournalStore,
               control: RunControl = RunControl(), emit: Callable[[Any], None] = lambda event: None) -> WatchResult:
    """`watch` while `owner`'s run is in flight: follow its plan until it ends (`execute.attach`)."""
    probe = control.lock.lock(port, Path("."), command="watch", journal_id=owner.journal)

    def holder() -> Owner | None:
        found, _stop = probe.read()
        return found

    journal = run_journal(store, owner)
    paced = paced_settings(journal) if journal is not None else None
    status = attach(port, owner, store=store, journal=journal, targets=request.targets, interval_s=request.interval_s,
                    timeout_s=request.timeout_s, clock=control.clock, sleep=control.sleep, current_owner=holder,
                    emit=emit, limits=paced[1] if paced is not None else None, time_scale=request.time_scale,
                    pace_poll_s=paced[2] if paced is not None else PACER_POLL_S)
    return WatchResult(status, ProgressView(0.0, ()), journal_path=journal.path if journal is not None else None)
