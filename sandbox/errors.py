"""The emulator's errors: what a request is refused with, each carrying what Kafka answers (an
error code or message). Handlers turn them into responses; none reaches a user as a traceback."""
from __future__ import annotations

from kreassign.cluster.errors import InputError


class SequenceError(Exception):
    """An idempotent producer's batch out of order or from a fenced epoch; `code` is Kafka's error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class AuthenticationFailed(Exception):
    """The credentials were refused; the message is what Kafka tells the client."""


class QuotaRequestError(Exception):
    """A request Kafka answers with INVALID_REQUEST (or UNSUPPORTED_VERSION) and this message."""

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


class InvalidRecords(Exception):
    """A record set the leader refuses; `code` is Kafka's error for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class PortTaken(InputError):
    """A real-Kafka sandbox node could not bind a port that was free when the cluster picked it:
    started again on new free ports, the cluster may come up."""
