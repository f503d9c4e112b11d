"""Max-min fair sharing (water-filling) of the brokers' capacities among the active moves.

Each kind of shared capacity (a broker's outbound catch-up, its inbound catch-up, a fetcher
session's response size) is a set of segments over the active moves; `max_min_rates` finds every
move's rate such that no move can go faster without slowing one that is no faster than it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kreassign.predict.model.kafka import INF

LEVEL_EPS = 1e-13
"""Relative change of one water level at which Newton's method has landed."""
SWEEP_EPS = 1e-5
"""Relative change of every water level at which the sharing between kinds has settled."""


@dataclass
class Shared:
    """One kind of shared capacity over the active moves, as contiguous segments of an order."""

    starts: np.ndarray  # first index of each segment in this order
    counts: np.ndarray
    key: np.ndarray  # broker position (or session id) of each segment
    order: np.ndarray | None  # active-move indices in this order; None = the moves' own order
    seg: np.ndarray  # segment of each move, in the moves' own order
    own: np.ndarray  # segment of each move in this order (`seg` when that is the moves' own)
    cap: np.ndarray  # capacity of each segment left for catch-up
    warm: np.ndarray  # level per key from the previous event, as a starting point
    touched: np.ndarray  # per key: moves came or went, or the capacity changed, since then


def segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of equal values in a sorted array."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    return starts, np.diff(np.append(starts, n))


def members(starts: np.ndarray, counts: np.ndarray, segs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the members of some segments, and where each segment starts among them."""
    cnt = counts[segs]
    sub_starts = np.zeros(len(segs), np.int64)
    np.cumsum(cnt[:-1], out=sub_starts[1:])
    return np.repeat(starts[segs] - sub_starts, cnt) + np.arange(int(cnt.sum())), sub_starts


def water_level(demand: np.ndarray, starts: np.ndarray, counts: np.ndarray, cap: np.ndarray,
                 start: np.ndarray) -> np.ndarray:
    """Per segment, the level L with sum(min(demand, L)) = capacity (inf if the demand fits).

    Newton's method on a concave piecewise-linear function: from below it never overshoots and
    lands exactly on the right linear piece, in one or two steps from a warm start.
    """
    floor = cap / counts  # an equal split never exceeds the level
    level = np.where(np.isfinite(start), np.maximum(start, floor), INF)
    for _ in range(100):
        x = np.repeat(level, counts)
        got = np.add.reduceat(np.minimum(demand, x), starts)
        slope = np.add.reduceat(demand > x, starts, dtype=np.int64)
        with np.errstate(invalid="ignore"):
            stepped = np.maximum(level + (cap - got) / np.maximum(slope, 1), floor)
        # no demand above the level: either it all fits (no level) or start again from below
        new = np.where(slope == 0, np.where(got > cap, floor, INF), stepped)
        fin = np.isfinite(new)
        if np.array_equal(fin, np.isfinite(level)) and np.all(np.abs(new[fin] - level[fin]) <= LEVEL_EPS * new[fin]):
            return new
        level = new
    return level


def changed(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Segments whose level moved by more than the sweep tolerance (or became (un)limited)."""
    fin = np.isfinite(new) & np.isfinite(old)
    out: np.ndarray = np.isfinite(new) != np.isfinite(old)
    out[fin] = np.abs(new[fin] - old[fin]) > SWEEP_EPS * new[fin]
    return out


def mark_dirty(k: int, segs: np.ndarray, before: np.ndarray, after: np.ndarray, own: float,
                shared: list[Shared], levels: list[np.ndarray], cross: list[list[np.ndarray]],
                dirty: list[np.ndarray]) -> None:
    """Mark the segments of the other kinds whose water level may move because these segments'
    levels moved: only where the lower of the old and new level is below what else caps the
    move there, since a demand above a segment's level is cut to the level anyway."""
    s = shared[k]
    idx = members(s.starts, s.counts, segs)[0]
    low = np.repeat(np.minimum(before, after), s.counts[segs])
    for j in range(len(shared)):
        if j == k:
            continue
        partner = cross[k][j][idx]
        cap = levels[j][partner]
        for i in range(len(shared)):
            if i not in (j, k):
                np.minimum(cap, levels[i][cross[k][i][idx]], out=cap)
        dirty[j][partner[low < np.minimum(cap, own)]] = True


def max_min_rates(own: float, shared: list[Shared], n: int, *, max_sweeps: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Max-min fair rates of n moves, each capped by `own`, sharing the capacities in `shared`.

    Block Gauss-Seidel over the kinds of capacity: each kind's water levels given the others',
    until no level moves. It starts from the previous event's levels and re-solves only the
    segments whose moves' demands changed, so a few completions cost little. If it does not
    settle, a cold start from unlimited levels converges monotonically.
    Returns the rates and, per move, 0 if its own cap binds or 1 + the index of the binding kind.
    """
    cross = [[o.seg if s.order is None else s.own if o is s else o.seg[s.order] for o in shared] for s in shared]
    levels: list[np.ndarray] = []
    for cold in (False, True):
        levels = [np.full(len(s.starts), INF) if cold else s.warm[s.key] for s in shared]
        dirty = [np.ones(len(s.starts), bool) if cold else s.touched[s.key] for s in shared]
        for _ in range(max_sweeps * (20 if cold else 1)):
            for k, s in enumerate(shared):
                segs = np.flatnonzero(dirty[k])
                if not len(segs):
                    continue
                dirty[k][:] = False
                whole = len(segs) == len(s.starts)  # skip the gathers when every segment is dirty
                idx, sub_starts = (None, s.starts) if whole else members(s.starts, s.counts, segs)
                demand = np.full(len(s.seg) if idx is None else len(idx), own)
                for j in range(len(shared)):
                    if j != k:
                        np.minimum(demand, levels[j][cross[k][j] if idx is None else cross[k][j][idx]], out=demand)
                new = water_level(demand, sub_starts, s.counts if whole else s.counts[segs],
                                   s.cap if whole else s.cap[segs], levels[k][segs])
                before = levels[k][segs]
                levels[k][segs] = new
                moved = changed(new, before)
                if moved.any() and len(shared) > 1:
                    mark_dirty(k, segs[moved], before[moved], new[moved], own, shared, levels, cross, dirty)
            if not any(d.any() for d in dirty):
                break
        else:
            continue
        break
    rate = np.full(n, own)
    which = np.zeros(n, np.int8)
    for k, (lv, s) in enumerate(zip(levels, shared)):
        s.warm[s.key] = lv
        s.touched[s.key] = False
        mine = lv[s.seg]
        lower = mine < rate
        rate = np.where(lower, mine, rate)
        which[lower] = k + 1
    return rate, which
