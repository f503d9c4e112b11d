"""The lower bound: the makespan no schedule of the moves can beat (per broker, the bytes it must
send or receive over the capacity its moves' writes leave; per move, its bytes at its best rate)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kreassign.predict.model.inputs import Admission, ModelInput, finished_still_count
from kreassign.predict.model.kafka import INF, Limit

@dataclass(frozen=True, eq=False)
class LowerBound:
    """No schedule of these moves (all started as early as allowed) can finish sooner.

    `out_s`: per broker, bytes to send over the capacity left once the write rates of its moves
    are served.
    """

    seconds: float
    out_s: np.ndarray
    limit: Limit
    broker: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": json_float(self.seconds), "limit": self.limit.label, "broker": self.broker}


def json_float(value: float) -> float | None:
    """JSON has no infinity: None stands for 'never'."""
    return None if math.isinf(value) or math.isnan(value) else float(value)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0 where num is 0 and inf where den <= 0 < num."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), INF)
    return np.where(num > 0, out, 0.0)


def lower_bound(inp: ModelInput, admission: Admission | None = None) -> LowerBound:
    """The makespan no allocation can beat, given the moves start no earlier than `start_s`.

    Each move alone needs start + bytes / (its best rate - w), its best rate counting the
    leaders' start-up credit and what completions can free on its leader, and start + (bytes -
    credit) / (that rate without the credit - w): its shortest copy (`alone`).

    Per broker, without an `admission` every move starts at its `start_s` and, once in sync,
    its writes still count against the quotas. So by time T the broker must have sent every byte
    plus the writes of its moves since they started, on top of the in-sync traffic it already
    serves: T >= (sum bytes - sum w'*start - credit) / (capacity - sum w') on each side, where
    a leader's w' = w - `released_bps` (a completed move's leader stops serving the replicas it
    replaces) and `leader_credit` is the most it sends beyond its steady capacity.

    Under an admission a move waits for a slot, and writes before it starts cost the quotas
    nothing (its replicas are in sync, not throttled), nor do they after it ends when the
    admission releases finished moves: the bound above, which charges every move's writes from
    its `start_s` to T, does not hold (a paced schedule beat it by 2% to 3x). What every
    schedule still pays is each move's bytes plus its writes over its shortest copy, so
    T >= (sum (bytes + w * alone) - credit) / (capacity + what completions free).
    """
    b = inp.n_brokers
    zeros = np.zeros(b)
    src, dst, w, s = inp.source, inp.dest, inp.write_bps, inp.start_s
    led = src >= 0
    out_cap, out_leader = inp.out_capacity(zeros)
    in_cap, in_follower = inp.in_capacity(zeros)
    released = inp.released_bps
    assert released is not None
    w_out = w - released
    freed = np.bincount(src[led], weights=np.maximum(-w_out[led], 0.0), minlength=b)
    if not finished_still_count(admission):
        freed = zeros  # finished moves leave the quotas' count: what they stop sending frees nothing
    credit = inp.leader_credit
    srcp = np.maximum(src, 0)
    others = np.minimum(np.minimum(np.full(len(inp), inp.fetch.partition_bps), inp.fetch.fetcher_bps), in_cap[dst])
    best = np.minimum(others, np.where(led, (out_cap + freed)[srcp], INF))
    alone = _ratio(np.maximum(inp.bytes - np.where(led, credit[srcp], 0.0), 0.0), best - w)
    if credit.any():
        flooding = np.where(inp.leader_flood > 0, 1.0, np.nan)  # a flood is not held back by its throttle
        boosted = np.minimum(others, np.where(led, (inp.out_capacity(zeros, boost=True, flood=flooding)[0] + freed)[srcp],
                                              INF))
        alone = np.maximum(alone, _ratio(inp.bytes, boosted - w))
    alone = np.where(np.isinf(best), 0.0, alone)
    if admission is None:
        work = inp.bytes - w * s
        out_work = np.bincount(src[led], weights=(inp.bytes - w_out * s)[led], minlength=b)
        out_w = np.bincount(src[led], weights=w_out[led], minlength=b)
        in_work = np.bincount(dst[led], weights=work[led], minlength=b)
        in_w = np.bincount(dst[led], weights=w[led], minlength=b)
    else:
        with np.errstate(invalid="ignore"):
            copied = inp.bytes + np.where(w > 0, w * alone, 0.0)
        out_work = np.bincount(src[led], weights=copied[led], minlength=b)
        in_work = np.bincount(dst[led], weights=copied[led], minlength=b)
        out_w = -freed
        in_w = zeros
    out_s = np.where(np.isinf(out_cap), 0.0, _ratio(np.maximum(out_work - credit, 0), out_cap - out_w))
    in_s = np.where(np.isinf(in_cap), 0.0, _ratio(np.maximum(in_work, 0), in_cap - in_w))
    move_s = np.where(led, s + alone, INF)
    candidates = [
        (float(out_s.max(initial=0.0)), "out"), (float(in_s.max(initial=0.0)), "in"),
        (float(move_s.max(initial=0.0)), "move"),
    ]
    seconds, kind = max(candidates, key=lambda c: c[0])
    broker: int | None
    if kind == "out":
        i = int(np.argmax(out_s))
        limit, broker = (Limit.LEADER_THROTTLE if out_leader[i] else Limit.NETWORK_OUT), int(inp.broker_ids[i])
    elif kind == "in":
        i = int(np.argmax(in_s))
        limit, broker = (Limit.FOLLOWER_THROTTLE if in_follower[i] else Limit.NETWORK_IN), int(inp.broker_ids[i])
    elif len(inp) and seconds > 0:
        i = int(np.argmax(move_s))
        limit, broker = _alone_limit(inp, i, out_cap, out_leader, in_cap, in_follower)
    else:
        limit, broker = Limit.UNLIMITED, None
    return LowerBound(seconds=seconds, out_s=out_s, limit=limit, broker=broker)


def _alone_limit(inp: ModelInput, i: int, out_cap: np.ndarray, out_leader: np.ndarray,
                 in_cap: np.ndarray, in_follower: np.ndarray) -> tuple[Limit, int | None]:
    """What limits move i when it runs alone."""
    src, dst = int(inp.source[i]), int(inp.dest[i])
    if src < 0:
        return Limit.NO_LEADER, None
    options = [
        (inp.fetch.partition_bps, Limit.FETCH_PARTITION, None),
        (inp.fetch.fetcher_bps, Limit.FETCH_RESPONSE, None),
        (float(out_cap[src]), Limit.LEADER_THROTTLE if out_leader[src] else Limit.NETWORK_OUT, int(inp.broker_ids[src])),
        (float(in_cap[dst]), Limit.FOLLOWER_THROTTLE if in_follower[dst] else Limit.NETWORK_IN, int(inp.broker_ids[dst])),
    ]
    _, limit, broker = min(options, key=lambda o: o[0])
    return limit, broker
