"""Starting moves: every move at its start time, or, under an `Admission`, in priority order as
the per-broker and byte limits on moves in flight free up; and completing them."""
from __future__ import annotations

import heapq
import itertools
import math

import numpy as np

from kreassign.predict.model.fair_share import segments
from kreassign.predict.model.inputs import Admission, ModelInput, finished_still_count, in_sync_traffic
from kreassign.predict.model.kafka import INF
from kreassign.predict.model.state import ACTIVE, DONE, PENDING, Capacity, Moves, Progress, narrow


def rank_within(keys: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements have the same key (non-negative)."""
    order = np.argsort(narrow(keys), kind="stable")
    starts, counts = segments(keys[order])
    ranks = np.empty(len(keys), np.int64)
    ranks[order] = np.arange(len(keys)) - np.repeat(starts, counts)
    return ranks


class Slots:
    """Which moves start when, and what is in flight."""

    def __init__(self, inp: ModelInput, admission: Admission | None, moves: Moves, progress: Progress,
                 capacity: Capacity) -> None:
        self.admission, self.moves, self.progress, self.capacity = admission, moves, progress, capacity
        b = inp.n_brokers
        # with admission: the moves not started yet in priority order, with their brokers
        queue = np.zeros(0, np.int64) if admission is None else moves.inv[admission.priority]
        self.queue = queue[progress.status[queue] == PENDING]
        self.queue_src, self.queue_dst = moves.srcp[self.queue], moves.dst[self.queue]
        self.late_starts = bool(np.any(moves.start_s > 0))  # some moves may not start at once
        self.pending = moves.nv  # moves not started yet
        self.inflight_out = np.zeros(b, np.int64)
        self.inflight_in = np.zeros(b, np.int64)
        self.inflight_bytes = 0.0
        # slots of finished moves that free at a later poll of the pacer: (when, seq, moves)
        self.releases: list[tuple[float, int, np.ndarray]] = []
        self.release_seq = itertools.count()
        self.delayed = admission is not None and (admission.poll_s > 0 or admission.wave_start_s > 0)

    def admit(self, t: float) -> bool:
        """Start every eligible move the admission limits allow; zero-byte moves finish at once.
        Returns whether any move started."""
        started = False
        progress = self.progress
        while self.releases and self.releases[0][0] <= t:
            self.count(heapq.heappop(self.releases)[2], -1)
        while self.pending:
            if self.admission is None:
                starters = np.flatnonzero((progress.status == PENDING) & (self.moves.start_s <= t))
            else:
                starters = self.choose(t)
            if not len(starters):
                return started
            started = True
            progress.status[starters] = ACTIVE
            self.pending -= len(starters)
            progress.start[starters] = t
            self.count(starters, +1)
            empty = starters[progress.rem[starters] <= 0]
            if self.admission is None:  # in the input's order, as their completion sums them
                empty = empty[np.argsort(self.moves.perm[empty], kind="stable")]
            if len(empty):
                progress.finish[empty] = t
                self.complete(empty)
            if not len(empty) or self.admission is None:
                return started
        return started

    def count(self, which: np.ndarray, sign: int) -> None:
        moves, b = self.moves, len(self.inflight_out)
        self.capacity.touch(moves, which)
        self.inflight_out += sign * np.bincount(moves.srcp[which], minlength=b)
        self.inflight_in += sign * np.bincount(moves.dst[which], minlength=b)
        self.inflight_bytes += sign * float(moves.bytes[which].sum())

    def complete(self, which: np.ndarray) -> None:
        """These moves are in sync: free their slots; unless the admission releases finished
        moves, the quotas keep counting their writes."""
        moves, capacity, b = self.moves, self.capacity, len(self.inflight_out)
        self.progress.status[which] = DONE
        self.progress.rem[which] = 0.0
        if self.delayed and self.pending:
            self.capacity.touch(moves, which)  # their copy's share frees now, their slot later
            self.hold(which)
        else:
            self.count(which, -1)
        if not finished_still_count(self.admission):
            return
        sent, received = in_sync_traffic(moves.srcp[which], moves.dst[which], moves.w[which], moves.released[which], b)
        capacity.in_sync_out += sent
        capacity.in_sync_in += received

    def hold(self, which: np.ndarray) -> None:
        """Keep these finished moves' slots until the pacer's next poll sees them finished, and
        the next wave starts copying (`Admission.poll_s`, `.wave_start_s`)."""
        adm = self.admission
        assert adm is not None
        finish = self.progress.finish[which]
        seen = np.ceil(finish / adm.poll_s * (1 - 1e-12)) * adm.poll_s if adm.poll_s > 0 else finish
        when, group = np.unique(np.maximum(seen, finish) + adm.wave_start_s, return_inverse=True)
        for k, at in enumerate(when):
            heapq.heappush(self.releases, (float(at), next(self.release_seq), which[group == k]))

    def choose(self, t: float) -> np.ndarray:
        """Moves to start now, in priority order, within the per-broker and byte limits."""
        adm = self.admission
        assert adm is not None
        cap = adm.max_moves_per_broker
        big = np.iinfo(np.int64).max // 4
        free_out = np.full(len(self.inflight_out), big) if cap is None else cap - self.inflight_out
        free_in = np.full(len(self.inflight_in), big) if cap is None else cap - self.inflight_in
        budget = INF if adm.max_inflight_bytes is None else adm.max_inflight_bytes - self.inflight_bytes
        fit = (free_out[self.queue_src] > 0) & (free_in[self.queue_dst] > 0)
        if self.late_starts:
            fit &= self.moves.start_s[self.queue] <= t
        where = np.flatnonzero(fit)  # candidates' places in the queue
        cand = (self.queue[where], self.queue_src[where], self.queue_dst[where], where)
        chosen, taken = pick(cand, self.moves.bytes, free_out, free_in, budget, not self.inflight_out.any())
        if not chosen:
            return np.zeros(0, np.int64)
        waiting = np.ones(len(self.queue), bool)
        waiting[np.concatenate(taken)] = False
        self.queue, self.queue_src, self.queue_dst = self.queue[waiting], self.queue_src[waiting], self.queue_dst[waiting]
        return np.concatenate(chosen)

    def next_start(self, t: float) -> float:
        """The next time a move becomes eligible by its start time, or the leaders' start-up
        credit runs out (capacity changes then too)."""
        status, start_s = self.progress.status, self.moves.start_s
        later = (status == PENDING) & (start_s > t) if self.pending else None
        first = float(start_s[later].min()) if later is not None and later.any() else INF
        if self.releases and self.pending:
            first = min(first, self.releases[0][0])
        return min(first, self.capacity.boost_end) if self.capacity.boost_on(t) else first


def pick(cand: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], size: np.ndarray, free_out: np.ndarray,
         free_in: np.ndarray, budget: float, nothing_in_flight: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Of the candidates (moves, their sources, destinations and places in the queue, in
    priority order), those that fit the free slots and the byte budget, in rounds (a move that
    did not fit may once others took their slots in the same round): the moves and their places."""
    moves, src, dst, where = cand
    chosen: list[np.ndarray] = []
    taken: list[np.ndarray] = []
    for _ in range(16):
        if not len(moves):
            break
        ok = (rank_within(src) < free_out[src]) & (rank_within(dst) < free_in[dst])
        if math.isfinite(budget):
            fits = np.cumsum(np.where(ok, size[moves], 0.0)) <= budget
            if nothing_in_flight and not chosen and ok.any() and not fits[np.argmax(ok)]:
                fits[np.argmax(ok)] = True  # a move larger than the budget runs alone
                fits[np.argmax(ok) + 1:] = False
            ok &= fits
        picked = moves[ok]
        if not len(picked):
            break
        chosen.append(picked)
        taken.append(where[ok])
        free_out = free_out - np.bincount(src[ok], minlength=len(free_out))
        free_in = free_in - np.bincount(dst[ok], minlength=len(free_in))
        budget -= float(size[picked].sum())
        rest = ~ok
        rest[rest] = (free_out[src[rest]] > 0) & (free_in[dst[rest]] > 0)
        moves, src, dst, where = moves[rest], src[rest], dst[rest], where[rest]
    return chosen, taken
