"""Live reassignment operations over a `ClusterPort`: the public library API in one place.

Every function takes a port and a typed request and returns a typed result; nothing here prints.
The implementations live in `executor`, `verify`, `cancel`, `recovery`, `clear`,
`logdir_moves` and `throttle_io`; the journal in `journal`.
"""
from __future__ import annotations

from kreassign.execute.journal import Journal, JournalStore, journal_root, plan_hash
from kreassign.execute.cancel import CancelRequest, CancelResult, cancel, cancellable
from kreassign.execute.clear import ClearResult, clear_throttles
from kreassign.execute.errors import ExecuteFailed, ReassignmentInProgress
from kreassign.execute.executor import (
    CANNOT_EXECUTE_MESSAGE,
    ExecuteEvent,
    ExecutePlan,
    ExecuteRequest,
    ExecuteResult,
    apply_execute,
    prepare_execute,
)
from kreassign.execute.logdir_moves import LogDirStatus, MoveStart
from kreassign.execute.recovery import AbortResult, ResumeResult, abort, resume, resume_preview
from kreassign.execute.throttle_io import ThrottleSnapshot, read_throttles
from kreassign.execute.verify import (
    ListResult,
    PartitionStatus,
    VerifyRequest,
    VerifyResult,
    list_reassignments,
    verify,
)

__all__ = [
    "CANNOT_EXECUTE_MESSAGE", "AbortResult", "CancelRequest", "CancelResult", "ClearResult",
    "ExecuteEvent", "ExecuteFailed", "ExecutePlan", "ExecuteRequest", "ExecuteResult", "Journal",
    "JournalStore", "ListResult", "LogDirStatus", "MoveStart", "PartitionStatus",
    "ReassignmentInProgress", "ResumeResult", "ThrottleSnapshot", "VerifyRequest", "VerifyResult",
    "abort", "apply_execute", "cancel", "cancellable", "clear_throttles", "journal_root",
    "list_reassignments", "plan_hash", "prepare_execute", "read_throttles", "resume", "resume_preview",
    "verify",
]
