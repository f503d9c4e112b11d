"""Vectorised membership and uniqueness checks over ragged id arrays (replica lists).

Used by `kreassign.cluster.snapshot` to find the first bad row of millions without a Python loop
per partition; each function returns the index of the first offender, or -1.
"""
from __future__ import annotations

import numpy as np

from kreassign.cluster.snapshot_header import INT32_MAX


def is_member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each value is in `sorted_set` (a lookup table when the ids are small)."""
    if not len(sorted_set):
        return np.zeros(len(values), dtype=bool)
    top = int(sorted_set[-1])
    if sorted_set[0] >= 0 and top < 1 << 24:
        table = np.zeros(top + 1, dtype=bool)
        table[sorted_set] = True
        hit: np.ndarray = (values >= 0) & (values <= top) & table[np.clip(values, 0, top)]
        return hit
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    found: np.ndarray = sorted_set[pos] == values
    return found


# Rows of a ragged array are compared position by position while they are this narrow (any
# real replication factor); wider rows fall back to sorting (row, id) keys.
_NARROW = 16


def first_repeat(offsets: np.ndarray, ids: np.ndarray) -> int:
    """Flat index of the first id equal to an earlier id of the same row, or -1.

    The ids must lie in 0..2**31-1.
    """
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    position = np.arange(len(ids), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    if width > _NARROW:
        keys = (np.repeat(np.arange(len(lengths), dtype=np.int64), lengths) << 32) | ids
        order = np.argsort(keys, kind="stable")
        later = order[1:][keys[order][1:] == keys[order][:-1]]
        return int(later.min()) if len(later) else -1
    repeated = np.zeros(len(ids), dtype=bool)
    for k in range(1, width):
        repeated[k:] |= (ids[k:] == ids[:-k]) & (position[k:] >= k)
    hits = np.flatnonzero(repeated)
    return int(hits[0]) if len(hits) else -1


def first_missing(offsets: np.ndarray, ids: np.ndarray, rows: np.ndarray, values: np.ndarray) -> int:
    """Index `i` of the first `values[i]` that is not among the ids of row `rows[i]`, or -1.

    The ids must lie in 0..2**31-1; values may be anything.
    """
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    if width > _NARROW:
        keys = np.sort((np.repeat(np.arange(len(lengths), dtype=np.int64), lengths) << 32) | ids)
        in_range = (values >= 0) & (values <= INT32_MAX)
        found = in_range & is_member((rows << 32) | np.where(in_range, values, 0), keys)
    else:
        start, length = offsets[:-1][rows], lengths[rows]
        found = np.zeros(len(values), dtype=bool)
        last = max(len(ids) - 1, 0)
        for k in range(width):
            found |= (k < length) & (ids[np.minimum(start + k, last)] == values)
    misses = np.flatnonzero(~found)
    return int(misses[0]) if len(misses) else -1


def row_of(offsets: np.ndarray, flat_index: int) -> int:
    return int(np.searchsorted(offsets, flat_index, side="right") - 1)
