"""Delayed operations (Kafka's purgatories): a request parked until its condition holds or its
deadline passes, whichever comes first. Pure bookkeeping on sandbox time; the server decides
when to look again (after appends, engine ticks and at the next wake-up time).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def _never(now: float) -> float | None:
    return None


@dataclass(eq=False)
class Delayed:
    """A parked request.

    `ready(now)` says whether it can complete; `complete(now, expired)` builds its response;
    `wake(now)` is the sandbox time at which `ready` may turn true without any other event
    (None if only appends or engine ticks can change it).
    """

    parked_at: float
    deadline: float
    ready: Callable[[float], bool]
    complete: Callable[[float, bool], Any]
    wake: Callable[[float], float | None] = field(default=_never)


class Purgatory:
    """The parked operations of one sandbox."""

    def __init__(self) -> None:
        self.ops: list[Delayed] = []

    def __len__(self) -> int:
        return len(self.ops)

    def park(self, op: Delayed) -> None:
        self.ops.append(op)

    def poke(self, now: float) -> list[tuple[Delayed, Any]]:
        """Complete every ready or expired operation; returns them with their responses (or the
        exception an operation raised, for the server to close its connection)."""
        done: list[tuple[Delayed, Any]] = []
        waiting: list[Delayed] = []
        for op in self.ops:
            try:
                if op.ready(now):
                    done.append((op, op.complete(now, False)))
                elif now >= op.deadline:
                    done.append((op, op.complete(now, True)))
                else:
                    waiting.append(op)
            except Exception as exc:  # noqa: BLE001 - one broken operation must not strand the others
                done.append((op, exc))
        self.ops = waiting
        return done

    def next_wake(self, now: float) -> float | None:
        """The earliest deadline or wake-up time of the parked operations."""
        times = [t for op in self.ops for t in (op.deadline, op.wake(now)) if t is not None]
        return min(times) if times else None

    def cancel(self, op: Delayed) -> None:
        """Forget an operation whose connection closed."""
        if op in self.ops:
            self.ops.remove(op)
