"""Warnings about limits no plan can lift, each naming what to change.

Rack diversity puts floor(RF/K)..ceil(RF/K) of every partition's replicas in each of the K
racks, so a rack with few brokers holds a fixed share of the data over few disks (a hotspot
whatever the planner does), and a topic's replicas there cannot be spread as thinly as on the
other racks. Disk capacities, when brokers report them, bound what a broker may hold.
"""
from __future__ import annotations

import numpy as np

from kreassign.planner.balance.targets import rack_bounds

SHOWN = 5  # names listed per warning
HOTSPOT = 0.05  # a rack forcing its brokers this far above the mean bytes is worth a warning
MARGIN = 0.10  # a topic forced this far above its even share per broker (and by 2+) likewise


def _names(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def rack_label(names: tuple[str | None, ...], ids: np.ndarray, members: np.ndarray) -> str:
    """A rack group's name; a broker without a rack is a rack of its own."""
    first = int(members[0])
    name = names[first]
    return f"rack {name}" if name is not None else f"broker {int(ids[first])} (no rack)"


def rack_hotspots(size: np.ndarray, rf: np.ndarray, live_racks: int, rack: np.ndarray,
                  balanced: np.ndarray, names: tuple[str | None, ...], ids: np.ndarray,
                  tolerance: float) -> list[str]:
    """Racks whose brokers must hold more than 1 + max(tolerance, HOTSPOT) times the mean bytes
    per broker because rack diversity fixes the rack's share of every partition."""
    n_bal = int(balanced.sum())
    total = float((rf * size.astype(np.float64)).sum())
    if live_racks <= 1 or not n_bal or total <= 0:
        return []
    least, _ = rack_bounds(size.astype(np.float64), rf, live_racks)
    mean = total / n_bal
    out = []
    for g in np.unique(rack[balanced]).tolist():
        members = np.flatnonzero(balanced & (rack == g))
        ratio = least / len(members) / mean
        if ratio > 1 + max(tolerance, HOTSPOT):
            out.append(f"{rack_label(names, ids, members)} has {len(members)} broker(s) but rack "
                       f"diversity puts at least {least / total:.0%} of the data on it: its brokers "
                       f"hold {ratio:.2f}x the mean bytes per broker; add brokers to that rack "
                       "(or drop the rack goal)")
    return out


def topic_rack_limits(topic_cap: np.ndarray, even_cap: np.ndarray, topics: tuple[str, ...],
                      rack: np.ndarray, balanced: np.ndarray, names: tuple[str | None, ...],
                      ids: np.ndarray) -> list[str]:
    """Topics whose replicas rack diversity concentrates on a small rack's brokers beyond the
    topic's even share per broker (by more than MARGIN and one replica, so rounding is quiet)."""
    racks = np.unique(rack[balanced])
    if not len(racks) or not len(topics):
        return []
    forced = topic_cap[:, racks] > even_cap[:, None] * (1 + MARGIN) + 1
    hit = np.flatnonzero(forced.any(axis=1))
    if not len(hit):
        return []
    worst = racks[np.argmax(topic_cap[hit][:, racks], axis=1)]
    items = [f"{topics[t]} ({rack_label(names, ids, np.flatnonzero(balanced & (rack == g)))}: up to "
             f"{int(topic_cap[t, g])} per broker, even share {int(even_cap[t])})"
             for t, g in zip(hit.tolist(), worst.tolist())]
    return [f"{len(hit)} topic(s) cannot be balanced within their racks, as rack diversity puts "
            f"more of their replicas on a small rack's brokers: {_names(items)}"]


def over_capacity(bytes_after: np.ndarray, disk: np.ndarray, headroom: float, ids: np.ndarray,
                  balanced: np.ndarray) -> list[str]:
    """Brokers that report a disk capacity and hold more than its usable part after the plan."""
    usable = disk * (1.0 - headroom)
    over = np.flatnonzero(balanced & ~np.isnan(disk) & (bytes_after > usable))
    if not len(over):
        return []
    items = [f"{int(ids[b])} ({bytes_after[b] / max(usable[b], 1.0):.2f}x)" for b in over.tolist()]
    what = "disk capacity" if headroom == 0 else f"disk capacity less {headroom:.0%} headroom"
    return [f"{len(over)} broker(s) hold more than their {what} after the plan: {_names(items)}"]
