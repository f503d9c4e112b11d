"""Replication quota windows measured the way Kafka's `SimpleRate` does, for all brokers at once.

Each broker has `samples` slots of `window` seconds. A sample starts at the first record after
the previous one completed; samples idle for `samples * window` are purged; the rate is the bytes
in the retained samples over the time since the oldest retained sample started, at least one
window (`max(now - oldest.start, window)`). The quota is exceeded when that rate is above the bound.
"""
from __future__ import annotations

import numpy as np


class SampledRates:
    """`SimpleRate` windows for `n` brokers (one row each)."""

    def __init__(self, n: int, *, samples: int = 11, window: float = 1.0) -> None:
        self.samples = samples
        self.window = window
        self.start = np.zeros((n, samples))
        self.last = np.full((n, samples), -np.inf)
        self.value = np.zeros((n, samples))
        self.current = np.zeros(n, dtype=np.int64)
        self._fresh = np.ones(n, dtype=bool)
        self._rows = np.arange(n)

    def _purge(self, now: float) -> None:
        stale = (now - self.last) >= self.samples * self.window
        if stale.any():
            self.value[stale] = 0.0
            self.start[stale] = now
            self.last[stale] = -np.inf

    def record(self, amounts: np.ndarray, now: float) -> None:
        """Add `amounts[i]` bytes to broker i's current sample at time `now`."""
        rows = self._rows
        cur = self.current
        advance = ((now - self.start[rows, cur]) >= self.window) & ~self._fresh
        if advance.any():
            cur = np.where(advance, (cur + 1) % self.samples, cur)
        restart = advance | self._fresh
        if restart.any():
            self.start[rows[restart], cur[restart]] = now
            self.value[rows[restart], cur[restart]] = 0.0
            self._fresh[:] = False
        self.value[rows, cur] += amounts
        self.last[rows, cur] = now
        self.current = cur

    def rates(self, now: float) -> np.ndarray:
        """Bytes per second per broker over the retained samples."""
        self._purge(now)
        live = np.isfinite(self.last)
        oldest = np.where(live, self.start, np.inf).min(axis=1)
        elapsed = np.where(np.isfinite(oldest), now - oldest, 0.0)
        rates: np.ndarray = self.value.sum(axis=1) / np.maximum(elapsed, self.window)
        return rates

    def exceeded(self, bounds: np.ndarray, now: float) -> np.ndarray:
        """True where the measured rate is above the bound (`Quota.acceptable` is `<=`)."""
        return self.rates(now) > bounds
