"""Topic specs (`orders:12:3[:SIZE[:RATE]]`), the demo default set, seeded sizes and write rates,
and a rack-aware initial assignment in the style of Kafka's `assignReplicasToBrokers`."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kreassign.cluster.errors import InputError, clip
from kreassign.cluster.units import parse_bytes, parse_rate

MB = 1_000_000
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})
"""Kafka's internal topics (Metadata marks them is_internal)"""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create at start-up; sizes and rates are per-partition medians (lognormal)."""

    name: str
    partitions: int
    replication_factor: int = 3
    median_size_bytes: int = 80 * MB
    median_produce_bps: float = 50_000.0
    size_sigma: float = 0.9

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > 249 or not all(c.isalnum() or c in "._-" for c in self.name):
            raise InputError(f"'{clip(self.name)}' is not a valid topic name: use letters, digits, '.', '_' and '-'"
                             " (at most 249)")
        if self.partitions < 1:
            raise InputError(f"topic {self.name}: the partition count must be at least 1")
        if self.replication_factor < 1:
            raise InputError(f"topic {self.name}: the replication factor must be at least 1")
        if self.median_size_bytes < 0 or self.median_produce_bps < 0:
            raise InputError(f"topic {self.name}: sizes and rates must not be negative")


DEFAULT_TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec("orders", 12, 3, 120 * MB, 80_000.0),
    TopicSpec("payments", 8, 3, 60 * MB, 30_000.0),
    TopicSpec("clickstream", 16, 3, 200 * MB, 150_000.0),
    TopicSpec("inventory", 8, 2, 40 * MB, 20_000.0),
    TopicSpec("audit-log", 6, 3, 90 * MB, 10_000.0),
)


def parse_topic_spec(text: str) -> TopicSpec:
    """Parse `name:partitions:rf[:median_size[:median_rate]]`, e.g. `orders:12:3:200MB:1MB/s`.

    Raises:
        InputError: the spec has the wrong shape or a field does not parse.
    """
    parts = text.strip().split(":")
    if not 3 <= len(parts) <= 5:
        raise InputError(f"'{text}' is not a topic spec: use name:partitions:rf[:size[:rate]], e.g. orders:12:3")
    try:
        partitions, rf = int(parts[1]), int(parts[2])
    except ValueError:
        raise InputError(f"'{text}': partitions and replication factor must be integers") from None
    size = parse_bytes(parts[3]) if len(parts) > 3 else 80 * MB
    rate = float(parse_rate(parts[4])) if len(parts) > 4 else 50_000.0  # 0 (a quiet topic) is a rate
    return TopicSpec(parts[0], partitions, rf, size, rate)


def partition_loads(spec: TopicSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Heavy-tailed sizes and write rates for a topic's partitions; rate follows size (hot is big)."""
    z = rng.normal(0.0, spec.size_sigma, spec.partitions)
    sizes = np.round(spec.median_size_bytes * np.exp(z)).astype(np.int64)
    rates = spec.median_produce_bps * np.exp(0.7 * z + rng.normal(0.0, 0.3, spec.partitions))
    return sizes, np.round(rates, 1)


def check_shape(brokers: int, racks: int, log_dirs: int) -> None:
    """Raises InputError for a cluster shape no engine can start."""
    if brokers < 1:
        raise InputError("a sandbox needs at least one broker")
    if log_dirs < 1:
        raise InputError("each broker needs at least one log dir")
    if racks < 0:
        raise InputError("the number of racks must not be negative")


def rack_names(brokers: int, racks: int) -> dict[int, str | None]:
    """Broker ids 1..N spread over racks rack-1..rack-R in turn (no racks when R is 0)."""
    return {b: (f"rack-{(b - 1) % racks + 1}" if racks > 0 else None) for b in range(1, brokers + 1)}


def rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids ordered rack by rack in turn (Kafka's `getRackAlternatedBrokerList`)."""
    by_rack: dict[str, list[int]] = {}
    for bid in sorted(brokers):
        by_rack.setdefault(brokers[bid] or "", []).append(bid)
    racks = sorted(by_rack)
    out: list[int] = []
    for i in range(max((len(v) for v in by_rack.values()), default=0)):
        out.extend(by_rack[r][i] for r in racks if i < len(by_rack[r]))
    return out


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, rf: int,
                    rng: np.random.Generator, start_partition: int = 0) -> list[list[int]]:
    """Kafka-style assignment: random start, round-robin leaders, shifted followers.

    Raises:
        InputError: rf is larger than the number of brokers.
    """
    order = rack_alternated(brokers)
    n = len(order)
    if rf > n:
        raise InputError(f"replication factor {rf} is larger than the {n} available brokers")
    start = int(rng.integers(n))
    shift = int(rng.integers(n))
    out = []
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [order[first]]
        for j in range(rf - 1):
            step = 1 + (shift + j) % (n - 1) if n > 1 else 0
            replicas.append(order[(first + step) % n])
        out.append(replicas)
    return out


def spec_names_unique(specs: Sequence[TopicSpec]) -> None:
    """Raises InputError if two specs name the same topic."""
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise InputError(f"topic {s.name} is given more than once")
        seen.add(s.name)
