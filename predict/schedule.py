"""Batching schedules: in which order moves start, and when, under limits on moves in flight.

A schedule is simulated by the replication model itself (`simulate` with an `Admission`): a
move starts as soon as a slot frees up, so start times come from the same rules as every ETA.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.predict.model import (
    DEFAULT_TOLERANCE,
    Admission,
    LowerBound,
    ModelInput,
    ModelResult,
    simulate,
)

Order = Literal["small-first", "large-first", "plan", "broker-balanced"]
ORDERS: tuple[str, ...] = ("plan", "small-first", "large-first", "broker-balanced")


def admission_order(inp: ModelInput, order: Order) -> np.ndarray:
    """Move indices in the order they should start (see `start_order`)."""
    return start_order(inp.bytes, inp.source, order)


def start_order(sizes: np.ndarray, sources: np.ndarray, order: str) -> np.ndarray:
    """Indices of moves in the order they should start; the one ordering behind the model's
    schedules and the live pacer.

    `plan` keeps the input order; `small-first`/`large-first` sort by bytes (ties in plan
    order); `broker-balanced` takes the sending brokers in turn (each broker's moves in plan
    order), so every broker has work early instead of one broker's queue draining first.

    Raises:
        InputError: an unknown order.
    """
    sizes, sources = np.asarray(sizes), np.asarray(sources)
    m = len(sizes)
    if order == "plan":
        return np.arange(m)
    if order == "small-first":
        return np.argsort(sizes, kind="stable")
    if order == "large-first":
        return np.argsort(-sizes, kind="stable")
    if order == "broker-balanced":
        by_src = np.argsort(sources, kind="stable")
        keys = sources[by_src]
        starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1)) if m else np.zeros(0, np.int64)
        counts = np.diff(np.append(starts, m))
        turn = np.empty(m, np.int64)
        turn[by_src] = np.arange(m) - np.repeat(starts, counts)
        return np.lexsort((np.arange(m), turn))
    raise InputError(f"unknown order '{order}': use one of {', '.join(ORDERS)}")


@dataclass(frozen=True, eq=False)
class Schedule:
    """A simulated schedule: start order, start and finish times, and how it compares with the
    lower bound of this schedule (`lower_bound` under its admission: moves that wait for a slot
    do not fall behind while they wait, so only each move's writes over its shortest copy are
    charged, and no schedule ends before it)."""

    order: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    makespan: float
    lower: LowerBound
    result: ModelResult
    max_moves_per_broker: int | None
    max_inflight_bytes: float | None
    order_name: str

    @property
    def ratio_to_lower_bound(self) -> float:
        """makespan / lower bound (inf if the schedule never ends, 1 for an empty plan)."""
        if math.isinf(self.makespan):
            return math.inf
        return self.makespan / self.lower.seconds if self.lower.seconds > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        ratio = self.ratio_to_lower_bound
        return {
            "order": self.order_name,
            "max_moves_per_broker": self.max_moves_per_broker,
            "max_inflight_bytes": self.max_inflight_bytes,
            "makespan_s": None if math.isinf(self.makespan) else self.makespan,
            "lower_bound_s": None if math.isinf(self.lower.seconds) else self.lower.seconds,
            "ratio_to_lower_bound": None if math.isinf(ratio) else ratio,
        }


def schedule_waves(
    inp: ModelInput,
    *,
    max_moves_per_broker: int | None = None,
    max_inflight_bytes: float | None = None,
    order: Order = "plan",
    tolerance: float = DEFAULT_TOLERANCE,
    release_finished: bool = True,
    poll_s: float = 0.0,
    wave_start_s: float = 0.0,
) -> Schedule:
    """Simulate starting the moves in `order`, each as soon as the limits allow.

    Args:
        inp: the moves and rates.
        max_moves_per_broker: at most this many moves in flight out of, and into, each broker.
        max_inflight_bytes: at most this many bytes of moves in flight.
        order: the admission order (see `admission_order`).
        tolerance: event batching of the model (see `simulate`).
        release_finished: finished moves stop counting against the quotas (kreassign's pacer
            recomputes the throttled lists per wave); False models one list for the whole plan.
        poll_s: the pacer's poll interval: a finished move's slot frees at the next poll.
        wave_start_s: how long after that poll the next move starts copying (`WAVE_START_S`).

    Raises:
        InputError: a limit below 1 or an unknown order.
    """
    priority = admission_order(inp, order)
    admission = Admission(priority, max_moves_per_broker=max_moves_per_broker, max_inflight_bytes=max_inflight_bytes,
                          release_finished=release_finished, poll_s=poll_s, wave_start_s=wave_start_s)
    result = simulate(inp, admission=admission, tolerance=tolerance)
    return Schedule(
        order=priority, start_s=result.start_s, finish_s=result.finish_s, makespan=result.makespan,
        lower=result.lower, result=result, max_moves_per_broker=max_moves_per_broker,
        max_inflight_bytes=max_inflight_bytes, order_name=order,
    )
