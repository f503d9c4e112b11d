"""The working assignment the balanced planner edits (`Layout`); its move phases are functions
over it: `place.py` (placing replicas that must move), `counts.py` (replica counts), `disk.py`
(bytes) and `bulk.py` (the vectorised first pass of the count phase).

Brokers are dense indices 0..B-1. Each broker keeps the *ranks* of its movable replicas in a
sorted Python list, where a partition's rank is its position in the global size order, so
"the replica on broker s whose size is closest to z" is one bisect plus a short outward scan.
Sources and sinks sit in heaps with lazy invalidation (a per-broker stamp), so one move costs
O(log B) heap work plus the candidate scan. Every phase only accepts moves that do not worsen a
goal ranked above it, which is what makes the result "never worse" goal by goal.
"""
from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from itertools import chain
from dataclasses import dataclass

import numpy as np

from kreassign.planner.balance.arrays import by_broker_then_size

SCAN = 24  # candidates looked at around the wanted size before trying another sink
TOP_SINKS = 3  # sinks per rack tried for one source before going deeper


@dataclass
class Targets:
    """Per-broker targets: exact replica counts with their floor/ceil band, bytes with a band."""

    count: list[int]
    count_lo: list[int]
    count_hi: list[int]
    bytes: list[float]
    bytes_lo: list[float]
    bytes_hi: list[float]


class TopicCounts:
    """Replicas of each topic per broker: a flat list when small, a dict otherwise."""

    def __init__(self, topics: int, brokers: int, topic_ids: np.ndarray, broker_ids: np.ndarray) -> None:
        self.brokers = brokers
        self.dense = topics * brokers <= 20_000_000
        keys = topic_ids.astype(np.int64) * brokers + broker_ids
        if self.dense:
            self.table: list[int] = np.bincount(keys, minlength=topics * brokers).tolist()
        else:
            uniq, counts = np.unique(keys, return_counts=True)
            self.map: dict[int, int] = dict(zip(uniq.tolist(), counts.tolist()))

    def get(self, topic: int, broker: int) -> int:
        k = topic * self.brokers + broker
        return self.table[k] if self.dense else self.map.get(k, 0)

    def add_many(self, topics: np.ndarray, brokers: np.ndarray, deltas: np.ndarray) -> None:
        keys, inverse = np.unique(topics.astype(np.int64) * self.brokers + brokers, return_inverse=True)
        net = np.bincount(inverse, weights=deltas, minlength=len(keys)).astype(np.int64)
        if self.dense:
            table = self.table
            for k, c in zip(keys.tolist(), net.tolist()):
                table[k] += c
        else:
            get = self.map.get
            for k, c in zip(keys.tolist(), net.tolist()):
                self.map[k] = get(k, 0) + c

    def add(self, topic: int, broker: int, delta: int) -> None:
        k = topic * self.brokers + broker
        if self.dense:
            self.table[k] += delta
        else:
            self.map[k] = self.map.get(k, 0) + delta


class Heap:
    """A min-heap of brokers whose entries go stale when the broker's stamp changes."""

    def __init__(self, stamps: list[int]) -> None:
        self.h: list[tuple[tuple[float, ...], int, int]] = []
        self.stamps = stamps

    def push(self, key: tuple[float, ...], b: int) -> None:
        heapq.heappush(self.h, (key, self.stamps[b], b))

    def pop(self) -> int:
        while self.h:
            _, stamp, b = heapq.heappop(self.h)
            if stamp == self.stamps[b]:
                return b
        return -1

    def top(self, k: int) -> list[tuple[tuple[float, ...], int]]:
        out: list[tuple[tuple[float, ...], int, int]] = []
        seen: set[int] = set()
        while self.h and len(out) < k:
            item = heapq.heappop(self.h)
            if item[1] == self.stamps[item[2]] and item[2] not in seen:
                out.append(item)
                seen.add(item[2])
        for item in out:
            heapq.heappush(self.h, item)
        return [(key, b) for key, _, b in out]


class Layout:
    """The assignment being planned, with per-broker load and the constraints on moves."""

    def __init__(
        self,
        *,
        matrix: np.ndarray,
        size: np.ndarray,
        topic: np.ndarray,
        n_topics: int,
        movable: np.ndarray,
        rack: np.ndarray,
        receivers: np.ndarray,
        disk_cap: np.ndarray,
        rack_on: bool,
        topic_on: bool,
        tiebreak: np.ndarray,
        max_moves: int | None,
        max_bytes: int | None,
    ) -> None:
        n, width = matrix.shape
        nb = len(rack)
        self.n, self.nb = n, nb
        self.rows: list[list[int]] = matrix.tolist()
        for p in np.flatnonzero((matrix < 0).any(axis=1)).tolist():
            self.rows[p] = [b for b in self.rows[p] if b >= 0]
        self.orig: list[tuple[int, ...]] = list(map(tuple, self.rows))
        self.width = width
        self.base = matrix  # the starting assignment; `touched` rows differ from it
        self.touched: set[int] = set()
        self.zs: list[int] = size.tolist()
        order = np.argsort(size, kind="stable")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        self.rank: list[int] = rank.tolist()
        self.by_rank: list[int] = order.tolist()
        self.size_by_rank: list[int] = size[order].tolist()
        self.rank_np = rank
        self.by_rank_np = order
        self.size_by_rank_np = size[order].astype(np.float64)
        self.topic_np = topic.astype(np.int64)
        self.rack: list[int] = rack.tolist()
        self.racks = int(rack.max()) + 1 if nb else 0
        self.recv: list[bool] = receivers.tolist()
        self.disk_cap: list[float] = disk_cap.tolist()
        self.rack_on = rack_on
        self.topic_on = topic_on  # track topic counts
        self.topic_check = topic_on  # enforce the topic cap on moves
        self.tb: list[int] = tiebreak.tolist()
        self.topic_of: list[int] = topic.tolist()
        self.n_topics = n_topics
        self.moves_left = math.inf if max_moves is None else float(max_moves)
        self.bytes_left = math.inf if max_bytes is None else float(max_bytes)
        self.budget_hit = False

        flat = matrix.ravel()
        keep = flat >= 0
        part = np.repeat(np.arange(n), width)[keep]
        brk = flat[keep]
        self.count: list[int] = np.bincount(brk, minlength=nb).tolist()
        self.bytes: list[float] = np.bincount(brk, weights=size[part].astype(np.float64), minlength=nb).tolist()
        mov_part, mb = by_broker_then_size(matrix, movable & (matrix >= 0), order, nb)
        mr = rank[mov_part]
        bounds = np.searchsorted(mb, np.arange(nb + 1))
        self.lists: list[list[int]] = [mr[bounds[b]:bounds[b + 1]].tolist() for b in range(nb)]
        self.tcounts = TopicCounts(n_topics, nb, topic[part], brk)
        self.rack_cap: list[int] = [n] * n
        self.rack_cap_np = np.full(n, n, dtype=np.int64)
        self.rack_lo: list[int] = [0] * n
        self.rack_lo_np = np.zeros(n, dtype=np.int64)
        self.live_rack: list[bool] = [True] * (self.racks + 1)
        self.fixing: set[tuple[int, int]] = set()  # (p, s) rack fixes: must lower the deviation
        self.set_topic_caps(np.full((max(n_topics, 1), max(self.racks + 1, 1)), n, dtype=np.int64))
        self.rack_locked = False
        self.crowded: set[int] = set()
        self.targets: Targets | None = None
        self.tscale = 1.0
        self.warnings: list[str] = []

    # ---- constraints ----------------------------------------------------------------------
    def set_rack_caps(self, lows: np.ndarray, caps: np.ndarray, live: np.ndarray, locked: bool) -> None:
        """Per partition the least and most replicas of it a live rack holds (`racks`), which
        rack groups are live, and whether every move must stay inside its rack."""
        self.rack_cap_np = caps.astype(np.int64)
        self.rack_cap = caps.tolist()
        self.rack_lo_np = lows.astype(np.int64)
        self.rack_lo = lows.tolist()
        self.live_rack = live.tolist()
        self.rack_locked = locked

    def set_topic_caps(self, caps: np.ndarray) -> None:
        self.topic_cap = caps
        self.topic_cap_list: list[list[int]] = caps.tolist()

    def set_targets(self, targets: Targets) -> None:
        self.targets = targets
        self.tscale = max(sum(targets.bytes) / max(self.nb, 1), 1.0)

    def can_host(self, p: int, s: int, d: int, waive: int = -1) -> bool:
        """May the replica of partition p on broker s (or a new one if s < 0) go to d?

        `waive`: a topic whose cap is not checked (a replica of it leaves d in the same swap)."""
        if not self.recv[d]:
            return False
        row = self.rows[p]
        if d in row:
            return False
        if self.topic_check and self.topic_of[p] != waive and not self.topic_fits(p, d):
            return False
        return self.rack_fits(p, s, d) and self.bytes[d] + self.zs[p] <= self.disk_cap[d]

    def topic_fits(self, p: int, d: int) -> bool:
        t = self.topic_of[p]
        return self.tcounts.get(t, d) < self.topic_cap_list[t][self.rack[d]]

    def rack_fits(self, p: int, s: int, d: int) -> bool:
        """Does moving p's replica from s (or adding one, s < 0) to d keep its rack diversity?

        A partition that follows the rule keeps following it; one that does not (`crowded`)
        may not get further from it, and a rack fix (`fixing`) must bring it closer."""
        rd = self.rack[d]
        rs = self.rack[s] if s >= 0 else -1
        # A move inside one rack leaves the partition's rack counts as they were.
        if not self.rack_on or (rs == rd and p not in self.crowded):
            return True
        if p in self.crowded:
            delta = self.deviation_change(p, s, d)
            return delta < 0 if (p, s) in self.fixing else delta <= 0
        rack = self.rack
        in_d = in_s = 0
        for b in self.rows[p]:
            if b != s:
                r = rack[b]
                if r == rd:
                    in_d += 1
                elif r == rs:
                    in_s += 1
        if in_d >= self.rack_cap[p]:
            return False
        # Leaving a live rack must not take it below its floor (that narrows the spread).
        return rs < 0 or in_s >= self.rack_lo[p] or not self.live_rack[rs]

    def deviation_change(self, p: int, s: int, d: int) -> int:
        """Change in p's rack deviation (see `racks`) if its replica on s goes to d."""
        lo, hi = self.rack_lo[p], self.rack_cap[p]
        per: dict[int, int] = {}
        for b in self.rows[p]:
            per[self.rack[b]] = per.get(self.rack[b], 0) + 1

        def cost(r: int, c: int) -> int:
            return max(c - hi, 0) + max(lo - c, 0) if self.live_rack[r] else 0

        rd = self.rack[d]
        delta = cost(rd, per.get(rd, 0) + 1) - cost(rd, per.get(rd, 0))
        if s >= 0:
            rs = self.rack[s]
            c = per.get(rs, 0) + (1 if rs == rd else 0)  # counts after d gained one
            delta += cost(rs, c - 1) - cost(rs, c)
        return delta

    def _cost(self, p: int, s: int, d: int) -> int:
        """Change in replicas moved (against the original assignment) if p goes from s to d."""
        orig = self.orig[p]
        return (d not in orig) - (s >= 0 and s not in orig)

    def affordable(self, p: int, s: int, d: int) -> bool:
        c = self._cost(p, s, d)
        if c <= 0 or (self.moves_left >= c and self.bytes_left >= c * self.zs[p]):
            return True
        self.budget_hit = True
        return False

    def lists_contains(self, p: int, b: int) -> bool:
        """Is p's replica on b movable (in b's candidate list)?"""
        lst = self.lists[b]
        r = self.rank[p]
        i = bisect_left(lst, r)
        return i < len(lst) and lst[i] == r

    # ---- edits ----------------------------------------------------------------------------
    def move(self, p: int, s: int, d: int) -> None:
        """Move p's replica from s to d, keeping its position in the replica list."""
        row = self.rows[p]
        row[row.index(s)] = d
        self.touched.add(p)
        self._charge(p, s, d)
        z = self.zs[p]
        r = self.rank[p]
        lst = self.lists[s]
        del lst[bisect_left(lst, r)]
        insort(self.lists[d], r)
        self.count[s] -= 1
        self.count[d] += 1
        self.bytes[s] -= z
        self.bytes[d] += z
        if self.topic_on:
            t = self.topic_of[p]
            self.tcounts.add(t, s, -1)
            self.tcounts.add(t, d, 1)

    def apply_moves(self, p: np.ndarray, s: np.ndarray, d: np.ndarray) -> None:
        """`move` for many replicas at once, in order; no replica may move twice. Budgets are
        not charged (callers make such batches only without a budget)."""
        rows = self.rows
        for pi, si, di in zip(p.tolist(), s.tolist(), d.tolist()):
            row = rows[pi]
            row[row.index(si)] = di
        self.touched.update(p.tolist())
        r = self.rank_np[p]
        z = self.size_by_rank_np[r]
        nb = self.nb
        self.count = (np.asarray(self.count, dtype=np.int64) + np.bincount(d, minlength=nb)
                      - np.bincount(s, minlength=nb)).tolist()
        self.bytes = (np.asarray(self.bytes, dtype=np.float64) + np.bincount(d, weights=z, minlength=nb)
                      - np.bincount(s, weights=z, minlength=nb)).tolist()
        n = self.n
        sources = np.unique(s)
        owner, ranks = self._lists_of(sources)
        keys = owner * n + ranks
        keep = np.ones(len(keys), dtype=bool)
        keep[np.searchsorted(keys, s * n + r)] = False
        for b in sources.tolist():  # a source left with nothing gets no entry below
            self.lists[b] = []
        self._set_lists(owner[keep], ranks[keep])
        owner, ranks = self._lists_of(np.unique(d))
        owner, ranks = np.concatenate([owner, d]), np.concatenate([ranks, r])
        order = np.argsort(owner * n + ranks, kind="stable")
        self._set_lists(owner[order], ranks[order])
        if self.topic_on:
            t = self.topic_np[p]
            self.tcounts.add_many(np.concatenate([t, t]), np.concatenate([s, d]),
                                  np.concatenate([np.full(len(p), -1), np.ones(len(p), dtype=np.int64)]))

    def _lists_of(self, brokers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The movable lists of `brokers` (sorted) as (broker, rank) arrays."""
        lens = np.fromiter((len(self.lists[b]) for b in brokers.tolist()), dtype=np.int64, count=len(brokers))
        ranks = np.fromiter(chain.from_iterable(self.lists[b] for b in brokers.tolist()), dtype=np.int64,
                            count=int(lens.sum()))
        return np.repeat(brokers, lens), ranks

    def _set_lists(self, owner: np.ndarray, ranks: np.ndarray) -> None:
        """Replace the movable lists of the brokers in `owner` (sorted by broker, then rank)."""
        cut = np.flatnonzero(np.diff(owner)) + 1
        for b, part in zip(owner[np.concatenate([[0], cut])].tolist() if len(owner) else [],
                           np.split(ranks, cut)):
            self.lists[b] = part.tolist()

    def matrix(self) -> np.ndarray:
        """The current assignment as a partition x slot matrix (-1 padding)."""
        touched = np.fromiter(sorted(self.touched), dtype=np.int64, count=len(self.touched))
        edited = rows_matrix([self.rows[p] for p in touched.tolist()], self.base.shape[1])
        if edited.shape[1] > self.base.shape[1] or not self.base.shape[1]:
            return rows_matrix(self.rows, max(self.width, 1))
        out = self.base.copy()
        out[touched] = edited
        return out

    def add_replica(self, p: int, d: int) -> None:
        self.rows[p].append(d)
        self.touched.add(p)
        self._charge(p, -1, d)
        insort(self.lists[d], self.rank[p])
        self.count[d] += 1
        self.bytes[d] += self.zs[p]
        if self.topic_on:
            self.tcounts.add(self.topic_of[p], d, 1)

    def drop_replica(self, p: int, s: int) -> None:
        self.rows[p].remove(s)
        self.touched.add(p)
        lst = self.lists[s]
        i = bisect_left(lst, self.rank[p])
        if i < len(lst) and lst[i] == self.rank[p]:
            del lst[i]
        self.count[s] -= 1
        self.bytes[s] -= self.zs[p]
        if self.topic_on:
            self.tcounts.add(self.topic_of[p], s, -1)

    def _charge(self, p: int, s: int, d: int) -> None:
        c = self._cost(p, s, d)
        self.moves_left -= c
        self.bytes_left -= c * self.zs[p]

    # ---- candidate search -------------------------------------------------------------------
    def pick(self, s: int, d: int, want: float, limit: int = SCAN, waive: int = -1, only: int = -1,
             under: float = 0.0) -> int:
        """The movable replica on s, closest in size to `want`, that may go to d (or -1).

        Sizes from `want - under` up to `want` count as a distance of 0; `waive` as in
        `can_host`; `only` >= 0 takes replicas of that topic only."""
        lst = self.lists[s]
        if not lst:
            return -1
        sizes = self.size_by_rank
        i = bisect_left(lst, bisect_left(sizes, want))
        lo, hi = i - 1, i
        n = len(lst)
        full: set[int] = set()  # topics already at their cap on d
        topic_of = self.topic_of
        for _ in range(limit):
            if lo < 0 and hi >= n:
                break
            if hi >= n or (lo >= 0 and want - under - sizes[lst[lo]] <= sizes[lst[hi]] - want):
                r = lst[lo]
                lo -= 1
            else:
                r = lst[hi]
                hi += 1
            p = self.by_rank[r]
            if only >= 0 and topic_of[p] != only:
                continue
            if self.topic_check:
                t = topic_of[p]
                if t in full:
                    continue
                if t != waive and not self.topic_fits(p, d):
                    full.add(t)
                    continue
            if self.can_host(p, s, d, waive) and self.affordable(p, s, d):
                return p
        return -1

    # ---- sink selection -------------------------------------------------------------------
    def candidate_sinks(self, heaps: list[Heap], s: int, per_rack: int) -> list[int]:
        racks = [self.rack[s]] if (self.rack_locked and s >= 0) else range(len(heaps))
        found: list[tuple[tuple[float, ...], int]] = []
        for r in racks:
            found.extend(heaps[r].top(per_rack))
        found.sort()
        return [b for _, b in found if b != s]

    def sink_key(self, b: int) -> tuple[float, ...]:
        t = self.targets
        assert t is not None
        return (-(t.count[b] - self.count[b]), (self.bytes[b] - t.bytes[b]) / self.tscale, self.tb[b])

    def disk_violation(self, b: int, delta: float = 0.0) -> float:
        t = self.targets
        assert t is not None
        x = self.bytes[b] + delta
        return max(0.0, x - t.bytes_hi[b]) + max(0.0, t.bytes_lo[b] - x)

    def disk_ok(self, p: int, s: int, d: int) -> bool:
        z = self.zs[p]
        before = self.disk_violation(s) + self.disk_violation(d)
        return self.disk_violation(s, -z) + self.disk_violation(d, z) <= before + 1e-9

    def off_count_band(self) -> bool:
        """Does a receiving broker hold fewer or more replicas than its count band allows?"""
        t = self.targets
        assert t is not None
        return any(r and not lo <= c <= hi for r, c, lo, hi in zip(self.recv, self.count, t.count_lo, t.count_hi))

    def count_ok(self, s: int, d: int) -> bool:
        t = self.targets
        assert t is not None
        return self.count[s] - 1 >= t.count_lo[s] and self.count[d] + 1 <= t.count_hi[d]

def rows_matrix(rows: list[list[int]], width: int) -> np.ndarray:
    """Replica lists as a partition x slot matrix, -1 padded to at least `width` slots."""
    lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    width = max(width, int(lens.max()) if len(lens) else 0)
    flat = np.fromiter((b for r in rows for b in r), dtype=np.int64, count=int(lens.sum()))
    out = np.full((len(rows), width), -1, dtype=np.int64)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
    out[np.repeat(np.arange(len(rows)), lens), cols] = flat
    return out
