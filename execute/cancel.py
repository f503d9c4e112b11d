"""Cancel the plan's running reassignments and log-dir moves, then clear throttles (reference §2.6).

Kafka 3.7-4.1 skip reassignments that only add replicas because of a lost negation (§3.6,
apache/kafka PR #20003); here every listed reassignment with adding or removing replicas is
cancelled, as in Kafka 3.6 and after the fix.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreassign.cluster.authorization import ALTER, ALTER_CONFIGS, require_cluster_operations
from kreassign.cluster.model import PartitionTarget, Reassignment, TopicPartition, TopicPartitionReplica
from kreassign.cluster.config_readback import Confirm
from kreassign.cluster.port import ApiError, ClusterPort
from kreassign.execute.journal import Journal, JournalStore, journaled
from kreassign.execute.clear import ClearResult, clear_throttles
from kreassign.execute.logdir_moves import MoveStart, explicit_log_dirs, log_dir_states, start_log_dir_moves
from kreassign.execute.verify import clear_scope, own_scope


def cancellable(running: Mapping[TopicPartition, Reassignment]) -> list[TopicPartition]:
    """The reassignments a cancel reverts: those adding or removing replicas (the fixed predicate)."""
    return sorted(tp for tp, r in running.items() if r.adding or r.removing)


@dataclass(frozen=True)
class CancelRequest:
    targets: tuple[PartitionTarget, ...]
    preserve_throttles: bool = False
    timeout_s: float = 10.0
    """how long to wait for log-dir moves back to start"""
    dry_run: bool = False
    foreign: bool = True
    """clear as Kafka's --cancel does (every live broker and the plan's topics, deleting what no
    journal recorded); False (kreassign's `cancel`): only what the plan's journal set, restored"""


@dataclass(frozen=True)
class CancelResult:
    cancelled: tuple[TopicPartition, ...] = ()
    errors: Mapping[TopicPartition, ApiError] = field(default_factory=dict)
    moves_back: Mapping[TopicPartitionReplica, str] = field(default_factory=dict)
    """active log-dir moves to send back to their current dir"""
    log_dir_moves: MoveStart = field(default_factory=lambda: MoveStart(()))
    clear: ClearResult | None = None
    journal_path: Path | None = None
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors and not self.log_dir_moves.timed_out

    def as_dict(self) -> dict[str, Any]:
        return {
            "cancelled": [str(tp) for tp in self.cancelled],
            "errors": {str(tp): {"error": e.name, "message": e.message} for tp, e in self.errors.items()},
            "log_dir_moves_reverted": [str(r) for r, _ in self.log_dir_moves.started],
            "log_dir_moves_timed_out": [str(r) for r in self.log_dir_moves.timed_out],
            "throttles_cleared": None if self.clear is None else self.clear.as_dict(),
            "journal": str(self.journal_path) if self.journal_path else None,
            "dry_run": self.dry_run,
        }


NO_REASSIGNMENT_IN_PROGRESS = 85
"""the controller's answer to a cancel of a partition that is not moving: its move finished
between the read that listed it and the cancel (a busy paced run finishes several per second)"""


def cancel_partitions(port: ClusterPort, partitions: list[TopicPartition], journal: Journal | None,
                      ) -> tuple[dict[TopicPartition, ApiError], list[TopicPartition]]:
    """Cancel these reassignments, journaling intent and outcome; returns the failures, and the
    partitions that finished meanwhile.

    A partition the controller says is no longer moving (NO_REASSIGNMENT_IN_PROGRESS) finished
    while the cancel was on its way: nothing is left to cancel, so it is no failure, and it is
    not cancelled either (it stays at its target)."""
    with journaled(journal, "cancel-reassignments", partitions=[str(tp) for tp in partitions]):
        results = port.alter_reassignments({tp: None for tp in partitions})
    finished = sorted(tp for tp, e in results.items() if e is not None and e.code == NO_REASSIGNMENT_IN_PROGRESS)
    errors = {tp: e for tp, e in sorted(results.items()) if e is not None and tp not in finished}
    if journal is not None:
        journal.record("cancel-reassignments", "failed" if errors else "done",
                       errors={str(tp): str(e) for tp, e in errors.items()},
                       finished_meanwhile=[str(tp) for tp in finished])
    return errors, finished


def cancel(
    port: ClusterPort,
    request: CancelRequest,
    *,
    store: JournalStore | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_moves_started: Callable[[list[tuple[TopicPartitionReplica, str]]], None] | None = None,
) -> CancelResult:
    """Cancel the plan's reassignments, send its active log-dir moves back, clear throttles.

    Stops after the cancellation when some partition could not be cancelled (as Kafka does),
    and after the log-dir step when moves back did not start in time.

    Raises:
        NotAuthorized: the login may not cancel or restore throttles (checked before any change).
        ClusterError: the cluster could not be read or refused a change.
        AdminCommandFailed: a broker refused to move a replica back.
    """
    partitions = sorted({t.tp for t in request.targets})
    to_cancel = cancellable(port.list_reassignments(partitions))
    info = port.describe_brokers()
    if not request.dry_run:
        require_cluster_operations(info, {ALTER: "to cancel the reassignment",
                                          ALTER_CONFIGS: "to restore the throttles"})
    journal = store.find(info.cluster_id, request.targets) if store is not None else None
    path = journal.path if journal else None
    errors: dict[TopicPartition, ApiError] = {}
    if to_cancel and not request.dry_run:
        errors, finished = cancel_partitions(port, to_cancel, journal)
        to_cancel = [tp for tp in to_cancel if tp not in finished]
        if errors:
            return CancelResult(tuple(tp for tp in to_cancel if tp not in errors), errors, journal_path=path)
    states, _ = log_dir_states(port, explicit_log_dirs(request.targets))
    back = {r: s.current_dir for r, s in states.items() if s.active and s.current_dir is not None}
    moves = MoveStart(())
    if back and not request.dry_run:
        moves = start_log_dir_moves(port, back, timeout_s=request.timeout_s, clock=clock, sleep=sleep,
                                    on_started=on_moves_started)
        if moves.timed_out:
            return CancelResult(tuple(to_cancel), {}, back, moves, journal_path=path)
    clear = None
    if not request.preserve_throttles and (request.foreign or journal is not None):
        if request.foreign or journal is None:
            brokers, topics = clear_scope([b.id for b in info.brokers], request.targets, journal)
        else:  # kreassign's cancel: only what the run set, restored; an operator's throttle stays
            brokers, topics = own_scope(journal)
        clear = clear_throttles(port, brokers, topics, journal=journal, dry_run=request.dry_run,
                                confirm=Confirm(clock, sleep))
        if journal is not None and clear.complete and not request.dry_run:
            journal.set_state("aborted")
    return CancelResult(tuple(to_cancel), {}, back, moves, clear, path, request.dry_run)
