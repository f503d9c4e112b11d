"""Domain exceptions shared by every kreassign package.

Each class carries the exit status the CLI uses for it; messages are written for an operator
reading them at 3 a.m.: what went wrong and what to do next.
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum


class ExitStatus(IntEnum):
    """Process exit codes, listed in the man page and pinned by tests."""

    OK = 0
    ERROR = 1
    USAGE = 2
    IN_PROGRESS = 3
    """`verify`/`watch` ended while moves are still running (only with --exit-status)."""
    CANNOT_COMPLETE = 4
    """a move cannot finish: its partition's write rate exceeds its throttled share."""
    CLUSTER_UNREACHABLE = 5
    INFEASIBLE_PLAN = 6
    """a planner could not satisfy a hard constraint; no plan was written (without --allow-partial)."""
    INTERRUPTED = 130


JAVA_LONG_MAX = 2**63 - 1
"""the largest value of a Kafka LONG config (rates, byte counts)"""
_CLIP = 80
PATH_CLIP = 400
"""a file's path in a message is cut only past this: the operator needs it whole to act on it
(a CI run's temporary paths are 90 characters)"""


def clip(value: object, limit: int = _CLIP) -> str:
    """A user value fit for a one-line message: long values are cut, saying how long they were."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


class KreassignError(Exception):
    """Root of every error kreassign reports to the user without a traceback."""

    exit_code: int = ExitStatus.ERROR


class InputError(KreassignError):
    """A file, field or value given by the user is malformed or inconsistent."""


class KafkaCompatError(KreassignError):
    """An error whose text must match Kafka's tool byte for byte."""


class TerseError(KafkaCompatError):
    """Kafka's TerseException: only the message is printed, on stdout."""


class AdminCommandFailed(KafkaCompatError):
    """Kafka's AdminCommandFailedException/AdminOperationException: printed as `Error: <msg>`."""


class ClusterError(KreassignError):
    """The cluster refused a request or answered with an error."""


class ClusterUnreachable(ClusterError):
    """No broker answered in time."""

    exit_code = ExitStatus.CLUSTER_UNREACHABLE




class NotAuthorized(ClusterError):
    """The connected principal lacks the ACLs a change needs (checked before changing anything)."""


class SecurityMismatch(ClusterUnreachable):
    """No broker could be used: the TLS or SASL settings do not match its listener, or it
    refused the login."""


class UnknownTopicError(ClusterError):
    """Topics named by the user do not exist in the cluster."""

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = tuple(sorted(topics))
        names = ", ".join(self.topics)
        noun = "Topic" if len(self.topics) == 1 else "Topics"
        super().__init__(f"{noun} {names} not found in the cluster. "
                         "Check the spelling, or list topics with kafka-topics.sh --list.")


class InfeasiblePlanError(KreassignError):
    """A plan would leave replicas that must move without a broker that may take them."""

    exit_code = ExitStatus.INFEASIBLE_PLAN


class JournalError(KreassignError):
    """The execution journal is missing, unreadable or does not match the cluster."""


class UnitError(InputError):
    """A number with a unit that is ambiguous or beyond what Kafka accepts (the hint matters more
    than a generic "not a size")."""


class NoAnswer(Exception):
    """An attempt outlived the operation's deadline."""


class GaveUp(ClusterUnreachable):
    """ClusterUnreachable that also carries a short reason for per-broker results."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
