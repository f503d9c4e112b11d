"""The live operations' errors: the executor's, the journal's and the execution lock's (the
cluster layer's own are `cluster.errors`)."""
from __future__ import annotations

from collections.abc import Iterable

from kreassign.cluster.errors import ClusterError, InputError, JournalError, KreassignError, TerseError
from kreassign.execute.lock_owner import Owner


class StillMoving(InputError):
    """Clearing throttles while reassignments run lets them copy unthrottled."""


class ConfigsRefused(ClusterError):
    """Some resources refused a config change; the others applied it."""

    def __init__(self, message: str, refused_brokers: Iterable[int], refused_topics: Iterable[str]) -> None:
        super().__init__(message)
        self.refused_brokers = frozenset(refused_brokers)
        self.refused_topics = frozenset(refused_topics)


class ReassignmentInProgress(TerseError):
    """`--execute` without `--additional` while a reassignment runs somewhere in the cluster."""


class ExecuteFailed(ClusterError):
    """A step failed; the message says what was rolled back or how to recover from the journal."""


class RetargetRefused(InputError):
    """The plan would re-target reassignments in flight that another run started."""


class JournalConflict(JournalError):
    """Another process wrote the journal since this one read it."""


class ExecutionLocked(KreassignError):
    """Another live kreassign holds the cluster's execution lock (or its owner is dead and
    `--force` was not given)."""

    def __init__(self, message: str, owner: Owner | None = None) -> None:
        super().__init__(message)
        self.owner = owner


class RunRefused(ExecutionLocked):
    """A command that would break the run in flight refuses, naming the run and what to do."""


class LockLost(KreassignError):
    """This run no longer holds the execution lock: its lease expired and another run took over."""


class StopRequested(KreassignError):
    """`kreassign abort` asked this run to stop."""


class RunStopped(ClusterError):
    """A run that a cluster error stopped: the error, what the run left and the commands that
    finish or undo it. Keeps the exit status of the error that stopped it."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
