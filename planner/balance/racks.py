"""Rack diversity: Kafka's rule of spreading a partition's replicas over as many racks as
possible, as evenly as possible.

With K racks that still have brokers ("live" racks) and replication factor r, every live rack
holds between floor(r/K) and ceil(r/K) replicas of the partition: the replicas span min(r, K)
racks and per-rack counts differ by at most one. A partition's *deviation* is how many replicas
sit above the ceiling plus how many are missing below the floor, summed over the live racks; it
is 0 exactly when the rule holds. Replicas on racks with no live broker left count for nothing
(they must move anyway); with one live rack there is nothing to spread over. The planner never
accepts a move that raises a deviation.
"""
from __future__ import annotations

import numpy as np


def rack_limits(rf: np.ndarray, live_racks: int, on: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per partition, the least and most replicas one live rack should hold."""
    if not on or live_racks <= 0:
        width = int(rf.max()) if len(rf) else 1
        return np.zeros(len(rf), dtype=np.int64), np.full(len(rf), max(width, 1), dtype=np.int64)
    rf = rf.astype(np.int64)
    return rf // live_racks, -(-rf // live_racks)


def rack_deviation(matrix: np.ndarray, rack: np.ndarray, live: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> np.ndarray:
    """Per partition (row of broker indices, -1 padding), the deviation from even rack spread.

    Args:
        rack: rack group per broker index.
        live: per rack group, whether it still has brokers that count.
        lo, hi: per partition, `rack_limits`.
    """
    n, width = matrix.shape
    if not n or not width or live.sum() <= 1:  # one rack left: nothing to spread over
        return np.zeros(n, dtype=np.int64)
    racks = np.where(matrix >= 0, rack[np.maximum(matrix, 0)], -1)
    counted = racks >= 0
    counted[counted] = live[racks[counted]]
    racks = np.where(counted, racks, -1)
    same = (racks[:, :, None] == racks[:, None, :]) & counted[:, :, None]
    count = same.sum(axis=2)  # per slot: replicas in its rack
    earlier = np.tril(np.ones((width, width), dtype=bool), -1)
    first = counted & ~(same & earlier[None, :, :]).any(axis=2)
    over = np.where(first, np.maximum(count - hi[:, None], 0), 0).sum(axis=1)
    short = np.where(first, np.maximum(lo[:, None] - count, 0), 0).sum(axis=1)
    present = first.sum(axis=1)
    n_live = int(live.sum())
    out: np.ndarray = over + short + np.maximum(n_live - present, 0) * lo
    return out
