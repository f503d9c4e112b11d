"""Live reassignment operations over a `ClusterPort`: the public library API in one place.

Every function takes a port and a typed request and returns a typed result; nothing here prints.
The implementations live in `ops_execute`, `ops_verify`, `ops_cancel`, `ops_recovery`,
`ops_clear`, `ops_logdirs` and `ops_throttles`; the journal in `journal`.
"""
from __future__ import annotations

from kreassign.throttle.journal import Journal, JournalStore, journal_root, plan_hash
from kreassign.throttle.ops_cancel import CancelRequest, CancelResult, cancel, cancellable
from kreassign.throttle.ops_clear import ClearResult, clear_throttles
from kreassign.throttle.ops_execute import (
    CANNOT_EXECUTE_MESSAGE,
    ExecuteEvent,
    ExecuteFailed,
    ExecutePlan,
    ExecuteRequest,
    ExecuteResult,
    ReassignmentInProgress,
    apply_execute,
    prepare_execute,
)
from kreassign.throttle.ops_logdirs import LogDirStatus, MoveStart
from kreassign.throttle.ops_recovery import AbortResult, ResumeResult, abort, resume, resume_preview
from kreassign.throttle.ops_throttles import ThrottleSnapshot, read_throttles
from kreassign.throttle.ops_verify import (
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
