"""Clocks for the sandbox: manual (tests step time) or scaled wall time (`--speed`), and the
keeper that holds a scaled clock to the work its engine can do."""
from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any


class ManualClock:
    """Sandbox time moves only when `advance` is called."""

    ticking = False

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def reset(self, now: float) -> None:
        with self._lock:
            self._now = now


class ScaledClock:
    """Sandbox seconds = wall seconds x speed (plus any explicit `advance`)."""

    ticking = True

    def __init__(self, speed: float, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.asked = speed
        """the speed it started with (`speed` is the one it runs at, lower once `slow_to` was called)"""
        self._monotonic = monotonic
        self._origin = monotonic()
        self._offset = 0.0
        self._given_up = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return (self._monotonic() - self._origin) * self.speed + self._offset

    def wall(self) -> float:
        """The wall clock this clock scales (seconds, monotonic)."""
        return self._monotonic()

    def hold(self, to: float) -> float:
        """Slow down to the work done: if `now()` is past `to`, move it back to `to`. Returns the
        sandbox seconds given up (also added to `given_up`)."""
        with self._lock:
            ahead = (self._monotonic() - self._origin) * self.speed + self._offset - to
            if ahead <= 0:
                return 0.0
            self._offset -= ahead
            self._given_up += ahead
            return ahead

    def slow_to(self, speed: float) -> None:
        """Run at `speed` from now on (sandbox time stays continuous)."""
        with self._lock:
            now = (self._monotonic() - self._origin) * self.speed + self._offset
            self._origin = self._monotonic()
            self._offset = now
            self.speed = speed

    @property
    def given_up(self) -> float:
        """Sandbox seconds the clock gave up (`hold`) since it started: the time it was asked to
        cover beyond the work its engine did."""
        with self._lock:
            return self._given_up

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def reset(self, now: float) -> None:
        with self._lock:
            self._origin = self._monotonic()
            self._offset = now


Clock = ManualClock | ScaledClock


KEPT_WINDOW_S = 10.0
"""the wall seconds over which `ClockKeeper.kept_speed` is measured"""
MAX_LAG_S = 1.0
"""how far (sandbox seconds) the clock may run ahead of the engine before it waits for it: one
quota window, so no client-facing rate is measured over time the engine did not cover; a
moment's lag (a thread preempted on a busy machine) catches up in the next slices"""
SLOW_BELOW = 0.95
"""a clock that kept less than this share of its speed over a whole window slows down"""
HEADROOM = 0.9
"""... to this share of the speed it kept, so that the engine keeps up from then on"""


class ClockKeeper:
    """Keeps a scaled clock honest: sandbox time never runs ahead of the work the engine did.

    The ticker calls `beat` after each slice of engine work with the sandbox time the engine
    reached. If that is more than `max_lag_s` short of the clock (the engine could not do the
    work in its slices of wall time: a busy machine, too many moves), the clock is held back to
    that distance, so the timestamps a client sees (quota windows, parked requests) stay within
    one quota window of work done, and the time given up is counted. When the clock kept less than SLOW_BELOW of its speed over a whole
    window, it slows to HEADROOM of the speed it kept: the speed it runs at, which brokers
    report as `kreassign.sandbox.time.scale`, is then one the engine can keep, so a tool that
    converts its wall-clock waits with it measures sandbox time. `status` is what
    `sandbox status` shows.
    """

    def __init__(self, clock: ScaledClock, *, window_s: float = KEPT_WINDOW_S, max_lag_s: float = MAX_LAG_S) -> None:
        self.clock = clock
        self.window_s = window_s
        self.max_lag_s = max_lag_s
        self._history: collections.deque[tuple[float, float]] = collections.deque()  # (wall, given up)
        self._history.append((clock.wall(), clock.given_up))
        self.lag_s = 0.0
        """how far the engine was behind the clock at the last beat, before the clock was held"""

    def beat(self, done: float, behind: bool) -> float:
        """The engine reached sandbox time `done` in its slice of work, `behind` the clock's time
        at the slice's start (it ran out of wall time first): hold the clock within `max_lag_s`
        of it, and slow it down if it kept too little of its speed over the last window.
        Returns the sandbox seconds given up now."""
        self.lag_s = max(self.clock.now() - done, 0.0) if behind else 0.0
        given = self.clock.hold(done + self.max_lag_s) if behind else 0.0
        wall = self.clock.wall()
        self._history.append((wall, self.clock.given_up))
        while len(self._history) > 2 and self._history[1][0] <= wall - self.window_s:
            self._history.popleft()
        if wall - self._history[0][0] >= self.window_s:
            kept = self.kept_speed()
            if kept < SLOW_BELOW * self.clock.speed:
                self.clock.slow_to(max(kept * HEADROOM, 1e-3))
                self._history.clear()
                self._history.append((wall, self.clock.given_up))
        return given

    def kept_speed(self) -> float:
        """Sandbox seconds per wall second over the last `window_s` (since the last slow-down):
        the speed run at less the time given up (that speed until a wall second has passed)."""
        (wall0, given0), (wall1, given1) = self._history[0], self._history[-1]
        span = wall1 - wall0
        if span < 1.0:
            return self.clock.speed
        return max(self.clock.speed - (given1 - given0) / span, 0.0)

    def status(self) -> dict[str, Any]:
        kept = self.kept_speed()
        return {"speed": self.clock.asked, "running_speed": round(self.clock.speed, 3), "kept_speed": round(kept, 3),
                "kept_share": round(kept / self.clock.asked, 4), "given_up_s": round(self.clock.given_up, 3),
                "lag_s": round(self.lag_s, 3)}
