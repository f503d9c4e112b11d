"""Preferred-leader balance by reordering replica lists: no data moves.

Each partition picks one of its replicas as preferred leader (the first in its list). Start from
the current leader (fewest leader changes), then shift leadership from brokers above their share
to brokers below it along partitions they share, with a breadth-first search for chains when no
direct shift exists; the per-broker count then sits within floor/ceil of its share. A second
pass evens out the produce bytes/s led per broker in vectorised rounds of trades between brokers
that share partitions: shifts where the count band has room, count-neutral swaps otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kreassign.planner.balance.arrays import stable_order
from kreassign.planner.balance.targets import integer_shares, waterfill


class LeaderBalancer:
    """Chooses preferred leaders for a fixed replica placement."""

    def __init__(
        self,
        matrix: np.ndarray,
        current: np.ndarray,
        movable: np.ndarray,
        produce_bps: np.ndarray,
        brokers: int,
        tiebreak: np.ndarray,
    ) -> None:
        self.F = matrix
        n, width = matrix.shape
        self.nb = brokers
        self.movable = movable & (matrix >= 0).sum(axis=1).astype(bool)
        self.bps = produce_bps.astype(np.float64)
        in_row = (matrix == current[:, None]).any(axis=1) & (current >= 0)
        first = np.where(matrix[:, 0] >= 0, matrix[:, 0], -1)
        self.lead = np.where(in_row, current, first).astype(np.int64)
        self.start = self.lead.copy()
        flat = matrix.ravel()
        keep = flat >= 0
        part = np.repeat(np.arange(n), width)[keep]
        brk = flat[keep]
        order = stable_order(brk, brokers)
        self.host_rows = part[order]
        self.host_start = np.searchsorted(brk[order], np.arange(brokers + 1))
        self.tb = tiebreak
        has = self.lead >= 0
        self.L = np.bincount(self.lead[has], minlength=brokers).astype(np.int64)
        self.B = np.bincount(self.lead[has], weights=self.bps[has], minlength=brokers)
        self.target = np.zeros(brokers, dtype=np.int64)
        self.lo = np.zeros(brokers, dtype=np.int64)
        self.hi = np.zeros(brokers, dtype=np.int64)

    def hosted(self, b: int) -> np.ndarray:
        out: np.ndarray = self.host_rows[self.host_start[b]:self.host_start[b + 1]]
        return out

    def led_movable(self, b: int) -> np.ndarray:
        rows = self.hosted(b)
        out: np.ndarray = rows[(self.lead[rows] == b) & self.movable[rows]]
        return out

    def set_targets(self, eligible: np.ndarray) -> None:
        has = self.lead >= 0
        fixed = np.bincount(self.lead[has & ~self.movable], minlength=self.nb).astype(np.float64)
        hosting = np.bincount(self.F[self.movable].ravel()[self.F[self.movable].ravel() >= 0],
                              minlength=self.nb).astype(np.float64)
        total = int(has.sum())
        w = eligible.astype(np.float64)
        cap = np.where(eligible, fixed + hosting, fixed)
        shares = waterfill(float(total), w, fixed, cap, np.zeros(self.nb, dtype=np.int64),
                           np.zeros(1), np.full(1, np.inf))
        self.target = integer_shares(shares, self.L, total, self.tb)
        self.lo = np.floor(shares + 1e-9).astype(np.int64)
        self.hi = np.ceil(shares - 1e-9).astype(np.int64)

    def _shift(self, p: int, to: int) -> None:
        a = int(self.lead[p])
        self.lead[p] = to
        self.L[a] -= 1
        self.L[to] += 1
        self.B[a] -= self.bps[p]
        self.B[to] += self.bps[p]

    # ---- counts -----------------------------------------------------------------------------
    def balance_counts(self) -> None:
        for _ in range(3):
            if not self._direct_pass():
                break
        for a in np.flatnonzero(self.L > self.target).tolist():
            while self.L[a] > self.target[a] and self._chain_from(a):
                pass

    def _direct_pass(self) -> bool:
        changed = False
        mean_bps = self.B.sum() / max(self.nb, 1)
        for a in np.argsort(-(self.L - self.target), kind="stable").tolist():
            if self.L[a] <= self.target[a]:
                break
            rows = self.led_movable(a)
            if not len(rows):
                continue
            alts = self.F[rows]
            ok = (alts >= 0) & (alts != a)
            # Shed the leaderships whose bytes/s move this broker toward the mean first.
            heavy = self.B[a] > mean_bps
            order = np.argsort(-self.bps[rows] if heavy else self.bps[rows], kind="stable")
            for i in order.tolist():
                if self.L[a] <= self.target[a]:
                    break
                cands = alts[i][ok[i]]
                room = cands[self.L[cands] < self.target[cands]]
                if len(room):
                    self._shift(int(rows[i]), int(room[np.argmin(self.L[room] - self.target[room])]))
                    changed = True
        for b in np.argsort(self.L - self.target, kind="stable").tolist():
            if self.L[b] >= self.target[b]:
                break
            rows = self.hosted(b)
            rows = rows[self.movable[rows] & (self.lead[rows] != b)]
            givers = self.lead[rows]
            rich = self.L[givers] > self.target[givers]
            for p in rows[rich].tolist():
                if self.L[b] >= self.target[b]:
                    break
                if self.L[self.lead[p]] > self.target[self.lead[p]]:
                    self._shift(p, b)
                    changed = True
        return changed

    def _chain_from(self, a: int) -> bool:
        """Shift one leadership along a path a -> ... -> b ending at a broker below target."""
        parent = np.full(self.nb, -1, dtype=np.int64)
        via = np.full(self.nb, -1, dtype=np.int64)
        parent[a] = a
        frontier = [a]
        while frontier:
            nxt: list[int] = []
            for x in frontier:
                rows = self.led_movable(x)
                if not len(rows):
                    continue
                alts = self.F[rows]
                ii, jj = np.nonzero(alts >= 0)
                ys, first = np.unique(alts[ii, jj], return_index=True)
                fresh = parent[ys] < 0
                ys, src_rows = ys[fresh], rows[ii[first[fresh]]]
                parent[ys] = x
                via[ys] = src_rows
                below = ys[self.L[ys] < self.target[ys]]
                if len(below):
                    y = int(below[0])
                    while y != a:
                        prev = int(parent[y])
                        self._shift(int(via[y]), y)
                        y = prev
                    return True
                nxt.extend(ys.tolist())
            frontier = nxt
        return False

    # ---- produce bytes/s --------------------------------------------------------------------
    def balance_bytes(self, tolerance: float, eligible: np.ndarray) -> None:
        """Even out produce bytes/s led per broker without leaving the count band.

        Works in rounds of simultaneous exchanges, alternating between the brokers above
        mean x (1 + tolerance) and those below mean x (1 - tolerance). Such a driver trades
        with the brokers it shares partitions with that are not on its side of the band: it
        shifts one leadership where both count bands have room, or swaps two (count-neutral)
        whose net bytes/s best fits what brings the pair toward the mean. In one round a
        partner trades once and a driver's trades add up to no more than its distance to the
        mean, so the trades of a round do not undo each other.
        """
        total = float(self.B[eligible].sum())
        n_el = int(eligible.sum())
        if total <= 0 or n_el == 0:
            return
        band = _Band(total / n_el, tolerance)
        order = np.argsort(self.bps, kind="stable")
        self._sorted_bps = self.bps[order]
        self._bps_rank = np.empty(len(order), dtype=np.int64)
        self._bps_rank[order] = np.arange(len(order))
        idle = 0
        for r in range(BYTES_ROUNDS):
            giving = r % 2 == 0
            side = self.B > band.hi if giving else self.B < band.lo
            drivers = np.flatnonzero(eligible & side)
            if not (eligible & (band.excess(self.B) > 0)).any():
                return
            done = len(drivers) > 0 and self._trade(drivers, eligible, band, giving=giving)
            idle = 0 if done else idle + 1
            if idle >= 2:
                return

    def _trade(self, drivers: np.ndarray, eligible: np.ndarray, band: _Band, *, giving: bool) -> bool:
        """One round of trades for drivers on one side of the band; True if any was made."""
        give, take = self._edges(drivers, eligible, band, giving=giving)
        # A giving driver starts from a leadership to give and takes one back; a taking one
        # the other way round.
        (fv, fw, fp), other = (give, take) if giving else (take, give)
        if not len(fv):
            return False
        B, x, n = self.B, self.bps, len(self.bps)
        pool = self._pool(*other)
        sign = 1.0 if giving else -1.0
        want = band.transfer(B[fv], B[fw])
        second = self._nearest(pool[0], pool[1], (fv * self.nb + fw) * n, x[fp] - sign * want)
        pair_moved = sign * (x[fp] - np.where(second >= 0, x[np.maximum(second, 0)], 0.0))
        solo_moved = sign * x[fp]
        if giving:
            room = (self.L[fv] - 1 >= self.lo[fv]) & (self.L[fw] + 1 <= self.hi[fw])
        else:
            room = (self.L[fw] - 1 >= self.lo[fw]) & (self.L[fv] + 1 <= self.hi[fv])
        # Each leadership that ends away from where it started costs a little, so that of
        # trades that help about as much the one with fewer leader changes wins.
        src, dst = (fv, fw) if giving else (fw, fv)
        first_cost = self._changes(fp, src, dst)
        second_cost = np.where(second >= 0, self._changes(np.maximum(second, 0), dst, src), 0)
        pair_score = np.where(second >= 0,
                              _less(band.score(B[fv], B[fw], pair_moved), first_cost + second_cost), 0.0)
        solo_score = np.where(room, _less(band.score(B[fv], B[fw], solo_moved), first_cost), 0.0)
        solo = solo_score > pair_score
        score = np.maximum(solo_score, pair_score)
        moved = np.where(solo, solo_moved, pair_moved)
        second = np.where(solo, -1, second)
        ok = np.flatnonzero(score > 0)
        if not len(ok):
            return False
        ok = ok[np.argsort(-score[ok], kind="stable")]
        # Each leadership once, best trades first.
        ok = ok[_first_of(fp[ok])]
        sec = second[ok]
        ok = ok[(sec < 0) | _first_of(np.where(sec >= 0, sec, -1 - np.arange(len(ok))))]
        # A partner takes trades up to its own goal (its first one whatever its size, as its
        # score already counts it); a driver's stop once they would carry it past its goal.
        # Shifts stop where the count bands have no more room.
        amount = np.abs(moved)
        solo = second < 0
        w_room = sign * (band.mean * (1 + sign * AIM * band.tolerance) - B[fw])
        w_slack = (self.hi[fw] - self.L[fw]) if giving else (self.L[fw] - self.lo[fw])
        ok = _capped(ok, fw, amount, w_room, solo, w_slack, first_free=True)
        v_reach = np.abs(B[fv] - band.goal(B[fv]))
        v_slack = (self.L[fv] - self.lo[fv]) if giving else (self.hi[fv] - self.L[fv])
        ok = np.sort(_capped(ok, fv, amount, v_reach, solo, v_slack, first_free=False))
        if not len(ok):
            return False
        gives = fp[ok] if giving else second[ok]
        takes = second[ok] if giving else fp[ok]
        self._exchange(fv[ok], fw[ok], gives, takes, moved[ok])
        return True

    def _edges(self, drivers: np.ndarray, eligible: np.ndarray, band: _Band, *,
               giving: bool) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Leaderships the drivers could give (v leads p, w hosts it) as (v, w, p), and could
        take (w leads q, v hosts it) as (v, w, q), with w eligible and not on v's side."""
        lens = self.host_start[drivers + 1] - self.host_start[drivers]
        idx = np.repeat(self.host_start[drivers] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        q = self.host_rows[idx]
        v = np.repeat(drivers, lens)
        ok = self.movable[q] & (self.lead[q] >= 0)
        q, v = q[ok], v[ok]
        partner = eligible & ((self.B < band.hi) if giving else (self.B > band.lo))
        led = self.lead[q] == v
        take_v, take_q = v[~led], q[~led]
        take_w = self.lead[take_q]
        keep = partner[take_w]
        give_q, give_v = q[led], v[led]
        others = self.F[give_q]
        ii, jj = np.nonzero((others >= 0) & (others != give_v[:, None]))
        give_v, give_w, give_p = give_v[ii], others[ii, jj], give_q[ii]
        ok = partner[give_w]
        return (give_v[ok], give_w[ok], give_p[ok]), (take_v[keep], take_w[keep], take_q[keep])

    def _changes(self, rows: np.ndarray, frm: np.ndarray, to: np.ndarray) -> np.ndarray:
        """Leader changes (against the start) added by moving each row's leadership frm -> to."""
        out: np.ndarray = (to != self.start[rows]).astype(np.int64) - (frm != self.start[rows])
        return out

    def _pool(self, v: np.ndarray, w: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Leaderships keyed by (v, w, bytes/s rank), sorted, for `_nearest`."""
        key = (v * self.nb + w) * len(self.bps) + self._bps_rank[rows]
        order = np.argsort(key, kind="stable")
        return key[order], rows[order]

    def _nearest(self, keys: np.ndarray, rows: np.ndarray, base: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Per query, the row whose key lies in [base, base + n) with bytes/s nearest `target`
        (keys are base + bytes/s rank, sorted); -1 when there is none."""
        n = len(self.bps)
        if not len(keys) or not len(base):
            return np.full(len(base), -1, dtype=np.int64)
        pos = np.searchsorted(keys, base + np.searchsorted(self._sorted_bps, target))
        above = np.minimum(pos, len(keys) - 1)
        below = np.maximum(pos - 1, 0)
        ok_above = (pos < len(keys)) & (keys[above] < base + n)
        ok_below = (pos > 0) & (keys[below] >= base)
        x = self.bps
        use_below = ok_below & (~ok_above | (np.abs(x[rows[below]] - target) <= np.abs(x[rows[above]] - target)))
        out: np.ndarray = np.where(use_below, rows[below], np.where(ok_above, rows[above], -1))
        return out

    def _exchange(self, v: np.ndarray, w: np.ndarray, p: np.ndarray, q: np.ndarray, moved: np.ndarray) -> None:
        gives, takes = p >= 0, q >= 0
        self.lead[p[gives]] = w[gives]
        self.lead[q[takes]] = v[takes]
        net = takes.astype(np.int64) - gives.astype(np.int64)
        np.add.at(self.L, v, net)
        np.add.at(self.L, w, -net)
        np.add.at(self.B, v, -moved)
        np.add.at(self.B, w, moved)


CHANGE_COST = 0.25  # a trade's score shrinks by this share per leader change it adds
AIM = 0.85  # drivers head halfway from the mean to the band's edge
BYTES_ROUNDS = 400  # exchange rounds at most; each round every broker exchanges at most once


@dataclass(frozen=True)
class _Band:
    """mean x (1 +- tolerance): how far a broker's bytes/s sits outside it, and what an
    exchange gains."""

    mean: float
    tolerance: float

    @property
    def hi(self) -> float:
        return self.mean * (1 + self.tolerance)

    @property
    def lo(self) -> float:
        return self.mean * (1 - self.tolerance)

    def excess(self, x: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.maximum(x - self.hi, 0.0) + np.maximum(self.lo - x, 0.0)
        return out

    def score(self, bv: np.ndarray, bw: np.ndarray, moved: np.ndarray) -> np.ndarray:
        """What an exchange gains, relative to the mean: the pair's distance to the band,
        then (as a tie-break among exchanges that both end inside it) to the mean. Zero or
        less when it does not help."""
        m = self.mean
        gain = (self.excess(bv) + self.excess(bw) - self.excess(bv - moved) - self.excess(bw + moved)) / m
        v, w, t = bv / m - 1, bw / m - 1, moved / m
        closer = v ** 2 + w ** 2 - (v - t) ** 2 - (w + t) ** 2
        out: np.ndarray = np.where(gain > 1e-9, gain + 1e-3 * np.maximum(closer, 0.0), 0.0)
        return out

    def goal(self, bv: np.ndarray) -> np.ndarray:
        """Where a driver at bv heads: AIM of the way from the mean to the band's edge on
        its side (not all the way to the mean, which would take more leader changes)."""
        out: np.ndarray = self.mean * (1 + np.sign(bv - self.mean) * AIM * self.tolerance)
        return out

    def transfer(self, bv: np.ndarray, bw: np.ndarray) -> np.ndarray:
        """Bytes/s to move from v to w: v to its goal without taking w past the mean (or,
        when w is already past the mean, no further than halfway to w's edge of the band)."""
        m = self.mean
        g = self.goal(bv)
        down = np.minimum(bv - g, np.maximum(m - bw, 0.5 * (self.hi - bw)))
        up = np.minimum(g - bv, np.maximum(bw - m, 0.5 * (bw - self.lo)))
        out: np.ndarray = np.where(bv > m, np.maximum(down, 0.0), -np.maximum(up, 0.0))
        return out


def _first_of(keys: np.ndarray) -> np.ndarray:
    """Mask of the first occurrence of each value in `keys`."""
    out = np.zeros(len(keys), dtype=bool)
    out[np.unique(keys, return_index=True)[1]] = True
    return out


def _running(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Sum of the values before each one within its group (groups sorted)."""
    total = np.cumsum(values)
    out: np.ndarray = total - values - np.concatenate([[0.0], total])[np.searchsorted(groups, groups)]
    return out


def _capped(idx: np.ndarray, group: np.ndarray, amount: np.ndarray, cap: np.ndarray, solo: np.ndarray,
            slack: np.ndarray, *, first_free: bool) -> np.ndarray:
    """The trades of `idx` (best first) that fit their group's caps: the amount carried before
    a trade stays under `cap` (with `first_free`, the amount including it, except for the
    group's first trade), and no more than `slack` of them are shifts. Keeps idx's order."""
    order = np.argsort(group[idx], kind="stable")
    i = idx[order]
    g = group[i]
    before = _running(amount[i], g)
    if first_free:
        fits = (before == 0) | (before + amount[i] <= cap[i])
    else:
        fits = before < cap[i]
    fits &= ~solo[i] | (_running(solo[i].astype(np.float64), g) < slack[i])
    keep = np.zeros(len(idx), dtype=bool)
    keep[order[fits]] = True
    out: np.ndarray = idx[keep]
    return out


def _less(score: np.ndarray, changes: np.ndarray) -> np.ndarray:
    """The score of a trade discounted by CHANGE_COST per leader change it adds (or raised
    per change it undoes); a trade that does not help stays at zero."""
    out: np.ndarray = np.where(score > 0, score * (1.0 - CHANGE_COST * changes), 0.0)
    return out
