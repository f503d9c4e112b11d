"""Fair shares per broker: water-filling under per-broker boxes and per-rack bounds.

A broker's share is `clip(level * weight, lo, hi)`; racks get `clip(sum of their brokers'
shares, rack_lo, rack_hi)` and the levels are found by bisection so that everything adds up to
the total. Rack bounds come from rack awareness: a partition with RF r over K racks puts between
floor(r/K) and ceil(r/K) replicas in each rack, so a small rack may have to hold more per broker.
"""
from __future__ import annotations

import numpy as np

_ITER = 100


def waterfill(
    total: float,
    weights: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    groups: np.ndarray,
    group_lo: np.ndarray,
    group_hi: np.ndarray,
) -> np.ndarray:
    """Split `total` over brokers as evenly (per unit of weight) as the bounds allow.

    Args:
        total: the amount to split.
        weights: relative capacity of each broker (> 0 for brokers that can take load).
        lo, hi: per-broker bounds (hi may be inf).
        groups: group (rack) index of each broker, 0..G-1.
        group_lo, group_hi: bounds on each group's total.

    Returns:
        Real-valued shares; they add up to `total` whenever the bounds allow it.
    """
    g = len(group_lo)
    w = np.maximum(weights.astype(np.float64), 0.0)
    lo = lo.astype(np.float64)
    hi = np.maximum(hi.astype(np.float64), lo)
    box_lo = np.bincount(groups, weights=lo, minlength=g)
    box_hi = np.bincount(groups, weights=np.where(np.isinf(hi), 0.0, hi), minlength=g)
    box_hi[np.bincount(groups, weights=np.isinf(hi).astype(float), minlength=g) > 0] = np.inf
    glo = np.clip(group_lo, box_lo, box_hi)
    ghi = np.clip(np.maximum(group_hi, glo), box_lo, box_hi)

    def fill(level: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.clip(level[groups] * w, lo, hi)
        return out

    def group_totals(level: float) -> np.ndarray:
        raw = np.bincount(groups, weights=fill(np.full(g, level)), minlength=g)
        return np.clip(raw, glo, ghi)

    top = _level_ceiling(total, w, lo, hi)
    a, b = 0.0, top
    for _ in range(_ITER):
        mid = (a + b) / 2
        if group_totals(mid).sum() < total:
            a = mid
        else:
            b = mid
    want = group_totals(b)
    # Each group now splits its own total with its own level.
    ga, gb = np.zeros(g), np.full(g, top)
    for _ in range(_ITER):
        mid = (ga + gb) / 2
        below = np.bincount(groups, weights=fill(mid), minlength=g) < want
        ga = np.where(below, mid, ga)
        gb = np.where(below, gb, mid)
    return fill(gb)


def _level_ceiling(total: float, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """A level at which every broker with weight sits at its upper bound (or beyond total)."""
    pos = w > 0
    if not pos.any():
        return 1.0
    finite_hi = np.where(np.isinf(hi), 0.0, hi)
    return float(max(total, finite_hi.max(), lo.max(), 1.0) / w[pos].min()) * 2.0 + 1.0


def integer_shares(shares: np.ndarray, current: np.ndarray, total: int, tiebreak: np.ndarray) -> np.ndarray:
    """Round shares to integers adding up to `total`, each floor or ceil of its share.

    The ceilings go to the brokers that already hold more than the floor (so a balanced cluster
    keeps its counts), then to the largest fractional parts.
    """
    base = np.floor(shares + 1e-9).astype(np.int64)
    extra = int(total - base.sum())
    if extra <= 0:
        return base
    frac = shares - base
    can = frac > 1e-9
    order = np.lexsort((tiebreak, -frac, -(current > base).astype(np.int64), ~can))
    take = order[:extra]
    base[take] += 1
    return base


def integer_shares_by_group(shares: np.ndarray, current: np.ndarray, total: int, tiebreak: np.ndarray,
                            groups: np.ndarray) -> np.ndarray:
    """`integer_shares` that also keeps each group's (rack's) total at the floor or ceil of its
    share, so a rack whose total rack awareness fixes gets exactly that total."""
    g = int(groups.max()) + 1 if len(groups) else 0
    group_share = np.bincount(groups, weights=shares, minlength=g)
    group_now = np.bincount(groups, weights=current, minlength=g)
    group_int = integer_shares(group_share, group_now, total, np.arange(g))
    out = np.zeros(len(shares), dtype=np.int64)
    for r in range(g):
        members = np.flatnonzero(groups == r)
        out[members] = integer_shares(shares[members], current[members], int(group_int[r]), tiebreak[members])
    return out


def rack_bounds(per_partition: np.ndarray, rf: np.ndarray, racks: int) -> tuple[float, float]:
    """Least and most a rack can hold of a per-partition quantity under even rack spread."""
    if racks <= 0:
        return 0.0, float(per_partition.sum())
    low = (rf // racks).astype(np.float64)
    high = -(-rf // racks).astype(np.float64)
    return float((per_partition * low).sum()), float((per_partition * high).sum())
