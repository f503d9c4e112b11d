"""Java's `String.hashCode`, and the order in which a Java `HashSet` hands back its elements, for
output that must match what Kafka's tool prints when it joins a set (the clearing lines of
`--verify` and `--cancel`).

Kafka collects the brokers and topics to clear with `Collectors.toSet()`: a `HashSet` with the
default capacity 16 that doubles whenever it holds more than three quarters of its capacity.
Iteration walks the buckets in index order, `(h ^ (h >>> 16)) & (capacity - 1)` of each
element's `hashCode()`, and within a bucket keeps the order of insertion (a resize splits a
bucket's list without reordering it). For ids below the capacity this is ascending order; for
strings and larger ids it is not.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` (over UTF-16 code units, 32-bit wrap-around, signed): the one
    copy for the replication model's fetcher ids and the emulator's fetchers and coordinators."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h >= 1 << 31 else h


def string_hash(text: str) -> int:
    """`String.hashCode()`, as an unsigned 32-bit value."""
    return java_string_hash(text) & _MASK


def int_hash(value: int) -> int:
    """`Integer.hashCode()` (the value itself), as an unsigned 32-bit value."""
    return value & _MASK


def _capacity(size: int) -> int:
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def hash_set_order(items: Iterable[T], hash_of: Callable[[T], int]) -> list[T]:
    """The distinct `items`, added in the given order to a `new HashSet<>()`, in its iteration order."""
    unique = list(dict.fromkeys(items))
    mask = _capacity(len(unique)) - 1

    def bucket(item: T) -> int:
        h = hash_of(item) & _MASK
        return (h ^ (h >> 16)) & mask

    order = {item: i for i, item in enumerate(unique)}
    return sorted(unique, key=lambda item: (bucket(item), order[item]))


def topic_set_order(topics: Iterable[str]) -> list[str]:
    return hash_set_order(topics, string_hash)


def broker_set_order(brokers: Iterable[int]) -> list[int]:
    return hash_set_order(brokers, int_hash)
