"""Kafka's quota and fetch rules as the replication model sees them (broker-semantics Part B §2-§3):
what limits a move (`Limit`), what a fetcher session carries (`Session`), the follower fetch
limits and what fetches get of a KIP-73 quota (`FetchLimits`), with every constant named after
the Kafka setting it stands for, or, where it is the model's own, measured where it was measured.

The next calibration against real Kafka changes this file: nothing else in `predict.model`
holds a number about Kafka.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from kreassign.cluster.errors import InputError

MiB = 1024 * 1024
INF = math.inf

# ---- Kafka's defaults (the broker configs a fetch depends on) ------------------------------
REPLICA_FETCH_MAX_BYTES = MiB
"""`replica.fetch.max.bytes`: most a follower fetch carries per partition (1 MiB)."""
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10 * MiB
"""`replica.fetch.response.max.bytes`: most one fetch response carries in all (10 MiB)."""
NUM_REPLICA_FETCHERS = 1
"""`num.replica.fetchers`: fetcher threads per source broker on each follower."""
REPLICA_FETCH_WAIT_MAX_S = 0.5
"""`replica.fetch.wait.max.ms` (500 ms): how long a leader parks a fetch it cannot answer yet."""
REPLICA_FETCH_BACKOFF_S = 1.0
"""`replica.fetch.backoff.ms` (1000 ms): a follower's pause when its request would be empty."""
QUOTA_WINDOW_NUM = 11
"""`replication.quota.window.num`: the windows a KIP-73 `SimpleRate` keeps."""
QUOTA_WINDOW_SIZE_S = 1.0
"""`replication.quota.window.size.seconds`: the length of one of those windows."""
QUOTA_SPAN_S = QUOTA_WINDOW_NUM * QUOTA_WINDOW_SIZE_S
"""The span a replication quota measures over (11 s)."""

# ---- the model's own assumptions and calibrations -----------------------------------------
FETCH_ROUND_TRIP_S = 0.01
"""One fetch cycle (network round trip, leader read, follower append): not a Kafka config, an
assumption of the model; with `REPLICA_FETCH_MAX_BYTES` it caps one partition's catch-up."""


class Limit(IntEnum):
    """What limits a move's rate (or stops it)."""

    FETCH_PARTITION = 0  # replica.fetch.max.bytes per fetch cycle
    LEADER_THROTTLE = 1
    NETWORK_OUT = 2
    FOLLOWER_THROTTLE = 3
    NETWORK_IN = 4
    FETCH_RESPONSE = 5  # replica.fetch.response.max.bytes per fetcher thread
    NO_LEADER = 6
    QUEUED = 7  # never started: its slots stay held by moves that never finish
    UNLIMITED = 8

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")

    @property
    def side(self) -> str | None:
        """'out' for a limit of the sending broker, 'in' for the receiving one."""
        if self in (Limit.LEADER_THROTTLE, Limit.NETWORK_OUT):
            return "out"
        if self in (Limit.FOLLOWER_THROTTLE, Limit.NETWORK_IN):
            return "in"
        return None


class Session(IntEnum):
    """What else a move's fetcher session (leader, follower, fetcher thread) carries, which sets
    how soon the follower asks again once its quota lets the move back into the request."""

    ALONE = 0  # nothing: an empty request is not sent, the thread backs off replica.fetch.backoff.ms
    IDLE_ISR = 1  # in-sync partitions without writes: the leader holds the request replica.fetch.wait.max.ms
    WRITTEN_ISR = 2  # in-sync partitions that take writes: the next append answers the request




@dataclass(frozen=True)
class FetchLimits:
    """Kafka's follower fetch limits, which bound catch-up when nothing is throttled (§2.6).

    `round_trip_s` is one fetch cycle (network round trip, leader read, follower append); it is
    not a Kafka config and is an assumption of the model. 0 disables the fetch limits.
    """

    partition_max_bytes: float = REPLICA_FETCH_MAX_BYTES
    response_max_bytes: float = REPLICA_FETCH_RESPONSE_MAX_BYTES
    num_fetchers: int = NUM_REPLICA_FETCHERS
    round_trip_s: float = FETCH_ROUND_TRIP_S
    wait_max_s: float = REPLICA_FETCH_WAIT_MAX_S
    backoff_s: float = REPLICA_FETCH_BACKOFF_S
    quota_span_s: float = QUOTA_SPAN_S
    quota_window_s: float = QUOTA_WINDOW_SIZE_S

    def __post_init__(self) -> None:
        if self.partition_max_bytes <= 0 or self.response_max_bytes <= 0 or self.num_fetchers < 1:
            raise InputError("fetch sizes must be positive and num.replica.fetchers at least 1")
        if self.round_trip_s < 0:
            raise InputError("the fetch round trip must not be negative")

    @property
    def partition_bps(self) -> float:
        """Most one lagging partition can catch up per second."""
        return self.partition_max_bytes / self.round_trip_s if self.round_trip_s > 0 else INF

    @property
    def fetcher_bps(self) -> float:
        """Most one fetcher thread (one per source broker and fetcher id) moves per second."""
        return self.response_max_bytes / self.round_trip_s if self.round_trip_s > 0 else INF

    def leader_share(self, rate: np.ndarray, written: bool | np.ndarray = False) -> np.ndarray:
        """What fetches get of a leader throttle `rate`.

        A fetch the leader leaves empty parks in its purgatory, and Kafka re-checks it at every
        append to its partitions (DelayedFetch.tryComplete, which counts a throttled partition
        once the quota is back under its bound). Where a moving partition, or an in-sync
        partition of the same fetcher session, takes writes (`written`), the next append answers
        the fetch as soon as the quota allows (`woken_share`); only sessions of idle partitions
        wait out `replica.fetch.wait.max.ms` (`quota_share` with that pause).
        """
        idle = self.quota_share(rate, self.wait_max_s, LEADER_GRANULARITY)
        return np.where(written, self.woken_share(rate), idle)

    def woken_share(self, rate: np.ndarray, pause_s: float | None = None) -> np.ndarray:
        """What fetches get of a throttle `rate` when they come back `pause_s` (default one fetch
        cycle) after the measured rate is back under the bound: appends that answer the leader's
        parked fetches, or a follower whose session keeps asking for in-sync partitions.

        The leader then admits one whole fetch of `replica.fetch.max.bytes` (P) whenever the
        bytes in its window are below rate x S, so the window settles at the smallest whole
        number of fetches at or above that: ceil(R S / P) P / (R S), less one fetch cycle per
        span. S is the span `SimpleRate` divides by: the retained windows plus the one in
        progress, half of it on average. Nothing else is lost or gained: each fetch is paid
        back before the next one goes out. (Sandbox, four written moves from one leader:
        1.82 of the quota at 100 kB/s, 1.00 from 1 to 20 MB/s.)
        """
        rate = np.asarray(rate, dtype=np.float64)
        if self.round_trip_s <= 0:
            return np.ones_like(rate)
        span = self.quota_span_s + self.quota_window_s / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            window = rate * span
            whole = np.where(rate > 0, np.ceil(window / self.partition_max_bytes) * self.partition_max_bytes / window,
                             1.0)
        pause = self.round_trip_s if pause_s is None else pause_s
        share = self.quota_span_s / (self.quota_span_s + pause) * whole
        return np.where(np.isfinite(rate), share, 1.0)

    def follower_share(self, rate: np.ndarray, session: int | np.ndarray = Session.ALONE) -> np.ndarray:
        """What fetches get of a follower throttle `rate`, by what the move's fetcher session
        also carries (`Session`).

        The follower leaves a throttled partition out of its request while its quota is over
        (RemoteLeaderEndPoint.buildFetch); only a request with nothing in it is not sent, and
        then the thread backs off `replica.fetch.backoff.ms` (`quota_share` with that pause). A
        session that also fetches in-sync partitions (never left out) keeps asking: each
        response comes at the next append to one of them (WRITTEN_ISR: `woken_share`, the
        quota used whole, as on a real cluster where followers of written partitions share
        every session) or after `replica.fetch.wait.max.ms` (IDLE_ISR: the better of that pause
        per span and a whole number of fetches per window). Sandbox, one move at 1-100 MB/s:
        0.91-0.93 alone, 0.96-0.99 with an idle and 1.00 with a written in-sync partition.
        """
        alone = self.quota_share(rate, self.backoff_s, FOLLOWER_GRANULARITY)
        idle = np.maximum(self.quota_share(rate, self.wait_max_s, FOLLOWER_GRANULARITY),
                          self.woken_share(rate, self.wait_max_s))
        session = np.asarray(session)
        return np.where(session == Session.WRITTEN_ISR, self.woken_share(rate),
                        np.where(session == Session.IDLE_ISR, idle, alone))

    def quota_share(self, rate: np.ndarray, pause_s: float | np.ndarray, granularity: float) -> np.ndarray:
        """The share of a KIP-73 quota `rate` that a long copy gets, fetch by fetch.

        A broker checks its `SimpleRate` before each fetch and records after it, so a copy
        alternates bursts (until one fetch takes the measured rate over the bound) with pauses
        of `pause_s` (the follower's `replica.fetch.backoff.ms` when it leaves the partition out,
        the leader's `replica.fetch.wait.max.ms` when only the leader throttles). Over the
        quota span W (11 x 1 s) that loses about one pause per span: W / (W + pause). One fetch
        of `replica.fetch.max.bytes` is a whole chunk of quota at low rates (P/R seconds of it),
        which the last fetch before each check adds on top, up to one per span:
        share = W / (W + pause) * (1 + granularity * min(P / R, W) / W), with `granularity`
        FOLLOWER_GRANULARITY or LEADER_GRANULARITY (see there).
        Calibrated on the sandbox's fetch-by-fetch engine (tests/test_throttle_fidelity.py,
        bench/bench_throttle_fidelity.py); 1 where the rate is unlimited or the fetch limits
        are off.
        """
        rate = np.asarray(rate, dtype=np.float64)
        if self.round_trip_s <= 0:
            return np.ones_like(rate)
        span = self.quota_span_s
        with np.errstate(divide="ignore"):
            chunk = np.minimum(np.where(rate > 0, self.partition_max_bytes / rate, span), span) / span
        share = span / (span + np.asarray(pause_s, dtype=np.float64)) * (1.0 + granularity * chunk)
        return np.where(np.isfinite(rate), share, 1.0)


NO_FETCH_LIMITS = FetchLimits(round_trip_s=0.0)
"""No fetch limits at all: only throttles and NICs bound a move."""
LEADER_CREDIT_S = 9.0
"""Seconds of its rate a warm leader throttle sends beyond its steady share (`leader_credit`).
Sandbox: 7.2 s (one move, 20 MB/s), 13 s (1 MB/s), 8.3 s (the leader-bound bench plan) and
11.5 s (Kafka's --generate plan of the demo sandbox, leader throttle only): the first cycle's
flood and a copy that ends at a flood, about half of the 12 s cycle early on average."""
FOLLOWER_GRANULARITY = 0.045
"""How much one fetch adds per quota span at the lowest rates when the follower throttles, as a
share of the quota (measured on the sandbox engine: 0.956 of the quota at 100 kB/s against 0.917
at 20 MB/s): the follower stops asking once over, so little spills over the bound."""
LEADER_GRANULARITY = 1.0
"""The same when the leader throttles: it checks before and records after each response, so every
fetch that arrives below the bound takes a whole `replica.fetch.max.bytes`, about one fetch per
span over the quota (sandbox: 1.04 of the quota at 1 MB/s, 0.96 at 20 and 100 MB/s with several
followers fetching from one throttled leader; Kafka's ReplicationQuotasTest warns that leader
rates under 1 MB/s do not hold for this reason)."""
