"""The working assignment the balanced planner edits, and its move phases.

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
from dataclasses import dataclass, replace

import numpy as np

from kreassign.planner.balance.arrays import by_broker_then_size

SWAP_SCAN = 32  # smallest replicas of a swap partner looked at for the one coming back
SWAP_TRIES = 4  # of those, how many are tried against the source
SCAN = 24  # candidates looked at around the wanted size before trying another sink
# The byte phase takes a replica covering at least this share of the wanted shift, without
# overshooting it, before the closest one: bytes a broker sheds below the level it aims for
# are movement that buys no balance, while a shortfall is made up by the next, smaller move.
REACH = 0.5
# Below this share of the broker's target a shift takes the closest replica: a shortfall that
# small would only be made up by more moves of tiny replicas.
MIN_SHIFT = 0.002
TOP_SINKS = 3  # sinks per rack tried for one source before going deeper
DEEP_SINKS = 192  # most sinks per rack `place` takes from its heaps before sorting every broker


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


class _Heap:
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
            delta = self._deviation_change(p, s, d)
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

    def _deviation_change(self, p: int, s: int, d: int) -> int:
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
    def _candidate_sinks(self, heaps: list[_Heap], s: int, per_rack: int) -> list[int]:
        racks = [self.rack[s]] if (self.rack_locked and s >= 0) else range(len(heaps))
        found: list[tuple[tuple[float, ...], int]] = []
        for r in racks:
            found.extend(heaps[r].top(per_rack))
        found.sort()
        return [b for _, b in found if b != s]

    # ---- phases ---------------------------------------------------------------------------
    def _sink_key(self, b: int) -> tuple[float, ...]:
        t = self.targets
        assert t is not None
        return (-(t.count[b] - self.count[b]), (self.bytes[b] - t.bytes[b]) / self.tscale, self.tb[b])

    def place(self, items: list[tuple[int, int]], count_goal: bool) -> list[tuple[int, int]]:
        """Move (p, s) replicas (s = -1: add a new replica) to the best sinks, largest first.

        Returns the items that could not be placed.
        """
        stamps = [0] * self.nb
        heaps = [_Heap(stamps) for _ in range(max(self.racks, 1))]
        for b in range(self.nb):
            if self.recv[b]:
                heaps[self.rack[b]].push(self._key_for_place(b, count_goal), b)
        failed: list[tuple[int, int]] = []
        # (topic, rack or -1 for all) at its cap on every receiver there: skip the capped search.
        full: set[tuple[int, int]] = set()
        items = sorted(items, key=lambda it: (-self.zs[it[0]], it[0], it[1]))
        for p, s in items:
            d = -1
            if p in self.crowded:
                # A replica of a partition off the rack rule goes where it brings the partition
                # closest to the rule (the topic cap ranks below), if there is such a broker.
                fix = (p, s) in self.fixing
                self.fixing.add((p, s))
                self.topic_check = False
                d = self._first_host(p, s, self._by_rack_gain(p, s, count_goal))
                self.topic_check = self.topic_on
                if not fix:
                    self.fixing.discard((p, s))
            t = self.topic_of[p]
            where = (t, self.rack[s] if self.rack_locked and s >= 0 else -1)
            # The best sinks of each rack (of s's rack only when racks are locked), then more.
            depth = TOP_SINKS
            while d < 0 and depth <= DEEP_SINKS:
                d = self._first_host(p, s, self._candidate_sinks(heaps, s, depth))
                depth *= 8
            if d < 0 and where not in full:
                if self.topic_on and self._topic_full(*where):
                    full.add(where)
                else:
                    d = self._first_host(p, s, self._all_sinks(count_goal))
            if d < 0 and self.topic_on:
                # These moves are mandatory; the topic cap ranks below them.
                self.topic_check = False
                d = self._first_host(p, s, self._all_sinks(count_goal))
                self.topic_check = True
            self.fixing.discard((p, s))
            if d < 0:
                failed.append((p, s))
                continue
            if s >= 0:
                self.move(p, s, d)
                stamps[s] += 1
                if self.recv[s]:
                    heaps[self.rack[s]].push(self._key_for_place(s, count_goal), s)
                    full.discard((t, self.rack[s]))  # a receiver lost one of the topic's replicas
                    full.discard((t, -1))
            else:
                self.add_replica(p, d)
            stamps[d] += 1
            heaps[self.rack[d]].push(self._key_for_place(d, count_goal), d)
        return failed

    def _key_for_place(self, b: int, count_goal: bool) -> tuple[float, ...]:
        key = self._sink_key(b)
        return key if count_goal else (key[1], key[0], key[2])

    def _topic_full(self, t: int, rack: int) -> bool:
        """Does every receiver (in `rack`, or anywhere if -1) hold as many of topic t's replicas
        as its cap allows?"""
        caps = self.topic_cap_list[t]
        get = self.tcounts.get
        return all(get(t, b) >= caps[self.rack[b]] for b in range(self.nb)
                   if self.recv[b] and (rack < 0 or self.rack[b] == rack))

    def _by_rack_gain(self, p: int, s: int, count_goal: bool) -> list[int]:
        """Every sink, those that bring p closest to the rack rule first (then by load)."""
        return sorted(self._all_sinks(count_goal), key=lambda d: self._deviation_change(p, s, d))

    def _first_host(self, p: int, s: int, sinks: list[int]) -> int:
        for d in sinks:
            if self.can_host(p, s, d) and self.affordable(p, s, d):
                return d
        return -1

    def _all_sinks(self, count_goal: bool) -> list[int]:
        keyed = sorted((self._key_for_place(b, count_goal), b) for b in range(self.nb) if self.recv[b])
        return [b for _, b in keyed]

    def balance_counts(self, aim: float | None, keep_disk: bool, relax_topic: bool) -> None:
        """Move replicas from brokers above their count target to brokers below it.

        The replica moved is the one whose size best fits both brokers' byte gaps (source to
        `aim` times its target, sink to its target), so bytes balance along the way; with no
        `aim` (bytes are not a goal) the smallest replica goes.
        """
        t = self.targets
        assert t is not None
        stamps = [0] * self.nb
        src = _Heap(stamps)
        heaps = [_Heap(stamps) for _ in range(max(self.racks, 1))]
        for b in range(self.nb):
            ex = self.count[b] - t.count[b]
            if ex > 0 and self.lists[b]:
                src.push(self._src_key(b), b)
            elif ex < 0 and self.recv[b]:
                heaps[self.rack[b]].push(self._sink_key(b), b)
        while True:
            s = src.pop()
            if s < 0:
                return
            done = self._count_move(s, heaps, aim, keep_disk, relax_topic)
            if done < 0:
                continue
            stamps[s] += 1
            stamps[done] += 1
            if self.count[s] > t.count[s]:
                src.push(self._src_key(s), s)
            if self.count[done] < t.count[done]:
                heaps[self.rack[done]].push(self._sink_key(done), done)

    def _count_move(self, s: int, heaps: list[_Heap], aim: float | None, keep_disk: bool,
                    relax_topic: bool) -> int:
        """One replica from s to the best sink that can take one; returns the sink or -1.

        Tries a short scan near the best-fitting size on the top sinks, then deeper sinks, then
        every replica of s; a lower-ranked topic cap is relaxed last."""
        full = len(self.lists[s])
        relax = relax_topic and self.topic_on
        attempts = [(1, SCAN, True), (4 * TOP_SINKS, SCAN, True)]
        if relax:
            attempts.append((TOP_SINKS, SCAN, False))
        attempts.append((TOP_SINKS, full, True))
        if relax:
            attempts.append((4 * TOP_SINKS, full, False))
        for depth, scan, topic_check in attempts:
            self.topic_check = self.topic_on and topic_check
            try:
                for d in self._candidate_sinks(heaps, s, depth):
                    want = 0.0 if aim is None else self._count_move_size(s, d, aim)
                    p = self.pick(s, d, want, limit=scan)
                    if p >= 0 and (not keep_disk or self._disk_ok(p, s, d)):
                        self.move(p, s, d)
                        return d
            finally:
                self.topic_check = self.topic_on
        return -1

    def _src_key(self, b: int) -> tuple[float, ...]:
        t = self.targets
        assert t is not None
        return (-(self.count[b] - t.count[b]), -(self.bytes[b] - t.bytes[b]) / self.tscale, self.tb[b])

    def _count_move_size(self, s: int, d: int, aim: float) -> float:
        t = self.targets
        assert t is not None
        ex = max(self.count[s] - t.count[s], 1)
        de = max(t.count[d] - self.count[d], 1)
        to_d = (t.bytes[d] - self.bytes[d]) / de
        if ex >= len(self.lists[s]):
            # A source that must give every replica (a removed broker) sheds its bytes anyway:
            # capping the size at its mean would leave its big replicas for the last sinks.
            return max(0.0, to_d)
        from_s = (self.bytes[s] - t.bytes[s] * aim) / ex
        return max(0.0, min(from_s, to_d))

    def disk_violation(self, b: int, delta: float = 0.0) -> float:
        t = self.targets
        assert t is not None
        x = self.bytes[b] + delta
        return max(0.0, x - t.bytes_hi[b]) + max(0.0, t.bytes_lo[b] - x)

    def _disk_ok(self, p: int, s: int, d: int) -> bool:
        z = self.zs[p]
        before = self.disk_violation(s) + self.disk_violation(d)
        return self.disk_violation(s, -z) + self.disk_violation(d, z) <= before + 1e-9

    def off_count_band(self) -> bool:
        """Does a receiving broker hold fewer or more replicas than its count band allows?"""
        t = self.targets
        assert t is not None
        return any(r and not lo <= c <= hi for r, c, lo, hi in zip(self.recv, self.count, t.count_lo, t.count_hi))

    def _count_ok(self, s: int, d: int) -> bool:
        t = self.targets
        assert t is not None
        return self.count[s] - 1 >= t.count_lo[s] and self.count[d] + 1 <= t.count_hi[d]

    def balance_disk(self, keep_counts: bool, tolerance: float) -> None:
        """Bring every broker's bytes inside its band with moves (where the count band has
        room) or swaps of a large replica for a small one (count-neutral), then level the top.

        Over-loaded brokers shed down to (1 + tolerance/2) x target, here and in the count
        phase. A broker left between that level and the band's top would make all that
        shedding movement that bought no better balance (the plan's worst broker is what its
        balance is), so a second pass brings every broker down to the level; it moves little,
        since only brokers the earlier moves filled sit there. The level stays the band's top
        for the phases after this one (the count phase when bytes rank first), which may not
        push a broker back above it.
        """
        t = self.targets
        assert t is not None
        self._disk_pass(keep_counts, tolerance / 2, level=False)
        self.targets = replace(t, bytes_hi=[x * (1 + tolerance / 2) for x in t.bytes])
        self._disk_pass(keep_counts, tolerance / 2, level=True)

    def _disk_pass(self, keep_counts: bool, half: float, level: bool) -> None:
        """One round of `balance_disk` against the current targets' band; `half` sets how far
        inside the band a move aims. When levelling, over-loaded brokers come worst first and
        the pass stops at the first that cannot be brought down: moving bytes off the ones
        below it would not lower the plan's worst broker. A broker whose largest replica alone
        is above the level is passed over instead: it is the worst broker of any plan that puts
        that replica there, and the others are still levelled (the lower bound leaves such
        brokers out of the band's top, `metrics._beside_forced`)."""
        t = self.targets
        assert t is not None
        stamps = [0] * self.nb
        drivers = _Heap(stamps)
        low = [_Heap(stamps) for _ in range(max(self.racks, 1))]
        high = [_Heap(stamps) for _ in range(max(self.racks, 1))]
        active = [self.recv[b] or bool(self.lists[b]) for b in range(self.nb)]
        for b in range(self.nb):
            self._push_disk(b, drivers, low, high, active)
        budget = 20 * self.nb + 10 * self.n
        while budget > 0:
            budget -= 1
            b = drivers.pop()
            if b < 0:
                return
            over = self.bytes[b] > t.bytes_hi[b]
            partners = self._candidate_sinks(high if not over else low, b, TOP_SINKS)
            partners += [x for x in self._candidate_sinks(high if not over else low, b, 6 * TOP_SINKS)
                         if x not in partners]
            acted = -1
            # An under-loaded broker takes first from partners above the level over-loaded
            # ones shed to, up to that level's mirror below the target; then, from partners
            # between their target and that level, only up to the band's bottom: those bytes
            # are movement beyond what the balance needs, so it takes as few as it can.
            for floor in ((1 + half, 1.0) if not over else (1.0,)):
                for o in partners:
                    s, d = (b, o) if over else (o, b)
                    if over:
                        want = min(self.bytes[s] - t.bytes[s] * (1 + half), t.bytes[d] - self.bytes[d])
                    else:
                        up = t.bytes[d] * (1 - half) if floor > 1 else t.bytes_lo[d]
                        want = min(up - self.bytes[d], self.bytes[s] - t.bytes[s] * floor)
                    if want <= 0:
                        continue
                    if self._disk_step(s, d, want, keep_counts):
                        acted = o
                        break
                if acted >= 0:
                    break
            if acted < 0:
                if level and over and not self._forced(b):
                    return
                continue
            for x in (b, acted):
                stamps[x] += 1
                self._push_disk(x, drivers, low, high, active)

    def _forced(self, b: int) -> bool:
        """Is one movable replica of b alone above b's byte band?"""
        t = self.targets
        assert t is not None
        lst = self.lists[b]
        return bool(lst) and self.size_by_rank[lst[-1]] > t.bytes_hi[b]

    def _push_disk(self, b: int, drivers: _Heap, low: list[_Heap], high: list[_Heap], active: list[bool]) -> None:
        if not active[b]:
            return
        t = self.targets
        assert t is not None
        ratio = self.bytes[b] / max(t.bytes[b], 1.0)
        v = self.disk_violation(b)
        if v > 0:
            drivers.push((-v / max(t.bytes[b], 1.0), self.tb[b]), b)
        r = self.rack[b]
        if self.recv[b]:
            low[r].push((ratio, self.tb[b]), b)
        if self.lists[b]:
            high[r].push((-ratio, self.tb[b]), b)

    def _disk_step(self, s: int, d: int, want: float, keep_counts: bool) -> bool:
        before = self.disk_violation(s) + self.disk_violation(d)
        if not keep_counts or self._count_ok(s, d):
            p = self.pick(s, d, want, under=self._slack(s, want))
            if p >= 0:
                z = self.zs[p]
                if self.disk_violation(s, -z) + self.disk_violation(d, z) < before - 1e-9:
                    self.move(p, s, d)
                    return True
        return self._swap(s, d, want, before)

    def _slack(self, s: int, want: float) -> float:
        """How far below `want` a byte-phase pick may fall at no cost (see REACH)."""
        t = self.targets
        assert t is not None
        return (1 - REACH) * want if want > MIN_SHIFT * t.bytes[s] else 0.0

    def _swap(self, s: int, d: int, want: float, before: float) -> bool:
        """Swap a large replica on s for a small one on d (count-neutral), lowering the two
        brokers' band violation by about `want`.

        The small replicas of d come first (a swap moves both, so the smaller the one coming
        back the fewer bytes buy the same shift): up to SWAP_TRIES of those that may go to s,
        then up to SWAP_TRIES of those that may go only in exchange for a replica of their own
        topic. Such a swap leaves every topic count as it was, which is what lets a broker over
        a topic's cap (a topic that dominates the cluster) still trade bytes."""
        bound: list[int] = []
        tried = 0
        for r in self.lists[d][:SWAP_SCAN]:
            q = self.by_rank[r]
            if not self.can_host(q, d, s, waive=self.topic_of[q]) or not self.affordable(q, d, s):
                continue
            if not self.topic_check or self.topic_fits(q, s):
                if self._swap_with(q, s, d, want, before, own=True):
                    return True
                tried += 1
                if tried >= SWAP_TRIES:
                    break
            elif len(bound) < SWAP_TRIES:
                bound.append(q)
        return any(self._swap_with(q, s, d, want, before, own=False) for q in bound)

    def _swap_with(self, q: int, s: int, d: int, want: float, before: float, own: bool) -> bool:
        t = self.topic_of[q]
        p = self.pick(s, d, want + self.zs[q], waive=t, only=-1 if own else t,
                      under=self._slack(s, want))
        if p < 0 or p == q:
            return False
        net = self.zs[p] - self.zs[q]
        if self.disk_violation(s, -net) + self.disk_violation(d, net) >= before - 1e-9:
            return False
        self.move(p, s, d)
        if not (self.can_host(q, d, s, waive=t if self.topic_of[p] == t else -1) and self.affordable(q, d, s)):
            self.move(p, d, s)
            return False
        self.move(q, d, s)
        return True


def rows_matrix(rows: list[list[int]], width: int) -> np.ndarray:
    """Replica lists as a partition x slot matrix, -1 padded to at least `width` slots."""
    lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    width = max(width, int(lens.max()) if len(lens) else 0)
    flat = np.fromiter((b for r in rows for b in r), dtype=np.int64, count=int(lens.sum()))
    out = np.full((len(rows), width), -1, dtype=np.int64)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
    out[np.repeat(np.arange(len(rows)), lens), cols] = flat
    return out
