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
  unless an in-sync partition of the session gets new data first, and the follower's next
  request comes `EMPTY_ROUND_S` after its empty response;
* the follower left every partition out (all throttled by its own quota) and has no in-sync
  partition on that leader: no request at all, it backs off `replica.fetch.backoff.ms` (1 s).

What a fetch keeps (`kept`): the leader reads a lagging partition up to `replica.fetch.max.bytes`
of log (`LogSegment.read` slices the segment there, through the middle of a record batch), sends
it all and records it all against its quota, and the follower records all of it against its own
(`ReplicaFetcherThread.processPartitionData`) but appends only the whole batches: the cut batch is
read again by the next fetch. Real Kafka 4.4.0, a leader-throttled copy of data in 983,266-byte
batches: every fetch's `recordsSizeInBytes` was 1,048,576 (the request log) and the replica grew
983,266 bytes a fetch; the quota's byte-rate then matched a SimpleRate fed 1 MiB per fetch to four
digits. So a copy gets `floor(P / batch) x batch / P` of its quota (0.938 with those batches; 1.0
with the producer's default 16 KiB `batch.size`, 64 of which fill a fetch exactly).

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

import numpy as np

from kreassign.cluster.java_order import java_string_hash

MiB = 1024 * 1024
PACED_CYCLE_S = 0.01
EMPTY_ROUND_S = 0.005
"""from an empty response to the follower's next request at its leader: real Kafka 4.4.0's
request log showed a parked follower FETCH completing every 503-506 ms (`replica.fetch.wait.max.ms`
500), so a follower whose fetches come back empty asks every `parked_cycle_s`"""


@dataclass(frozen=True)
class FetchConfig:
    """The fetch limits of every broker in a sandbox (Kafka's defaults)."""

    partition_max_bytes: int = MiB  # replica.fetch.max.bytes
    response_max_bytes: int = 10 * MiB  # replica.fetch.response.max.bytes
    num_fetchers: int = 1  # num.replica.fetchers (static value; a dynamic override wins)
    round_s: float = 0.01
    wait_max_s: float = 0.5  # replica.fetch.wait.max.ms
    backoff_s: float = 1.0  # replica.fetch.backoff.ms
    batch_bytes: int = 16 * 1024
    """the record batch size of the replicated data (the producer's default `batch.size`)"""

    def __post_init__(self) -> None:
        if self.partition_max_bytes <= 0 or self.response_max_bytes <= 0 or self.num_fetchers < 1:
            raise ValueError("fetch sizes must be positive and num.replica.fetchers at least 1")
        if not math.isfinite(self.round_s) or self.round_s < 0:
            raise ValueError("the fetch round must be a non-negative number of seconds")
        if not (0 < self.wait_max_s < math.inf and 0 < self.backoff_s < math.inf):
            raise ValueError("the fetch wait and backoff must be positive numbers of seconds")
        if self.batch_bytes <= 0:
            raise ValueError("the record batch size must be positive")

    def rounds(self, dt: float) -> float:
        """Fetch rounds a fetcher thread completes in `dt` seconds (inf: no limits)."""
        return dt / self.round_s if self.round_s > 0 else math.inf

    @property
    def cycle_s(self) -> float:
        """One fetch cycle of a throttled fetcher thread, in seconds."""
        return self.round_s if self.round_s > 0 else PACED_CYCLE_S

    @property
    def parked_cycle_s(self) -> float:
        """How often a follower whose fetches the leader parks asks again."""
        return self.wait_max_s + EMPTY_ROUND_S

    @property
    def fetch_bytes(self) -> tuple[float, float]:
        """Most one fetch takes per partition and in all (inf without limits)."""
        if self.round_s <= 0:
            return math.inf, math.inf
        return float(self.partition_max_bytes), float(self.response_max_bytes)

    def kept(self, read: np.ndarray, lag: np.ndarray) -> np.ndarray:
        """Of each fetch's `read` bytes of a partition `lag` bytes behind (the caller's
        tolerance taken off), what the follower appends: all of it where the read reached the
        log's end, else its whole batches. (A batch larger than a fetch, which KIP-74 returns
        whole, is not modelled: the bytes count as read.)"""
        b = float(self.batch_bytes)
        if b >= self.partition_max_bytes:
            return read
        return np.where(read < lag, np.floor(read / b) * b, read)

    @property
    def kept_share(self) -> float:
        """What a fetch that reads its whole `replica.fetch.max.bytes` keeps of it."""
        full = np.array([float(self.partition_max_bytes)])
        return float(self.kept(full, full + 1.0)[0]) / self.partition_max_bytes

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> FetchConfig:
        if not data:
            return cls()
        return cls(int(data["partition_max_bytes"]), int(data["response_max_bytes"]), int(data["num_fetchers"]),
                   float(data["round_s"]), float(data.get("wait_max_s", cls.wait_max_s)),
                   float(data.get("backoff_s", cls.backoff_s)), int(data.get("batch_bytes", cls.batch_bytes)))


NO_FETCH_LIMITS = FetchConfig(round_s=0.0)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's `AbstractFetcherManager.getFetcherId`: `Utils.abs(31 * topic.hashCode + partition) % n`."""
    if num_fetchers <= 1:
        return 0
    value = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    value = value - (1 << 32) if value >= 1 << 31 else value
    # Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing
    return (0 if value == -(1 << 31) else abs(value)) % num_fetchers
