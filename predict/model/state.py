"""The state of one run of the event loop: the moves in session order (`Moves`), what happened
to each move so far (`Progress`) and what the brokers have left for catch-up (`Capacity`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kreassign.predict.model.inputs import ModelInput
from kreassign.predict.model.kafka import INF, LEADER_FLOOD_SPANS, Limit

PENDING, ACTIVE, DONE, NEVER = 0, 1, 2, 3
"""A move's status: not started, copying, in sync, never starts (no leader)."""


def narrow(keys: np.ndarray) -> np.ndarray:
    """Non-negative integer keys as 16-bit ones when they fit: numpy sorts those stably by radix."""
    return keys.astype(np.int16) if len(keys) and keys.max() < 2**15 else keys


@dataclass(frozen=True, eq=False)
class Moves:
    """The moves in session order (by leader, destination, fetcher thread; moves without a
    leader last): the active moves of a step are then increasing positions and every per-move
    gather of the step reads memory in order. The order of every sum is the session order, as
    it always was, so the numbers do not depend on it; `perm` maps back to the input's order."""

    perm: np.ndarray
    inv: np.ndarray
    nv: int  # moves with a leader (the first nv in this order)
    src: np.ndarray
    srcp: np.ndarray  # src with -1 as 0, to index by
    dst: np.ndarray
    w: np.ndarray
    bytes: np.ndarray
    start_s: np.ndarray
    released: np.ndarray
    dorder: np.ndarray  # the moves with a leader by destination, then session order
    session: np.ndarray  # fetcher session id of each move

    @classmethod
    def of(cls, inp: ModelInput) -> Moves:
        m, b = len(inp), inp.n_brokers
        valid = np.flatnonzero(inp.source >= 0)
        # by leader, destination and fetcher thread, as one stable sort of one key (what a
        # lexsort of the three does, in half the time)
        threads = int(inp.fetcher.max(initial=0)) + 1
        gorder = valid[np.argsort((inp.source[valid] * b + inp.dest[valid]) * threads + inp.fetcher[valid], kind="stable")]
        perm = np.concatenate([gorder, np.flatnonzero(inp.source < 0)])
        inv = np.empty(m, np.int64)
        inv[perm] = np.arange(m)
        nv = len(valid)
        src, dst = inp.source[perm], inp.dest[perm]
        assert inp.released_bps is not None
        key = np.stack([src[:nv], dst[:nv], inp.fetcher[gorder]])
        new_session = np.concatenate(([True], np.any(key[:, 1:] != key[:, :-1], axis=0))) if nv else np.zeros(0, bool)
        session = np.zeros(m, np.int64)
        session[:nv] = np.cumsum(new_session) - 1
        return cls(perm=perm, inv=inv, nv=nv, src=src, srcp=np.maximum(src, 0), dst=dst, w=inp.write_bps[perm],
                   bytes=inp.bytes[perm], start_s=inp.start_s[perm], released=inp.released_bps[perm],
                   dorder=np.argsort(narrow(dst[:nv]), kind="stable"), session=session)


@dataclass(eq=False)
class Progress:
    """Per move, in session order: its status, bytes left, when it started and finished, what
    limited it (a `Limit` code and the broker position, -1 for none), the value of that limit a
    stalled move needs, and finish times found when a step was settled (`early`)."""

    status: np.ndarray
    rem: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    limit: np.ndarray
    limit_broker: np.ndarray
    needed: np.ndarray
    early: np.ndarray

    @classmethod
    def of(cls, moves: Moves) -> Progress:
        m = len(moves.src)
        limit = np.full(m, int(Limit.UNLIMITED), np.int8)
        limit[moves.src < 0] = int(Limit.NO_LEADER)
        return cls(status=np.where(moves.src >= 0, PENDING, NEVER).astype(np.int8),
                   rem=moves.bytes.astype(np.float64).copy(), start=np.full(m, INF), finish=np.full(m, INF),
                   limit=limit, limit_broker=np.full(m, -1, np.int64), needed=np.full(m, np.nan),
                   early=np.full(m, INF))


class Capacity:
    """What the brokers have left for catch-up as the run goes: the write rates of completed moves
    that the quotas still count (`in_sync_out`/`in_sync_in`), whether the leaders' start-up
    credit is on, and the water levels of the last sharing with where they may have moved."""

    def __init__(self, inp: ModelInput, moves: Moves) -> None:
        b = inp.n_brokers
        self.inp = inp
        self.in_sync_out = np.zeros(b)
        self.in_sync_in = np.zeros(b)
        self.boost_end = inp.credit_s
        self.boosting = self.boost_end > 0
        # warm leaders' floods: each span's allowance (bytes; below 0 a step's overshoot, paid
        # from the next), followed for LEADER_FLOOD_SPANS spans of each leader
        self.flood_size = np.asarray(inp.leader_flood)
        self.allowance = self.flood_size.copy()
        # a flood's bytes leave the windows about a span and a half window after they came (its
        # first sample is purged 11 s after its last record): real Kafka 4.4.0 11.3-12.3 s. So
        # each leader's span starts when its flood does (its first bytes after a refill), not
        # at time 0: a move that starts late gets one flood, not a second a few seconds on
        self.flood_span = inp.fetch.measured_span_s
        self.flood_end = np.full(b, INF)
        self.spans_left = np.where(self.flood_size > 0, LEADER_FLOOD_SPANS, 0)
        self.flood_changed = False
        sessions = int(moves.session.max(initial=-1)) + 1
        self.warm_out, self.warm_in, self.warm_session = np.full(b, INF), np.full(b, INF), np.full(sessions, INF)
        self.touched_out, self.touched_in = np.ones(b, bool), np.ones(b, bool)
        self.touched_session = np.ones(sessions, bool)
        fetch = inp.fetch
        biggest = int(np.bincount(moves.session[:moves.nv]).max()) if moves.nv else 0
        self.sessions_may_bind = math.isfinite(fetch.fetcher_bps) and biggest * fetch.partition_bps > fetch.fetcher_bps

    def out(self) -> tuple[np.ndarray, np.ndarray]:
        """`ModelInput.out_capacity` now."""
        flood = np.where(self.flooding, (self.allowance > 0).astype(np.float64), np.nan) if self.flooding.any() else None
        return self.inp.out_capacity(self.in_sync_out, self.boosting, flood)

    def follow_floods(self, tol: float) -> None:
        """How many spans to follow the floods for: LEADER_FLOOD_SPANS event by event (`tol` 0);
        with batched events only while half a span (what following them changes in a move's
        end) is more than `tol` of the time elapsed, 1 / (2 tol) spans."""
        if tol > 0:
            self.spans_left = np.minimum(self.spans_left, max(1, int(1 / (2 * tol))))

    @property
    def flooding(self) -> np.ndarray:
        """Per broker: its warm leader's floods are still followed."""
        return self.spans_left > 0

    @property
    def next_refill(self) -> float:
        """When the next flood comes back (inf: none is running)."""
        return float(self.flood_end.min(initial=INF))

    def leader_spend(self) -> np.ndarray:
        """Per broker, what its leader quota records besides catch-up (bytes/s): the in-sync
        followers of its throttled partitions."""
        return self.inp.leader_base + self.in_sync_out

    def until_dry(self, src: np.ndarray, rate: np.ndarray, tol: float) -> float:
        """How long until the floods of this span run dry at these rates (the first of them, or
        with `tol` > 0 the one a `tol` share of the flooding brokers into the list, whose
        overshoot the next span pays back); inf when none is flowing."""
        if not self.flooding.any():
            return INF
        b = len(self.allowance)
        send = np.bincount(src, weights=np.where(np.isfinite(rate), rate, 0.0), minlength=b) + self.leader_spend()
        open_ = self.flooding & (self.allowance > 0) & (send > 0)
        if not open_.any():
            return INF
        with np.errstate(over="ignore"):  # a tiny send rate: the flood outlasts the run
            times = self.allowance[open_] / send[open_]
        first = float(times.min())
        if tol <= 0:
            return first
        # batched: a `tol` share of all the flooding leaders, or every one that runs dry within
        # `tol` of a span after the first, whichever reaches further (the overshoot is paid from
        # the next span), so a span's run-dry events take a few steps, not one per leader
        k = min(int(tol * int(self.flooding.sum())), len(times) - 1)
        by_count = float(np.partition(times, k)[k]) if k > 0 else first
        by_time = float(times[times <= first + tol * self.flood_span].max())
        return max(by_count, by_time)

    def spend(self, src: np.ndarray, moved: np.ndarray, t: float, dt: float) -> None:
        """Charge the catch-up bytes of the step from `t` on (per active move, by leader `src`)
        and the in-sync traffic to the floods; a flood that starts starts its leader's span, one
        that ran dry changes its leader's capacity."""
        if not self.flooding.any():
            return
        b = len(self.allowance)
        was = self.allowance > 0
        spent = np.bincount(src, weights=moved, minlength=b) + self.leader_spend() * dt
        starts = self.flooding & np.isinf(self.flood_end) & (spent > 0)
        self.flood_end[starts] = t + self.flood_span
        self.allowance = np.where(self.flooding, self.allowance - spent, self.allowance)
        dry = self.flooding & was & (self.allowance <= self.flood_size * 1e-9)
        if dry.any():
            self.allowance[dry] = np.minimum(self.allowance[dry], 0.0)
            self._floods_moved(dry)
            self.flood_changed = True

    def flood_tick(self, t: float) -> bool:
        """At a span's end the floods' bytes leave the quota windows: each warm leader may send a
        whole flood again (less what the last overshot); after LEADER_FLOOD_SPANS spans the
        leaders keep their steady share. True when a leader's capacity changed since the last
        call (a flood ran dry or came back)."""
        changed, self.flood_changed = self.flood_changed, False
        due = self.flooding & (t >= self.flood_end * (1 - 1e-12))
        if due.any():
            self.spans_left[due] -= 1
            self._floods_moved(due)
            back = due & (self.spans_left > 0)
            self.allowance[back] = self.flood_size[back] + np.minimum(self.allowance[back], 0.0)
            self.flood_end[due] = INF  # the next span starts with the next flood's first bytes
            changed = True
        return changed

    def _floods_moved(self, leaders: np.ndarray) -> None:
        """These leaders' floods ran dry or came back: their capacity changes, and the levels
        their followers and sessions reached were set by it."""
        self.touched_out[leaders] = True
        self.touched_in[:] = True
        self.touched_session[:] = True

    def into(self) -> tuple[np.ndarray, np.ndarray]:
        """`ModelInput.in_capacity` now."""
        return self.inp.in_capacity(self.in_sync_in)

    def touch(self, moves: Moves, which: np.ndarray) -> None:
        """These moves came or went: the levels of their brokers and sessions may move."""
        self.touched_out[moves.srcp[which]] = True
        self.touched_in[moves.dst[which]] = True
        self.touched_session[moves.session[which]] = True

    def boost_on(self, t: float) -> bool:
        return t < self.boost_end * (1 - 1e-12)

    def boost(self, t: float) -> bool:
        """Track whether the cold leaders' start-up credit is on at `t`; True when that just changed
        (every sending broker's capacity then changes)."""
        on = self.boost_on(t)
        changed = on != self.boosting
        self.boosting = on
        if changed:
            self.touched_out[:] = True
        return changed
