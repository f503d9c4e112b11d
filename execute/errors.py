"""Errors of the live operations that are not the cluster layer's own (`cluster.errors`).

The execution lock's, the executor's and the journal's errors still live beside their code
(`lock.py`, `executor.py`, `journal.py`), which issues 26/29 are changing at the same time;
they join this module once those land."""
from __future__ import annotations

from collections.abc import Iterable

from kreassign.cluster.errors import ClusterError, InputError


class StillMoving(InputError):
    """Clearing throttles while reassignments run lets them copy unthrottled."""


class ConfigsRefused(ClusterError):
    """Some resources refused a config change; the others applied it."""

    def __init__(self, message: str, refused_brokers: Iterable[int], refused_topics: Iterable[str]) -> None:
        super().__init__(message)
        self.refused_brokers = frozenset(refused_brokers)
        self.refused_topics = frozenset(refused_topics)


class RunStopped(ClusterError):
    """A run that a cluster error stopped: the error, what the run left and the commands that
    finish or undo it. Keeps the exit status of the error that stopped it."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
