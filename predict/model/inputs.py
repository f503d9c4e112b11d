"""The replication model's inputs: the moves and the brokers as plain arrays (`ModelInput`), what
fetches get of each broker's throttles and the capacity left for catch-up, and the limits on
moves in flight of a schedule (`Admission`)."""
from __future__ import annotations

import math

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import NO_LEADER
from kreassign.predict.model.kafka import (
    INF,
    LEADER_COLD_CREDIT_S,
    LEADER_FLOOD_S,
    LEADER_FLOOD_SPANS,
    FetchLimits,
    Session,
)

PerBroker = float | Sequence[float] | np.ndarray | Mapping[int, float]


def broker_positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`np.searchsorted(sorted_ids, ids)`, by a table over the ids' range when it is small next
    to the number of lookups: a gather per move instead of a binary search (1M moves on 2,000
    brokers: 6 ms instead of 50, and the simulation looks the moves' brokers up five times)."""
    if not len(sorted_ids):
        return np.zeros(len(ids), np.int64)
    low, high = int(sorted_ids[0]), int(sorted_ids[-1])
    if high - low > len(ids) // 4:
        return np.searchsorted(sorted_ids, ids)
    table = np.append(np.searchsorted(sorted_ids, np.arange(low, high + 1)), len(sorted_ids))
    return table[np.clip(ids, low, high + 1) - low]


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
    throttle starts, so its leader throttle floods once a quota span (`leader_flood`); None: no (a
    throttle already running, as in the middle of a reassignment, has used it up)"""
    fresh: bool = False
    """the throttles start with the moves at time 0, so a leader that is not `warm` starts cold
    with one window of credit (LEADER_COLD_CREDIT_S); False: they are already running (or the
    caller does not say), no cold credit"""

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
        fresh: bool = False,
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
            idx = broker_positions(sorted_ids, values)
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
            session=per_move(session, np.int8), warm=per_move(warm, np.bool_), fresh=bool(fresh),
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
    def _throttling_leaders(self) -> np.ndarray:
        """Per broker: it sends a move under a finite leader throttle, with fetch limits on (what
        a leader throttle's first seconds need to matter)."""
        led = self.source >= 0
        sends = np.bincount(self.source[led], minlength=self.n_brokers) > 0
        return sends & np.isfinite(self.leader_rate) & (self.fetch.round_trip_s > 0)

    @cached_property
    def leader_flood(self) -> np.ndarray:
        """Per broker, the bytes its warm leader throttle lets through at once in each quota span
        (LEADER_FLOOD_S of its rate; the event loop spends and refills it, `Capacity`): where a
        move it sends is `warm`, its leader throttle is finite and fetch limits are on; 0
        elsewhere. A warm leader records every response to its followers (zero bytes of
        throttled partitions until the throttle lists some), so when the throttle comes its
        `SimpleRate` windows span their full length, empty; fetches flood until they hold rate
        x span, those bytes drop out together a span later, and the next flood comes."""
        led = self.source >= 0
        warm = np.bincount(self.source[led], weights=self.warm[led], minlength=self.n_brokers) > 0
        on = warm & self._throttling_leaders
        flood = np.where(on, np.where(on, self.leader_rate, 0.0) * LEADER_FLOOD_S, 0.0)
        flood.setflags(write=False)
        return flood

    @cached_property
    def cold_credit(self) -> np.ndarray:
        """Bytes a cold leader throttle (no follower fetched from it in the last quota span) lets
        through at once when the throttles are `fresh`: `SimpleRate` divides by at least one
        window, so LEADER_COLD_CREDIT_S of the rate goes through; 0 for warm leaders (they
        flood, `leader_flood`) and where the throttles are already running."""
        on = self._throttling_leaders & (self.leader_flood == 0) & self.fresh
        credit = np.where(on, np.where(on, self.leader_rate, 0.0) * LEADER_COLD_CREDIT_S, 0.0)
        credit.setflags(write=False)
        return credit

    @property
    def leader_credit(self) -> np.ndarray:
        """The most each leader throttle sends beyond its steady share over a run (what lower
        bounds count): a warm leader's first flood (`leader_flood`) and what its floods carry
        above the steady share while the model follows them (LEADER_FLOOD_SPANS: each is the
        whole rate), a cold one's `cold_credit`."""
        on = self.leader_flood > 0
        # a flood per measured span: what one carries above the steady share over that span
        gap = (np.where(on, self.leader_rate, 0.0) * LEADER_FLOOD_S
               - np.where(on, self.leader_quota, 0.0) * self.fetch.measured_span_s)
        return np.where(on, self.leader_flood + LEADER_FLOOD_SPANS * np.maximum(gap, 0.0), self.cold_credit)

    @property
    def credit_s(self) -> float:
        """How long the model spreads `cold_credit` over, from time 0: one quota span (the
        first fetches fill the window the leader divides by); 0 without it."""
        return self.fetch.measured_span_s if self.cold_credit.any() else 0.0

    def out_capacity(self, in_sync_out: np.ndarray, boost: bool = False,
                     flood: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Capacity each broker has left for sending catch-up, and whether the leader throttle
        (what fetches get of it, `leader_quota`) rather than the NIC is what limits it. `boost`
        adds `cold_credit` spread over `credit_s` (the model's first seconds). `flood`, per
        broker: 1 where a warm leader's flood of this span is not spent (its throttle does not
        hold fetches back), 0 where it is (it holds them all), NaN where floods are not followed
        (its steady share)."""
        quota = self.leader_quota + (self.cold_credit / self.credit_s if boost and self.credit_s > 0 else 0.0)
        leader = quota - self.leader_base - in_sync_out
        if flood is not None:
            leader = np.where(np.isnan(flood), leader, np.where(flood > 0, INF, 0.0))
        nic = self.network_out - self.client_out - in_sync_out
        return np.maximum(np.minimum(leader, nic), 0.0), leader <= nic

    def in_capacity(self, in_sync_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Capacity each broker has left for receiving catch-up, and whether the follower
        throttle (what fetches get of it, `follower_quota`) rather than the NIC limits it."""
        follower = self.follower_quota - self.follower_base - in_sync_in
        nic = self.network_in - self.client_in - in_sync_in
        return np.maximum(np.minimum(follower, nic), 0.0), follower <= nic


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
    poll_s: float = 0.0
    """How often the pacer looks for finished moves (`execute --interval`), from time 0: a
    finished move's slot frees at the first poll at or after its finish. 0: at once."""
    wave_start_s: float = 0.0
    """How long after that poll the next move starts copying: the submission, the controller's
    new replica and its fetcher (`WAVE_START_S`). 0: at once."""

    def __post_init__(self) -> None:
        if self.max_moves_per_broker is not None and self.max_moves_per_broker < 1:
            raise InputError("the number of moves per broker must be at least 1")
        if self.max_inflight_bytes is not None and self.max_inflight_bytes <= 0:
            raise InputError("the bytes in flight must be positive")
        if not (self.poll_s >= 0 and self.wave_start_s >= 0 and math.isfinite(self.poll_s + self.wave_start_s)):
            raise InputError("the pacer's poll interval and wave start must be finite and not negative")
        object.__setattr__(self, "priority", np.asarray(self.priority, dtype=np.int64))


def finished_still_count(admission: Admission | None) -> bool:
    """Whether a finished move's new replica keeps counting against the quotas until the end of
    the run (one throttle list for the whole plan: no admission, or `release_finished` off)."""
    return admission is None or not admission.release_finished


def in_sync_traffic(src: np.ndarray, dst: np.ndarray, writes: np.ndarray, released: np.ndarray,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per broker position, the (sent, received) replication that finished moves leave for the
    quotas to count: each leader sends its new follower the partition's writes, less those of
    the replica the move removed, and each new follower receives them. A move whose source is
    -1 (no leader left to send) only receives."""
    led = src >= 0
    return (np.bincount(src[led], weights=(writes - released)[led], minlength=n),
            np.bincount(dst, weights=writes, minlength=n))
