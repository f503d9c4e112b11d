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
from kreassign.cluster.errors import JournalError
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.cluster.port import ClusterPort
from kreassign.execute.executor import (
    ExecuteEvent, ExecutePlan, ExecuteRequest, ExecuteResult, apply_execute, execute_needs, prepare_execute,
)
from kreassign.execute.journal import Journal, JournalStore, plan_hash
from kreassign.execute.lock import ExecutionLock, ExecutionLocked, LockConfig, Owner
from kreassign.execute.pacing import PaceLimits
from kreassign.execute.recovery import AbortResult, ResumeResult, abort, check_journal, resume
from kreassign.execute.verify import VerifyRequest, VerifyResult, verify
from kreassign.execute.watch import WatchEvent, WatchRequest, WatchResult, watch

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
                pace: PaceLimits | None = None, interval_s: float = 10.0, dry_run: bool = False,
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
            watched = watch(port, watch_request, store=store, clock=control.clock, sleep=control.sleep,
                            emit=emit, guard=guard)
            return RunOutcome(watched=watched, took_over=held.took_over)
        plan = prepare_execute(port, request, owned=owned())  # again under the lock: nobody moved in between
        on_plan(plan)
        result = apply_execute(port, plan, store=store, command=command, progress=progress,
                               clock=control.clock, sleep=control.sleep, guard=guard)
        return RunOutcome(plan=plan, result=result, took_over=held.took_over)


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
        interval = float(options.get("interval_s") or 10.0)
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
        return run_execute(port, request, store=store, pace=limits, interval_s=interval, command=journal.command,
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
              wait_s: float | None = None, on_wait: Callable[[Owner], None] = lambda owner: None) -> AbortOutcome:
    """Abort a run: if it is still running, ask it to stop and wait until it let go of the lock
    (so nothing is submitted after the abort), then cancel its moves and restore the throttles.

    Raises:
        ExecutionLocked: another run holds the lock, or the owner did not stop within `wait_s`
            (nothing was cancelled then).
    """
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
        if not fresh.is_open:
            check_journal(port, fresh, "abort")
        fresh.guard = _guard(lock, control.crash)
        result = abort(port, fresh, preserve_throttles=preserve_throttles, timeout_s=timeout_s,
                       clock=control.clock, sleep=control.sleep,
                       others=store.journals(fresh.cluster_id, open_only=True))
        return AbortOutcome(result, stopped, lock.took_over)


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
    return verify(port, request, store=store, sleep=control.sleep), owner


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


def watch_run(port: ClusterPort, request: WatchRequest, *, store: JournalStore, control: RunControl = RunControl(),
              emit: Callable[[WatchEvent], None] = lambda event: None) -> WatchResult:
    """`kreassign watch`: with `--pace` it submits waves, so it is a run like a paced execute and
    holds the execution lock; watching alone changes nothing but throttles and needs no lock."""
    if request.pace is None or request.dry_run or request.targets is None:
        return watch(port, request, store=store, clock=control.clock, sleep=control.sleep, emit=emit)
    info = port.describe_brokers()
    cluster_id = info.cluster_id
    # before the lock: a login without the rights leaves no trace, not even the lock's marker
    require_cluster_operations(info, execute_needs(request.throttled))
    with _lock(port, store, cluster_id, request.targets, "watch --pace", control).acquire(force=control.force) as held:
        return watch(port, request, store=store, clock=control.clock, sleep=control.sleep, emit=emit,
                     guard=_guard(held, control.crash))
