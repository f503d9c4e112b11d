"""Kafka's follower fetch limits and cadence (broker-semantics Part B §2.6).

A follower replicates from each leader through `num.replica.fetchers` fetcher threads; a
partition belongs to thread `abs(31 * topic.hashCode() + partition) % n`. Each thread runs
synchronous fetches (`AbstractFetcherThread.maybeFetch`), and a fetch carries at most
`replica.fetch.max.bytes` per partition and `replica.fetch.response.max.bytes` in all, shared
among the thread's partitions (Kafka serves them in a rotating order; the engine shares each
fetch max-min fairly, the fluid form of that rotation).

Cadence of one fetcher thread (RemoteLeaderEndPoint.buildFetch, ReplicaManager.fetchMessages):
* data came back: the next fetch goes out at once, one `round_s` later;
* the request went out but the leader had nothing to return (every partition caught up or left
  empty by the leader's throttle): the leader parks it for `replica.fetch.wait.max.ms` (500 ms)
  unless an in-sync partition of the session gets new data first;
* the follower left every partition out (all throttled by its own quota) and has no in-sync
  partition on that leader: no request at all, it backs off `replica.fetch.backoff.ms` (1 s).

`round_s`, one fetch cycle (round trip, leader read, follower append), is not a Kafka config:
it is the same assumption, with the same default, as the replication model's
`FetchLimits.round_trip_s`, so the two agree. 0 turns the size limits off (throttled fetchers
then still cycle every `PACED_CYCLE_S`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kreassign.cluster.java_order import java_string_hash

MiB = 1024 * 1024
PACED_CYCLE_S = 0.01


@dataclass(frozen=True)
class FetchConfig:
    """The fetch limits of every broker in a sandbox (Kafka's defaults)."""

    partition_max_bytes: int = MiB  # replica.fetch.max.bytes
    response_max_bytes: int = 10 * MiB  # replica.fetch.response.max.bytes
    num_fetchers: int = 1  # num.replica.fetchers (static value; a dynamic override wins)
    round_s: float = 0.01
    wait_max_s: float = 0.5  # replica.fetch.wait.max.ms
    backoff_s: float = 1.0  # replica.fetch.backoff.ms

    def __post_init__(self) -> None:
        if self.partition_max_bytes <= 0 or self.response_max_bytes <= 0 or self.num_fetchers < 1:
            raise ValueError("fetch sizes must be positive and num.replica.fetchers at least 1")
        if not math.isfinite(self.round_s) or self.round_s < 0:
            raise ValueError("the fetch round must be a non-negative number of seconds")
        if not (0 < self.wait_max_s < math.inf and 0 < self.backoff_s < math.inf):
            raise ValueError("the fetch wait and backoff must be positive numbers of seconds")

    def rounds(self, dt: float) -> float:
        """Fetch rounds a fetcher thread completes in `dt` seconds (inf: no limits)."""
        return dt / self.round_s if self.round_s > 0 else math.inf

    @property
    def cycle_s(self) -> float:
        """One fetch cycle of a throttled fetcher thread, in seconds."""
        return self.round_s if self.round_s > 0 else PACED_CYCLE_S

    @property
    def fetch_bytes(self) -> tuple[float, float]:
        """Most one fetch takes per partition and in all (inf without limits)."""
        if self.round_s <= 0:
            return math.inf, math.inf
        return float(self.partition_max_bytes), float(self.response_max_bytes)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> FetchConfig:
        if not data:
            return cls()
        return cls(int(data["partition_max_bytes"]), int(data["response_max_bytes"]), int(data["num_fetchers"]),
                   float(data["round_s"]), float(data.get("wait_max_s", cls.wait_max_s)),
                   float(data.get("backoff_s", cls.backoff_s)))


NO_FETCH_LIMITS = FetchConfig(round_s=0.0)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's `AbstractFetcherManager.getFetcherId`: `Utils.abs(31 * topic.hashCode + partition) % n`."""
    if num_fetchers <= 1:
        return 0
    value = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    value = value - (1 << 32) if value >= 1 << 31 else value
    # Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing
    return (0 if value == -(1 << 31) else abs(value)) % num_fetchers
