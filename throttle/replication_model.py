"""The replication model behind every ETA: how fast throttled reassignment moves copy their data.

A fluid, event-driven model of Kafka's replication path (broker-semantics Part B §2-§3):

* every moving replica copies from the partition's current leader;
* a broker's leader throttle is shared by the catch-up traffic of the moves it sends, its
  follower throttle by the moves it receives, and its NIC (if known, minus client traffic) by
  both; a fetch cycle carries at most `replica.fetch.max.bytes` per partition and
  `replica.fetch.response.max.bytes` per fetcher thread;
* a throttle gives fetches a share of its rate that depends on how soon they ask again once its
  `SimpleRate` is back under the bound (`FetchLimits.leader_share`, `follower_share`): a follower
  session that also fetches in-sync partitions (`Session`, read from the ISRs by
  `fetch_sessions`) keeps asking and uses its quota whole, one with nothing else backs off 1 s;
* capacity is shared max-min fairly (water-filling) across all these constraints at once;
* a move progresses at (its rate - the partition's write rate) against its lag, and once in
  sync keeps replicating at the write rate, which the throttles still count until they are
  cleared, so a share at or below the write rate never completes.

The core (`simulate`, `lower_bound`) is a pure function of numpy arrays: no pandas, no I/O, and
no Python loop over moves. Completions are processed in batches whose size `tolerance` bounds
(and corrected for the capacity freed inside a batch), so 100,000 moves on 1,000 brokers take
about a second of CPU (bench/bench_estimate.py); `tolerance=0` processes every event exactly.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import cached_property
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import NO_LEADER, ClusterState

MiB = 1024 * 1024
INF = math.inf
DEFAULT_TOLERANCE = 0.1
"""Event batching of `simulate`: on 10,000 heavy-tailed moves, makespans about 1% above exact
(`tolerance=0`) and single moves within 5% (p99), at a twentieth of the events."""
_PROGRESS_EPS = 1e-9  # a move whose rate exceeds its write rate by less than this fraction is stuck
_LEVEL_EPS = 1e-13
_MAX_GROWTH = 1.0  # a batch never spans more than this share of the time elapsed so far
_SWEEP_EPS = 1e-5  # relative change of every water level at which the sharing has settled


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

    partition_max_bytes: float = MiB  # replica.fetch.max.bytes
    response_max_bytes: float = 10 * MiB  # replica.fetch.response.max.bytes
    num_fetchers: int = 1  # num.replica.fetchers
    round_trip_s: float = 0.01
    wait_max_s: float = 0.5  # replica.fetch.wait.max.ms
    backoff_s: float = 1.0  # replica.fetch.backoff.ms
    quota_span_s: float = 11.0  # replication.quota.window.num x replication.quota.window.size.seconds
    quota_window_s: float = 1.0  # replication.quota.window.size.seconds

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

PerBroker = float | Sequence[float] | np.ndarray | Mapping[int, float]


def _per_broker(value: PerBroker, broker_ids: np.ndarray, default: float, name: str) -> np.ndarray:
    """A per-broker array from a scalar, an array in broker order, or a {broker id: value} map."""
    if isinstance(value, Mapping):
        pos = {int(b): i for i, b in enumerate(broker_ids)}
        out = np.full(len(broker_ids), default, dtype=np.float64)
        for bid, v in value.items():
            if int(bid) not in pos:
                raise InputError(f"{name}: broker {bid} is not in the cluster")
            out[pos[int(bid)]] = float(v)
        return out
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(len(broker_ids), float(arr))
    if arr.shape != (len(broker_ids),):
        raise InputError(f"{name} has {arr.size} values for {len(broker_ids)} brokers")
    return arr.copy()


@dataclass(frozen=True, eq=False)
class ModelInput:
    """Everything the model needs, as plain arrays. Brokers are positions into `broker_ids`.

    Per move: `source` (the leader it copies from, -1 if the partition has no leader), `dest`,
    `bytes` to copy, `write_bps` of its partition, `start_s` (earliest start), `fetcher` (the
    fetcher thread on `dest` that serves it), what else that fetcher session carries
    (`session`, a `Session`) and whether its leader's quota starts warm (`warm`). Per broker:
    throttles (`inf` = unthrottled), NIC capacities (`inf` = unknown), client traffic to
    subtract from them, and the in-sync replication of throttled partitions that the
    leader/follower quotas count.
    Build one with `ModelInput.build` (broker ids) or `from_moves` (a ClusterState).
    """

    broker_ids: np.ndarray
    source: np.ndarray
    dest: np.ndarray
    bytes: np.ndarray
    write_bps: np.ndarray
    start_s: np.ndarray
    fetcher: np.ndarray
    leader_rate: np.ndarray
    follower_rate: np.ndarray
    network_in: np.ndarray
    network_out: np.ndarray
    client_in: np.ndarray
    client_out: np.ndarray
    leader_base: np.ndarray
    follower_base: np.ndarray
    fetch: FetchLimits = field(default_factory=FetchLimits)
    released_bps: np.ndarray | None = None
    """per move: in-sync replication its leader stops sending when the move completes (the
    replicas the plan removes, whose fetches `leader_base` counted); None: nothing"""
    session: np.ndarray | None = None
    """per move: what else its fetcher session carries (`Session`); None: nothing (ALONE)"""
    warm: np.ndarray | None = None
    """per move: its leader has answered in-sync followers for a whole quota span when the
    throttle starts, so its leader quota starts with a credit (`leader_credit`); None: no (a
    throttle already running, as in the middle of a reassignment, has used it up)"""

    def __post_init__(self) -> None:
        ids = np.asarray(self.broker_ids, dtype=np.int64)
        b, m = len(ids), len(np.asarray(self.bytes))
        if len(np.unique(ids)) != b:
            raise InputError("a broker id is listed more than once")
        conv: dict[str, np.ndarray] = {"broker_ids": ids}
        for name in ("source", "dest", "fetcher"):
            conv[name] = np.asarray(getattr(self, name), dtype=np.int64)
        for name in ("bytes", "write_bps", "start_s"):
            conv[name] = np.asarray(getattr(self, name), dtype=np.float64)
        conv["released_bps"] = np.zeros(m) if self.released_bps is None else np.asarray(self.released_bps, np.float64)
        conv["session"] = np.zeros(m, np.int8) if self.session is None else np.asarray(self.session, np.int8)
        conv["warm"] = np.zeros(m, bool) if self.warm is None else np.asarray(self.warm, bool)
        for name in ("leader_rate", "follower_rate", "network_in", "network_out", "client_in",
                     "client_out", "leader_base", "follower_base"):
            conv[name] = np.asarray(getattr(self, name), dtype=np.float64)
        for name, arr in conv.items():
            want = b if name in ("broker_ids", "leader_rate", "follower_rate", "network_in", "network_out",
                                 "client_in", "client_out", "leader_base", "follower_base") else m
            if arr.shape != (want,):
                raise InputError(f"{name} has shape {arr.shape}, expected ({want},)")
        src, dst = conv["source"], conv["dest"]
        if m and (src.min() < -1 or src.max() >= b or dst.min() < 0 or dst.max() >= b):
            raise InputError("a move names a broker position outside the broker list")
        if np.any(src == dst):
            raise InputError("a move copies a replica onto the broker it comes from")
        for name in ("bytes", "write_bps", "start_s", "client_in", "client_out", "leader_base", "follower_base",
                     "released_bps"):
            if np.any(~np.isfinite(conv[name])) or np.any(conv[name] < 0):
                raise InputError(f"{name} must be finite and not negative")
        for name in ("leader_rate", "follower_rate", "network_in", "network_out"):
            if np.any(np.isnan(conv[name])) or np.any(conv[name] < 0):
                raise InputError(f"{name} must not be negative (use inf for no limit)")
        if np.any(conv["fetcher"] < 0):
            raise InputError("fetcher ids must not be negative")
        if np.any(~np.isin(conv["session"], [int(x) for x in Session])):
            raise InputError("a move's session kind is not one of " + ", ".join(x.name for x in Session))
        for name, arr in conv.items():
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def build(
        cls,
        *,
        broker_ids: Sequence[int] | np.ndarray,
        source: Sequence[int] | np.ndarray,
        dest: Sequence[int] | np.ndarray,
        bytes: Sequence[float] | np.ndarray,
        write_bps: float | Sequence[float] | np.ndarray = 0.0,
        start_s: float | Sequence[float] | np.ndarray = 0.0,
        fetcher: int | Sequence[int] | np.ndarray = 0,
        leader_rate: PerBroker = INF,
        follower_rate: PerBroker = INF,
        network_in: PerBroker = INF,
        network_out: PerBroker = INF,
        client_in: PerBroker = 0.0,
        client_out: PerBroker = 0.0,
        leader_base: PerBroker = 0.0,
        follower_base: PerBroker = 0.0,
        fetch: FetchLimits | None = None,
        released_bps: float | Sequence[float] | np.ndarray = 0.0,
        session: int | Sequence[int] | np.ndarray = Session.ALONE,
        warm: bool | Sequence[bool] | np.ndarray = False,
    ) -> ModelInput:
        """Build from broker ids (not positions); per-broker values may be a scalar, an array
        in `broker_ids` order or a {broker id: value} map; a source of -1 means no leader.

        Raises:
            InputError: a move names an unknown broker, or arrays disagree in length.
        """
        ids = np.asarray(broker_ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        src_ids = np.asarray(source, dtype=np.int64)
        dst_ids = np.asarray(dest, dtype=np.int64)
        m = len(np.asarray(bytes))

        def positions(values: np.ndarray, what: str, allow_none: bool) -> np.ndarray:
            if values.shape != (m,):
                raise InputError(f"{what} has {values.size} values for {m} moves")
            idx = np.searchsorted(sorted_ids, values)
            idx_c = np.minimum(idx, max(len(ids) - 1, 0))
            known = (idx < len(ids)) & (sorted_ids[idx_c] == values) if len(ids) else np.zeros(m, bool)
            bad = ~known & ~((values == NO_LEADER) & allow_none)
            if bad.any():
                raise InputError(f"{what} broker {int(values[np.argmax(bad)])} is not in the cluster")
            return np.where(known, order[idx_c], -1)

        def per_move(value: Any, dtype: type) -> np.ndarray:
            arr: np.ndarray = np.asarray(value, dtype=dtype)
            return np.full(m, arr, dtype=dtype) if arr.ndim == 0 else arr

        return cls(
            broker_ids=ids, source=positions(src_ids, "source", True), dest=positions(dst_ids, "destination", False),
            bytes=np.asarray(bytes, dtype=np.float64), write_bps=per_move(write_bps, np.float64),
            start_s=per_move(start_s, np.float64), fetcher=per_move(fetcher, np.int64),
            leader_rate=_per_broker(leader_rate, ids, INF, "leader rate"),
            follower_rate=_per_broker(follower_rate, ids, INF, "follower rate"),
            network_in=_per_broker(network_in, ids, INF, "network in"),
            network_out=_per_broker(network_out, ids, INF, "network out"),
            client_in=_per_broker(client_in, ids, 0.0, "client in"),
            client_out=_per_broker(client_out, ids, 0.0, "client out"),
            leader_base=_per_broker(leader_base, ids, 0.0, "leader base"),
            follower_base=_per_broker(follower_base, ids, 0.0, "follower base"),
            fetch=fetch if fetch is not None else FetchLimits(), released_bps=per_move(released_bps, np.float64),
            session=per_move(session, np.int8), warm=per_move(warm, np.bool_),
        )

    def __len__(self) -> int:
        return len(self.bytes)

    @property
    def n_brokers(self) -> int:
        return len(self.broker_ids)

    def with_rates(self, *, leader_rate: PerBroker | None = None, follower_rate: PerBroker | None = None) -> ModelInput:
        """The same moves under other throttles (for `throttle suggest` and sweeps)."""
        return replace(
            self,
            leader_rate=self.leader_rate if leader_rate is None else _per_broker(leader_rate, self.broker_ids, INF, "leader rate"),
            follower_rate=self.follower_rate if follower_rate is None else _per_broker(follower_rate, self.broker_ids, INF, "follower rate"),
        )

    @cached_property
    def leader_quota(self) -> np.ndarray:
        """The leader throttles as fetches meet them (`FetchLimits.leader_share`): a fetch it
        leaves empty parks until an append re-checks it (one fetch cycle where a partition of the
        session, moving or in sync, takes writes) or `replica.fetch.wait.max.ms` runs out, and
        each fetch below the bound takes a whole chunk (LEADER_GRANULARITY). Where the follower
        throttle binds first, its own share (`follower_quota`) is the smaller one and decides.

        Computed once per input (every array it reads is frozen): the model asks for it at every
        step, and which brokers send written partitions is a pass over all the moves."""
        led = self.source >= 0
        woken = (self.write_bps[led] > 0) | (self.session[led] == Session.WRITTEN_ISR)
        written = np.bincount(self.source[led], weights=woken, minlength=self.n_brokers) > 0
        quota = self.leader_rate * self.fetch.leader_share(self.leader_rate, written)
        quota.setflags(write=False)
        return quota

    @cached_property
    def follower_quota(self) -> np.ndarray:
        """The follower throttles as fetches meet them (`FetchLimits.follower_share`, by what each
        move's session also carries). One quota serves every session into the broker, and the
        sessions that ask again soonest take what it frees, so the broker's share is the
        byte-weighted harmonic mean of its moves' shares: their bytes take as long in all as at
        each move's own pace one after another."""
        by_kind = self.fetch.follower_share(self.follower_rate[:, None], np.arange(len(Session))[None, :])
        share = by_kind[self.dest, self.session]
        weight = self.bytes + 1.0  # moves with nothing left to copy still say how their session asks
        b = self.n_brokers
        bytes_in = np.bincount(self.dest, weights=weight, minlength=b)
        paced = np.bincount(self.dest, weights=weight / share, minlength=b)
        kinds = np.bincount(self.dest * len(Session) + self.session, minlength=b * len(Session)).reshape(b, -1) > 0
        one = by_kind[np.arange(b), np.argmax(kinds, axis=1)]  # ALONE where none come in
        with np.errstate(divide="ignore", invalid="ignore"):
            mixed = np.where(kinds.sum(axis=1) <= 1, one, bytes_in / np.where(paced > 0, paced, 1.0))
        quota = self.follower_rate * mixed
        quota.setflags(write=False)
        return quota

    @cached_property
    def leader_credit(self) -> np.ndarray:
        """Bytes a leader throttle lets through beyond its steady share when it starts.

        A leader records every response to its followers (zero bytes of throttled partitions
        until the throttle lists some), so when the throttle comes its `SimpleRate` windows span
        their full length, empty, and fetches flood until they hold rate x span. That window's
        bytes drop out together a ring of windows (12 s) later and are refilled by the next
        flood, so the copy keeps coming in floods and ends at one. Counted as LEADER_CREDIT_S
        seconds of the rate, per broker where a move it sends is `warm` and its leader throttle
        is finite; 0 elsewhere."""
        led = self.source >= 0
        warm = np.bincount(self.source[led], weights=self.warm[led], minlength=self.n_brokers) > 0
        on = warm & np.isfinite(self.leader_rate) & (self.fetch.round_trip_s > 0)
        credit = np.where(on, self.leader_rate * LEADER_CREDIT_S, 0.0)
        credit.setflags(write=False)
        return credit

    @property
    def credit_s(self) -> float:
        """How long the model spreads `leader_credit` over, from time 0: one quota span (the
        flood fills the window the leader divides by); 0 without credit."""
        return self.fetch.quota_span_s + self.fetch.quota_window_s / 2 if self.leader_credit.any() else 0.0

    def out_capacity(self, in_sync_out: np.ndarray, boost: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Capacity each broker has left for sending catch-up, and whether the leader throttle
        (what fetches get of it, `leader_quota`) rather than the NIC is what limits it. `boost`
        adds `leader_credit` spread over `credit_s` (the model's first seconds)."""
        quota = self.leader_quota + (self.leader_credit / self.credit_s if boost and self.credit_s > 0 else 0.0)
        leader = quota - self.leader_base - in_sync_out
        nic = self.network_out - self.client_out - in_sync_out
        return np.maximum(np.minimum(leader, nic), 0.0), leader <= nic

    def in_capacity(self, in_sync_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Capacity each broker has left for receiving catch-up, and whether the follower
        throttle (what fetches get of it, `follower_quota`) rather than the NIC limits it."""
        follower = self.follower_quota - self.follower_base - in_sync_in
        nic = self.network_in - self.client_in - in_sync_in
        return np.maximum(np.minimum(follower, nic), 0.0), follower <= nic


# ---- lower bound ------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class LowerBound:
    """No schedule of these moves (all started as early as allowed) can finish sooner.

    `out_s`: per broker, bytes to send over the capacity left once the write rates of its moves
    are served.
    """

    seconds: float
    out_s: np.ndarray
    limit: Limit
    broker: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": _json_float(self.seconds), "limit": self.limit.label, "broker": self.broker}


def _json_float(value: float) -> float | None:
    """JSON has no infinity: None stands for 'never'."""
    return None if math.isinf(value) or math.isnan(value) else float(value)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0 where num is 0 and inf where den <= 0 < num."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), INF)
    return np.where(num > 0, out, 0.0)


def lower_bound(inp: ModelInput) -> LowerBound:
    """The makespan no allocation can beat, given the moves start no earlier than `start_s`.

    Per broker: by time T it must have sent every byte plus the writes of its moves since they
    started, on top of the in-sync traffic it already serves, so
    T >= (sum bytes - sum w'*start - credit) / (capacity - sum w') on each side, where a
    leader's w' = w - `released_bps` (a completed move's leader stops serving the replicas it
    replaces) and `leader_credit` is the most it sends beyond its steady capacity; and each move
    alone needs start + bytes / (its best rate - w), its best rate counting the credit's boost
    and what completions can free on its leader, and start + (bytes - credit) / (that rate
    without the boost - w).
    """
    b = inp.n_brokers
    zeros = np.zeros(b)
    src, dst, w, s = inp.source, inp.dest, inp.write_bps, inp.start_s
    led = src >= 0
    out_cap, out_leader = inp.out_capacity(zeros)
    in_cap, in_follower = inp.in_capacity(zeros)
    work = inp.bytes - w * s
    released = inp.released_bps
    assert released is not None
    w_out = w - released
    out_work = np.bincount(src[led], weights=(inp.bytes - w_out * s)[led], minlength=b)
    out_w = np.bincount(src[led], weights=w_out[led], minlength=b)
    freed = np.bincount(src[led], weights=np.maximum(-w_out[led], 0.0), minlength=b)
    in_work = np.bincount(dst[led], weights=work[led], minlength=b)
    in_w = np.bincount(dst[led], weights=w[led], minlength=b)
    credit = inp.leader_credit
    out_s = np.where(np.isinf(out_cap), 0.0, _ratio(np.maximum(out_work - credit, 0), out_cap - out_w))
    in_s = np.where(np.isinf(in_cap), 0.0, _ratio(np.maximum(in_work, 0), in_cap - in_w))
    srcp = np.maximum(src, 0)
    others = np.minimum(np.minimum(np.full(len(inp), inp.fetch.partition_bps), inp.fetch.fetcher_bps), in_cap[dst])
    best = np.minimum(others, np.where(led, (out_cap + freed)[srcp], INF))
    alone = _ratio(np.maximum(inp.bytes - np.where(led, credit[srcp], 0.0), 0.0), best - w)
    if credit.any():
        boosted = np.minimum(others, np.where(led, (inp.out_capacity(zeros, boost=True)[0] + freed)[srcp], INF))
        alone = np.maximum(alone, _ratio(inp.bytes, boosted - w))
    move_s = np.where(led, s + np.where(np.isinf(best), 0.0, alone), INF)
    candidates = [
        (float(out_s.max(initial=0.0)), "out"), (float(in_s.max(initial=0.0)), "in"),
        (float(move_s.max(initial=0.0)), "move"),
    ]
    seconds, kind = max(candidates, key=lambda c: c[0])
    broker: int | None
    if kind == "out":
        i = int(np.argmax(out_s))
        limit, broker = (Limit.LEADER_THROTTLE if out_leader[i] else Limit.NETWORK_OUT), int(inp.broker_ids[i])
    elif kind == "in":
        i = int(np.argmax(in_s))
        limit, broker = (Limit.FOLLOWER_THROTTLE if in_follower[i] else Limit.NETWORK_IN), int(inp.broker_ids[i])
    elif len(inp) and seconds > 0:
        i = int(np.argmax(move_s))
        limit, broker = _alone_limit(inp, i, out_cap, out_leader, in_cap, in_follower)
    else:
        limit, broker = Limit.UNLIMITED, None
    return LowerBound(seconds=seconds, out_s=out_s, limit=limit, broker=broker)


def _alone_limit(inp: ModelInput, i: int, out_cap: np.ndarray, out_leader: np.ndarray,
                 in_cap: np.ndarray, in_follower: np.ndarray) -> tuple[Limit, int | None]:
    """What limits move i when it runs alone."""
    src, dst = int(inp.source[i]), int(inp.dest[i])
    if src < 0:
        return Limit.NO_LEADER, None
    options = [
        (inp.fetch.partition_bps, Limit.FETCH_PARTITION, None),
        (inp.fetch.fetcher_bps, Limit.FETCH_RESPONSE, None),
        (float(out_cap[src]), Limit.LEADER_THROTTLE if out_leader[src] else Limit.NETWORK_OUT, int(inp.broker_ids[src])),
        (float(in_cap[dst]), Limit.FOLLOWER_THROTTLE if in_follower[dst] else Limit.NETWORK_IN, int(inp.broker_ids[dst])),
    ]
    _, limit, broker = min(options, key=lambda o: o[0])
    return limit, broker


# ---- max-min fair sharing -------------------------------------------------------------------
@dataclass
class _Shared:
    """One kind of shared capacity over the active moves, as contiguous segments of an order."""

    starts: np.ndarray  # first index of each segment in this order
    counts: np.ndarray
    key: np.ndarray  # broker position (or session id) of each segment
    order: np.ndarray | None  # active-move indices in this order; None = the moves' own order
    seg: np.ndarray  # segment of each move, in the moves' own order
    own: np.ndarray  # segment of each move in this order (`seg` when that is the moves' own)
    cap: np.ndarray  # capacity of each segment left for catch-up
    warm: np.ndarray  # level per key from the previous event, as a starting point
    touched: np.ndarray  # per key: moves came or went, or the capacity changed, since then


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of equal values in a sorted array."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    return starts, np.diff(np.append(starts, n))


def _members(starts: np.ndarray, counts: np.ndarray, segs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the members of some segments, and where each segment starts among them."""
    cnt = counts[segs]
    sub_starts = np.zeros(len(segs), np.int64)
    np.cumsum(cnt[:-1], out=sub_starts[1:])
    return np.repeat(starts[segs] - sub_starts, cnt) + np.arange(int(cnt.sum())), sub_starts


def _water_level(demand: np.ndarray, starts: np.ndarray, counts: np.ndarray, cap: np.ndarray,
                 start: np.ndarray) -> np.ndarray:
    """Per segment, the level L with sum(min(demand, L)) = capacity (inf if the demand fits).

    Newton's method on a concave piecewise-linear function: from below it never overshoots and
    lands exactly on the right linear piece, in one or two steps from a warm start.
    """
    floor = cap / counts  # an equal split never exceeds the level
    level = np.where(np.isfinite(start), np.maximum(start, floor), INF)
    for _ in range(100):
        x = np.repeat(level, counts)
        got = np.add.reduceat(np.minimum(demand, x), starts)
        slope = np.add.reduceat(demand > x, starts, dtype=np.int64)
        with np.errstate(invalid="ignore"):
            stepped = np.maximum(level + (cap - got) / np.maximum(slope, 1), floor)
        # no demand above the level: either it all fits (no level) or start again from below
        new = np.where(slope == 0, np.where(got > cap, floor, INF), stepped)
        fin = np.isfinite(new)
        if np.array_equal(fin, np.isfinite(level)) and np.all(np.abs(new[fin] - level[fin]) <= _LEVEL_EPS * new[fin]):
            return new
        level = new
    return level


def _changed(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Segments whose level moved by more than the sweep tolerance (or became (un)limited)."""
    fin = np.isfinite(new) & np.isfinite(old)
    out: np.ndarray = np.isfinite(new) != np.isfinite(old)
    out[fin] = np.abs(new[fin] - old[fin]) > _SWEEP_EPS * new[fin]
    return out


def _mark_dirty(k: int, segs: np.ndarray, before: np.ndarray, after: np.ndarray, own: float,
                shared: list[_Shared], levels: list[np.ndarray], cross: list[list[np.ndarray]],
                dirty: list[np.ndarray]) -> None:
    """Mark the segments of the other kinds whose water level may move because these segments'
    levels moved: only where the lower of the old and new level is below what else caps the
    move there, since a demand above a segment's level is cut to the level anyway."""
    s = shared[k]
    idx = _members(s.starts, s.counts, segs)[0]
    low = np.repeat(np.minimum(before, after), s.counts[segs])
    for j in range(len(shared)):
        if j == k:
            continue
        partner = cross[k][j][idx]
        cap = levels[j][partner]
        for i in range(len(shared)):
            if i not in (j, k):
                np.minimum(cap, levels[i][cross[k][i][idx]], out=cap)
        dirty[j][partner[low < np.minimum(cap, own)]] = True


def _max_min_rates(own: float, shared: list[_Shared], n: int, *, max_sweeps: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Max-min fair rates of n moves, each capped by `own`, sharing the capacities in `shared`.

    Block Gauss-Seidel over the kinds of capacity: each kind's water levels given the others',
    until no level moves. It starts from the previous event's levels and re-solves only the
    segments whose moves' demands changed, so a few completions cost little. If it does not
    settle, a cold start from unlimited levels converges monotonically.
    Returns the rates and, per move, 0 if its own cap binds or 1 + the index of the binding kind.
    """
    cross = [[o.seg if s.order is None else s.own if o is s else o.seg[s.order] for o in shared] for s in shared]
    levels: list[np.ndarray] = []
    for cold in (False, True):
        levels = [np.full(len(s.starts), INF) if cold else s.warm[s.key] for s in shared]
        dirty = [np.ones(len(s.starts), bool) if cold else s.touched[s.key] for s in shared]
        for _ in range(max_sweeps * (20 if cold else 1)):
            for k, s in enumerate(shared):
                segs = np.flatnonzero(dirty[k])
                if not len(segs):
                    continue
                dirty[k][:] = False
                whole = len(segs) == len(s.starts)  # skip the gathers when every segment is dirty
                idx, sub_starts = (None, s.starts) if whole else _members(s.starts, s.counts, segs)
                demand = np.full(len(s.seg) if idx is None else len(idx), own)
                for j in range(len(shared)):
                    if j != k:
                        np.minimum(demand, levels[j][cross[k][j] if idx is None else cross[k][j][idx]], out=demand)
                new = _water_level(demand, sub_starts, s.counts if whole else s.counts[segs],
                                   s.cap if whole else s.cap[segs], levels[k][segs])
                before = levels[k][segs]
                levels[k][segs] = new
                moved = _changed(new, before)
                if moved.any() and len(shared) > 1:
                    _mark_dirty(k, segs[moved], before[moved], new[moved], own, shared, levels, cross, dirty)
            if not any(d.any() for d in dirty):
                break
        else:
            continue
        break
    rate = np.full(n, own)
    which = np.zeros(n, np.int8)
    for k, (lv, s) in enumerate(zip(levels, shared)):
        s.warm[s.key] = lv
        s.touched[s.key] = False
        mine = lv[s.seg]
        lower = mine < rate
        rate = np.where(lower, mine, rate)
        which[lower] = k + 1
    return rate, which


# ---- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Critical:
    """A constraint that decides the makespan: a broker's throttle or NIC, or a fetch limit."""

    limit: Limit
    broker: int | None
    moves: int

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit.label, "broker": self.broker, "moves": self.moves}


@dataclass(frozen=True, eq=False)
class ModelResult:
    """What the model predicts, per move and per broker. Times are seconds from the start.

    Per move: `start_s`/`finish_s` (inf: never), `limit`/`limit_broker` (what bound it last;
    broker position or -1), `needed_bps` (for a stalled move, the value of that limit it needs
    to exceed to progress; NaN otherwise), `copied_bytes` (its bytes plus the writes during its
    catch-up). Per broker: catch-up bytes sent and received, and when its last move finished.
    Timelines: `times`/`remaining_bytes` (bytes still to copy, for plots) and a change log of
    each broker's average catch-up rate (`rate_time`, `rate_broker`, `rate_out`, `rate_in`):
    a broker's rates hold from one entry until its next one.
    """

    broker_ids: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    limit: np.ndarray
    limit_broker: np.ndarray
    needed_bps: np.ndarray
    copied_bytes: np.ndarray
    bytes_out: np.ndarray
    bytes_in: np.ndarray
    busy_until: np.ndarray
    times: np.ndarray
    remaining_bytes: np.ndarray
    rate_time: np.ndarray
    rate_broker: np.ndarray
    rate_out: np.ndarray
    rate_in: np.ndarray
    critical: tuple[Critical, ...]
    lower: LowerBound
    steps: int

    @property
    def stalled(self) -> np.ndarray:
        """Moves that never complete."""
        out: np.ndarray = np.isinf(self.finish_s)
        return out

    @property
    def makespan(self) -> float:
        """When the last move completes; inf if some never do."""
        return float(self.finish_s.max()) if len(self.finish_s) else 0.0

    @property
    def completable_makespan(self) -> float:
        """When the last move that does complete completes."""
        done = self.finish_s[np.isfinite(self.finish_s)]
        return float(done.max()) if len(done) else 0.0

    def broker_timeline(self, broker_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times, bytes/s out, bytes/s in) breakpoints of one broker's catch-up traffic.

        Raises:
            InputError: the broker is not in the model.
        """
        pos = np.flatnonzero(self.broker_ids == broker_id)
        if not len(pos):
            raise InputError(f"broker {broker_id} is not in the model")
        sel = self.rate_broker == pos[0]
        return self.rate_time[sel], self.rate_out[sel], self.rate_in[sel]


# ---- admission (schedules) --------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Admission:
    """Limits on moves in flight; moves start in `priority` order as slots free up.

    `max_moves_per_broker` caps the moves a broker sends and, separately, the moves it receives;
    `max_inflight_bytes` caps the bytes of all moves in flight (a larger move still starts when
    nothing else is in flight). A move that does not fit lets later ones pass for broker slots,
    but not for bytes, so big moves are not starved.
    """

    priority: np.ndarray
    max_moves_per_broker: int | None = None
    max_inflight_bytes: float | None = None
    release_finished: bool = True
    """A finished move stops counting against the quotas, as with kreassign's pacer, which
    recomputes the throttled-replica lists at every wave. False keeps it counted until the end,
    as when one list covers the whole plan (Kafka's tool)."""

    def __post_init__(self) -> None:
        if self.max_moves_per_broker is not None and self.max_moves_per_broker < 1:
            raise InputError("the number of moves per broker must be at least 1")
        if self.max_inflight_bytes is not None and self.max_inflight_bytes <= 0:
            raise InputError("the bytes in flight must be positive")
        object.__setattr__(self, "priority", np.asarray(self.priority, dtype=np.int64))


def _narrow(keys: np.ndarray) -> np.ndarray:
    """Non-negative integer keys as 16-bit ones when they fit: numpy sorts those stably by radix."""
    return keys.astype(np.int16) if len(keys) and keys.max() < 2**15 else keys


def _rank_within(keys: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements have the same key (non-negative)."""
    order = np.argsort(_narrow(keys), kind="stable")
    starts, counts = _segments(keys[order])
    ranks = np.empty(len(keys), np.int64)
    ranks[order] = np.arange(len(keys)) - np.repeat(starts, counts)
    return ranks


# ---- the event loop ---------------------------------------------------------------------------
_PENDING, _ACTIVE, _DONE, _NEVER = 0, 1, 2, 3


@dataclass
class _Active:
    """The active moves of a step (increasing positions) and their columns, read once per step:
    taken from the step before when no move started since, else gathered afresh."""

    act: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    released: np.ndarray
    keep: np.ndarray | None = None  # which of the step before's active moves these are
    by_dst: np.ndarray | None = None  # `act` by destination, then session order (set by `rates`)

    def kept(self, keep: np.ndarray) -> _Active:
        """The moves of this step that are still active in the next one."""
        return _Active(self.act[keep], self.src[keep], self.dst[keep], self.w[keep], self.released[keep], keep)


@dataclass
class _Step:
    """One advance of the event loop, kept until the next allocation is known."""

    t: float
    dt: float
    active: _Active
    rate: np.ndarray
    moved: np.ndarray  # catch-up bytes each active move sent during the step
    done: np.ndarray  # which active moves completed in it
    late: float  # share of the step that came after the capacity of completed moves was freed
    spare_out: np.ndarray  # per broker, bytes of capacity left unused during the step
    spare_in: np.ndarray

    @property
    def act(self) -> np.ndarray:
        return self.active.act


def _late_share(progress: np.ndarray, tau: np.ndarray, dt: float) -> float:
    """Capacity-weighted share of a step [0, dt] left after each completion at tau."""
    ok = np.isfinite(progress) & (progress > 0)
    if dt <= 0 or not ok.any():
        return 0.0
    weight = progress[ok]
    return float(np.sum(weight * (dt - tau[ok])) / (np.sum(weight) * dt))


class _Simulation:
    """State of one run of the event loop. Use `simulate`.

    Moves are held in session order (by leader, destination, fetcher thread; moves without a
    leader last): the active moves of a step are then increasing positions and every per-move
    gather of the step reads memory in order. The order of every sum is the session order, as
    it always was, so the numbers do not depend on it; `perm` maps back to the input's order
    for the result."""

    def __init__(self, inp: ModelInput, admission: Admission | None, tolerance: float) -> None:
        self.inp, self.admission, self.tol = inp, admission, tolerance
        m, b = len(inp), inp.n_brokers
        valid = np.flatnonzero(inp.source >= 0)
        # by leader, destination and fetcher thread, as one stable sort of one key (what a
        # lexsort of the three does, in half the time)
        threads = int(inp.fetcher.max(initial=0)) + 1
        gorder = valid[np.argsort((inp.source[valid] * b + inp.dest[valid]) * threads + inp.fetcher[valid], kind="stable")]
        self.perm = np.concatenate([gorder, np.flatnonzero(inp.source < 0)])
        self.inv = np.empty(m, np.int64)
        self.inv[self.perm] = np.arange(m)
        self.nv = nv = len(valid)
        self.src, self.dst, self.w = inp.source[self.perm], inp.dest[self.perm], inp.write_bps[self.perm]
        self.bytes, self.start_s = inp.bytes[self.perm], inp.start_s[self.perm]
        assert inp.released_bps is not None
        self.released = inp.released_bps[self.perm]
        self.srcp = np.maximum(self.src, 0)
        self.dorder = np.argsort(_narrow(self.dst[:nv]), kind="stable")  # by destination, then session order
        key = np.stack([self.src[:nv], self.dst[:nv], inp.fetcher[gorder]])
        new_session = np.concatenate(([True], np.any(key[:, 1:] != key[:, :-1], axis=0))) if nv else np.zeros(0, bool)
        self.session = np.zeros(m, np.int64)
        self.session[:nv] = np.cumsum(new_session) - 1
        self.status = np.where(self.src >= 0, _PENDING, _NEVER).astype(np.int8)
        # with admission: the moves not started yet in priority order, with their brokers
        queue = np.zeros(0, np.int64) if admission is None else self.inv[admission.priority]
        self.queue = queue[self.status[queue] == _PENDING]
        self.queue_src, self.queue_dst = self.srcp[self.queue], self.dst[self.queue]
        self.late_starts = bool(np.any(self.start_s > 0))  # some moves may not start at once
        self.pending = nv  # moves not started yet
        self.not_done = np.arange(m)  # a superset of the moves not done (see `_record_remaining`)
        self.boost_end = inp.credit_s
        self.boosting = self.boost_end > 0
        self.rem = self.bytes.astype(np.float64).copy()
        self.start = np.full(m, INF)
        self.finish = np.full(m, INF)
        self.limit = np.full(m, int(Limit.UNLIMITED), np.int8)
        self.limit[self.src < 0] = int(Limit.NO_LEADER)
        self.limit_broker = np.full(m, -1, np.int64)
        self.needed = np.full(m, np.nan)
        self.early = np.full(m, INF)  # finish times found when a step was settled
        self.in_sync_out = np.zeros(b)  # write rates of completed moves, still counted by quotas
        self.in_sync_in = np.zeros(b)
        self.inflight_out = np.zeros(b, np.int64)
        self.inflight_in = np.zeros(b, np.int64)
        self.inflight_bytes = 0.0
        self.bytes_out = np.zeros(b)
        self.bytes_in = np.zeros(b)
        self.warm_out = np.full(b, INF)
        self.warm_in = np.full(b, INF)
        self.warm_session = np.full(int(self.session.max(initial=-1)) + 1, INF)
        self.touched_out = np.ones(b, bool)
        self.touched_in = np.ones(b, bool)
        self.touched_session = np.ones(len(self.warm_session), bool)
        fetch = inp.fetch
        biggest = int(np.bincount(self.session[:nv]).max()) if nv else 0
        self.sessions_may_bind = math.isfinite(fetch.fetcher_bps) and biggest * fetch.partition_bps > fetch.fetcher_bps
        self.last_out = np.zeros(b)
        self.last_in = np.zeros(b)
        self.log: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
        self.stalled = False
        self.times: list[float] = []
        self.remaining: list[float] = []
        self.steps = 0

    # -- admission ------------------------------------------------------------------------------
    def admit(self, t: float) -> bool:
        """Start every eligible move the admission limits allow; zero-byte moves finish at once.
        Returns whether any move started."""
        started = False
        while self.pending:
            if self.admission is None:
                starters = np.flatnonzero((self.status == _PENDING) & (self.start_s <= t))
            else:
                starters = self._choose(t)
            if not len(starters):
                return started
            started = True
            self.status[starters] = _ACTIVE
            self.pending -= len(starters)
            self.start[starters] = t
            self._count(starters, +1)
            empty = starters[self.rem[starters] <= 0]
            if self.admission is None:  # in the input's order, as their completion sums them
                empty = empty[np.argsort(self.perm[empty], kind="stable")]
            if len(empty):
                self.finish[empty] = t
                self._complete(empty)
            if not len(empty) or self.admission is None:
                return started
        return started

    def _count(self, moves: np.ndarray, sign: int) -> None:
        b = self.inp.n_brokers
        self.touched_out[self.srcp[moves]] = True
        self.touched_in[self.dst[moves]] = True
        self.touched_session[self.session[moves]] = True
        self.inflight_out += sign * np.bincount(self.srcp[moves], minlength=b)
        self.inflight_in += sign * np.bincount(self.dst[moves], minlength=b)
        self.inflight_bytes += sign * float(self.bytes[moves].sum())

    def _complete(self, moves: np.ndarray) -> None:
        b = self.inp.n_brokers
        self.status[moves] = _DONE
        self.rem[moves] = 0.0
        self._count(moves, -1)
        if self.admission is not None and self.admission.release_finished:
            return
        self.in_sync_out += np.bincount(self.srcp[moves], weights=self.w[moves] - self.released[moves], minlength=b)
        self.in_sync_in += np.bincount(self.dst[moves], weights=self.w[moves], minlength=b)

    def _choose(self, t: float) -> np.ndarray:
        """Moves to start now, in priority order, within the per-broker and byte limits."""
        adm = self.admission
        assert adm is not None
        cap = adm.max_moves_per_broker
        big = np.iinfo(np.int64).max // 4
        free_out = np.full(self.inp.n_brokers, big) if cap is None else cap - self.inflight_out
        free_in = np.full(self.inp.n_brokers, big) if cap is None else cap - self.inflight_in
        budget = INF if adm.max_inflight_bytes is None else adm.max_inflight_bytes - self.inflight_bytes
        fit = (free_out[self.queue_src] > 0) & (free_in[self.queue_dst] > 0)
        if self.late_starts:
            fit &= self.start_s[self.queue] <= t
        where = np.flatnonzero(fit)  # candidates' places in the queue
        cand, cand_src, cand_dst = self.queue[where], self.queue_src[where], self.queue_dst[where]
        chosen: list[np.ndarray] = []
        taken: list[np.ndarray] = []
        nothing_in_flight = not self.inflight_out.any()
        for _ in range(16):
            if not len(cand):
                break
            ok = (_rank_within(cand_src) < free_out[cand_src]) & (_rank_within(cand_dst) < free_in[cand_dst])
            if math.isfinite(budget):
                fits = np.cumsum(np.where(ok, self.bytes[cand], 0.0)) <= budget
                if nothing_in_flight and not chosen and ok.any() and not fits[np.argmax(ok)]:
                    fits[np.argmax(ok)] = True  # a move larger than the budget runs alone
                    fits[np.argmax(ok) + 1:] = False
                ok &= fits
            picked = cand[ok]
            if not len(picked):
                break
            chosen.append(picked)
            taken.append(where[ok])
            free_out = free_out - np.bincount(cand_src[ok], minlength=len(free_out))
            free_in = free_in - np.bincount(cand_dst[ok], minlength=len(free_in))
            budget -= float(self.bytes[picked].sum())
            rest = ~ok
            rest[rest] = (free_out[cand_src[rest]] > 0) & (free_in[cand_dst[rest]] > 0)
            cand, cand_src, cand_dst, where = cand[rest], cand_src[rest], cand_dst[rest], where[rest]
        if not chosen:
            return np.zeros(0, np.int64)
        waiting = np.ones(len(self.queue), bool)
        waiting[np.concatenate(taken)] = False
        self.queue, self.queue_src, self.queue_dst = self.queue[waiting], self.queue_src[waiting], self.queue_dst[waiting]
        return np.concatenate(chosen)

    def next_start(self, t: float) -> float:
        """The next time a move becomes eligible by its start time, or the leaders' start-up
        credit runs out (capacity changes then too)."""
        later = (self.status == _PENDING) & (self.start_s > t) if self.pending else None
        first = float(self.start_s[later].min()) if later is not None and later.any() else INF
        return min(first, self.boost_end) if self._boost_on(t) else first

    def _boost_on(self, t: float) -> bool:
        return t < self.boost_end * (1 - 1e-12)

    def _boost(self, t: float) -> bool:
        """Track whether the leaders' start-up credit is on at `t`; True when that just changed
        (every sending broker's capacity then changes)."""
        on = self._boost_on(t)
        changed = on != self.boosting
        self.boosting = on
        if changed:
            self.touched_out[:] = True
        return changed

    # -- sharing ---------------------------------------------------------------------------------
    def rates(self, active: _Active, before: _Active | None) -> tuple[np.ndarray, np.ndarray, list[str], list[_Shared]]:
        """Max-min fair rates of the active moves and, per move, which kind of capacity binds
        (0: its own fetch limit, k: the k-th of the returned kinds). `before`: the step before's
        moves, when these are what is left of them."""
        inp, act, n = self.inp, active.act, len(active.act)
        out_cap = inp.out_capacity(self.in_sync_out, self.boosting)[0]
        in_cap = inp.in_capacity(self.in_sync_in)[0]
        shared: list[_Shared] = []
        kinds: list[str] = []
        src = active.src
        starts, counts = _segments(src)
        if np.isfinite(out_cap[src[starts]]).any():
            seg = np.repeat(np.arange(len(starts)), counts)
            shared.append(_Shared(starts, counts, src[starts], None, seg, seg, out_cap[src[starts]], self.warm_out,
                                  self.touched_out))
            kinds.append("out")
        pool = self.dorder if before is None or before.by_dst is None else before.by_dst
        by_dst = active.by_dst = pool[self.status[pool] == _ACTIVE]
        keys = self.dst[by_dst]
        starts, counts = _segments(keys)
        if np.isfinite(in_cap[keys[starts]]).any():
            local = np.empty(len(self.status), np.int64)
            local[act] = np.arange(n)
            order = local[by_dst]
            own = np.repeat(np.arange(len(starts)), counts)
            seg = np.empty(n, np.int64)
            seg[order] = own
            shared.append(_Shared(starts, counts, keys[starts], order, seg, own, in_cap[keys[starts]], self.warm_in,
                                  self.touched_in))
            kinds.append("in")
        own = inp.fetch.partition_bps
        if self.sessions_may_bind and n:
            sess = self.session[act]
            starts, counts = _segments(sess)
            if counts.max() * own > inp.fetch.fetcher_bps:
                cap = np.full(len(starts), inp.fetch.fetcher_bps)
                seg = np.repeat(np.arange(len(starts)), counts)
                shared.append(_Shared(starts, counts, sess[starts], None, seg, seg, cap, self.warm_session,
                                      self.touched_session))
                kinds.append("session")
        rate, which = _max_min_rates(own, shared, n)
        return rate, which, kinds, shared

    def limits(self, moves: np.ndarray, which: np.ndarray, kinds: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """What limits these moves (a Limit code) and the broker position it belongs to."""
        inp = self.inp
        default = Limit.FETCH_PARTITION if math.isfinite(inp.fetch.partition_bps) else Limit.UNLIMITED
        limit = np.full(len(moves), int(default), np.int8)
        broker = np.full(len(moves), -1, np.int64)
        for k, kind in enumerate(kinds):
            sel = which == k + 1
            if kind == "out":
                leader = inp.out_capacity(self.in_sync_out, self.boosting)[1]
                limit[sel] = np.where(leader[self.src[moves[sel]]], int(Limit.LEADER_THROTTLE), int(Limit.NETWORK_OUT))
                broker[sel] = self.src[moves[sel]]
            elif kind == "in":
                follower = inp.in_capacity(self.in_sync_in)[1]
                limit[sel] = np.where(follower[self.dst[moves[sel]]], int(Limit.FOLLOWER_THROTTLE), int(Limit.NETWORK_IN))
                broker[sel] = self.dst[moves[sel]]
            else:
                limit[sel] = int(Limit.FETCH_RESPONSE)
        return limit, broker

    # -- the loop ------------------------------------------------------------------------------
    def step_length(self, tau: np.ndarray, t: float, until_start: float) -> float:
        """How far to advance: to the first completion, or further by `tolerance` (a fraction of
        the active moves, or of the elapsed time), never past the next start."""
        tau_min = float(tau.min())
        if until_start < tau_min:
            return until_start
        dt = tau_min
        finite = tau[np.isfinite(tau)]
        if self.tol > 0 and len(finite) > 1:
            k = min(int(self.tol * len(tau)), len(finite) - 1)
            by_count = float(np.partition(finite, k)[k]) if k >= 1 else tau_min
            # With moves queued for a slot, growing steps by elapsed time would start them late.
            paced = self.admission is not None and bool(np.any(self.status == _PENDING))
            by_time = tau_min if paced else min(tau_min + self.tol * (t + tau_min), float(finite.max()))
            growth = tau_min + _MAX_GROWTH * (t + tau_min)
            dt = max(dt, min(max(min(by_count, growth), by_time), until_start))
        return dt

    def run(self) -> ModelResult:
        t = 0.0
        prev: _Step | None = None
        for _ in range(4 * len(self.status) + 8):
            boosted = self._boost(t)
            admitted = self.admit(t)
            started = boosted or admitted  # a capacity change is no lost capacity either
            before = None if prev is None or admitted else prev.active
            active = self._active() if before is None else before.kept(~prev.done)  # type: ignore[union-attr]
            act = active.act
            until_start = self.next_start(t) - t
            if not len(act):
                self._settle(prev, None, None, False)
                prev = None
                self._record_remaining(t)
                if math.isinf(until_start):
                    break
                t += until_start
                continue
            rate, which, kinds, shared = self.rates(active, before)
            self._settle(prev, active, rate, started)
            self._record_remaining(t)
            w, rem = active.w, self.rem[act]
            progress = rate - w
            moving = progress > _PROGRESS_EPS * np.where(np.isfinite(rate), rate, 1.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                tau = np.where(moving, rem / np.where(moving, progress, 1.0), INF)
            if np.isinf(tau.min()) and math.isinf(until_start):
                self._stall(act, rate, which, kinds, shared, t)
                prev = None
                break
            dt = self.step_length(tau, t, until_start)
            done = tau <= dt * (1 + 1e-12)
            moved = np.where(done, rem + w * np.where(done, tau, 0.0), rate * dt)
            self.rem[act] = np.where(done, 0.0, rem - np.where(np.isfinite(progress), progress, 0.0) * dt)
            finished = act[done]
            self.limit[finished], self.limit_broker[finished] = self.limits(finished, which[done], kinds)
            # never after the step's end, where the next event (and any slot they free) is
            self.finish[finished] = np.minimum(np.minimum(t + tau[done], t + dt), self.early[finished])
            self._complete(finished)
            prev = self._step_record(t, dt, active, rate, moved, progress, tau, done)
            t += dt
            self.steps += 1
        self._settle(prev, None, None, False)
        self._record_remaining(t)
        self._close_log(t)
        return self._result()

    def _active(self) -> _Active:
        act = np.flatnonzero(self.status[:self.nv] == _ACTIVE)
        return _Active(act, self.src[act], self.dst[act], self.w[act], self.released[act])

    def _step_record(self, t: float, dt: float, active: _Active, rate: np.ndarray, moved: np.ndarray,
                     progress: np.ndarray, tau: np.ndarray, done: np.ndarray) -> _Step:
        """Keep a step until the next allocation, with each broker's capacity left unused in it
        (called after its completions were recorded)."""
        b = self.inp.n_brokers
        # What the completed moves (few) add, computed for them alone: every other move adds
        # nothing to `begin` and exactly its `moved` to `used`, so the sums are the same.
        ended = np.flatnonzero(done)
        after = dt - tau[ended]
        synced = active.w[ended]
        sent = synced - active.released[ended]  # the leader also stops serving removed replicas
        spare = []
        for cap, ends, synced in ((self.inp.out_capacity(self.in_sync_out, self.boosting)[0], active.src, sent),
                                  (self.inp.in_capacity(self.in_sync_in)[0], active.dst, synced)):
            begin = cap + np.bincount(ends[ended], weights=synced, minlength=b)
            weights = moved.copy()
            weights[ended] += synced * after
            used = np.bincount(ends, weights=weights, minlength=b)
            with np.errstate(invalid="ignore"):
                spare.append(np.where(np.isfinite(begin), np.maximum(begin * dt - used, 0.0), INF))
        return _Step(t, dt, active, rate, moved, done, _late_share(progress[done], tau[done], dt), spare[0], spare[1])

    def _within_freed(self, prev: _Step, active: _Active, extra: np.ndarray) -> np.ndarray:
        """Per move, the factor that keeps each broker's credit within the capacity left unused
        during the step, so the correction never creates bandwidth."""
        b = self.inp.n_brokers
        gain = np.maximum(extra, 0.0)
        src, dst = active.src, active.dst
        asked_out = np.bincount(src, weights=gain, minlength=b)
        asked_in = np.bincount(dst, weights=gain, minlength=b)
        with np.errstate(divide="ignore", invalid="ignore"):
            f_out = np.where(asked_out > prev.spare_out, prev.spare_out / asked_out, 1.0)
            f_in = np.where(asked_in > prev.spare_in, prev.spare_in / asked_in, 1.0)
        return np.where(extra > 0, np.minimum(f_out[src], f_in[dst]), 1.0)

    def _settle(self, prev: _Step | None, active: _Active | None, rate: np.ndarray | None, started: bool) -> None:
        """Close the previous step: credit the moves that stayed active with the capacity freed
        by the moves that completed during it (trapezoid rule between the rates before and
        after), then log its traffic. Not done when moves started in between, whose arrival
        would be mistaken for lost capacity."""
        if prev is None:
            return
        if active is not None and rate is not None and prev.late > 0 and not started:
            act = active.act
            if active.keep is not None:
                i = np.flatnonzero(active.keep)
            else:
                where = np.empty(len(self.status), np.int64)
                where[prev.act] = np.arange(len(prev.act))
                i = where[act]
            r0 = prev.rate[i]
            both = np.isfinite(rate) & np.isfinite(r0)
            extra = np.where(both, rate - r0, 0.0) * prev.late * prev.dt
            extra *= self._within_freed(prev, active, extra)
            rem = self.rem[act]
            through = rem - extra <= 0  # would have completed during the previous step
            if through.any():
                # progress p0 until the completions (at `freed` into the step), then faster by
                # exactly the credit given, so the finish time agrees with the bytes credited
                p0 = r0[through] - active.w[through]
                freed = prev.dt * (1 - prev.late)
                p1 = p0 + extra[through] / (prev.late * prev.dt)
                begin = rem[through] + p0 * prev.dt
                head = p0 * freed
                with np.errstate(divide="ignore", invalid="ignore"):
                    when = np.where(begin <= head, begin / p0, freed + (begin - head) / p1)
                self.early[act[through]] = prev.t + np.clip(np.nan_to_num(when, nan=prev.dt), 0.0, prev.dt)
                extra[through] = rem[through] * (1 - 1e-9)
            self.rem[act] = rem - extra
            prev.moved[i] += extra
        self._record_rates(prev.t, prev.dt, prev.active, prev.moved)

    def _stall(self, act: np.ndarray, rate: np.ndarray, which: np.ndarray, kinds: list[str],
               shared: list[_Shared], t: float) -> None:
        """Nothing can progress any more: record why, and what each limit would need to be."""
        inp = self.inp
        limit, broker = self.limits(act, which, kinds)
        self.limit[act], self.limit_broker[act] = limit, broker
        w = self.w[act]
        out_leader = inp.out_capacity(self.in_sync_out, self.boosting)[1]
        in_follower = inp.in_capacity(self.in_sync_in)[1]
        needed = np.where(limit == int(Limit.FETCH_PARTITION), w, np.nan)
        for kind, s in zip(kinds, shared):
            code = {"out": (Limit.LEADER_THROTTLE, Limit.NETWORK_OUT), "in": (Limit.FOLLOWER_THROTTLE, Limit.NETWORK_IN),
                    "session": (Limit.FETCH_RESPONSE, Limit.FETCH_RESPONSE)}[kind]
            bound = np.isin(limit, [int(code[0]), int(code[1])])
            seg_of = s.seg
            nseg = len(s.starts)
            others = np.bincount(seg_of[~bound], weights=rate[~bound], minlength=nseg)
            k = np.bincount(seg_of[bound], minlength=nseg)
            wmax = np.zeros(nseg)
            np.maximum.at(wmax, seg_of[bound], w[bound])
            if kind == "out":
                base = np.where(out_leader[s.key], inp.leader_base[s.key], inp.client_out[s.key]) + self.in_sync_out[s.key]
            elif kind == "in":
                base = np.where(in_follower[s.key], inp.follower_base[s.key], inp.client_in[s.key]) + self.in_sync_in[s.key]
            else:
                base = np.zeros(nseg)
            need_seg = base + others + k * wmax
            needed = np.where(bound, need_seg[seg_of], needed)
        self.needed[act] = needed
        self.stalled = True
        self._log(t, np.bincount(self.src[act], weights=rate, minlength=inp.n_brokers),
                  np.bincount(self.dst[act], weights=rate, minlength=inp.n_brokers))
        queued = np.flatnonzero(self.status == _PENDING)
        self.limit[queued] = int(Limit.QUEUED)

    # -- records ---------------------------------------------------------------------------------
    def _record_remaining(self, t: float) -> None:
        self.times.append(t)
        # summed in the input's order, over the moves not done (every other one has nothing left)
        self.not_done = self.not_done[self.status[self.not_done] != _DONE]
        if 4 * len(self.not_done) > len(self.rem):
            self.remaining.append(float(self.rem[self.inv].sum()))
        else:
            left = np.zeros(len(self.rem))
            left[self.perm[self.not_done]] = self.rem[self.not_done]
            self.remaining.append(float(left.sum()))

    def _record_rates(self, t: float, dt: float, active: _Active, moved: np.ndarray) -> None:
        b = self.inp.n_brokers
        out = np.bincount(active.src, weights=moved, minlength=b)
        into = np.bincount(active.dst, weights=moved, minlength=b)
        self.bytes_out += out
        self.bytes_in += into
        if dt > 0:
            self._log(t, out / dt, into / dt)

    def _log(self, t: float, out: np.ndarray, into: np.ndarray) -> None:
        changed = np.flatnonzero(~np.isclose(out, self.last_out, rtol=1e-9, atol=1e-6)
                                 | ~np.isclose(into, self.last_in, rtol=1e-9, atol=1e-6))
        if len(changed):
            self.log.append((t, changed, out[changed], into[changed]))
            self.last_out, self.last_in = out, into

    def _close_log(self, t: float) -> None:
        if not self.stalled:
            self._log(t, np.zeros(self.inp.n_brokers), np.zeros(self.inp.n_brokers))

    def _critical(self, finish: np.ndarray, limit: np.ndarray, limit_broker: np.ndarray) -> tuple[Critical, ...]:
        """The limits binding the moves that finish last (or never)."""
        if not len(finish):
            return ()
        makespan = float(finish.max())
        if math.isinf(makespan):
            last = np.isinf(finish)
        else:
            last = finish >= makespan * 0.95
        limits, brokers = limit[last].astype(np.int64), limit_broker[last]
        pairs, counts = np.unique(np.stack([limits, brokers]), axis=1, return_counts=True)
        order = np.lexsort((pairs[1], pairs[0], -counts))
        ids = self.inp.broker_ids
        return tuple(
            Critical(Limit(int(pairs[0, i])), int(ids[pairs[1, i]]) if pairs[1, i] >= 0 else None, int(counts[i]))
            for i in order
        )

    def _result(self) -> ModelResult:
        inp, b = self.inp, self.inp.n_brokers
        start, finish, limit = self.start[self.inv], self.finish[self.inv], self.limit[self.inv]
        limit_broker, needed = self.limit_broker[self.inv], self.needed[self.inv]
        lower = lower_bound(inp)
        finite = finish[np.isfinite(finish)]
        if (self.tol > 0 and self.admission is None and len(finite) and math.isfinite(lower.seconds)
                and finite.max() < lower.seconds):
            # Batched completions can land a hair under the proven bound; no real run can.
            finish = np.where(finish == finite.max(), lower.seconds, finish)
        busy = np.zeros(b)
        led = inp.source >= 0
        np.maximum.at(busy, inp.source[led], finish[led])
        np.maximum.at(busy, inp.dest, finish)
        done = np.isfinite(finish)
        span = np.where(done, finish, 0.0) - np.where(done, start, 0.0)
        copied = np.where(done, inp.bytes + inp.write_bps * span, INF)
        if self.log:
            rate_time = np.concatenate([np.full(len(c), t) for t, c, _, _ in self.log])
            rate_broker = np.concatenate([c for _, c, _, _ in self.log])
            rate_out = np.concatenate([o for _, _, o, _ in self.log])
            rate_in = np.concatenate([i for _, _, _, i in self.log])
        else:
            rate_time, rate_out, rate_in = np.zeros(0), np.zeros(0), np.zeros(0)
            rate_broker = np.zeros(0, np.int64)
        return ModelResult(
            broker_ids=inp.broker_ids, start_s=start, finish_s=finish, limit=limit,
            limit_broker=limit_broker, needed_bps=needed, copied_bytes=copied,
            bytes_out=self.bytes_out, bytes_in=self.bytes_in, busy_until=busy,
            times=np.asarray(self.times), remaining_bytes=np.asarray(self.remaining),
            rate_time=rate_time, rate_broker=rate_broker, rate_out=rate_out, rate_in=rate_in,
            critical=self._critical(finish, limit, limit_broker), lower=lower, steps=self.steps,
        )


def simulate(inp: ModelInput, *, admission: Admission | None = None, tolerance: float = DEFAULT_TOLERANCE) -> ModelResult:
    """Run the replication model: when each move completes, and what limits it.

    Args:
        inp: the moves, rates and limits.
        admission: optional limits on moves in flight (see `Admission`); without it every move
            starts at its `start_s`.
        tolerance: completions that fall within this fraction of the active moves, or of the
            elapsed time, are processed as one event; 0 processes every completion on its own.
            Rates still change at every event, so the error stays around this fraction.

    Raises:
        InputError: a tolerance outside [0, 1) or a priority that is not a permutation.
    """
    if not 0 <= tolerance < 1:
        raise InputError("the model tolerance must be at least 0 and below 1")
    if admission is not None:
        prio = admission.priority
        if len(prio) != len(inp) or (len(prio) and (prio.min() < 0 or prio.max() >= len(inp)
                                                   or np.any(np.bincount(prio, minlength=len(inp)) != 1))):
            raise InputError("the admission priority must list every move exactly once")
    return _Simulation(inp, admission, tolerance).run()


# ---- building from a cluster ------------------------------------------------------------------
def java_string_hash(text: str) -> int:
    """Java's String.hashCode (32-bit, over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_ids(state: ClusterState, rows: np.ndarray, num_fetchers: int) -> np.ndarray:
    """Kafka's AbstractFetcherManager.getFetcherId: abs(31 * topic.hashCode + partition) % n."""
    if num_fetchers <= 1:
        return np.zeros(len(rows), np.int64)
    topic_hash = np.array([java_string_hash(t) for t in state.topics], dtype=np.int64)
    raw = 31 * topic_hash[state.topic_index[rows]] + state.partition[rows].astype(np.int64)
    as_int = ((raw + (1 << 31)) % (1 << 32)) - (1 << 31)  # Java int overflow
    return np.where(as_int == -(1 << 31), 0, np.abs(as_int)) % num_fetchers


def session_kinds(isr_keys: np.ndarray, isr_written: np.ndarray, move_keys: np.ndarray) -> np.ndarray:
    """Per move, its `Session` from what the sessions carry: `isr_keys` are the sessions (any
    integer key for leader, follower, fetcher thread) of in-sync followers, `isr_written` whether
    their partition takes writes, `move_keys` the moves' sessions."""
    written = np.asarray(isr_keys)[np.asarray(isr_written, dtype=bool)]
    session = np.where(np.isin(move_keys, written), int(Session.WRITTEN_ISR),
                       np.where(np.isin(move_keys, isr_keys), int(Session.IDLE_ISR), int(Session.ALONE)))
    return session.astype(np.int8)


def fetch_sessions(state: ClusterState, rows: np.ndarray, dest: np.ndarray, num_fetchers: int) -> np.ndarray:
    """Per move (partition `rows`, new replica on `dest`): what else its fetcher session (the
    partition's leader, `dest`, the fetcher thread) carries, as a `Session`: in-sync replicas on
    `dest` of other partitions with that leader and thread, and whether one of those takes
    writes (`session_kinds`)."""
    lengths = np.diff(state.isr_offsets)
    isr_rows = np.repeat(np.arange(len(state)), lengths)
    lead = state.leader.astype(np.int64)
    follower = state.isr_ids.astype(np.int64)
    keep = (lead[isr_rows] >= 0) & (follower != lead[isr_rows])
    isr_rows, follower = isr_rows[keep], follower[keep]
    move_lead = lead[rows]
    ids = np.unique(np.concatenate([follower, lead[isr_rows], dest.astype(np.int64), move_lead]))
    n_ids, n_f = len(ids), max(num_fetchers, 1)

    def key(leader: np.ndarray, to: np.ndarray, fetcher: np.ndarray) -> np.ndarray:
        return (np.searchsorted(ids, leader) * n_ids + np.searchsorted(ids, to)) * n_f + fetcher

    isr_keys = key(lead[isr_rows], follower, fetcher_ids(state, isr_rows, num_fetchers))
    move_keys = key(move_lead, dest.astype(np.int64), fetcher_ids(state, rows, num_fetchers))
    return session_kinds(isr_keys, state.produce_bps[isr_rows] > 0, move_keys)


def move_sessions(state: ClusterState, rows: np.ndarray, dest: np.ndarray, source: np.ndarray,
                  num_fetchers: int) -> tuple[np.ndarray, np.ndarray]:
    """Per move, its `Session` (`fetch_sessions`) and whether its leader `source` is warm
    (`warm_leaders`): what `ModelInput.session` and `.warm` hold. A reassignment under way has
    had its throttles running, so their credit is spent."""
    session = fetch_sessions(state, rows, dest, num_fetchers)
    warm = np.isin(source, warm_leaders(state)) & (not state.reassignments)
    return session, warm


def warm_leaders(state: ClusterState) -> np.ndarray:
    """Broker ids that lead a partition with an in-sync follower: they answer follower fetches
    all the time, so their leader quota windows are warm (`ModelInput.warm`)."""
    followers = np.maximum(np.diff(state.isr_offsets) - 1, 0)
    lead = state.leader.astype(np.int64)
    return np.unique(lead[(followers > 0) & (lead >= 0)])


def client_traffic(state: ClusterState) -> tuple[np.ndarray, np.ndarray]:
    """Per broker (in `state.brokers` order), bytes/s in and out that are not catch-up: produce
    into leaders, follower replication, and consumers reading from leaders."""
    b = len(state.brokers)
    ids = np.array(state.broker_ids, dtype=np.int64)
    pos = np.full(int(max(ids.max(initial=0), state.replica_ids.max(initial=0))) + 1, -1)
    pos[ids] = np.arange(b)
    rf = state.replication_factors
    rows = np.repeat(np.arange(len(state)), rf)
    replica = pos[state.replica_ids]
    leader = np.where(state.leader >= 0, pos[np.maximum(state.leader, 0)], -1)
    follower = (state.replica_ids != state.leader[rows]) & (replica >= 0)
    produce, consume = state.produce_bps, state.consume_bps
    has_leader = leader >= 0
    into = np.bincount(leader[has_leader], weights=produce[has_leader], minlength=b)
    into += np.bincount(replica[follower], weights=produce[rows[follower]], minlength=b)
    out = np.bincount(leader[has_leader], weights=consume[has_leader], minlength=b)
    lead_of = leader[rows[follower]]
    ok = lead_of >= 0
    out += np.bincount(lead_of[ok], weights=produce[rows[follower]][ok], minlength=b)
    return into, out


def from_moves(
    state: ClusterState,
    moves: Any = None,
    *,
    row: np.ndarray | None = None,
    dest: np.ndarray | None = None,
    bytes: np.ndarray | None = None,
    write_bps: np.ndarray | None = None,
    released_bps: np.ndarray | None = None,
    start_s: float | np.ndarray = 0.0,
    leader_rate: PerBroker = INF,
    follower_rate: PerBroker = INF,
    fetch: FetchLimits | None = None,
) -> ModelInput:
    """Model input for moves of a cluster: columns `row` (partition row in `state`), `dest`
    (broker receiving a new replica), `bytes`, `write_bps` and, when the moves have it,
    `released_bps`, taken from `moves` (any object with those attributes, such as the planner's
    Moves) unless given one by one.

    Each move copies from the partition's current leader, as Kafka does (a `source` column, if
    any, is not used). NIC capacities come from the brokers, client traffic from the partitions'
    produce and consume rates, and the in-sync followers of moving partitions count against
    their leader's quota because Kafka's tool throttles every replica of a moving partition.
    What each move's fetcher session also carries comes from the ISRs (`fetch_sessions`), and
    every move starts warm where its leader has in-sync followers (`warm_leaders`) unless a
    reassignment is already under way in `state` (its throttles have run).

    Raises:
        InputError: a row outside the cluster or a destination broker it does not have.
    """
    def column(name: str, given: Any) -> np.ndarray:
        if given is not None:
            return np.asarray(given)
        if moves is None or not hasattr(moves, name):
            raise InputError(f"the moves have no '{name}' column")
        return np.asarray(getattr(moves, name))

    rows = column("row", row).astype(np.int64)
    dst = column("dest", dest).astype(np.int64)
    size = column("bytes", bytes).astype(np.float64)
    writes = column("write_bps", write_bps).astype(np.float64)
    if released_bps is None and moves is not None and hasattr(moves, "released_bps"):
        released_bps = np.asarray(moves.released_bps)
    if len(rows) and (rows.min() < 0 or rows.max() >= len(state)):
        raise InputError("a move names a partition row that is not in the cluster")
    fetch = fetch if fetch is not None else FetchLimits()
    ids = np.array(state.broker_ids, dtype=np.int64)
    leaders = state.leader[rows].astype(np.int64)
    leaders = np.where(np.isin(leaders, ids), leaders, NO_LEADER)
    net_in = np.array([b.network_in_bps if b.network_in_bps is not None else INF for b in state.brokers], dtype=np.float64)
    net_out = np.array([b.network_out_bps if b.network_out_bps is not None else INF for b in state.brokers], dtype=np.float64)
    if np.isfinite(net_in).any() or np.isfinite(net_out).any():
        client_in, client_out = client_traffic(state)
    else:
        client_in, client_out = np.zeros(len(ids)), np.zeros(len(ids))
    moving = np.unique(rows)
    isr_followers = np.maximum(np.diff(state.isr_offsets)[moving] - 1, 0)
    lead = state.leader[moving].astype(np.int64)
    known = np.isin(lead, ids)
    pos = np.searchsorted(ids, lead[known])
    leader_base = np.bincount(pos, weights=(state.produce_bps[moving] * isr_followers)[known], minlength=len(ids))
    session, warm = move_sessions(state, rows, dst, leaders, fetch.num_fetchers)
    return ModelInput.build(
        broker_ids=ids, source=leaders, dest=dst, bytes=size, write_bps=writes, start_s=start_s,
        fetcher=fetcher_ids(state, rows, fetch.num_fetchers), session=session, warm=warm, leader_rate=leader_rate,
        follower_rate=follower_rate, network_in=net_in, network_out=net_out, client_in=client_in,
        client_out=client_out, leader_base=leader_base, fetch=fetch,
        released_bps=0.0 if released_bps is None else released_bps,
    )
