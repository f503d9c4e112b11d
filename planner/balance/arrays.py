"""Array helpers shared by the balanced planner's modules."""
from __future__ import annotations

import numpy as np


def stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` for small non-negative integer keys (< n_keys), which
    numpy sorts in linear time when they fit 16 bits."""
    small = keys.astype(np.uint16) if n_keys <= 1 << 16 else keys
    out: np.ndarray = np.argsort(small, kind="stable")
    return out


def by_broker_then_size(matrix: np.ndarray, mask: np.ndarray, size_order: np.ndarray,
                        brokers: int) -> tuple[np.ndarray, np.ndarray]:
    """The (partition, broker) slots of `matrix` where `mask` holds, ordered by broker and,
    within a broker, by the partition's place in `size_order` (partitions, smallest first).

    Returns:
        partition and broker index of each slot, in that order.
    """
    width = matrix.shape[1]
    slots = matrix[size_order].ravel()
    keep = mask[size_order].ravel()
    part = np.repeat(size_order, width)[keep]
    brk = slots[keep]
    order = stable_order(brk, brokers)
    return part[order], brk[order]
