"""The event loop: from one completion (or batch of completions) to the next, the active moves
share the capacities max-min fairly and progress at their rate less their partition's writes.

Completions are processed in batches whose size `tolerance` bounds (and corrected for the
capacity freed inside a batch, `steps.settle`), so 100,000 moves on 1,000 brokers take about a
second of CPU (bench/bench_estimate.py); `tolerance=0` processes every event exactly.
"""
from __future__ import annotations

import math

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.predict.model.inputs import Admission, ModelInput
from kreassign.predict.model.kafka import INF
from kreassign.predict.model.records import Recorder, result, stall
from kreassign.predict.model.results import ModelResult
from kreassign.predict.model.slots import Slots
from kreassign.predict.model.state import ACTIVE, PENDING, Capacity, Moves, Progress
from kreassign.predict.model.steps import Active, Step, limits, rates, settle, step_record

DEFAULT_TOLERANCE = 0.1
"""Event batching of `simulate`: on 10,000 heavy-tailed moves, makespans about 1% above exact
(`tolerance=0`) and single moves within 5% (p99), at a twentieth of the events."""
PROGRESS_EPS = 1e-9
"""A move whose rate exceeds its write rate by less than this fraction is stuck."""
MAX_GROWTH = 1.0
"""A batch never spans more than this share of the time elapsed so far."""


class Run:
    """One run of the event loop: the moves in session order, their progress, the brokers'
    capacity, the slots moves start in, and what is recorded. Use `simulate`."""

    def __init__(self, inp: ModelInput, admission: Admission | None, tolerance: float) -> None:
        self.inp, self.admission, self.tol = inp, admission, tolerance
        self.moves = Moves.of(inp)
        self.progress = Progress.of(self.moves)
        self.capacity = Capacity(inp, self.moves)
        self.capacity.follow_floods(tolerance)
        self.slots = Slots(inp, admission, self.moves, self.progress, self.capacity)
        self.recorder = Recorder(self.moves, inp.n_brokers)
        self.steps = 0

    def close(self, prev: Step | None, active: Active | None, rate: np.ndarray | None, started: bool) -> None:
        """Close the previous step: credit the capacity its completions freed (`settle`; not when
        moves started in between, whose arrival would be mistaken for lost capacity), then log
        its traffic."""
        if prev is None:
            return
        if active is not None and rate is not None and prev.late > 0 and not started:
            settle(self.progress, prev, active, rate, self.inp.n_brokers)
        self.recorder.rates(prev.t, prev.dt, prev.active, prev.moved)

    def advance(self, t: float, active: Active, rate: np.ndarray, which: np.ndarray, kinds: list[str],
                tau: np.ndarray, dt: float) -> Step:
        """Move the active moves on by `dt`, completing those due within it."""
        progress, w, act = self.progress, active.w, active.act
        rem = progress.rem[act]
        progress_bps = rate - w
        done = tau <= dt * (1 + 1e-12)
        moved = np.where(done, rem + w * np.where(done, tau, 0.0), np.where(done, 0.0, rate) * dt)
        progress.rem[act] = np.where(done, 0.0, rem - np.where(np.isfinite(progress_bps), progress_bps, 0.0) * dt)
        finished = act[done]
        progress.limit[finished], progress.limit_broker[finished] = limits(self.moves, self.capacity, finished,
                                                                           which[done], kinds)
        # never after the step's end, where the next event (and any slot they free) is
        progress.finish[finished] = np.minimum(np.minimum(t + tau[done], t + dt), progress.early[finished])
        self.slots.complete(finished)
        return step_record(self.capacity, t, dt, active, rate, moved, progress_bps, tau, done)

    def run(self) -> ModelResult:
        t = 0.0
        prev: Step | None = None
        # every completion, start and capacity change is an event; floods add a refill and a
        # run-dry per flooding leader and span followed
        floods = 2 * int(self.capacity.spans_left.max(initial=0)) * (int(self.capacity.flooding.sum()) + 1)
        for _ in range(4 * len(self.progress.status) + 8 + floods):
            boosted = self.capacity.boost(t) | self.capacity.flood_tick(t)
            admitted = self.slots.admit(t)
            started = boosted or admitted  # a capacity change is no lost capacity either
            before = None if prev is None or admitted else prev.active
            active = self._active() if before is None else before.kept(~prev.done)  # type: ignore[union-attr]
            until_start = min(self.slots.next_start(t), self.capacity.next_refill) - t
            if not len(active.act):
                self.close(prev, None, None, False)
                prev = None
                self.recorder.remaining_at(t, self.progress)
                if math.isinf(until_start):
                    break
                t += until_start
                continue
            rate, which, kinds, shared = rates(self.moves, self.progress, self.capacity, active, before)
            self.close(prev, active, rate, started)
            self.recorder.remaining_at(t, self.progress)
            tau = self._time_to_sync(active, rate)
            if np.isinf(tau.min()) and math.isinf(until_start):
                stall(self.moves, self.progress, self.capacity, self.recorder, active.act, rate, which, kinds,
                      shared, t)
                prev = None
                break
            # With moves queued for a slot, growing steps by elapsed time would start them late.
            paced = self.admission is not None and bool(np.any(self.progress.status == PENDING))
            until_dry = self.capacity.until_dry(active.src, rate, self.tol)
            dt = step_length(tau, t, min(until_start, until_dry), self.tol, paced)
            prev = self.advance(t, active, rate, which, kinds, tau, dt)
            self.capacity.spend(active.src, prev.moved, t, dt)
            t += dt
            self.steps += 1
        self.close(prev, None, None, False)
        self.recorder.remaining_at(t, self.progress)
        self.recorder.close(t)
        return result(self.inp, self.moves, self.progress, self.recorder,
                      batched=self.tol > 0 and self.admission is None, steps=self.steps, admission=self.admission)

    def _active(self) -> Active:
        act = np.flatnonzero(self.progress.status[:self.moves.nv] == ACTIVE)
        return Active.gather(self.moves, act)

    def _time_to_sync(self, active: Active, rate: np.ndarray) -> np.ndarray:
        """Per active move, how long until it is in sync at this rate (inf: never)."""
        rem = self.progress.rem[active.act]
        progress = rate - active.w
        moving = progress > PROGRESS_EPS * np.where(np.isfinite(rate), rate, 1.0)
        tau = np.full(len(rem), INF)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(rem, progress, out=tau, where=moving)
        return tau


def step_length(tau: np.ndarray, t: float, until_start: float, tol: float, paced: bool) -> float:
    """How far to advance: to the first completion, or further by `tol` (a fraction of the
    active moves, or of the elapsed time, unless moves wait for a slot: `paced`), never past
    the next start."""
    tau_min = float(tau.min())
    if until_start < tau_min:
        return until_start
    dt = tau_min
    finite = tau if math.isfinite(float(tau.max())) else tau[np.isfinite(tau)]
    if tol > 0 and len(finite) > 1:
        k = min(int(tol * len(tau)), len(finite) - 1)
        by_count = float(np.partition(finite, k)[k]) if k >= 1 else tau_min
        by_time = tau_min if paced else min(tau_min + tol * (t + tau_min), float(finite.max()))
        growth = tau_min + MAX_GROWTH * (t + tau_min)
        dt = max(dt, min(max(min(by_count, growth), by_time), until_start))
    return dt


def simulate(inp: ModelInput, *, admission: Admission | None = None, tolerance: float = DEFAULT_TOLERANCE) -> ModelResult:
    """Run the replication model: when each move completes, and what limits it.

    Args:
        inp: the moves, rates and limits.
        admission: optional limits on moves in flight (see `Admission`); without it every move
            starts at its `start_s`.
        tolerance: completions that fall within this fraction of the active moves, or of the
            elapsed time, are processed as one event; 0 processes every completion on its own.
            Rates still change at every event, so the error stays around this fraction.

    Raises:
        InputError: a tolerance outside [0, 1) or a priority that is not a permutation.
    """
    if not 0 <= tolerance < 1:
        raise InputError("the model tolerance must be at least 0 and below 1")
    if admission is not None:
        prio = admission.priority
        if len(prio) != len(inp) or (len(prio) and (prio.min() < 0 or prio.max() >= len(inp)
                                                   or np.any(np.bincount(prio, minlength=len(inp)) != 1))):
            raise InputError("the admission priority must list every move exactly once")
    return Run(inp, admission, tolerance).run()
