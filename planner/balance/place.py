"""The placing phase of the balanced planner: replicas that must move (off removed brokers, off
racks the rule forbids, new replicas of a raised replication factor) go to the best sinks,
largest first."""
from __future__ import annotations

from kreassign.planner.balance.engine import TOP_SINKS, Heap, Layout

DEEP_SINKS = 192  # most sinks per rack `place` takes from its heaps before sorting every broker


def place(layout: Layout, items: list[tuple[int, int]], count_goal: bool) -> list[tuple[int, int]]:
    """Move (p, s) replicas (s = -1: add a new replica) to the best sinks, largest first.

    Returns the items that could not be placed.
    """
    stamps = [0] * layout.nb
    heaps = [Heap(stamps) for _ in range(max(layout.racks, 1))]
    for b in range(layout.nb):
        if layout.recv[b]:
            heaps[layout.rack[b]].push(_key_for_place(layout, b, count_goal), b)
    failed: list[tuple[int, int]] = []
    # (topic, rack or -1 for all) at its cap on every receiver there: skip the capped search.
    full: set[tuple[int, int]] = set()
    items = sorted(items, key=lambda it: (-layout.zs[it[0]], it[0], it[1]))
    for p, s in items:
        d = -1
        if p in layout.crowded:
            # A replica of a partition off the rack rule goes where it brings the partition
            # closest to the rule (the topic cap ranks below), if there is such a broker.
            fix = (p, s) in layout.fixing
            layout.fixing.add((p, s))
            layout.topic_check = False
            d = _first_host(layout, p, s, _by_rack_gain(layout, p, s, count_goal))
            layout.topic_check = layout.topic_on
            if not fix:
                layout.fixing.discard((p, s))
        t = layout.topic_of[p]
        where = (t, layout.rack[s] if layout.rack_locked and s >= 0 else -1)
        # The best sinks of each rack (of s's rack only when racks are locked), then more.
        depth = TOP_SINKS
        while d < 0 and depth <= DEEP_SINKS:
            d = _first_host(layout, p, s, layout.candidate_sinks(heaps, s, depth))
            depth *= 8
        if d < 0 and where not in full:
            if layout.topic_on and _topic_full(layout, *where):
                full.add(where)
            else:
                d = _first_host(layout, p, s, _all_sinks(layout, count_goal))
        if d < 0 and layout.topic_on:
            # These moves are mandatory; the topic cap ranks below them.
            layout.topic_check = False
            d = _first_host(layout, p, s, _all_sinks(layout, count_goal))
            layout.topic_check = True
        layout.fixing.discard((p, s))
        if d < 0:
            failed.append((p, s))
            continue
        if s >= 0:
            layout.move(p, s, d)
            stamps[s] += 1
            if layout.recv[s]:
                heaps[layout.rack[s]].push(_key_for_place(layout, s, count_goal), s)
                full.discard((t, layout.rack[s]))  # a receiver lost one of the topic's replicas
                full.discard((t, -1))
        else:
            layout.add_replica(p, d)
        stamps[d] += 1
        heaps[layout.rack[d]].push(_key_for_place(layout, d, count_goal), d)
    return failed

def _key_for_place(layout: Layout, b: int, count_goal: bool) -> tuple[float, ...]:
    key = layout.sink_key(b)
    return key if count_goal else (key[1], key[0], key[2])

def _topic_full(layout: Layout, t: int, rack: int) -> bool:
    """Does every receiver (in `rack`, or anywhere if -1) hold as many of topic t's replicas
    as its cap allows?"""
    caps = layout.topic_cap_list[t]
    get = layout.tcounts.get
    return all(get(t, b) >= caps[layout.rack[b]] for b in range(layout.nb)
               if layout.recv[b] and (rack < 0 or layout.rack[b] == rack))

def _by_rack_gain(layout: Layout, p: int, s: int, count_goal: bool) -> list[int]:
    """Every sink, those that bring p closest to the rack rule first (then by load)."""
    return sorted(_all_sinks(layout, count_goal), key=lambda d: layout.deviation_change(p, s, d))

def _first_host(layout: Layout, p: int, s: int, sinks: list[int]) -> int:
    for d in sinks:
        if layout.can_host(p, s, d) and layout.affordable(p, s, d):
            return d
    return -1

def _all_sinks(layout: Layout, count_goal: bool) -> list[int]:
    keyed = sorted((_key_for_place(layout, b, count_goal), b) for b in range(layout.nb) if layout.recv[b])
    return [b for _, b in keyed]
