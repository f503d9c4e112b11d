"""Vectorised first pass of the replica-count phase: most of its moves in a few numpy rounds.

Each round matches count offers of over-target brokers with free slots of under-target brokers
(within a rack when rack awareness fixes each rack's share), about 1/ROUNDS of each broker's gap
per round, biggest gaps first. A source offers a run of consecutive replicas in size order whose
total is closest to the bytes it should shed towards `aim` times its target (less when its
rack's sinks could not take that much); a source that must give every replica (a removed
broker) offers a sample spread over its sizes. The round's replicas are then dealt to the sinks in
passes, each sink taking the free replica nearest in size to its remaining byte need per slot.
A move that would break a constraint (the sink holds the partition, rack or topic caps, disk
headroom, a second move of the partition in the round) waits for a later round, where a source
that keeps failing tries the runs beside its best one; whatever is left when rounds stop paying
off goes to the move loop (`counts.balance_counts`).
"""
from __future__ import annotations

from itertools import chain

import numpy as np

from kreassign.planner.balance.engine import Layout

MIN_MOVES = 2_000  # below this the move loop is fast enough and plans stay as they were
ROUNDS = 12  # rounds a source's excess is spread over
MAX_ROUNDS = 48
GIVE_UP = 4  # rounds in a row a source may fail every offer before the loop takes it over
MIN_GAIN = 0.01  # stop once a round places fewer than this share of its pairs
TOPIC_TABLE_MAX = 50_000_000  # topic x sink counters kept dense up to this size


def bulk_eligible(layout: Layout, keep_disk: bool) -> bool:
    """Worth it (at least MIN_MOVES replicas above their brokers' count targets) and possible:
    no move budget (the loop charges moves one by one) and no disk goal ranked above counts
    (the loop checks each move against it)."""
    t = layout.targets
    if t is None or keep_disk or layout.moves_left != np.inf or layout.bytes_left != np.inf:
        return False
    excess = np.asarray(layout.count, dtype=np.int64) - np.asarray(t.count, dtype=np.int64)
    return int(np.maximum(excess, 0).sum()) >= MIN_MOVES


def bulk_balance_counts(layout: Layout, aim: float | None) -> int:
    """Make most count-phase moves on `layout` in vectorised rounds; returns how many."""
    plan = _BulkCounts(layout, aim)
    if not plan.ready:
        return 0
    p, s, d = plan.run()
    if len(p):
        layout.apply_moves(p, s, d)
    return len(p)


class _BulkCounts:
    def __init__(self, layout: Layout, aim: float | None) -> None:
        t = layout.targets
        assert t is not None
        self.lay = layout
        self.aim = aim
        nb = layout.nb
        self.nb = nb
        self.tc = np.asarray(t.count, dtype=np.int64)
        self.tbytes = np.asarray(t.bytes, dtype=np.float64)
        self.band_hi = np.asarray(t.bytes_hi, dtype=np.float64)
        self.count = np.asarray(layout.count, dtype=np.int64)
        self.bytes = np.asarray(layout.bytes, dtype=np.float64)
        self.rack = np.asarray(layout.rack, dtype=np.int64)
        self.group = self.rack if layout.rack_locked else np.zeros(nb, dtype=np.int64)
        self.tb = np.asarray(layout.tb, dtype=np.int64)
        have = np.fromiter((len(x) for x in layout.lists), dtype=np.int64, count=nb)
        gap = self.count - self.tc
        self.is_src = (gap > 0) & (have > 0)
        self.is_sink = (gap < 0) & np.asarray(layout.recv, dtype=bool)
        self.src0 = np.maximum(gap, 0)
        self.sink0 = np.maximum(-gap, 0)
        sinks = np.flatnonzero(self.is_sink)
        self.sink_ix = np.full(nb, -1, dtype=np.int64)
        self.sink_ix[sinks] = np.arange(len(sinks))
        self.topic_on = layout.topic_on
        # Topic caps need a topic x sink table; when it would be too big the loop does it all.
        fits = not layout.topic_on or layout.n_topics * max(len(sinks), 1) <= TOPIC_TABLE_MAX
        self.ready = bool(self.is_src.any() and self.is_sink.any() and fits)
        if not self.ready:
            return
        self.F = layout.matrix()
        self.part_of_rank = layout.by_rank_np
        self.size_of_rank = layout.size_by_rank_np
        self.topic = layout.topic_np
        self.rack_cap = layout.rack_cap_np
        self.rack_lo = layout.rack_lo_np
        self.live_rack = np.asarray(layout.live_rack, dtype=bool)
        self.crowded = np.fromiter(layout.crowded, dtype=np.int64, count=len(layout.crowded))
        self.disk_cap = np.asarray(layout.disk_cap, dtype=np.float64)
        self.disk_on = bool(np.isfinite(self.disk_cap[sinks]).any())
        srcs = np.flatnonzero(self.is_src)
        self.item_rank = np.fromiter(chain.from_iterable(layout.lists[b] for b in srcs.tolist()),
                                     dtype=np.int64, count=int(have[srcs].sum()))
        self.item_broker = np.repeat(srcs, have[srcs])
        self._index_items()
        if self.topic_on:
            on_sink = self.F >= 0
            on_sink[on_sink] = self.is_sink[self.F[on_sink]]
            rows, cols = np.nonzero(on_sink)
            self.tcount = np.zeros((layout.n_topics, len(sinks)), dtype=np.int64)
            np.add.at(self.tcount, (self.topic[rows], self.sink_ix[self.F[rows, cols]]), 1)
        self.fails = np.zeros(nb, dtype=np.int64)
        self.moves: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _index_items(self) -> None:
        self.start = np.searchsorted(self.item_broker, np.arange(self.nb + 1))
        self.csum = np.concatenate([[0.0], np.cumsum(self.size_of_rank[self.item_rank])])

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        for _ in range(MAX_ROUNDS):
            pairs = self._pairs()
            if pairs is None:
                break
            placed = self._round(*pairs)
            if placed < max(1, MIN_GAIN * len(pairs[0])):
                break
        if not self.moves:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        p, s, d = (np.concatenate(x) for x in zip(*self.moves))
        return p, s, d

    # ---- pairing ---------------------------------------------------------------------------
    def _pairs(self) -> tuple[np.ndarray, np.ndarray] | None:
        gap = self.count - self.tc
        have = np.diff(self.start)
        src = self.is_src & (gap > 0) & (have > 0)
        sink = self.is_sink & (gap < 0)
        if not src.any() or not sink.any():
            return None
        offers = np.where(src, np.minimum(np.minimum(gap, have), np.maximum(1, -(-self.src0 // ROUNDS))), 0)
        slots = np.where(sink, np.minimum(-gap, np.maximum(1, -(-self.sink0 // ROUNDS))), 0)
        scale = max(float(self.tbytes.sum()) / max(self.nb, 1), 1.0)
        surplus = (self.bytes - self.tbytes) / scale
        src_rank = _rank(np.lexsort((self.tb, -surplus, -gap)))
        sink_rank = _rank(np.lexsort((self.tb, surplus, gap)))
        s = self._expand(offers, src_rank)
        d = self._expand(slots, sink_rank)
        gs, gd = self.group[s], self.group[d]
        n_groups = int(self.group.max()) + 1
        take = np.minimum(np.bincount(gs, minlength=n_groups), np.bincount(gd, minlength=n_groups))
        s = s[_position_in_group(gs) < take[gs]]
        d = d[_position_in_group(gd) < take[gd]]
        return s, d

    def _expand(self, k: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Each broker repeated k times, ordered by (group, repetition, rank)."""
        b = np.repeat(np.arange(self.nb), k)
        rep = np.arange(len(b)) - np.repeat(np.cumsum(k) - k, k)
        out: np.ndarray = b[np.lexsort((rank[b], rep, self.group[b]))]
        return out

    # ---- one round -------------------------------------------------------------------------
    def _round(self, s_pairs: np.ndarray, d_pairs: np.ndarray) -> int:
        k = np.bincount(s_pairs, minlength=self.nb)
        slots = np.bincount(d_pairs, minlength=self.nb)
        pos = self._windows(k, self._shed(k, slots))
        pos, d = self._deal(pos, slots)
        s = self.item_broker[pos]
        p = self.part_of_rank[self.item_rank[pos]]
        ok = self._feasible(p, s, d)
        keep = np.flatnonzero(ok)
        _, first = np.unique(p[keep], return_index=True)
        keep = np.sort(keep[first])
        if self.topic_on:
            keep = keep[self._topic_room(p[keep], d[keep])]
        if self.disk_on:
            keep = keep[self._room(p[keep], d[keep], self.disk_cap)]
        if self.aim is not None:
            # A replica that would lift its sink above the byte band only moves the hotspot
            # there (the byte phase then swaps it back out, replica by replica); only a source
            # that must give every replica (a removed broker) may still send it.
            must = ((self.count - self.tc) >= np.diff(self.start))[s[keep]]
            keep = keep[must | self._room(p[keep], d[keep], self.band_hi)]
        self._apply(p[keep], s[keep], d[keep], pos[keep])
        tried = k > 0
        won = np.bincount(s[keep], minlength=self.nb) > 0
        self.fails = np.where(tried & ~won, self.fails + 1, np.where(won, 0, self.fails))
        self.is_src &= self.fails < GIVE_UP
        return len(keep)

    def _shed(self, k: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Bytes each source should give this round: its share of what it must shed to reach
        `aim` times its target, scaled down where the rack's sinks could not take that much
        without passing `aim` times their own targets."""
        if self.aim is None:
            return np.zeros(self.nb)
        gap = self.count - self.tc
        give = k * np.maximum(self.bytes - self.tbytes * self.aim, 0.0) / np.maximum(gap, 1)
        need = slots * np.maximum(self.tbytes * self.aim - self.bytes, 0.0) / np.maximum(-gap, 1)
        g = int(self.group.max()) + 1
        scale = np.minimum(1.0, np.bincount(self.group, weights=need, minlength=g)
                           / np.maximum(np.bincount(self.group, weights=give, minlength=g), 1e-9))
        out: np.ndarray = give * scale[self.group]
        return out

    def _windows(self, k: np.ndarray, total: np.ndarray) -> np.ndarray:
        """Item positions of, per source, the k consecutive items (in size order) whose sum
        is closest to `total`."""
        srcs = np.flatnonzero(k)
        kk, tt = k[srcs], total[srcs]
        a, last = self.start[srcs], self.start[srcs + 1] - kk
        lo, hi = a.copy(), last + 1
        csum = self.csum
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = np.minimum((lo + hi) // 2, last)
            ge = csum[mid + kk] - csum[mid] >= tt
            hi = np.where(open_ & ge, mid, hi)
            lo = np.where(open_ & ~ge, mid + 1, lo)
        u = np.minimum(lo, last)
        prev = np.maximum(u - 1, a)
        err_u = np.abs(csum[u + kk] - csum[u] - tt)
        err_prev = np.abs(csum[prev + kk] - csum[prev] - tt)
        u = np.where(err_prev < err_u, prev, u)
        # A source whose last offers all failed tries the runs beside the best one.
        f = self.fails[srcs]
        u = np.clip(u + kk * ((f + 1) // 2) * np.where(f % 2 == 1, 1, -1), a, last)
        j = np.arange(int(kk.sum())) - np.repeat(np.cumsum(kk) - kk, kk)
        out: np.ndarray = np.repeat(u, kk) + j
        # A source that must give every item (a removed broker) offers a sample spread over
        # its sizes instead: its total is fixed anyway, and small items reach the sinks whose
        # bytes are full while their counts are not, big ones the sinks short of bytes.
        have = self.start[srcs + 1] - a
        every = (self.count - self.tc)[srcs] >= have
        if every.any():
            phase = np.repeat((0.5 + 0.618 * f) % 1.0, kk)  # failed offers shift the sample
            spread = np.repeat(a, kk) + ((j + phase) * np.repeat(have, kk) / np.repeat(kk, kk)).astype(np.int64)
            out = np.where(np.repeat(every, kk), spread, out)
        return out

    def _deal(self, pos: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Give the round's items to its sink slots, one item per sink per pass: each sink takes
        the free item of its rack group nearest in size to its remaining byte need per slot,
        neediest first, no two sinks the same item."""
        n = len(self.part_of_rank)
        key = self.group[self.item_broker[pos]] * n + self.item_rank[pos]
        order = np.argsort(key, kind="stable")
        pool, pool_key = pos[order], key[order]
        sinks = np.flatnonzero(slots)
        gap = (self.tc - self.count)[sinks]
        need = (self.tbytes - self.bytes)[sinks]
        group = self.group[sinks]
        tb = self.tb[sinks]
        sizes = self.size_of_rank
        got_pos: list[np.ndarray] = []
        got_sink: list[np.ndarray] = []
        # A sink with q of the round's P passes' worth of slots takes part in q passes spread
        # evenly, so the items nobody wanted, left for the last passes, are shared out.
        share = slots[sinks]
        passes = int(share.max())
        for i in range(passes):
            act = np.flatnonzero((i + 1) * share // passes > i * share // passes)
            per_slot = np.maximum(need[act], 0.0) / np.maximum(gap[act], 1)
            want_key = group[act] * n + np.minimum(np.searchsorted(sizes, per_slot), n - 1)
            srt = np.lexsort((tb[act], want_key))
            act, want_key = act[srt], want_key[srt]
            g = group[act]
            seg_lo = np.searchsorted(pool_key, g * n)
            seg_hi = np.searchsorted(pool_key, (g + 1) * n)
            at = np.clip(np.searchsorted(pool_key, want_key), seg_lo, seg_hi - 1)
            below = np.maximum(at - 1, seg_lo)
            z_want = per_slot[srt]
            closer = np.abs(sizes[pool_key[below] - g * n] - z_want) < np.abs(sizes[pool_key[at] - g * n] - z_want)
            at = np.where(closer, below, at)
            j = _position_in_group(g)
            at = np.maximum.accumulate(at - j) + j
            n_g = np.bincount(g, minlength=int(g.max()) + 1)[g]
            at = np.minimum(at, seg_hi - n_g + j)
            got_pos.append(pool[at])
            got_sink.append(sinks[act])
            z = sizes[self.item_rank[pool[at]]]
            need[act] -= z
            gap[act] -= 1
            alive = np.ones(len(pool), dtype=bool)
            alive[at] = False
            pool, pool_key = pool[alive], pool_key[alive]
        return np.concatenate(got_pos), np.concatenate(got_sink)

    def _feasible(self, p: np.ndarray, s: np.ndarray, d: np.ndarray) -> np.ndarray:
        rows = self.F[p]
        ok: np.ndarray = ~(rows == d[:, None]).any(axis=1)
        if self.lay.rack_on:
            racks = np.where(rows >= 0, self.rack[np.maximum(rows, 0)], -1)
            others = rows != s[:, None]
            rd, rs = self.rack[d], self.rack[s]
            same = ((racks == rd[:, None]) & others).sum(axis=1)
            ok &= same < self.rack_cap[p]
            # Leaving a live rack may not take it below the partition's floor there.
            left = ((racks == rs[:, None]) & others).sum(axis=1)
            ok &= (rs == rd) | (left >= self.rack_lo[p]) | ~self.live_rack[rs]
            if self.lay.crowded:
                ok &= ~np.isin(p, self.crowded)
        if self.topic_on:
            t = self.topic[p]
            ok &= self.tcount[t, self.sink_ix[d]] < self.lay.topic_cap[t, self.rack[d]]
        return ok

    def _topic_room(self, p: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Moves of one topic into one sink within the round, up to the cap."""
        t = self.topic[p]
        key = t * self.nb + d
        order = np.argsort(key, kind="stable")
        seq = np.empty(len(key), dtype=np.int64)
        seq[order] = _position_in_group(key[order])
        room = self.lay.topic_cap[t, self.rack[d]] - self.tcount[t, self.sink_ix[d]]
        out: np.ndarray = seq < room
        return out

    def _room(self, p: np.ndarray, d: np.ndarray, ceiling: np.ndarray) -> np.ndarray:
        """Moves that keep their sink at or below `ceiling`, taken in order within the round."""
        z = self.size_of_rank[self.lay.rank_np[p]]
        order = np.argsort(d, kind="stable")
        ds, zs = d[order], z[order]
        run = np.cumsum(zs)
        run -= np.concatenate([[0.0], run])[np.searchsorted(ds, ds)]
        fits = np.empty(len(d), dtype=bool)
        fits[order] = self.bytes[ds] + run <= ceiling[ds]
        return fits

    def _apply(self, p: np.ndarray, s: np.ndarray, d: np.ndarray, pos: np.ndarray) -> None:
        if not len(p):
            return
        col = np.argmax(self.F[p] == s[:, None], axis=1)
        self.F[p, col] = d
        z = self.size_of_rank[self.item_rank[pos]]
        nb = self.nb
        self.count += np.bincount(d, minlength=nb) - np.bincount(s, minlength=nb)
        self.bytes += np.bincount(d, weights=z, minlength=nb) - np.bincount(s, weights=z, minlength=nb)
        if self.topic_on:
            np.add.at(self.tcount, (self.topic[p], self.sink_ix[d]), 1)
        # Items of sources that are done drop out, so later rounds work on less.
        alive = (self.count > self.tc)[self.item_broker]
        alive[pos] = False
        self.item_rank = self.item_rank[alive]
        self.item_broker = self.item_broker[alive]
        self._index_items()
        self.moves.append((p, s, d))


def _rank(order: np.ndarray) -> np.ndarray:
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order))
    return out


def _position_in_group(sorted_keys: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal keys of a sorted array."""
    out: np.ndarray = np.arange(len(sorted_keys)) - np.searchsorted(sorted_keys, sorted_keys)
    return out
