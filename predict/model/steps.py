"""One step of the event loop: the active moves (`Active`), their max-min fair rates and what
limits them (`rates`, `limits`), and a step kept until the next allocation (`Step`) so the
capacity its completed moves freed can be credited to the others (`settle`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kreassign.predict.model.fair_share import Shared, max_min_rates, segments
from kreassign.predict.model.kafka import INF, Limit
from kreassign.predict.model.state import ACTIVE, Capacity, Moves, Progress


@dataclass
class Active:
    """The active moves of a step (increasing positions) and their columns, read once per step:
    taken from the step before when no move started since, else gathered afresh."""

    act: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    released: np.ndarray
    keep: np.ndarray | None = None  # which of the step before's active moves these are
    by_dst: np.ndarray | None = None  # `act` by destination, then session order (set by `rates`)

    @classmethod
    def gather(cls, moves: Moves, act: np.ndarray) -> Active:
        return cls(act, moves.src[act], moves.dst[act], moves.w[act], moves.released[act])

    def kept(self, keep: np.ndarray) -> Active:
        """The moves of this step that are still active in the next one."""
        return Active(self.act[keep], self.src[keep], self.dst[keep], self.w[keep], self.released[keep], keep)


@dataclass
class Step:
    """One advance of the event loop, kept until the next allocation is known."""

    t: float
    dt: float
    active: Active
    rate: np.ndarray
    moved: np.ndarray  # catch-up bytes each active move sent during the step
    done: np.ndarray  # which active moves completed in it
    late: float  # share of the step that came after the capacity of completed moves was freed
    spare_out: np.ndarray  # per broker, bytes of capacity left unused during the step
    spare_in: np.ndarray

    @property
    def act(self) -> np.ndarray:
        return self.active.act


def rates(moves: Moves, progress: Progress, capacity: Capacity, active: Active,
          before: Active | None) -> tuple[np.ndarray, np.ndarray, list[str], list[Shared]]:
    """Max-min fair rates of the active moves and, per move, which kind of capacity binds
    (0: its own fetch limit, k: the k-th of the returned kinds). `before`: the step before's
    moves, when these are what is left of them."""
    fetch, act, n = capacity.inp.fetch, active.act, len(active.act)
    shared: list[Shared] = []
    kinds: list[str] = []
    out = _out_shared(capacity, active)
    if out is not None:
        shared.append(out)
        kinds.append("out")
    into = _in_shared(moves, progress, capacity, active, before)
    if into is not None:
        shared.append(into)
        kinds.append("in")
    own = fetch.partition_bps
    if capacity.sessions_may_bind and n:
        sess = moves.session[act]
        starts, counts = segments(sess)
        if counts.max() * own > fetch.fetcher_bps:
            cap = np.full(len(starts), fetch.fetcher_bps)
            seg = np.repeat(np.arange(len(starts)), counts)
            shared.append(Shared(starts, counts, sess[starts], None, seg, seg, cap, capacity.warm_session,
                                 capacity.touched_session))
            kinds.append("session")
    rate, which = max_min_rates(own, shared, n)
    return rate, which, kinds, shared


def _out_shared(capacity: Capacity, active: Active) -> Shared | None:
    """The sending brokers' capacity, over the active moves in their own (leader) order."""
    out_cap = capacity.out()[0]
    src = active.src
    starts, counts = segments(src)
    if not np.isfinite(out_cap[src[starts]]).any():
        return None
    seg = np.repeat(np.arange(len(starts)), counts)
    return Shared(starts, counts, src[starts], None, seg, seg, out_cap[src[starts]], capacity.warm_out,
                  capacity.touched_out)


def _in_shared(moves: Moves, progress: Progress, capacity: Capacity, active: Active,
               before: Active | None) -> Shared | None:
    """The receiving brokers' capacity, over the active moves by destination (`active.by_dst`,
    kept for the next step)."""
    in_cap = capacity.into()[0]
    act, n = active.act, len(active.act)
    pool = moves.dorder if before is None or before.by_dst is None else before.by_dst
    by_dst = active.by_dst = pool[progress.status[pool] == ACTIVE]
    # the segments by destination from a count per broker (a pass in the moves' own order),
    # not from the destinations gathered in `by_dst` order
    per_broker = np.bincount(active.dst, minlength=len(in_cap))
    key = np.flatnonzero(per_broker)
    if not np.isfinite(in_cap[key]).any():
        return None
    counts = per_broker[key]
    starts = np.zeros(len(key), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    rank = np.zeros(len(in_cap), np.int64)
    rank[key] = np.arange(len(key))
    local = np.empty(len(progress.status), np.int64)
    local[act] = np.arange(n)
    order = local[by_dst]
    own = np.repeat(np.arange(len(starts)), counts)
    return Shared(starts, counts, key, order, rank[active.dst], own, in_cap[key], capacity.warm_in,
                  capacity.touched_in)


def limits(moves: Moves, capacity: Capacity, which_moves: np.ndarray, which: np.ndarray,
           kinds: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """What limits these moves (a Limit code) and the broker position it belongs to."""
    fetch = capacity.inp.fetch
    default = Limit.FETCH_PARTITION if math.isfinite(fetch.partition_bps) else Limit.UNLIMITED
    limit = np.full(len(which_moves), int(default), np.int8)
    broker = np.full(len(which_moves), -1, np.int64)
    for k, kind in enumerate(kinds):
        sel = which == k + 1
        if kind == "out":
            leader = capacity.out()[1]
            limit[sel] = np.where(leader[moves.src[which_moves[sel]]], int(Limit.LEADER_THROTTLE), int(Limit.NETWORK_OUT))
            broker[sel] = moves.src[which_moves[sel]]
        elif kind == "in":
            follower = capacity.into()[1]
            limit[sel] = np.where(follower[moves.dst[which_moves[sel]]], int(Limit.FOLLOWER_THROTTLE), int(Limit.NETWORK_IN))
            broker[sel] = moves.dst[which_moves[sel]]
        else:
            limit[sel] = int(Limit.FETCH_RESPONSE)
    return limit, broker


def late_share(progress: np.ndarray, tau: np.ndarray, dt: float) -> float:
    """Capacity-weighted share of a step [0, dt] left after each completion at tau."""
    ok = np.isfinite(progress) & (progress > 0)
    if dt <= 0 or not ok.any():
        return 0.0
    weight = progress[ok]
    return float(np.sum(weight * (dt - tau[ok])) / (np.sum(weight) * dt))


def step_record(capacity: Capacity, t: float, dt: float, active: Active, rate: np.ndarray, moved: np.ndarray,
                progress: np.ndarray, tau: np.ndarray, done: np.ndarray) -> Step:
    """Keep a step until the next allocation, with each broker's capacity left unused in it
    (called after its completions were recorded)."""
    b = capacity.inp.n_brokers
    # What the completed moves (few) add, computed for them alone: every other move adds
    # nothing to `begin` and exactly its `moved` to `used`, so the sums are the same.
    ended = np.flatnonzero(done)
    after = dt - tau[ended]
    synced = active.w[ended]
    sent = synced - active.released[ended]  # the leader also stops serving removed replicas
    spare = []
    for cap, ends, synced in ((capacity.out()[0], active.src, sent), (capacity.into()[0], active.dst, synced)):
        begin = cap + np.bincount(ends[ended], weights=synced, minlength=b)
        weights = moved.copy()
        weights[ended] += synced * after
        used = np.bincount(ends, weights=weights, minlength=b)
        with np.errstate(invalid="ignore"):
            spare.append(np.where(np.isfinite(begin), np.maximum(begin * dt - used, 0.0), INF))
    return Step(t, dt, active, rate, moved, done, late_share(progress[done], tau[done], dt), spare[0], spare[1])


def within_freed(prev: Step, active: Active, extra: np.ndarray, b: int) -> np.ndarray:
    """Per move, the factor that keeps each broker's credit within the capacity left unused
    during the step, so the correction never creates bandwidth."""
    gain = np.maximum(extra, 0.0)
    src, dst = active.src, active.dst
    asked_out = np.bincount(src, weights=gain, minlength=b)
    asked_in = np.bincount(dst, weights=gain, minlength=b)
    with np.errstate(divide="ignore", invalid="ignore"):
        f_out = np.where(asked_out > prev.spare_out, prev.spare_out / asked_out, 1.0)
        f_in = np.where(asked_in > prev.spare_in, prev.spare_in / asked_in, 1.0)
    return np.where(extra > 0, np.minimum(f_out[src], f_in[dst]), 1.0)


def settle(progress: Progress, prev: Step, active: Active, rate: np.ndarray, b: int) -> None:
    """Credit the moves of `prev` that stayed active with the capacity freed by the moves that
    completed during it (trapezoid rule between the rates before and after)."""
    act = active.act
    if active.keep is not None:
        i = np.flatnonzero(active.keep)
    else:
        where = np.empty(len(progress.status), np.int64)
        where[prev.act] = np.arange(len(prev.act))
        i = where[act]
    r0 = prev.rate[i]
    both = np.isfinite(rate) & np.isfinite(r0)
    extra = np.where(both, rate - r0, 0.0) * prev.late * prev.dt
    extra *= within_freed(prev, active, extra, b)
    rem = progress.rem[act]
    through = rem - extra <= 0  # would have completed during the previous step
    if through.any():
        # progress p0 until the completions (at `freed` into the step), then faster by
        # exactly the credit given, so the finish time agrees with the bytes credited
        p0 = r0[through] - active.w[through]
        freed = prev.dt * (1 - prev.late)
        p1 = p0 + extra[through] / (prev.late * prev.dt)
        begin = rem[through] + p0 * prev.dt
        head = p0 * freed
        with np.errstate(divide="ignore", invalid="ignore"):
            when = np.where(begin <= head, begin / p0, freed + (begin - head) / p1)
        progress.early[act[through]] = prev.t + np.clip(np.nan_to_num(when, nan=prev.dt), 0.0, prev.dt)
        extra[through] = rem[through] * (1 - 1e-9)
    progress.rem[act] = rem - extra
    prev.moved[i] += extra
