"""The replication step: leaders take writes, lagging replicas copy from their leader under
KIP-73 quotas and the brokers' network capacity, and caught-up replicas are reported for the ISR.

A *flow* is one out-of-sync replica on a live broker fetching from a live leader. The flow table
is rebuilt (from the engine's partitions) only when membership, leadership or throttle configs
change; each tick is a handful of numpy operations over flows and brokers.

KIP-73 rules modelled (broker-semantics Part B §2–§3):
* a flow is throttled on the leader side if its partition is in the leader list as
  `partition:leader` (or `*`), and on the follower side if it is in the follower list as
  `partition:follower` (or `*`); in-sync replicas are never throttled;
* inclusion-based: while a broker's measured rate is above its bound, its throttled flows get
  no bytes that tick; otherwise they copy as fast as the network allows;
* bytes are recorded after the transfer: the leader counts every byte it sent for throttled
  partitions (in-sync followers included), the follower every byte it appended for them.

Fetch limits (Part B §2.6, `kreassign.sandbox.fetch`): per tick a flow copies at most
`replica.fetch.max.bytes` per fetch round, and the flows of one fetcher session (leader,
follower, fetcher thread) share `replica.fetch.response.max.bytes` per round, as the replication
model's fetch limits do. In-sync replication is left out of the sessions, as in the model.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kreassign.sandbox.configs import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    NUM_REPLICA_FETCHERS,
    ConfigStore,
)
from kreassign.sandbox.fetch import FetchConfig, fetcher_id
from kreassign.sandbox.quota import SampledRates
from kreassign.sandbox.state import BrokerState, PartitionState

CAUGHT_UP_BYTES = 0.5


@dataclass
class FlowTable:
    """Columns of the active flows, plus per-broker constants for the current topology."""

    part: list[PartitionState]
    broker: np.ndarray        # follower broker id per flow
    row: np.ndarray           # partition row per flow
    src: np.ndarray           # leader position per flow
    dst: np.ndarray           # follower position per flow
    session: np.ndarray       # fetcher session (leader, follower, fetcher thread) per flow
    n_sessions: int
    size: np.ndarray          # bytes the follower holds
    leader_throttled: np.ndarray
    follower_throttled: np.ndarray
    growing: np.ndarray       # rows whose leader is alive (they take writes)
    out_isr_bps: np.ndarray   # per broker: in-sync replication sent
    in_isr_bps: np.ndarray    # per broker: in-sync replication received
    leader_quota_isr_bps: np.ndarray
    follower_quota_isr_bps: np.ndarray
    bounds: np.ndarray        # leader bounds of every broker, then follower bounds
    index: dict[tuple[int, int], int]   # (row, follower broker) -> flow


class Replication:
    """Per-broker quota windows and the flow table; `step` advances one tick."""

    def __init__(self, broker_ids: Sequence[int], *, network_bps: float, fetch: FetchConfig | None = None,
                 samples: int = 11, window: float = 1.0) -> None:
        self.broker_ids = list(broker_ids)
        self.pos = {b: i for i, b in enumerate(self.broker_ids)}
        self.network_bps = network_bps
        self.fetch = fetch if fetch is not None else FetchConfig()
        # rows 0..n-1: leader-side quota of each broker; rows n..2n-1: follower-side quota
        self.rates = SampledRates(2 * len(self.broker_ids), samples=samples, window=window)
        self.table: FlowTable | None = None

    def lagging_size(self, p: PartitionState, broker_id: int) -> float:
        """The current size of an out-of-sync replica, from the live table if it is a flow."""
        t = self.table
        i = t.index.get((p.row, broker_id)) if t is not None else None
        return float(t.size[i]) if t is not None and i is not None else p.lagging[broker_id]

    def flush(self) -> None:
        """Write flow sizes back to the partitions' `lagging` maps and drop the table."""
        t = self.table
        if t is None:
            return
        for i, p in enumerate(t.part):
            b = int(t.broker[i])
            if b in p.lagging:
                p.lagging[b] = float(t.size[i])
        self.table = None

    def build(self, partitions: Sequence[PartitionState], brokers: Mapping[int, BrokerState],
              produce_bps: np.ndarray, configs: ConfigStore, n_rows: int) -> FlowTable:
        nb = len(self.broker_ids)
        parts: list[PartitionState] = []
        fb: list[int] = []
        rows: list[int] = []
        lthr: list[bool] = []
        fthr: list[bool] = []
        growing = np.zeros(n_rows, dtype=bool)
        out_isr = np.zeros(nb)
        in_isr = np.zeros(nb)
        lq_isr = np.zeros(nb)
        fq_isr = np.zeros(nb)
        lists: dict[str, tuple[object, object]] = {}
        for p in partitions:
            lead = p.leader
            if lead < 0 or not brokers[lead].alive:
                continue
            growing[p.row] = True
            if p.topic not in lists:
                lists[p.topic] = (configs.throttled(p.topic, LEADER_REPLICAS), configs.throttled(p.topic, FOLLOWER_REPLICAS))
            ll, fl = lists[p.topic]
            lt = ll.covers(p.index, lead)  # type: ignore[attr-defined]
            rate = float(produce_bps[p.row])
            for b in p.replicas:
                if b == lead or not brokers[b].alive:
                    continue
                ft = fl.covers(p.index, b)  # type: ignore[attr-defined]
                if b in p.lagging:
                    parts.append(p)
                    fb.append(b)
                    rows.append(p.row)
                    lthr.append(lt)
                    fthr.append(ft)
                elif rate > 0:
                    li, fi = self.pos[lead], self.pos[b]
                    out_isr[li] += rate
                    in_isr[fi] += rate
                    if lt:
                        lq_isr[li] += rate
                    if ft:
                        fq_isr[fi] += rate
        broker_arr = np.array(fb, dtype=np.int64)
        src = np.array([self.pos[p.leader] for p in parts], dtype=np.int64)
        dst = np.array([self.pos[b] for b in fb], dtype=np.int64)
        session, n_sessions = self._sessions(parts, fb, src, dst, configs)
        self.table = FlowTable(
            part=parts, broker=broker_arr, row=np.array(rows, dtype=np.int64), src=src, dst=dst,
            session=session, n_sessions=n_sessions,
            size=np.array([p.lagging[b] for p, b in zip(parts, fb)], dtype=np.float64),
            leader_throttled=np.array(lthr, dtype=bool), follower_throttled=np.array(fthr, dtype=bool),
            growing=growing, out_isr_bps=out_isr, in_isr_bps=in_isr, leader_quota_isr_bps=lq_isr,
            follower_quota_isr_bps=fq_isr,
            bounds=np.array([configs.rate(b, LEADER_RATE) for b in self.broker_ids]
                            + [configs.rate(b, FOLLOWER_RATE) for b in self.broker_ids]),
            index={(r, b): i for i, (r, b) in enumerate(zip(rows, fb))},
        )
        return self.table

    def _sessions(self, parts: Sequence[PartitionState], followers: Sequence[int], src: np.ndarray,
                  dst: np.ndarray, configs: ConfigStore) -> tuple[np.ndarray, int]:
        """Number the fetcher sessions: one per (leader, follower, fetcher thread of the follower)."""
        if not parts:
            return np.zeros(0, dtype=np.int64), 0
        threads = {b: self.num_fetchers(b, configs) for b in set(followers)}
        fid = np.array([fetcher_id(p.topic, p.index, threads[b]) for p, b in zip(parts, followers)], dtype=np.int64)
        key = (src * len(self.broker_ids) + dst) * max(threads.values()) + fid
        uniq, session = np.unique(key, return_inverse=True)
        return session.astype(np.int64), len(uniq)

    def num_fetchers(self, broker_id: int, configs: ConfigStore) -> int:
        """A follower's `num.replica.fetchers`: its dynamic value if set (per broker or cluster-wide)."""
        value = configs.dynamic(broker_id, NUM_REPLICA_FETCHERS)
        return max(int(value), 1) if value is not None else self.fetch.num_fetchers

    def step(self, log_end: np.ndarray, produce_bps: np.ndarray, now: float, dt: float,
             rebuild: Callable[[], FlowTable]) -> list[tuple[PartitionState, int]]:
        """Advance `dt` seconds from `now`; returns the (partition, broker) replicas that caught up."""
        t = self.table if self.table is not None else rebuild()
        nb = len(self.broker_ids)
        over = self.rates.exceeded(t.bounds, now)
        leader_over, follower_over = over[:nb], over[nb:]
        growing = t.growing[: len(log_end)]
        log_end[growing] += produce_bps[growing] * dt
        lrec = t.leader_quota_isr_bps * dt
        frec = t.follower_quota_isr_bps * dt
        caught: list[tuple[PartitionState, int]] = []
        if len(t.row):
            want = log_end[t.row] - t.size
            blocked = (t.leader_throttled & leader_over[t.src]) | (t.follower_throttled & follower_over[t.dst])
            rounds = self.fetch.rounds(dt)
            want = np.where(blocked, 0.0, np.clip(want, 0.0, self.fetch.partition_max_bytes * rounds))
            cap_out = np.maximum(self.network_bps - t.out_isr_bps, 0.0) * dt
            cap_in = np.maximum(self.network_bps - t.in_isr_bps, 0.0) * dt
            cap_session = np.full(t.n_sessions, self.fetch.response_max_bytes * rounds)
            grant = _water_fill(want, (t.src, t.dst, t.session), (cap_out, cap_in, cap_session))
            t.size += grant
            lrec = lrec + np.bincount(t.src, weights=grant * t.leader_throttled, minlength=nb)
            frec = frec + np.bincount(t.dst, weights=grant * t.follower_throttled, minlength=nb)
            done = np.flatnonzero(log_end[t.row] - t.size <= CAUGHT_UP_BYTES)
            caught = [(t.part[i], int(t.broker[i])) for i in done]
        self.rates.record(np.concatenate([lrec, frec]), now + dt)
        return caught


def _water_fill(want: np.ndarray, members: tuple[np.ndarray, ...], caps: tuple[np.ndarray, ...],
                rounds: int = 8) -> np.ndarray:
    """Share each resource (a broker's send or receive capacity, a fetcher session's response
    size) equally among the flows that use it, re-offering what a flow could not use for a few
    rounds (progressive filling: close to max-min fair, and cheap)."""
    grant = np.zeros_like(want)
    want = want.copy()
    left = [c.astype(np.float64) for c in caps]
    for _ in range(rounds):
        active = want > 0
        if not active.any():
            break
        share = want.copy()
        for idx, room in zip(members, left):
            n = np.bincount(idx[active], minlength=len(room))
            np.minimum(share, room[idx] / np.maximum(n[idx], 1), out=share)
        g = np.where(active, np.maximum(share, 0.0), 0.0)
        grant += g
        want -= g
        for idx, room in zip(members, left):
            room -= np.bincount(idx, weights=g, minlength=len(room))
        # another round only helps a flow that still wants bytes while all its resources have room
        still = want > 1e-9
        for idx, room in zip(members, left):
            still &= room[idx] > 1e-9
        if not still.any():
            break
    return grant
