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
assumption of the model; with `REPLICA_FETCH_MAX_BYTES` it caps one partition's catch-up.
Real Kafka 4.4.0 (bench/results/real_throttle_4.4.0.md, `idle/none/50MB/s`): an unthrottled copy
of 750 MB took 7.9 s at load 18, 1 MiB per 11 ms; load makes it anything, so it stays 0.01 s."""
BATCH_BYTES = 16 * 1024
"""The record batch size the model assumes when the partitions' is not known (`FetchLimits.
batch_bytes`): the producer's `batch.size` default, 16 KiB, 64 of which fill a fetch exactly.
A fetch reads, sends and counts against both quotas up to `replica.fetch.max.bytes` of log (the
leader's `LogSegment.read` slices the segment there, through a batch), and the follower appends
the whole batches of it (at least one, KIP-74); see `FetchLimits.fetch_bytes`."""


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
    batch_bytes: float = BATCH_BYTES
    """the record batch size of the moving partitions (`BATCH_BYTES` when not known)"""

    def __post_init__(self) -> None:
        if self.partition_max_bytes <= 0 or self.response_max_bytes <= 0 or self.num_fetchers < 1:
            raise InputError("fetch sizes must be positive and num.replica.fetchers at least 1")
        if self.round_trip_s < 0:
            raise InputError("the fetch round trip must not be negative")
        if self.batch_bytes <= 0:
            raise InputError("the record batch size must be positive")

    @property
    def fetch_bytes(self) -> float:
        """What one fetch of a lagging partition adds to the replica: the whole record batches
        of the `replica.fetch.max.bytes` it read, floor(P / batch) x batch, and one batch when none
        fits (KIP-74). The quotas count the whole read. Real Kafka 4.4.0 (bench/results/
        real_throttle_4.4.0.md, every throttled 1 MB/s and 100 kB/s row): each fetch grew the
        replica by exactly one 983,266-byte batch, and its response carried 1,048,576 bytes (the
        broker's request log, tests/recorded/leader_quota_4.4.0.txt)."""
        return max(math.floor(self.partition_max_bytes / self.batch_bytes), 1) * self.batch_bytes

    @property
    def batch_factor(self) -> float:
        """`fetch_bytes` over `replica.fetch.max.bytes`: what a throttled copy gets of its share
        (the shares below were fitted to fetches of exactly `partition_max_bytes`). Real Kafka
        4.4.0 with 983,266-byte batches (0.938 of 1 MiB), bench/results/real_throttle_4.4.0.md:
        follower throttle alone (`idle/follower/1MB/s`) 0.854-0.912 of the quota, the model's
        0.917 x 0.938 = 0.86; with a written in-sync partition (`isr_written/follower/1MB/s`,
        `isr_written/both/1MB/s`) 0.924-0.953, the model's 1.00 x 0.938; with an idle one
        (`isr_idle/follower/1MB/s`) 0.914-0.961, the model's 0.96 x 0.938 = 0.90. 1.0 for
        batches that fill a fetch exactly (the 16 KiB default)."""
        return self.fetch_bytes / self.partition_max_bytes

    @property
    def measured_span_s(self) -> float:
        """The span a leader's `SimpleRate` divides by on average: the retained windows plus the
        one in progress, half of it on average. A warm leader's flood comes once per this span
        (real Kafka 4.4.0: 11.3-12.3 s)."""
        return self.quota_span_s + self.quota_window_s / 2

    @property
    def partition_bps(self) -> float:
        """Most one lagging partition can catch up per second."""
        return self.fetch_bytes / self.round_trip_s if self.round_trip_s > 0 else INF

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

        The leader then admits one whole fetch (P, `fetch_bytes`) whenever the
        bytes in its window are below rate x S, so the window settles at the smallest whole
        number of fetches at or above that: ceil(R S / P) P / (R S), less one fetch cycle per
        span, times `batch_factor`. S is the span `SimpleRate` divides by: the retained windows plus the one in
        progress, half of it on average. Nothing else is lost or gained: each fetch is paid
        back before the next one goes out. (Sandbox, four written moves from one leader:
        1.82 of the quota at 100 kB/s, 1.00 from 1 to 20 MB/s.)
        """
        rate = np.asarray(rate, dtype=np.float64)
        if self.round_trip_s <= 0:
            return np.ones_like(rate)
        span = self.measured_span_s
        with np.errstate(divide="ignore", invalid="ignore"):
            window = rate * span
            whole = np.where(rate > 0, np.ceil(window / self.fetch_bytes) * self.fetch_bytes / window, 1.0)
        pause = self.round_trip_s if pause_s is None else pause_s
        share = self.quota_span_s / (self.quota_span_s + pause) * whole * self.batch_factor
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
        share = W / (W + pause) * (1 + granularity * min(P / R, W) / W) * `batch_factor`, with
        P the whole batches of one fetch (`fetch_bytes`) and `granularity`
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
            chunk = np.minimum(np.where(rate > 0, self.fetch_bytes / rate, span), span) / span
        share = span / (span + np.asarray(pause_s, dtype=np.float64)) * (1.0 + granularity * chunk)
        return np.where(np.isfinite(rate), share * self.batch_factor, 1.0)


NO_FETCH_LIMITS = FetchLimits(round_trip_s=0.0)
"""No fetch limits at all: only throttles and NICs bound a move."""
LEADER_FLOOD_S = QUOTA_SPAN_S + QUOTA_WINDOW_SIZE_S
"""Seconds of its rate a warm leader throttle lets through at once, once per quota span: a
leader that answered in-sync followers for a whole span before the throttle came. Kafka:
`KafkaApis.handleFetchRequest` records the throttled part of every response to a follower
(`quotas.leader.record`, zero bytes until the throttle lists a partition), so its `SimpleRate`
windows span their full length (up to 11 windows and the one in progress), empty, and
`ReplicaManager.readFromLog` lets fetches through until they hold rate x that span; those bytes
leave the windows together a span later, and the next flood comes. Real Kafka 4.4.0
(bench/results/real_eta_4.4.0.md, the leader-bound rows' `floods`): 23.3-24.3 MB at 2 MB/s
(11.6-12.2 s of the rate), one per 11.3-12.3 s (the model: one per quota span and half a
window, 11.5 s), delivered at the followers' pace; 1.02-1.04 of the rate on average. Replaces a credit spread over the first span
(`LEADER_CREDIT_S`, 6 s, which fitted short moves by their phase)."""
LEADER_FLOOD_SPANS = 10
"""How many quota spans the model follows a warm leader's floods for (its allowance per span,
spent and refilled in the event loop); after them it takes the leader's steady share. A move
ends within half a span's pause of that straight line, which is under 5% of a move longer than
about two minutes, and following every span of a plan of hours would cost an event per leader
per span."""
LEADER_COLD_CREDIT_S = QUOTA_WINDOW_SIZE_S
"""The same for a cold leader (no follower fetched from it in the last quota span) whose
throttle starts with the move: `SimpleRate` divides by at least one window
(`replication.quota.window.size.seconds`), so one window of the rate goes through at once.
Real Kafka 4.4.0 (bench/results/real_throttle_4.4.0.md, `idle/leader/10MB/s`): 9.8 MB in the
first 0.8 s, about 1 s of the rate. A throttle already running (a reassignment under way) has
no credit left (`ModelInput.fresh`)."""
WAVE_START_S = 0.34
"""How long a paced run's next wave takes to start copying after the poll that frees its slot:
the AlterPartitionReassignments round trip, the controller adding the replica, and the new
replica's fetcher starting (`ReplicaManager.applyDelta`, `ReplicaFetcherManager.addFetcherForPartitions`).
Real Kafka 4.4.0 (bench/results/real_throttle_4.4.0.md, `started`): median 0.34 s over 45
scenarios, 0-1.7 s on a loaded 2-core machine. With the poll (`Admission.poll_s`, the pacer's
`--interval`), the paced decommission of bench/results/real_eta_4.4.0.md holds within 5% at the
default 10 s (+2.3%, +3.6%; -77% without); at 1 s the model overshoots by 15-18%, as the quota
window refunds a throttle-bound broker's gaps shorter than its span (not modelled)."""
PACER_POLL_S = 10.0
"""The pacer's default poll interval (`execute --interval`)."""
FOLLOWER_GRANULARITY = 0.045
"""How much one fetch adds per quota span at the lowest rates when the follower throttles, as a
share of the quota (measured on the sandbox engine: 0.956 of the quota at 100 kB/s against 0.917
at 20 MB/s): the follower stops asking once over, so little spills over the bound. Kafka: the
quota check in `RemoteLeaderEndPoint.buildFetch` (`shouldFollowerThrottle`), the record after
the append in `ReplicaFetcherThread.processPartitionData`. Real Kafka 4.4.0 confirms it
(bench/results/real_throttle_4.4.0.md, `idle/follower/1MB/s`: steady 0.88-0.90, the model's
0.917 x `batch_factor` 0.938 = 0.86); unchanged."""
LEADER_GRANULARITY = 0.5
"""The same when the leader throttles: it checks before and records after each response, so a
fetch that arrives below the bound takes a whole fetch (`FetchLimits.fetch_bytes`) over it, on
average half a fetch per span (was 1.0, fitted to the sandbox's 1.04 of the quota at 1 MB/s).
Kafka: `ReplicaManager.readFromLog` leaves a throttled partition out when
`ReplicationQuotaManager.isQuotaExceeded`, `KafkaApis.handleFetchRequest` records the bytes sent
after; an empty fetch parks `replica.fetch.wait.max.ms` in `DelayedFetch`. Real Kafka 4.4.0
(bench/results/real_throttle_4.4.0.md, `idle/leader/1MB/s`): one 983,266-byte batch per two
0.5 s waits, active 0.922-0.963 of the quota: 0.5 gives 0.937 with `batch_factor` 0.938 (1.0
gave 0.977, 1.048 without the factor). At 100 kB/s a 3 MB copy is three fetches, the first
sent at once: 1.75-2.56 measured, 1.30 modelled (Kafka's ReplicationQuotasTest warns that
leader rates under 1 MB/s do not hold)."""
