"""Repairs of the balanced planner: what must move before any balancing (replicas of removed
brokers, new replicas of a raised replication factor, partitions off the rack rule), and why a
replica found no broker when it cannot be placed."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kreassign.cluster.model import ClusterState
from kreassign.planner.balance.engine import Layout
from kreassign.planner.balance.place import place
from kreassign.planner.balance.racks import rack_deviation
from kreassign.planner.balance.values import BalanceOptions


def repair(layout: Layout, state: ClusterState, F0: np.ndarray, movable: np.ndarray,
            rf_changes: Mapping[int, int], is_removed: np.ndarray, direct: tuple[int, int] | None,
            id_pos: Mapping[int, int], options: BalanceOptions, warnings: list[str],
            everywhere: bool, defer_removed: bool, bytes_first: bool) -> list[tuple[int, int]]:
    """Place what must move (replicas of removed brokers unless `defer_removed`, new replicas
    of set-rf, rack fixes); returns the (partition, broker) items that found no broker."""
    items: list[tuple[int, int]] = []
    on_removed = movable & is_removed[np.maximum(F0, 0)] & (F0 >= 0)
    stuck = (F0 >= 0) & ~movable & is_removed[np.maximum(F0, 0)]
    if stuck.any():
        warnings.append(f"{int(stuck.sum())} replica(s) on removed brokers belong to excluded topics, "
                        "pinned replicas or running reassignments and stay where they are")
    if direct is not None:
        old, new = id_pos[direct[0]], id_pos[direct[1]]
        for p in np.flatnonzero(on_removed.any(axis=1)).tolist():
            for s in F0[p][on_removed[p]].tolist():
                if s == old and layout.can_host(p, s, new) and layout.affordable(p, s, new):
                    layout.move(p, s, new)
                else:
                    items.append((p, s))
    elif not defer_removed:
        rr, cc = np.nonzero(on_removed)
        items.extend(zip(rr.tolist(), F0[rr, cc].tolist()))
    for p, want in sorted(rf_changes.items()):
        have = len(layout.rows[p])
        if want > have:
            items.extend((p, -1) for _ in range(want - have))
        elif want < have:
            _shrink(layout, p, have - want)
    if layout.rack_on:
        fixes = _rack_fixes(layout, F0, is_removed)
        if not everywhere:
            # Targeted commands repair rack awareness only in the partitions they touch.
            touched = set(rf_changes) | set(np.flatnonzero(on_removed.any(axis=1)).tolist())
            fixes = [(p, s) for p, s in fixes if p in touched]
        items.extend(fixes)
    # Largest first onto the broker furthest below its byte share keeps bytes even when a
    # broker's replicas must all go somewhere; otherwise the goal order decides.
    count_goal = not bytes_first and (options.before("replicas", "disk") or not options.has("disk"))
    fixes = set(layout.fixing)
    # A rack fix that finds no broker leaves the partition as it was (it is counted as a
    # violation); only replicas that must move make the plan impossible.
    return [it for it in place(layout, items, count_goal) if it not in fixes]


SHOWN = 5  # partitions named per constraint in an infeasible-plan message


def unplaced(layout: Layout, state: ClusterState, failed: list[tuple[int, int]]) -> str:
    """Which replicas found no broker, grouped by the constraint that stopped them."""
    by_reason: dict[str, list[int]] = {}
    for p, s in failed:
        by_reason.setdefault(_blocker(layout, p, s), []).append(p)
    parts = []
    for reason, rows in by_reason.items():
        uniq = sorted(set(rows))
        names = ", ".join(f"{state.topic_of(r)}-{int(state.partition[r])}" for r in uniq[:SHOWN])
        more = f" and {len(uniq) - SHOWN} more" if len(uniq) > SHOWN else ""
        parts.append(f"{len(rows)} replica(s) of {len(uniq)} partition(s) ({names}{more}) have no "
                     f"broker: {reason}")
    return "; ".join(parts)


def _blocker(layout: Layout, p: int, s: int) -> str:
    """The first hard constraint, in the order they are checked, that no broker satisfies."""
    recv = [d for d in range(layout.nb) if layout.recv[d]]
    free = [d for d in recv if d not in layout.rows[p]]
    if not free:
        rf = len(layout.rows[p]) + (1 if s < 0 else 0)
        return f"replication factor {rf} is larger than the {len(recv)} broker(s) that may hold it"
    if layout.rack_on:
        free = [d for d in free if layout.rack_fits(p, s, d)]
        if not free:
            return "rack diversity (replicas over min(RF, racks) racks, per-rack counts within one)"
    if not any(layout.bytes[d] + layout.zs[p] <= layout.disk_cap[d] for d in free):
        return "disk headroom (--disk-headroom of the brokers' capacity must stay free)"
    return "the move budget (--max-moves / --max-bytes)"


def left_on(layout: Layout, is_removed: np.ndarray) -> list[tuple[int, int]]:
    """Movable replicas still on removed brokers, as (partition, broker) items."""
    return [(layout.by_rank[r], b) for b in np.flatnonzero(is_removed).tolist() for r in layout.lists[b]]


def _shrink(layout: Layout, p: int, k: int) -> None:
    """Drop k replicas of partition p: from the most crowded rack, the most loaded broker, and
    the preferred leader only as a last resort."""
    t = layout.targets
    assert t is not None
    for _ in range(k):
        row = layout.rows[p]
        free = [b for b in row if layout.lists_contains(p, b)]
        cands = [b for b in free if b != row[0]] or free
        if not cands:
            return
        per_rack: dict[int, int] = {}
        for b in row:
            per_rack[layout.rack[b]] = per_rack.get(layout.rack[b], 0) + 1
        s = max(cands, key=lambda b: (per_rack[layout.rack[b]], layout.count[b] - t.count[b], -layout.tb[b]))
        layout.drop_replica(p, s)


def _rack_fixes(layout: Layout, F0: np.ndarray, is_removed: np.ndarray) -> list[tuple[int, int]]:
    """Replicas to move so that partitions spread over their racks as evenly as possible.

    Only partitions off the rule in the original assignment can be off it now: every edit made
    before this point (replacements, drops) is rack-checked. Such partitions lose the same-rack
    shortcut in `Layout.rack_fits`, so their other moves are fully checked too. From each one,
    the replicas above a rack's ceiling move, and as many more from the fullest racks as other
    live racks are below their floor; each such move must lower the partition's deviation.
    """
    t = layout.targets
    assert t is not None
    live = np.asarray(layout.live_rack, dtype=bool)
    dev = rack_deviation(F0, np.asarray(layout.rack, dtype=np.int64), live, layout.rack_lo_np,
                         layout.rack_cap_np)
    crowded = np.flatnonzero(dev > 0)
    # Replicas on removed brokers move anyway, but until then they count for their rack.
    layout.crowded = set(crowded.tolist())
    n_live = int(live.sum())
    out: list[tuple[int, int]] = []
    for p in crowded.tolist():
        lo, hi = layout.rack_lo[p], layout.rack_cap[p]
        per_rack: dict[int, list[int]] = {}
        for b in layout.rows[p]:
            if not is_removed[b]:
                per_rack.setdefault(layout.rack[b], []).append(b)
        short = sum(max(lo - len(m), 0) for r, m in per_rack.items() if live[r]) \
            + lo * (n_live - sum(1 for r in per_rack if live[r]))
        picked: list[int] = []
        for members in sorted(per_rack.values(), key=len, reverse=True):
            free = [b for b in members if layout.lists_contains(p, b)]
            free.sort(key=lambda b: (-(layout.count[b] - t.count[b]), layout.tb[b]))
            over = max(len(members) - hi, 0)
            spare = max(len(members) - max(lo, 1), 0) - over
            extra = min(max(short - len(picked) - over, 0), spare) if short else 0
            picked.extend(free[:over + extra])
        out.extend((p, b) for b in picked)
    layout.fixing = set(out)
    return out
