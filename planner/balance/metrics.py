"""Balance metrics of an assignment and lower bounds on the movement a balance needs.

Both work on dense replica matrices (partition x slot, broker index, -1 padding) so they cost a
few `np.bincount`s even at millions of replicas. Leaders are preferred leaders: first replicas.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kreassign.planner.balance.arrays import by_broker_then_size
from kreassign.planner.balance.racks import rack_deviation
from kreassign.planner.balance.values import BalanceMetrics, BrokerLoad, LowerBounds, Spread


@dataclass(frozen=True)
class MetricContext:
    """What the metrics need to know about brokers, targets and constraints."""

    broker_ids: np.ndarray  # dense index -> broker id (ghost brokers included)
    rack_names: tuple[str | None, ...]  # per dense index
    rack: np.ndarray  # rack group per dense index
    real: np.ndarray  # bool: a broker of the cluster (not a ghost id from a replica list)
    balanced: np.ndarray  # bool: takes part in balancing (real, not removed, not excluded)
    byte_target: np.ndarray  # per dense index
    count_lo: np.ndarray
    count_hi: np.ndarray
    rack_lo: np.ndarray  # per partition: least replicas a live rack should hold
    rack_cap: np.ndarray  # per partition: most replicas one rack may hold
    live_rack: np.ndarray  # per rack group: still has brokers after the plan
    rack_on: bool
    topic: np.ndarray  # topic index per partition
    topic_cap: np.ndarray  # topic x rack: most replicas of the topic per broker in that rack
    topic_on: bool
    size: np.ndarray
    produce_bps: np.ndarray


def _spread(values: np.ndarray) -> Spread:
    if not len(values):
        return Spread(0.0, 0.0, 0.0, 0.0)
    v = values.astype(np.float64)
    return Spread(float(v.min()), float(v.max()), float(v.mean()), float(v.std()))


def per_broker(matrix: np.ndarray, ctx: MetricContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Replicas, leaders, bytes and produce bytes/s led, per dense broker index."""
    nb = len(ctx.broker_ids)
    n, width = matrix.shape
    flat = matrix.ravel()
    keep = flat >= 0
    part = np.repeat(np.arange(n), width)[keep]
    replicas = np.bincount(flat[keep], minlength=nb)
    size = np.bincount(flat[keep], weights=ctx.size[part].astype(np.float64), minlength=nb)
    lead = matrix[:, 0] if width else np.zeros(0, dtype=np.int64)
    has = lead >= 0
    leaders = np.bincount(lead[has], minlength=nb)
    bps = np.bincount(lead[has], weights=ctx.produce_bps[has], minlength=nb)
    return replicas, leaders, np.rint(size).astype(np.int64), bps


def rack_violations(matrix: np.ndarray, ctx: MetricContext) -> int:
    """Partitions whose replicas do not spread over the live racks as evenly as possible
    (min(RF, racks) racks, per-rack counts within one of each other)."""
    if not ctx.rack_on or not matrix.size:
        return 0
    dev = rack_deviation(matrix, ctx.rack, ctx.live_rack, ctx.rack_lo, ctx.rack_cap)
    return int((dev > 0).sum())


def topic_excess(matrix: np.ndarray, ctx: MetricContext) -> int:
    """Replicas above each topic's even share per broker, summed over topics and brokers."""
    if not ctx.topic_on or not matrix.size:
        return 0
    n, width = matrix.shape
    flat = matrix.ravel()
    keep = flat >= 0
    part = np.repeat(np.arange(n), width)[keep]
    nb = len(ctx.broker_ids)
    keys = ctx.topic[part].astype(np.int64) * nb + flat[keep]
    uniq, counts = np.unique(keys, return_counts=True)
    t, b = uniq // nb, uniq % nb
    cap = ctx.topic_cap[t, ctx.rack[b]]
    return int(np.maximum(counts - cap, 0)[ctx.balanced[b]].sum())


def metrics(matrix: np.ndarray, ctx: MetricContext) -> BalanceMetrics:
    """Balance of `matrix` over the brokers that take part in balancing."""
    replicas, leaders, size, bps = per_broker(matrix, ctx)
    loads = tuple(
        BrokerLoad(int(ctx.broker_ids[i]), ctx.rack_names[i], int(replicas[i]), int(leaders[i]),
                   int(size[i]), float(bps[i]))
        for i in np.flatnonzero(ctx.real)
    )
    m = ctx.balanced
    target = ctx.byte_target[m]
    ratio = size[m] / np.maximum(target, 1.0)
    real_target = target > 0
    allowed = int(ctx.count_hi[m].max() - ctx.count_lo[m].min()) if m.any() else 0
    return BalanceMetrics(
        brokers=loads, replicas=_spread(replicas[m]), leaders=_spread(leaders[m]),
        bytes=_spread(size[m]), leader_bps=_spread(bps[m]),
        bytes_over_target=float(ratio[real_target].max()) if real_target.any() else 0.0,
        bytes_under_target=float(ratio[real_target].min()) if real_target.any() else 0.0,
        replica_spread_allowed=allowed,
        rack_violations=rack_violations(matrix, ctx), topic_excess=topic_excess(matrix, ctx),
    )


def lower_bounds(
    before: np.ndarray,
    after: np.ndarray,
    movable: np.ndarray,
    ctx: MetricContext,
) -> LowerBounds:
    """Least replica moves and bytes that reach the same balance as `after` from `before`.

    Per broker, "the same balance" means a replica count between the min and max the plan
    leaves in the broker's rack, and bytes between the min and max after/target ratio the plan
    reaches. Every moved replica leaves one broker and enters another, so both the total that
    must leave over-loaded brokers and the total that must enter under-loaded ones bound the
    movement; a broker that must shed k replicas sheds at least its k smallest movable ones;
    brokers that take the replicas of emptied brokers shed what exceeds their room
    (`_overflow`); brokers forced above the others by one large replica do not set the band
    top for the rest (`_forced_top`).
    """
    nb = len(ctx.broker_ids)
    c0, _, b0, _ = per_broker(before, ctx)
    c1, _, b1, _ = per_broker(after, ctx)
    m = ctx.balanced
    racks = ctx.rack
    g = int(racks.max()) + 1 if nb else 0
    hi_c = c1.astype(np.int64).copy()
    lo_c = c1.astype(np.int64).copy()
    if m.any():
        rack_max = np.zeros(g, dtype=np.int64)
        np.maximum.at(rack_max, racks[m], c1[m])
        rack_min = np.full(g, np.iinfo(np.int64).max)
        np.minimum.at(rack_min, racks[m], c1[m])
        hi_c[m] = rack_max[racks[m]]
        lo_c[m] = rack_min[racks[m]]
    target = ctx.byte_target.astype(np.float64)
    pos = m & (target > 0)
    ratio = b1[pos] / target[pos]
    r_hi = float(ratio.max()) if len(ratio) else 1.0
    r_lo = float(ratio.min()) if len(ratio) else 1.0
    cap_bytes = np.where(pos, r_hi * target, b1.astype(np.float64))
    floor_bytes = np.where(pos, r_lo * target, 0.0)

    rf0 = (before >= 0).sum(axis=1)
    rf1 = (after >= 0).sum(axis=1)
    added = np.maximum(rf1 - rf0, 0)
    dropped = int(np.maximum(rf0 - rf1, 0).sum())
    add_bytes = float((added * ctx.size).sum())

    shed = np.maximum(c0 - hi_c, 0)
    out_count = max(int(shed.sum()) - dropped, 0)
    in_count = int(np.maximum(lo_c - c0, 0)[m].sum())
    moves = max(out_count, in_count, int(added.sum()))

    in_bytes = float(np.maximum(floor_bytes - b0, 0.0)[m].sum())
    out_bytes = 0.0
    if dropped == 0:
        by_bytes = np.maximum(b0 - cap_bytes, 0.0)
        by_count = _smallest_k(before, movable, ctx.size, shed, nb)
        out_bytes = float(np.maximum(by_bytes, by_count).sum())
        room = np.maximum(cap_bytes - b0, 0.0)
        emptied = (b1 == 0) & (b0 > 0)
        out_bytes = max(out_bytes, float(by_bytes.sum()) + _overflow(before, movable, ctx.size, emptied, room))
        top, exempt, big = _forced_top(after, ctx.size, b1, target, pos)
        if exempt:
            # The same two terms with the band top at r' (see `_forced_top`), where up to
            # `exempt` brokers keep the plan's max ratio as theirs: they shed only their count
            # term, or only the bytes above the max. Their rooms reach up to the max, less the
            # large replica that makes them exempt unless they hold one already (or it is one
            # of the replicas leaving emptied brokers, which the rooms are for).
            cap_top = np.where(pos, top * target, b1)
            by_top = np.maximum(b0 - cap_top, 0.0)
            need = np.maximum(by_top, by_count)
            room_top = np.maximum(cap_top - b0, 0.0)
            holds = np.zeros(nb, dtype=bool)
            holds[before[big][before[big] >= 0]] = True
            least = top * float(target[pos].min())  # a large replica is bigger than this
            # An exempt broker that held no large replica received one: it sheds what that
            # takes it above the max.
            keeps = np.maximum(by_count, np.where(holds, by_bytes, np.maximum(b0 + least - cap_bytes, 0.0)))
            if (emptied[before[big][before[big] >= 0]]).any():
                holds[:] = True
            lift = np.where(holds, room, np.maximum(cap_bytes - b0 - least, 0.0)) - room_top
            out_bytes = max(
                out_bytes, float(need.sum() - _largest(need - np.minimum(keeps, need), exempt)),
                float(by_top.sum() - _largest(by_top - by_bytes, exempt))
                + _overflow(before, movable, ctx.size, emptied, room_top, lift=_largest_each(lift, exempt)))
    return LowerBounds(replica_moves=moves, bytes_moved=int(max(out_bytes, in_bytes, add_bytes)))


def _forced_top(after: np.ndarray, size: np.ndarray, b1: np.ndarray, target: np.ndarray,
                pos: np.ndarray) -> tuple[float, int, np.ndarray]:
    """A band top r' below the plan's max ratio, and how many brokers any layout may have above it.

    With heavy-tailed sizes one replica can be larger than a broker's share; the plan's max
    ratio is then that replica's broker while the others end far lower, and a band top at
    that max would let them all stay that high. Walking down the after-plan ratios, a broker is
    forced while its largest replica alone is above the next broker's ratio times its own
    share; the first broker that is not sets r'. "The same balance" then also asks every
    broker to be within r' of its share unless it holds a replica larger than that, which at
    most as many brokers can as there are replicas larger than r' times the smallest share.
    Returns (r', that many, which partitions are that large); no broker forced: (max ratio, 0, none).
    """
    ratio = np.where(pos, b1 / np.maximum(target, 1.0), -np.inf)
    order = np.argsort(-ratio, kind="stable")[:int(pos.sum())]
    if len(order) < 2:
        return 0.0, 0, np.zeros(len(size), dtype=bool)
    valid = after >= 0
    largest = np.zeros(len(b1))
    np.maximum.at(largest, after[valid], np.broadcast_to(size[:, None], after.shape)[valid].astype(np.float64))
    k = 0
    while k + 1 < len(order) and largest[order[k]] > ratio[order[k + 1]] * target[order[k]]:
        k += 1
    top = float(ratio[order[k]])
    big = size > top * float(target[pos].min())
    if k == 0:
        return top, 0, np.zeros(len(size), dtype=bool)
    return top, int(valid[big].sum()), big


def _largest_each(values: np.ndarray, k: int) -> np.ndarray:
    """The k largest values, largest first."""
    out: np.ndarray = np.sort(values)[::-1][:k]
    return out


def _largest(values: np.ndarray, k: int) -> float:
    """Sum of the k largest values."""
    return float(_largest_each(values, k).sum())


def _overflow(matrix: np.ndarray, movable: np.ndarray, size: np.ndarray, emptied: np.ndarray,
              room: np.ndarray, lift: np.ndarray | None = None) -> float:
    """Bytes that brokers receiving the replicas of emptied brokers must shed of their own.

    A broker d ends at most `room[d]` above where it started, so whatever lands on it beyond
    that room pushes out as many bytes of its own replicas: out_d >= (b0_d - cap_d)+ +
    (in_d - room_d)+. The j largest replicas that must leave land on at most j brokers, which
    together have at most the j largest rooms, so for every j the brokers they land on shed at
    least (sum of the j largest replicas - sum of the j largest rooms). A replica bigger than
    any broker's room (heavy-tailed sizes) is movement no other term of the bound sees.
    `lift`: extra room some brokers may have (largest first), at most one each.
    """
    leaving = (matrix >= 0) & movable & emptied[np.maximum(matrix, 0)]
    z = np.sort(np.broadcast_to(size[:, None], matrix.shape)[leaving].astype(np.float64))[::-1]
    if not len(z):
        return 0.0
    rooms = np.sort(room)[::-1]
    j = min(len(z), len(rooms))
    reach = np.cumsum(rooms[:j])
    if lift is not None and len(lift):
        up = np.cumsum(np.maximum(lift, 0.0))
        reach += up[np.minimum(np.arange(j), len(up) - 1)]
    excess = np.cumsum(z[:j]) - reach
    return float(max(excess.max(), 0.0))


def _smallest_k(matrix: np.ndarray, movable: np.ndarray, size: np.ndarray, k: np.ndarray, nb: int) -> np.ndarray:
    """Per broker, the total size of its k smallest movable replicas."""
    part, brk = by_broker_then_size(matrix, movable & (matrix >= 0), np.argsort(size, kind="stable"), nb)
    z = size[part].astype(np.float64)
    start = np.searchsorted(brk, np.arange(nb + 1))
    csum = np.concatenate([[0.0], np.cumsum(z)])
    have = start[1:] - start[:-1]
    take = np.minimum(k, have)
    out: np.ndarray = csum[start[:-1] + take] - csum[start[:-1]]
    return out
