"""Replication quota windows measured the way Kafka's `SimpleRate` does, for all brokers at once.

Kafka's ReplicationQuotaManager keeps one sensor per side (leader, follower) and broker, whose
metric is a `SimpleRate` over `replication.quota.window.num` (11) samples of
`replication.quota.window.size.seconds` (1 s). The `SampledStat` underneath, as of Kafka 3.9:

* a ring of `samples + 1` slots (the extra one holds the sample that overlaps the start of the
  monitored span); a slot exists from the first time it is used;
* a record goes into the current sample unless that sample started at least one window ago,
  in which case the ring advances and the next slot restarts at the record's time;
* a sample whose last record is `samples * window` (11 s) old is *obsolete*: before every
  measurement it is reset (value 0, start = last record = now);
* the rate is the sum of all samples over `now - oldest start`, floored at one window
  (`SimpleRate.windowSize`; a plain `Rate` would floor at `samples - 1` windows);
* the quota is exceeded when the rate is above the bound (`Quota.acceptable` is `<=`).

Callers record after a transfer and check before the next one; nothing here decides when.
"""
from __future__ import annotations

import numpy as np


class SampledRates:
    """`SimpleRate` windows for `n` sensors (one row each)."""

    def __init__(self, n: int, *, samples: int = 11, window: float = 1.0) -> None:
        self.samples = samples
        self.window = window
        slots = samples + 1
        # a slot that does not exist yet has start = last = +inf: never oldest, never obsolete
        self.start = np.full((n, slots), np.inf)
        self.last = np.full((n, slots), np.inf)
        self.value = np.zeros((n, slots))
        self.current = np.zeros(n, dtype=np.int64)
        self._rows = np.arange(n)

    def _first_use(self, rows: np.ndarray, now: float) -> None:
        """`SampledStat.current`/`oldest` create the first sample on first use."""
        fresh = rows[np.isinf(self.start[rows, 0])]
        if len(fresh):
            self.start[fresh, 0] = now
            self.last[fresh, 0] = now

    def _purge(self, rows: np.ndarray, now: float) -> None:
        last = self.last[rows]
        stale = (now - last) >= self.samples * self.window
        if stale.any():
            r, c = np.nonzero(stale)
            self.value[rows[r], c] = 0.0
            self.start[rows[r], c] = now
            self.last[rows[r], c] = now

    def record(self, amounts: np.ndarray, now: float, which: np.ndarray | None = None) -> None:
        """Add `amounts[i]` bytes to sensor i at time `now`, for the sensors in `which` (a boolean
        mask; default all). A zero amount is a record too: it can start a sample and keeps the
        current one from going obsolete, as Kafka's records of empty responses do."""
        rows = self._rows if which is None else self._rows[which]
        if not len(rows):
            return
        self._first_use(rows, now)
        cur = self.current[rows]
        advance = (now - self.start[rows, cur]) >= self.window
        if advance.any():
            moved = rows[advance]
            nxt = (cur[advance] + 1) % (self.samples + 1)
            self.start[moved, nxt] = now
            self.last[moved, nxt] = now
            self.value[moved, nxt] = 0.0
            cur = cur.copy()
            cur[advance] = nxt
            self.current[moved] = nxt
        add = amounts if which is None else amounts[which]
        self.value[rows, cur] += add
        # Kafka's clock only moves on; a caller that records within a step out of order must not
        # move a sample's last record back
        self.last[rows, cur] = np.maximum(self.last[rows, cur], now)

    def rates(self, now: float, which: np.ndarray | None = None) -> np.ndarray:
        """Bytes per second of the sensors in `which` (a boolean mask; default all), as
        `SimpleRate.measure`. Measuring changes state (it creates the first sample and resets
        obsolete ones to start now), so only the sensors Kafka would consult are measured; the
        others read 0."""
        rows = self._rows if which is None else self._rows[which]
        out = np.zeros(len(self._rows))
        if not len(rows):
            return out
        self._first_use(rows, now)
        self._purge(rows, now)
        oldest = self.start[rows].min(axis=1)
        out[rows] = self.value[rows].sum(axis=1) / np.maximum(now - oldest, self.window)
        return out

    def exceeded(self, bounds: np.ndarray, now: float, which: np.ndarray | None = None) -> np.ndarray:
        """True where a measured rate is above its bound (`Sensor.checkQuotas`)."""
        return self.rates(now, which) > bounds
