"""The replication step: leaders take writes, lagging replicas copy from their leader in fetch
cycles under KIP-73 quotas and the brokers' network capacity, and caught-up replicas are
reported for the ISR.

A *flow* is one out-of-sync replica on a live broker fetching from a live leader; flows belong
to *fetcher sessions* (leader, follower, fetcher thread: `kreassign.sandbox.fetch`). The flow
table is built from the engine's partitions when topology or throttle configs change; a replica
that catches up is retired from it in place, so a tick costs numpy work over the flows and never
a Python pass over the partitions.

KIP-73 as Kafka enforces it (ReplicationQuotaManager, RemoteLeaderEndPoint, ReplicaManager,
KafkaApis; broker-semantics Part B §2-§3), per broker and side:
* throttled replicas: a flow is leader-throttled if its partition is in the topic's
  `leader.replication.throttled.replicas` as `partition:leader` (or `*`), follower-throttled if
  it is in `follower.replication.throttled.replicas` as `partition:follower` (or `*`);
* the measured rate is `SimpleRate` (`kreassign.sandbox.quota`: 11 windows of 1 s, obsolete
  samples purged, elapsed floored at one window), compared with the broker's bound;
* check, then transfer, then record, once per fetch: the follower leaves a throttled partition
  out of the request while its follower quota is exceeded (in-sync partitions are never left
  out); the leader returns a throttled, out-of-sync partition empty while its leader quota is
  exceeded; after the response the leader records the bytes of every throttled partition it
  sent (in-sync followers included) and the follower the bytes it appended for throttled
  partitions;
* a fetch carries at most `replica.fetch.max.bytes` per partition and
  `replica.fetch.response.max.bytes` in all, filled in the session's rotating partition order
  (the leader reads in request order until the response is full; the follower moves partitions
  that got data to the back); what it reads is sent and counted whole, and the follower keeps
  the whole record batches of it (`FetchConfig.kept`); the cadence is back to back while data
  comes back, and when the leader has nothing to send the fetch parks in its purgatory: every
  append to one of its partitions re-checks it (DelayedFetch.tryComplete), and a throttled
  partition counts there once the leader quota is back under its bound, so a fetch that holds a
  written partition is answered as soon as the quota allows (the sandbox's writes are fluid:
  checked every fetch cycle), one that holds only idle ones waits out
  `replica.fetch.wait.max.ms` and asks again `FetchConfig.parked_cycle_s` after the last;
  `replica.fetch.backoff.ms` when the follower asks for nothing (`FetchConfig`);
* so a long copy alternates bursts (until one fetch takes the rate over the bound) with those
  pauses: from 100 kB/s to 100 MB/s it runs at 0.91-0.96 of the throttle with both sides
  throttled (bench/bench_throttle_fidelity.py), which is what the replication model's
  `FetchLimits.quota_share` counts. With only the leader throttling, low rates run faster than
  the throttle (about 1.9x at 100 kB/s): the leader records every (empty) response, its ring of
  samples stays full, and one 1 MiB fetch is then below 100 kB/s over the ~11 s span; Kafka's
  ReplicationQuotasTest warns that rates below 1 MB/s do not hold for this reason.

Time: a session whose flows a finite quota can stop (*paced*) is simulated fetch by fetch at the
exact times its cycles fall on, whatever the tick length, so the sandbox's speed and tick never
change a copy rate. Sessions no quota can stop (*free*) only meet the fetch size limits and the
network, so their fetches within a tick are taken at once (the rounds that fit in it, shared
max-min fairly: the fluid form of the rotation).

Simplifications: a fetch's bytes are recorded at the instant of its check (a fetch cycle is
short against the 1 s windows), and a fetch that parked is answered by a fresh check of both
quotas (Kafka's follower decided its request before sending it); the network
is shared per fetch as a fluid, free sessions first, and a fetch holds its session for as long
as its bytes need on the busier broker; in-sync followers are exactly at the leader's log end,
and their replication counts against the quotas and the network as a steady rate; each
broker link keeps its latest catch-up response size and the share of the link catch-up used
over the last second, so client batches wait behind catch-up bytes (`catchup_link`): acks=all
latency rises with unthrottled copying and falls with the throttle.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kreassign.sandbox.configs import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    NUM_REPLICA_FETCHERS,
    ConfigStore,
    ThrottledReplicas,
)
from kreassign.sandbox.fetch import FetchConfig, fetcher_id
from kreassign.sandbox.quota import SampledRates
from kreassign.sandbox.state import BrokerState, PartitionState

CAUGHT_UP_BYTES = 0.5
CATCHUP_SHARE_S = 1.0
"""the span over which a link's catch-up share is averaged: Kafka's quota window"""
_THREAD_BITS = 20  # session key = ((leader pos * brokers + follower pos) << bits) | fetcher id
_EPS = 1e-9


@dataclass(frozen=True)
class InSync:
    """One in-sync follower replica's steady replication (positions are broker positions)."""

    leader: int
    follower: int
    session: int  # session key
    write_bps: float
    leader_throttled: bool
    follower_throttled: bool


@dataclass
class FlowTable:
    """Columns of the flows, per-session state and per-broker constants for the current topology."""

    part: list[PartitionState]
    broker: np.ndarray        # follower broker id per flow
    row: np.ndarray           # partition row per flow
    src: np.ndarray           # leader position per flow
    dst: np.ndarray           # follower position per flow
    session: np.ndarray       # fetcher session index per flow (flows are sorted by it)
    bounds_of: np.ndarray     # session i's flows are flows[bounds_of[i]:bounds_of[i + 1]]
    size: np.ndarray          # bytes the follower holds
    live: np.ndarray          # False once the replica caught up (retired in place)
    caught: np.ndarray        # reached the log end at a fetch during this tick
    leader_throttled: np.ndarray
    follower_throttled: np.ndarray
    keys: np.ndarray          # per session: its key (sorted)
    paced: np.ndarray         # per session: a finite quota can stop one of its flows
    due: np.ndarray           # per session: when its next fetch goes out
    parked_until: np.ndarray  # per session: when its fetch parked in the leader's purgatory expires
    isr_count: np.ndarray     # per session: in-sync partitions it also fetches
    isr_busy: np.ndarray      # per session: ... of which take writes (the leader answers at once)
    growing: np.ndarray       # rows whose leader is alive (they take writes)
    out_isr_bps: np.ndarray   # per broker: in-sync replication sent
    in_isr_bps: np.ndarray    # per broker: in-sync replication received
    leader_quota_isr_bps: np.ndarray
    follower_quota_isr_bps: np.ndarray
    leads_isr: np.ndarray     # per broker: in-sync followers fetching from it
    bounds: np.ndarray        # leader bounds of every broker, then follower bounds
    cursor: np.ndarray        # per session: where its next fetch starts serving (round robin)
    lookup: np.ndarray        # sorted `row * brokers + follower position` of the flows ...
    lookup_flow: np.ndarray   # ... and the flow each one is

    def flows_of(self, row: int, n_brokers: int) -> np.ndarray:
        """The flows (live or retired) of one partition row."""
        lo, hi = np.searchsorted(self.lookup, [row * n_brokers, (row + 1) * n_brokers])
        return self.lookup_flow[lo:hi]

    def flow(self, row: int, follower: int, n_brokers: int) -> int | None:
        """The live flow of one replica (follower position), if any."""
        key = row * n_brokers + follower
        i = int(np.searchsorted(self.lookup, key))
        if i < len(self.lookup) and self.lookup[i] == key and self.live[self.lookup_flow[i]]:
            return int(self.lookup_flow[i])
        return None

    def compact(self, n_brokers: int) -> None:
        """Drop retired flows (numpy only: sessions keep their numbers, flows their order)."""
        keep = np.flatnonzero(self.live)
        self.part = [self.part[i] for i in keep]
        for name in ("broker", "row", "src", "dst", "session", "size", "live", "caught", "leader_throttled",
                     "follower_throttled"):
            setattr(self, name, getattr(self, name)[keep])
        self.bounds_of = np.searchsorted(self.session, np.arange(len(self.keys) + 1))
        self.lookup, self.lookup_flow = _lookup(self.row, self.dst, n_brokers)


class Replication:
    """Per-broker quota windows, the flow table and the sessions' fetch times; `step` advances."""

    def __init__(self, broker_ids: Sequence[int], *, network_bps: float, fetch: FetchConfig | None = None,
                 samples: int = 11, window: float = 1.0) -> None:
        self.broker_ids = list(broker_ids)
        self.pos = {b: i for i, b in enumerate(self.broker_ids)}
        self.network_bps = network_bps
        self.fetch = fetch if fetch is not None else FetchConfig()
        # rows 0..n-1: leader-side quota of each broker; rows n..2n-1: follower-side quota
        self.rates = SampledRates(2 * len(self.broker_ids), samples=samples, window=window)
        self.table: FlowTable | None = None
        self.due: dict[int, float] = {}  # session key -> next fetch, kept across rebuilds
        # replication bytes each broker sent as a leader and received as a follower, since start
        self.sent = np.zeros(len(self.broker_ids))
        self.received = np.zeros(len(self.broker_ids))
        # per broker, sending and receiving: the catch-up bytes of the latest fetch response that
        # carried any, and the share of the link catch-up copying used over about the last
        # second (`catchup_link`)
        self.catchup_fetch = np.zeros((2, len(self.broker_ids)))
        self.catchup_share = np.zeros((2, len(self.broker_ids)))
        self._step_fetch = np.zeros((2, len(self.broker_ids)))
        self._idle_isr_due = np.full(len(self.broker_ids), np.inf)  # per broker: its idle in-sync fetch's next answer

    def lagging_size(self, p: PartitionState, broker_id: int) -> float:
        """The current size of an out-of-sync replica, from the live table if it is a flow."""
        t = self.table
        i = t.flow(p.row, self.pos[broker_id], len(self.broker_ids)) if t is not None else None
        return float(t.size[i]) if t is not None and i is not None else p.lagging[broker_id]

    def flush(self) -> None:
        """Write flow sizes back to the partitions' `lagging` maps and drop the table."""
        t = self.table
        if t is None:
            return
        for i in np.flatnonzero(t.live):
            p, b = t.part[i], int(t.broker[i])
            if b in p.lagging:
                p.lagging[b] = float(t.size[i])
        self.due = {int(k): float(d) for k, d in zip(t.keys, t.due) if np.isfinite(d)}
        self.table = None

    # ---- building --------------------------------------------------------------------------
    def _key(self, leader: int, follower: int, fetcher: int) -> int:
        return ((leader * len(self.broker_ids) + follower) << _THREAD_BITS) | fetcher

    def _replicas(self, p: PartitionState, brokers: Mapping[int, BrokerState], configs: ConfigStore,
                  lists: dict[str, tuple[ThrottledReplicas, ThrottledReplicas]], threads: dict[int, int]
                  ) -> Iterator[tuple[int, bool, bool, int]]:
        """(follower, leader-throttled, follower-throttled, session key) of each live follower of a
        partition with a live leader."""
        lead = p.leader
        if lead < 0 or not brokers[lead].serving:
            return
        if p.topic not in lists:
            lists[p.topic] = (configs.throttled(p.topic, LEADER_REPLICAS), configs.throttled(p.topic, FOLLOWER_REPLICAS))
        ll, fl = lists[p.topic]
        lt = ll.covers(p.index, lead)
        for b in p.replicas:
            if b == lead or not brokers[b].serving:
                continue
            if b not in threads:
                threads[b] = self.num_fetchers(b, configs)
            key = self._key(self.pos[lead], self.pos[b], fetcher_id(p.topic, p.index, threads[b]))
            yield b, lt, fl.covers(p.index, b), key

    def in_sync(self, p: PartitionState, brokers: Mapping[int, BrokerState], produce_bps: np.ndarray,
                configs: ConfigStore) -> list[InSync]:
        """The in-sync followers of one partition, as the table counts them."""
        rate = float(produce_bps[p.row])
        return [InSync(self.pos[p.leader], self.pos[b], key, rate, lt, ft)
                for b, lt, ft, key in self._replicas(p, brokers, configs, {}, {}) if b not in p.lagging]

    def build(self, partitions: Sequence[PartitionState], brokers: Mapping[int, BrokerState],
              produce_bps: np.ndarray, configs: ConfigStore, n_rows: int) -> FlowTable:
        nb = len(self.broker_ids)
        parts: list[PartitionState] = []
        fb: list[int] = []
        rows: list[int] = []
        lthr: list[bool] = []
        fthr: list[bool] = []
        fkeys: list[int] = []
        isr: list[tuple[int, int, int, float, bool, bool]] = []
        growing = np.zeros(n_rows, dtype=bool)
        lists: dict[str, tuple[ThrottledReplicas, ThrottledReplicas]] = {}
        threads: dict[int, int] = {}
        for p in partitions:
            lead = p.leader
            if lead < 0 or not brokers[lead].serving:
                continue
            growing[p.row] = True
            for b, lt, ft, key in self._replicas(p, brokers, configs, lists, threads):
                if b in p.lagging:
                    parts.append(p)
                    fb.append(b)
                    rows.append(p.row)
                    lthr.append(lt)
                    fthr.append(ft)
                    fkeys.append(key)
                else:
                    isr.append((self.pos[lead], self.pos[b], key, float(produce_bps[p.row]), lt, ft))
        # flows ordered by session, so a session's flows are one slice of the columns
        order = np.argsort(np.array(fkeys, dtype=np.int64), kind="stable")
        parts, fb, rows = [parts[i] for i in order], [fb[i] for i in order], [rows[i] for i in order]
        lthr, fthr = [lthr[i] for i in order], [fthr[i] for i in order]
        keys, session = np.unique(np.array(fkeys, dtype=np.int64)[order], return_inverse=True)
        session = session.astype(np.int64).reshape(-1)
        n_sessions = len(keys)
        src = np.array([self.pos[p.leader] for p in parts], dtype=np.int64)
        dst = np.array([self.pos[b] for b in fb], dtype=np.int64)
        lt_arr, ft_arr = np.array(lthr, dtype=bool), np.array(fthr, dtype=bool)
        bounds = np.array([configs.rate(b, LEADER_RATE) for b in self.broker_ids]
                          + [configs.rate(b, FOLLOWER_RATE) for b in self.broker_ids])
        bound_flow = (lt_arr & np.isfinite(bounds[:nb][src])) | (ft_arr & np.isfinite(bounds[nb:][dst]))
        cols = np.array(isr, dtype=np.float64).reshape(-1, 6)
        li, fi = cols[:, 0].astype(np.int64), cols[:, 1].astype(np.int64)
        rate, ilt, ift = cols[:, 3], cols[:, 4].astype(bool), cols[:, 5].astype(bool)
        isr_keys = np.array([x[2] for x in isr], dtype=np.int64)
        self.table = t = FlowTable(
            part=parts, broker=np.array(fb, dtype=np.int64), row=np.array(rows, dtype=np.int64), src=src, dst=dst,
            session=session, bounds_of=np.searchsorted(session, np.arange(n_sessions + 1)), size=np.array([p.lagging[b] for p, b in zip(parts, fb)],
                                                                        dtype=np.float64),
            live=np.ones(len(parts), dtype=bool), caught=np.zeros(len(parts), dtype=bool), leader_throttled=lt_arr, follower_throttled=ft_arr,
            keys=keys, paced=np.bincount(session, weights=bound_flow, minlength=n_sessions) > 0,
            due=np.array([self.due.get(int(k), -np.inf) for k in keys], dtype=np.float64),
            parked_until=np.full(n_sessions, -np.inf),
            isr_count=np.zeros(n_sessions, dtype=np.int64), isr_busy=np.zeros(n_sessions, dtype=np.int64),
            growing=growing, out_isr_bps=_per_broker(li, rate, nb), in_isr_bps=_per_broker(fi, rate, nb),
            leader_quota_isr_bps=_per_broker(li, rate * ilt, nb),
            follower_quota_isr_bps=_per_broker(fi, rate * ift, nb),
            leads_isr=np.bincount(li, minlength=nb), bounds=bounds, cursor=np.zeros(n_sessions, dtype=np.int64),
            lookup=np.zeros(0, dtype=np.int64), lookup_flow=np.zeros(0, dtype=np.int64),
        )
        t.lookup, t.lookup_flow = _lookup(t.row, t.dst, nb)
        self._count_sessions(isr_keys, rate, +1)
        return t

    def _count_sessions(self, keys: np.ndarray, rate: np.ndarray, sign: int) -> None:
        """Add in-sync partitions to the sessions (of the table) that also fetch them."""
        t = self.table
        if t is None or not len(keys) or not len(t.keys):
            return
        at = np.minimum(np.searchsorted(t.keys, keys), len(t.keys) - 1)
        hit = t.keys[at] == keys
        np.add.at(t.isr_count, at[hit], sign)
        np.add.at(t.isr_busy, at[hit & (rate > 0)], sign)

    def changed(self, p: PartitionState, before: list[InSync], after: list[InSync], leader_moved: bool) -> None:
        """A partition's ISR or replicas changed without a rebuild: move its in-sync replication
        from `before` to `after` and retire its flows that are no longer lagging."""
        t = self.table
        if t is None:
            return
        nb = len(self.broker_ids)
        for items, sign in ((before, -1.0), (after, 1.0)):
            if not items:
                continue
            li = np.array([x.leader for x in items], dtype=np.int64)
            fi = np.array([x.follower for x in items], dtype=np.int64)
            rate = np.array([x.write_bps for x in items], dtype=np.float64)
            t.out_isr_bps += sign * _per_broker(li, rate, nb)
            t.in_isr_bps += sign * _per_broker(fi, rate, nb)
            t.leader_quota_isr_bps += sign * _per_broker(li, rate * [x.leader_throttled for x in items], nb)
            t.follower_quota_isr_bps += sign * _per_broker(fi, rate * [x.follower_throttled for x in items], nb)
            t.leads_isr += int(sign) * np.bincount(li, minlength=nb)
            self._count_sessions(np.array([x.session for x in items], dtype=np.int64), rate, int(sign))
        flows = [int(i) for i in t.flows_of(p.row, nb) if t.live[i]]
        for i in flows:
            if int(t.broker[i]) not in p.lagging:
                t.live[i] = False
        if leader_moved and any(t.live[i] for i in flows):
            self.flush()

    def num_fetchers(self, broker_id: int, configs: ConfigStore) -> int:
        """A follower's `num.replica.fetchers`: its dynamic value if set (per broker or cluster-wide)."""
        value = configs.dynamic(broker_id, NUM_REPLICA_FETCHERS)
        return max(int(value), 1) if value is not None else self.fetch.num_fetchers

    # ---- time ----------------------------------------------------------------------------------
    def step(self, log_end: np.ndarray, produce_bps: np.ndarray, now: float, dt: float,
             rebuild: Callable[[], FlowTable]) -> list[tuple[PartitionState, int]]:
        """Advance `dt` seconds from `now`; returns the (partition, broker) replicas that caught up
        (already retired from the table)."""
        t = self.table if self.table is not None else rebuild()
        nb = len(self.broker_ids)
        self._step_fetch[:] = 0.0
        growing = t.growing[: len(log_end)]
        log_end[growing] += produce_bps[growing] * dt
        lrec = t.leader_quota_isr_bps * dt
        frec = t.follower_quota_isr_bps * dt
        self.sent += t.out_isr_bps * dt
        self.received += t.in_isr_bps * dt
        if not t.live.any():
            self._record_in_sync(t, lrec, frec, now, now + dt)
            self._note_catchup(dt, np.zeros((2, nb)))
            return []
        before = np.stack([self.sent, self.received])
        used_out, used_in = self._free(t, log_end, dt, lrec, frec)
        self.sent += used_out
        self.received += used_in
        avail_out = np.maximum(self.network_bps - t.out_isr_bps - used_out / dt, 0.0)
        avail_in = np.maximum(self.network_bps - t.in_isr_bps - used_in / dt, 0.0)
        self._paced(t, log_end, produce_bps, now, now + dt, avail_out, avail_in)
        self._record_in_sync(t, lrec, frec, now, now + dt)
        self._note_catchup(dt, np.stack([self.sent, self.received]) - before)
        live = np.flatnonzero(t.live)
        done = live[t.caught[live] | (log_end[t.row[live]] - t.size[live] <= CAUGHT_UP_BYTES)]
        t.live[done] = False
        t.size[done] = log_end[t.row[done]]
        caught = [(t.part[i], int(t.broker[i])) for i in done]
        if len(t.live) >= 1024 and 2 * (len(live) - len(done)) < len(t.live):
            t.compact(nb)
        return caught

    def _record_in_sync(self, t: FlowTable, lrec: np.ndarray, frec: np.ndarray, now: float, when: float) -> None:
        """In-sync followers fetch all the time: their leaders record every response (the
        throttled partitions' bytes, maybe none), their followers what they appended. A leader
        whose in-sync partitions take writes answers a fetch at each append (every tick here,
        at `when`); one whose in-sync partitions are idle answers each parked fetch when its wait
        runs out, and the follower asks again at once (`FetchConfig.parked_cycle_s`; real Kafka
        4.4.0: an idle follower's FETCH completed every 503-506 ms in the request log), so those
        records fall at their own times in [`now`, `when`]. In-sync partitions that share a paced session
        with a copy are answered with its fetches (recorded there)."""
        nb = len(self.broker_ids)
        fetching = t.paced & (np.bincount(t.session, weights=t.live, minlength=len(t.keys)) > 0)
        with_copies = np.bincount((t.keys >> _THREAD_BITS) // nb, weights=t.isr_count * fetching, minlength=nb)
        leads = t.leads_isr > with_copies
        written = leads & (t.out_isr_bps > 0)
        idle = leads & ~written
        due = self._idle_isr_due
        due[~idle] = np.inf
        due[idle & np.isinf(due)] = now  # answered from the first fetch on
        zeros = np.zeros(2 * nb)
        while True:
            waiting = idle & (due <= when + _EPS)
            if not waiting.any():
                break
            at = float(due[waiting].min())
            answered = waiting & (due <= at + _EPS)
            self.rates.record(zeros, at, np.concatenate([answered, np.zeros(nb, dtype=bool)]))
            due[answered] = at + self.fetch.parked_cycle_s
        which = np.concatenate([(lrec > 0) | written, frec > 0])
        self.rates.record(np.concatenate([lrec, frec]), when, which)

    def _free(self, t: FlowTable, log_end: np.ndarray, dt: float, lrec: np.ndarray,
              frec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All fetches of the free sessions in one go (the rounds that fit in `dt`), shared
        max-min fairly per partition as the replication model shares them; adds their throttled
        bytes to the in-sync records (they are recorded with them) and returns the bytes
        sent/received per broker."""
        nb = len(self.broker_ids)
        f = np.flatnonzero(t.live & ~t.paced[t.session])
        if not len(f):
            return np.zeros(nb), np.zeros(nb)
        rounds = self.fetch.rounds(dt)
        part_max, resp_max = self.fetch.fetch_bytes
        src, dst = t.src[f], t.dst[f]
        want = np.clip(log_end[t.row[f]] - t.size[f], 0.0, part_max * rounds)
        cap_out = np.maximum(self.network_bps - t.out_isr_bps, 0.0) * dt
        cap_in = np.maximum(self.network_bps - t.in_isr_bps, 0.0) * dt
        cap_session = np.full(len(t.keys), resp_max * rounds)
        grant = _water_fill(want, (src, dst, t.session[f]), (cap_out, cap_in, cap_session))
        # each round's full read keeps its whole batches (`FetchConfig.kept`)
        lag = log_end[t.row[f]] - t.size[f]
        t.size[f] += np.where(grant < lag - CAUGHT_UP_BYTES, grant * self.fetch.kept_share, grant)
        # a response of a copying session is full (no quota empties it): up to `part_max` per
        # partition and `resp_max` in all, however many of them the tick's network allowed
        # (without fetch limits there are no responses, only a fluid: nothing to wait behind)
        copying = (np.bincount(t.session[f], weights=grant, minlength=len(t.keys)) > 0) & math.isfinite(resp_max)
        full = np.minimum(np.bincount(t.session[f], weights=np.minimum(want, part_max), minlength=len(t.keys)),
                          resp_max)
        self._note_fetches(t, np.flatnonzero(copying), full[copying])
        lrec += np.bincount(src, weights=grant * t.leader_throttled[f], minlength=nb)
        frec += np.bincount(dst, weights=grant * t.follower_throttled[f], minlength=nb)
        return np.bincount(src, weights=grant, minlength=nb), np.bincount(dst, weights=grant, minlength=nb)

    @staticmethod
    def _class_counts(t: FlowTable) -> np.ndarray:
        """Live flows per session and class: 0 unthrottled, 1 follower-, 2 leader-, 3 both throttled."""
        n_keys = len(t.keys)
        cls = t.leader_throttled * 2 + t.follower_throttled
        return np.bincount(t.session * 4 + cls, weights=t.live, minlength=4 * n_keys).reshape(n_keys, 4)

    def _fill(self, t: FlowTable, ds: np.ndarray, counts: np.ndarray, served: np.ndarray, log_end: np.ndarray,
              produce_bps: np.ndarray, before_end: float, per_flow: float, budget: float,
              caps: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
        """Fill one response of each (paced) session in `ds`: its partitions in rotating order
        from its cursor, each up to `per_flow`, until `budget` is used up (Kafka's leader reads in
        request order until the response is full; the follower moves partitions that got data to
        the back); then share the brokers' network (`caps`: send, receive) fairly among them and
        advance the cursors. Only a window of partitions is looked at unless it cannot fill the response,
        so a fetch costs what it serves. Returns (flows, session row, lag, served, grant)."""
        window = 2 * int(math.ceil(budget / per_flow)) + 8 if math.isfinite(budget) and math.isfinite(per_flow) else None
        sizes = np.diff(t.bounds_of)[ds]
        servable = (counts * served).sum(axis=1)
        lengths = np.where(servable > 0, sizes if window is None else np.minimum(sizes, window), 0)
        f, seg, off, lag, want, ok = self._offer(t, ds, lengths, served, log_end, produce_bps, before_end, per_flow)
        short = ((np.bincount(seg, weights=want, minlength=len(ds)) < budget) & (lengths < sizes)
                 & (np.bincount(seg, weights=ok, minlength=len(ds)) < servable))
        if short.any():  # the window did not fill a response: offer every partition
            lengths = np.where(short, sizes, lengths)
            f, seg, off, lag, want, ok = self._offer(t, ds, lengths, served, log_end, produce_bps, before_end,
                                                     per_flow)
        cum = np.concatenate([[0.0], np.cumsum(want)])
        before = cum[:-1] - np.repeat(cum[np.cumsum(lengths) - lengths], lengths)
        grant = _water_fill(np.clip(budget - before, 0.0, want), (t.src[f], t.dst[f]), caps)
        got = grant > 0
        last = np.full(len(ds), -1)
        np.maximum.at(last, seg[got], off[got])
        t.cursor[ds] = np.where(last >= 0, (t.cursor[ds] + last + 1) % np.maximum(sizes, 1), t.cursor[ds])
        return f, seg, lag, ok, grant

    def _paced(self, t: FlowTable, log_end: np.ndarray, produce_bps: np.ndarray, t0: float, t1: float,
               avail_out: np.ndarray, avail_in: np.ndarray) -> None:
        """Every fetch of the paced sessions due in [t0, t1), in time order, each checking the
        quotas before it and recording after it. `log_end` is already at t1."""
        nb = len(self.broker_ids)
        counts = self._class_counts(t)
        sessions = np.flatnonzero(t.paced & (counts.sum(axis=1) > 0))
        if not len(sessions):
            return
        fetch = self.fetch
        cycle = fetch.cycle_s
        part_max, resp_max = fetch.fetch_bytes
        # a fetch takes the network for as long as its bytes need (at least one cycle), so a
        # broker can always carry one partition's full fetch in one go
        caps = (np.maximum(avail_out * cycle, min(part_max, resp_max)),
                np.maximum(avail_in * cycle, min(part_max, resp_max)))
        pair = t.keys >> _THREAD_BITS
        s_src, s_dst = pair // nb, pair % nb
        has_ft = counts[:, 1] + counts[:, 3] > 0
        # sessions with a leader-throttled lagging partition that takes writes: each append
        # re-checks their parked fetch (DelayedFetch.tryComplete on the partition's key)
        woken = np.bincount(t.session, weights=t.live & t.leader_throttled & (produce_bps[t.row] > 0),
                            minlength=len(t.keys)) > 0
        while True:
            when = max(float(t.due[sessions].min()), t0)
            if when >= t1 - _EPS:
                return
            ds = sessions[t.due[sessions] <= when + _EPS]
            parked = t.parked_until[ds] > when + _EPS
            if parked.any():  # appends (one per cycle, the fluid writes) find the leader quota still exceeded
                held = parked & self.rates.exceeded(t.bounds, when, _mask(2 * nb, s_src[ds[parked]]))[s_src[ds]]
                t.due[ds[held]] = np.minimum(when + cycle, t.parked_until[ds[held]])
                ds = ds[~held]
                if not len(ds):
                    continue
            expired = np.isfinite(t.parked_until[ds])  # parked until now: its response goes out
            t.parked_until[ds] = -np.inf
            # follower side first: it leaves its throttled partitions out of the request
            fo = self.rates.exceeded(t.bounds, when, _mask(2 * nb, nb + s_dst[ds[has_ft[ds]]]))[nb + s_dst[ds]]
            c = counts[ds]
            lt_asked = (c[:, 2] > 0) | ((c[:, 3] > 0) & ~fo)
            lo = self.rates.exceeded(t.bounds, when, _mask(2 * nb, s_src[ds[lt_asked]]))[s_src[ds]]
            asked = np.stack([np.ones_like(fo), ~fo, np.ones_like(fo), ~fo], axis=1)
            served = asked & np.stack([np.ones_like(lo), np.ones_like(lo), ~lo, ~lo], axis=1)
            sent = (c[:, 0] + c[:, 2] > 0) | (has_ft[ds] & ~fo) | (t.isr_count[ds] > 0)
            f, seg, lag, ok, grant = self._fill(t, ds, c, served, log_end, produce_bps, t1 - when, part_max,
                                                resp_max, caps)
            src, dst = t.src[f], t.dst[f]
            # the leader sends (and both quotas count) all it read; the follower keeps the whole
            # batches of a read that stops short of the log's end (`FetchConfig.kept`; the
            # network's fluid share of a read keeps the same part)
            kept = grant * np.where(lag - CAUGHT_UP_BYTES > part_max, fetch.kept_share, 1.0)
            t.size[f] += kept
            self._note_fetches(t, ds, np.bincount(seg, weights=grant, minlength=len(ds)))
            self.sent += np.bincount(src, weights=grant, minlength=nb)
            self.received += np.bincount(dst, weights=grant, minlength=nb)
            # joined the leader's log end at this fetch: in sync from here on (ISR at the tick's end)
            t.caught[f[ok & (lag - kept <= CAUGHT_UP_BYTES)]] = True
            data = (np.bincount(seg, weights=grant, minlength=len(ds)) > 0) | (t.isr_busy[ds] > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                busy = np.maximum(np.bincount(src, weights=grant, minlength=nb)[s_src[ds]] / avail_out[s_src[ds]],
                                  np.bincount(dst, weights=grant, minlength=nb)[s_dst[ds]] / avail_in[s_dst[ds]])
            # (a network saturated by free sessions this tick holds a fetch at most one backoff)
            took = np.clip(np.nan_to_num(busy, nan=cycle), cycle, max(cycle, fetch.backoff_s))
            # left empty by the leader's quota: parked until an append finds the quota under its
            # bound (a written partition: checked every cycle) or the fetch wait runs out
            park = sent & ~data & lo & woken[ds]
            t.due[ds] = np.where(~sent, when + fetch.backoff_s, np.where(data, when + took, np.where(
                park, when + cycle, when + fetch.parked_cycle_s)))
            t.parked_until[ds[park]] = when + fetch.wait_max_s
            lt, ft = t.leader_throttled[f], t.follower_throttled[f]
            answered = sent & (~park | expired)  # a parked fetch is recorded when it is answered
            recorded = np.concatenate([_mask(nb, s_src[ds[answered]]), _mask(nb, s_dst[ds[answered & has_ft[ds] & ~fo]])])
            self.rates.record(np.concatenate([np.bincount(src, weights=grant * lt, minlength=nb),
                                              np.bincount(dst, weights=grant * ft, minlength=nb)]), when, recorded)

    def _note_fetches(self, t: FlowTable, sessions: np.ndarray, nbytes: np.ndarray) -> None:
        """Keep this step's largest catch-up response of each broker's links (the sessions' leader
        sends it, their follower receives it)."""
        nb = len(self.broker_ids)
        pair = t.keys[sessions] >> _THREAD_BITS
        np.maximum.at(self._step_fetch[0], pair // nb, nbytes)
        np.maximum.at(self._step_fetch[1], pair % nb, nbytes)

    def _note_catchup(self, dt: float, copied: np.ndarray) -> None:
        """Fold one step's catch-up bytes (sent, received per broker) into the links' shares: an
        exponential average over `CATCHUP_SHARE_S` (so the share does not depend on the tick)."""
        hit = self._step_fetch > 0
        self.catchup_fetch[hit] = self._step_fetch[hit]
        if dt <= 0 or not math.isfinite(self.network_bps):
            return
        keep = math.exp(-dt / CATCHUP_SHARE_S)
        self.catchup_share *= keep
        self.catchup_share += (1.0 - keep) * np.minimum(copied / dt / self.network_bps, 1.0)

    def catchup_link(self, leader: int, follower: int) -> tuple[float, float]:
        """The busier of the two links an in-sync batch from `leader` to `follower` (broker
        positions) crosses: the share of the last second it carried catch-up, and the catch-up
        bytes of its latest response that had any. Unthrottled copying fills the links; a
        throttle leaves them mostly idle (KIP-73's pauses)."""
        out = (float(self.catchup_share[0, leader]), float(self.catchup_fetch[0, leader]))
        into = (float(self.catchup_share[1, follower]), float(self.catchup_fetch[1, follower]))
        return max(out, into, key=lambda link: link[0] * link[1])

    @staticmethod
    def _offer(t: FlowTable, ds: np.ndarray, lengths: np.ndarray, served: np.ndarray, log_end: np.ndarray,
               produce_bps: np.ndarray, before_end: float, part_max: float
               ) -> tuple[np.ndarray, ...]:
        """The first `lengths[k]` flows of due session ds[k] from its cursor on, in rotating
        order: (flows, session row, offset, lag at the fetch, bytes wanted, served)."""
        seg = np.repeat(np.arange(len(ds)), lengths)
        off = np.arange(len(seg)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        start, size = t.bounds_of[ds], np.maximum(np.diff(t.bounds_of)[ds], 1)
        f = start[seg] + (t.cursor[ds][seg] + off) % size[seg]
        ok = t.live[f] & served[seg, t.leader_throttled[f] * 2 + t.follower_throttled[f]]
        rows = t.row[f]
        lag = log_end[rows] - produce_bps[rows] * before_end - t.size[f]
        want = np.where(ok, np.clip(lag, 0.0, part_max), 0.0)
        return f, seg, off, lag, want, ok


def _mask(n: int, on: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[on] = True
    return out


def _lookup(row: np.ndarray, dst: np.ndarray, n_brokers: int) -> tuple[np.ndarray, np.ndarray]:
    key = row * n_brokers + dst
    order = np.argsort(key, kind="stable")
    return key[order], order


def _per_broker(idx: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(idx, weights=weights, minlength=n).astype(np.float64)


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
