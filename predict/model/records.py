"""What the event loop writes down as it goes (`Recorder`: bytes left over time, each broker's
catch-up rates), why moves stall (`stall`), and the `ModelResult` it all becomes (`result`)."""
from __future__ import annotations

import math

import numpy as np

from kreassign.predict.model.bounds import lower_bound
from kreassign.predict.model.fair_share import Shared
from kreassign.predict.model.inputs import Admission, ModelInput
from kreassign.predict.model.kafka import INF, Limit
from kreassign.predict.model.results import Critical, ModelResult
from kreassign.predict.model.state import DONE, PENDING, Capacity, Moves, Progress
from kreassign.predict.model.steps import Active, limits


class Recorder:
    """The timelines of a run: bytes still to copy at each event, and a change log of each
    broker's average catch-up rate, with the catch-up bytes each broker sent and received."""

    def __init__(self, moves: Moves, b: int) -> None:
        self.moves = moves
        self.not_done = np.arange(len(moves.src))  # a superset of the moves not done (see `remaining_at`)
        self.times: list[float] = []
        self.remaining: list[float] = []
        self.log: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
        self.last_out, self.last_in = np.zeros(b), np.zeros(b)
        self.bytes_out, self.bytes_in = np.zeros(b), np.zeros(b)
        self.stalled = False

    def remaining_at(self, t: float, progress: Progress) -> None:
        self.times.append(t)
        # summed in the input's order, over the moves not done (every other one has nothing left)
        moves, rem = self.moves, progress.rem
        self.not_done = self.not_done[progress.status[self.not_done] != DONE]
        if 4 * len(self.not_done) > len(rem):
            self.remaining.append(float(rem[moves.inv].sum()))
        else:
            left = np.zeros(len(rem))
            left[moves.perm[self.not_done]] = rem[self.not_done]
            self.remaining.append(float(left.sum()))

    def rates(self, t: float, dt: float, active: Active, moved: np.ndarray) -> None:
        b = len(self.bytes_out)
        out = np.bincount(active.src, weights=moved, minlength=b)
        into = np.bincount(active.dst, weights=moved, minlength=b)
        self.bytes_out += out
        self.bytes_in += into
        if dt > 0:
            self.entry(t, out / dt, into / dt)

    def entry(self, t: float, out: np.ndarray, into: np.ndarray) -> None:
        changed = np.flatnonzero(~np.isclose(out, self.last_out, rtol=1e-9, atol=1e-6)
                                 | ~np.isclose(into, self.last_in, rtol=1e-9, atol=1e-6))
        if len(changed):
            self.log.append((t, changed, out[changed], into[changed]))
            self.last_out, self.last_in = out, into

    def close(self, t: float) -> None:
        if not self.stalled:
            b = len(self.bytes_out)
            self.entry(t, np.zeros(b), np.zeros(b))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rate log as columns: time, broker position, bytes/s out, bytes/s in."""
        if not self.log:
            return np.zeros(0), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        return (np.concatenate([np.full(len(c), t) for t, c, _, _ in self.log]),
                np.concatenate([c for _, c, _, _ in self.log]),
                np.concatenate([o for _, _, o, _ in self.log]),
                np.concatenate([i for _, _, _, i in self.log]))


def stall(moves: Moves, progress: Progress, capacity: Capacity, recorder: Recorder, act: np.ndarray,
          rate: np.ndarray, which: np.ndarray, kinds: list[str], shared: list[Shared], t: float) -> None:
    """Nothing can progress any more: record why, and what each limit would need to be."""
    inp = capacity.inp
    limit, broker = limits(moves, capacity, act, which, kinds)
    progress.limit[act], progress.limit_broker[act] = limit, broker
    w = moves.w[act]
    needed = np.where(limit == int(Limit.FETCH_PARTITION), w, np.nan)
    for kind, s in zip(kinds, shared):
        code = {"out": (Limit.LEADER_THROTTLE, Limit.NETWORK_OUT), "in": (Limit.FOLLOWER_THROTTLE, Limit.NETWORK_IN),
                "session": (Limit.FETCH_RESPONSE, Limit.FETCH_RESPONSE)}[kind]
        bound = np.isin(limit, [int(code[0]), int(code[1])])
        seg_of = s.seg
        nseg = len(s.starts)
        others = np.bincount(seg_of[~bound], weights=rate[~bound], minlength=nseg)
        k = np.bincount(seg_of[bound], minlength=nseg)
        wmax = np.zeros(nseg)
        np.maximum.at(wmax, seg_of[bound], w[bound])
        need_seg = _base(kind, s, capacity) + others + k * wmax
        needed = np.where(bound, need_seg[seg_of], needed)
    progress.needed[act] = needed
    recorder.stalled = True
    recorder.entry(t, np.bincount(moves.src[act], weights=rate, minlength=inp.n_brokers),
                   np.bincount(moves.dst[act], weights=rate, minlength=inp.n_brokers))
    queued = np.flatnonzero(progress.status == PENDING)
    progress.limit[queued] = int(Limit.QUEUED)


def _base(kind: str, s: Shared, capacity: Capacity) -> np.ndarray:
    """Per segment, what the capacity of this kind serves besides the stalled moves."""
    inp = capacity.inp
    if kind == "out":
        out_leader = capacity.out()[1]
        return np.where(out_leader[s.key], inp.leader_base[s.key], inp.client_out[s.key]) + capacity.in_sync_out[s.key]
    if kind == "in":
        in_follower = capacity.into()[1]
        return np.where(in_follower[s.key], inp.follower_base[s.key], inp.client_in[s.key]) + capacity.in_sync_in[s.key]
    return np.zeros(len(s.starts))


def critical(inp: ModelInput, finish: np.ndarray, limit: np.ndarray, limit_broker: np.ndarray) -> tuple[Critical, ...]:
    """The limits binding the moves that finish last (or never)."""
    if not len(finish):
        return ()
    makespan = float(finish.max())
    if math.isinf(makespan):
        last = np.isinf(finish)
    else:
        last = finish >= makespan * 0.95
    limits_, brokers = limit[last].astype(np.int64), limit_broker[last]
    pairs, counts = np.unique(np.stack([limits_, brokers]), axis=1, return_counts=True)
    order = np.lexsort((pairs[1], pairs[0], -counts))
    ids = inp.broker_ids
    return tuple(
        Critical(Limit(int(pairs[0, i])), int(ids[pairs[1, i]]) if pairs[1, i] >= 0 else None, int(counts[i]))
        for i in order
    )


def result(inp: ModelInput, moves: Moves, progress: Progress, recorder: Recorder, *, batched: bool,
           steps: int, admission: Admission | None = None) -> ModelResult:
    """The run as a `ModelResult`, in the input's order. `batched`: completions were batched
    without admission, so a finish a hair under the lower bound is put on it."""
    inv = moves.inv
    start, finish, limit = progress.start[inv], progress.finish[inv], progress.limit[inv]
    limit_broker, needed = progress.limit_broker[inv], progress.needed[inv]
    lower = lower_bound(inp, admission)
    finite = finish[np.isfinite(finish)]
    if batched and len(finite) and math.isfinite(lower.seconds) and finite.max() < lower.seconds:
        # Batched completions can land a hair under the proven bound; no real run can.
        finish = np.where(finish == finite.max(), lower.seconds, finish)
    busy = np.zeros(inp.n_brokers)
    led = inp.source >= 0
    np.maximum.at(busy, inp.source[led], finish[led])
    np.maximum.at(busy, inp.dest, finish)
    done = np.isfinite(finish)
    span = np.where(done, finish, 0.0) - np.where(done, start, 0.0)
    copied = np.where(done, inp.bytes + inp.write_bps * span, INF)
    rate_time, rate_broker, rate_out, rate_in = recorder.columns()
    return ModelResult(
        broker_ids=inp.broker_ids, start_s=start, finish_s=finish, limit=limit,
        limit_broker=limit_broker, needed_bps=needed, copied_bytes=copied,
        bytes_out=recorder.bytes_out, bytes_in=recorder.bytes_in, busy_until=busy,
        times=np.asarray(recorder.times), remaining_bytes=np.asarray(recorder.remaining),
        rate_time=rate_time, rate_broker=rate_broker, rate_out=rate_out, rate_in=rate_in,
        critical=critical(inp, finish, limit, limit_broker), lower=lower, steps=steps,
    )
