"""Preferred-leader balance by reordering replica lists: no data moves.

Each partition picks one of its replicas as preferred leader (the first in its list). Start from
the current leader (fewest leader changes), then shift leadership from brokers above their share
to brokers below it along partitions they share, with a breadth-first search for chains when no
direct shift exists; the per-broker count then sits within floor/ceil of its share. A second
pass evens out the produce bytes/s led per broker by shifts where the count band has room and by
count-neutral leadership swaps otherwise.
"""
from __future__ import annotations

import numpy as np

from kreassign.planner.balance_targets import integer_shares, waterfill


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
        flat = matrix.ravel()
        keep = flat >= 0
        part = np.repeat(np.arange(n), width)[keep]
        brk = flat[keep]
        order = np.argsort(brk, kind="stable")
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
        return self.host_rows[self.host_start[b]:self.host_start[b + 1]]

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
        """Even out produce bytes/s led per broker without leaving the count band."""
        total = float(self.B[eligible].sum())
        n_el = int(eligible.sum())
        if total <= 0 or n_el == 0:
            return
        mean = total / n_el
        stuck = np.zeros(self.nb, dtype=bool)
        for _ in range(min(4 * self.nb, 2000)):
            dev = np.abs(self.B / mean - 1.0)
            dev[~eligible | stuck] = 0.0
            b = int(np.argmax(dev))
            if dev[b] <= tolerance:
                return
            if self.B[b] > mean:
                rows = self.led_movable(b)
                alts = self.F[rows]
                ii, jj = np.nonzero((alts >= 0) & (alts != b))
                ok = self._exchange(rows[ii], np.full(len(ii), b), alts[ii, jj], mean, tolerance)
            else:
                rows = self.hosted(b)
                rows = rows[self.movable[rows] & (self.lead[rows] != b) & (self.lead[rows] >= 0)]
                ok = self._exchange(rows, self.lead[rows], np.full(len(rows), b), mean, tolerance)
            if not ok:
                stuck[b] = True

    def _exchange(self, rows: np.ndarray, givers: np.ndarray, takers: np.ndarray, mean: float,
                  tol: float) -> bool:
        """Move leadership of one of `rows` from its giver to its taker (where the count band has
        room), or swap it for a leadership going back; True if the imbalance shrank."""
        if not len(rows):
            return False
        want = np.minimum(self.B[givers] - mean, mean - self.B[takers])
        good = (want > 0) & (givers != takers)
        if not good.any():
            return False
        rows, givers, takers, want = rows[good], givers[good], takers[good], want[good]
        slack = (self.L[givers] - 1 >= self.lo[givers]) & (self.L[takers] + 1 <= self.hi[takers])
        if slack.any():
            miss = np.abs(self.bps[rows] - want)
            miss[~slack] = np.inf
            k = int(np.argmin(miss))
            g, t = int(givers[k]), int(takers[k])
            if self._improves(g, t, float(self.bps[rows[k]]), mean, tol):
                self._shift(int(rows[k]), t)
                return True
        keys = np.unique(givers * self.nb + takers)
        pg, pt = keys // self.nb, keys % self.nb
        best = np.argsort(self.B[pt] - self.B[pg], kind="stable")[:8]
        for g, t in zip(pg[best].tolist(), pt[best].tolist()):
            mine = rows[(givers == g) & (takers == t)]
            theirs = self.led_movable(t)
            theirs = theirs[(self.F[theirs] == g).any(axis=1)]
            if not len(theirs):
                continue
            delta = min(self.B[g] - mean, mean - self.B[t])
            q_bps = self.bps[theirs]
            order = np.argsort(q_bps, kind="stable")
            sorted_q = q_bps[order]
            pos = np.clip(np.searchsorted(sorted_q, self.bps[mine] - delta), 0, len(sorted_q) - 1)
            net = self.bps[mine] - sorted_q[pos]
            k = int(np.argmin(np.abs(net - delta)))
            if net[k] > 0 and self._improves(g, t, float(net[k]), mean, tol):
                self._shift(int(mine[k]), t)
                self._shift(int(theirs[order[pos[k]]]), g)
                return True
        return False

    def _viol(self, a: int, mean: float, tolerance: float, delta: float = 0.0) -> float:
        x = float(self.B[a]) + delta
        return max(0.0, x - mean * (1 + tolerance)) + max(0.0, mean * (1 - tolerance) - x)

    def _improves(self, g: int, t: int, moved: float, mean: float, tol: float) -> bool:
        before = self._viol(g, mean, tol) + self._viol(t, mean, tol)
        after = self._viol(g, mean, tol, -moved) + self._viol(t, mean, tol, moved)
        return after < before - 1e-9

