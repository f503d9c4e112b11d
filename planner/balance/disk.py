"""The byte phase of the balanced planner: every broker's bytes into its band, by moves where the
count band has room and by count-neutral swaps, then the top levelled."""
from __future__ import annotations

from dataclasses import replace

from kreassign.planner.balance.engine import TOP_SINKS, Heap, Layout

SWAP_SCAN = 32  # smallest replicas of a swap partner looked at for the one coming back
SWAP_TRIES = 4  # of those, how many are tried against the source
# The byte phase takes a replica covering at least this share of the wanted shift, without
# overshooting it, before the closest one: bytes a broker sheds below the level it aims for
# are movement that buys no balance, while a shortfall is made up by the next, smaller move.
REACH = 0.5
# Below this share of the broker's target a shift takes the closest replica: a shortfall that
# small would only be made up by more moves of tiny replicas.
MIN_SHIFT = 0.002


def balance_disk(layout: Layout, keep_counts: bool, tolerance: float) -> None:
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
    t = layout.targets
    assert t is not None
    _disk_pass(layout, keep_counts, tolerance / 2, level=False)
    layout.targets = replace(t, bytes_hi=[x * (1 + tolerance / 2) for x in t.bytes])
    _disk_pass(layout, keep_counts, tolerance / 2, level=True)

def _disk_pass(layout: Layout, keep_counts: bool, half: float, level: bool) -> None:
    """One round of `balance_disk` against the current targets' band; `half` sets how far
    inside the band a move aims. When levelling, over-loaded brokers come worst first and
    the pass stops at the first that cannot be brought down: moving bytes off the ones
    below it would not lower the plan's worst broker. A broker whose largest replica alone
    is above the level is passed over instead: it is the worst broker of any plan that puts
    that replica there, and the others are still levelled (the lower bound leaves such
    brokers out of the band's top, `metrics._beside_forced`)."""
    t = layout.targets
    assert t is not None
    stamps = [0] * layout.nb
    drivers = Heap(stamps)
    low = [Heap(stamps) for _ in range(max(layout.racks, 1))]
    high = [Heap(stamps) for _ in range(max(layout.racks, 1))]
    active = [layout.recv[b] or bool(layout.lists[b]) for b in range(layout.nb)]
    for b in range(layout.nb):
        _push_disk(layout, b, drivers, low, high, active)
    budget = 20 * layout.nb + 10 * layout.n
    while budget > 0:
        budget -= 1
        b = drivers.pop()
        if b < 0:
            return
        over = layout.bytes[b] > t.bytes_hi[b]
        partners = layout.candidate_sinks(high if not over else low, b, TOP_SINKS)
        partners += [x for x in layout.candidate_sinks(high if not over else low, b, 6 * TOP_SINKS)
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
                    want = min(layout.bytes[s] - t.bytes[s] * (1 + half), t.bytes[d] - layout.bytes[d])
                else:
                    up = t.bytes[d] * (1 - half) if floor > 1 else t.bytes_lo[d]
                    want = min(up - layout.bytes[d], layout.bytes[s] - t.bytes[s] * floor)
                if want <= 0:
                    continue
                if _disk_step(layout, s, d, want, keep_counts):
                    acted = o
                    break
            if acted >= 0:
                break
        if acted < 0:
            if level and over and not _forced(layout, b):
                return
            continue
        for x in (b, acted):
            stamps[x] += 1
            _push_disk(layout, x, drivers, low, high, active)

def _forced(layout: Layout, b: int) -> bool:
    """Is one movable replica of b alone above b's byte band?"""
    t = layout.targets
    assert t is not None
    lst = layout.lists[b]
    return bool(lst) and layout.size_by_rank[lst[-1]] > t.bytes_hi[b]

def _push_disk(layout: Layout, b: int, drivers: Heap, low: list[Heap], high: list[Heap], active: list[bool]) -> None:
    if not active[b]:
        return
    t = layout.targets
    assert t is not None
    ratio = layout.bytes[b] / max(t.bytes[b], 1.0)
    v = layout.disk_violation(b)
    if v > 0:
        drivers.push((-v / max(t.bytes[b], 1.0), layout.tb[b]), b)
    r = layout.rack[b]
    if layout.recv[b]:
        low[r].push((ratio, layout.tb[b]), b)
    if layout.lists[b]:
        high[r].push((-ratio, layout.tb[b]), b)

def _disk_step(layout: Layout, s: int, d: int, want: float, keep_counts: bool) -> bool:
    before = layout.disk_violation(s) + layout.disk_violation(d)
    if not keep_counts or layout.count_ok(s, d):
        p = layout.pick(s, d, want, under=_slack(layout, s, want))
        if p >= 0:
            z = layout.zs[p]
            if layout.disk_violation(s, -z) + layout.disk_violation(d, z) < before - 1e-9:
                layout.move(p, s, d)
                return True
    return _swap(layout, s, d, want, before)

def _slack(layout: Layout, s: int, want: float) -> float:
    """How far below `want` a byte-phase pick may fall at no cost (see REACH)."""
    t = layout.targets
    assert t is not None
    return (1 - REACH) * want if want > MIN_SHIFT * t.bytes[s] else 0.0

def _swap(layout: Layout, s: int, d: int, want: float, before: float) -> bool:
    """Swap a large replica on s for a small one on d (count-neutral), lowering the two
    brokers' band violation by about `want`.

    The small replicas of d come first (a swap moves both, so the smaller the one coming
    back the fewer bytes buy the same shift): up to SWAP_TRIES of those that may go to s,
    then up to SWAP_TRIES of those that may go only in exchange for a replica of their own
    topic. Such a swap leaves every topic count as it was, which is what lets a broker over
    a topic's cap (a topic that dominates the cluster) still trade bytes."""
    bound: list[int] = []
    tried = 0
    for r in layout.lists[d][:SWAP_SCAN]:
        q = layout.by_rank[r]
        if not layout.can_host(q, d, s, waive=layout.topic_of[q]) or not layout.affordable(q, d, s):
            continue
        if not layout.topic_check or layout.topic_fits(q, s):
            if _swap_with(layout, q, s, d, want, before, own=True):
                return True
            tried += 1
            if tried >= SWAP_TRIES:
                break
        elif len(bound) < SWAP_TRIES:
            bound.append(q)
    return any(_swap_with(layout, q, s, d, want, before, own=False) for q in bound)

def _swap_with(layout: Layout, q: int, s: int, d: int, want: float, before: float, own: bool) -> bool:
    t = layout.topic_of[q]
    p = layout.pick(s, d, want + layout.zs[q], waive=t, only=-1 if own else t,
                  under=_slack(layout, s, want))
    if p < 0 or p == q:
        return False
    net = layout.zs[p] - layout.zs[q]
    if layout.disk_violation(s, -net) + layout.disk_violation(d, net) >= before - 1e-9:
        return False
    layout.move(p, s, d)
    if not (layout.can_host(q, d, s, waive=t if layout.topic_of[p] == t else -1) and layout.affordable(q, d, s)):
        layout.move(p, d, s)
        return False
    layout.move(q, d, s)
    return True
