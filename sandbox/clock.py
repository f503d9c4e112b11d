"""Clocks for the sandbox: manual (tests step time) or scaled wall time (`--speed`)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable


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
        self._monotonic = monotonic
        self._origin = monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return (self._monotonic() - self._origin) * self.speed + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def reset(self, now: float) -> None:
        with self._lock:
            self._origin = self._monotonic()
            self._offset = now


Clock = ManualClock | ScaledClock
