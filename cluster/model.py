"""The cluster model: brokers, partitions, in-flight reassignments and throttle configs.

Partitions are stored column by column in numpy arrays, sorted by (topic, partition), so a
1,000,000-partition cluster costs a few tens of megabytes and per-broker aggregates are a
`np.bincount` away. Replica and ISR lists are ragged (offsets plus a flat id array) because a
topic may mix replication factors during or after a reassignment.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError

NO_LEADER = -1
FIRST_REPLICA = -2
"""`PartitionInfo.leader` default: the first replica leads (convenient for tests and plans)."""


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A partition id; sorts by topic then partition, prints like Kafka's `topic-partition`."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, order=True)
class TopicPartitionReplica:
    """A replica of a partition on one broker; prints like Kafka's `topic-partition-broker`."""

    topic: str
    partition: int
    broker: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}-{self.broker}"


@dataclass(frozen=True)
class Broker:
    """A broker, with the capacities the planners and the replication model may use."""

    id: int
    rack: str | None = None
    host: str | None = None
    port: int | None = None
    network_in_bps: float | None = None
    network_out_bps: float | None = None
    disk_bytes: int | None = None


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as a value object (for small collections and APIs, not hot paths)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int | None = FIRST_REPLICA
    """None (or NO_LEADER) for a partition without a leader; FIRST_REPLICA by default."""
    isr: tuple[int, ...] | None = None
    """None means all replicas are in sync; () is an empty ISR (an offline partition)."""
    size_bytes: int = 0
    produce_bps: float = 0.0
    consume_bps: float = 0.0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class Reassignment:
    """An in-flight reassignment as ListPartitionReassignments reports it (KIP-455)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    copied: tuple[tuple[int, int], ...] = ()
    """(broker, bytes its log holds) of adding replicas whose size DescribeLogDirs reported: what
    their copy has done, so an estimate taken mid-move counts only the rest."""

    def copied_by(self, broker: int) -> int | None:
        return next((size for b, size in self.copied if b == broker), None)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas the partition will have once the move completes."""
        removing = set(self.removing)
        return tuple(r for r in self.replicas if r not in removing)

    @property
    def original(self) -> tuple[int, ...]:
        """The replicas before the move; what a cancel reverts to."""
        adding = set(self.adding)
        return tuple(r for r in self.replicas if r not in adding)


@dataclass(frozen=True)
class WriteRates:
    """Where the partitions' write rates (`produce_bps`) came from.

    `measured`: two readings of log end offsets and sizes `window_s` cluster seconds apart
    (`method` says which readings gave bytes/s); `given`: written into a snapshot by hand or by
    another tool. A state without a `WriteRates` and with every rate 0 has unknown rates: every
    ETA computed from it says so instead of passing 0 off as a measurement.
    """

    source: str
    """"measured" or "given"."""
    window_s: float | None = None
    method: str | None = None
    """"sizes" (DescribeLogDirs) or "offsets+sizes" (ListOffsets too), for measured rates."""
    measured_at: str | None = None
    note: str | None = None
    """What was missing (e.g. ListOffsets unsupported), one line."""

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "window_s": self.window_s, "method": self.method,
                "measured_at": self.measured_at, "note": self.note}


@dataclass(frozen=True)
class ThrottleConfigs:
    """Dynamic throttle configs: broker id -> {key: value} and topic -> {key: value}."""

    broker: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    topic: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not any(self.broker.values()) and not any(self.topic.values())


def _ragged(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((r for x in lists for r in x), dtype=np.int32, count=int(offsets[-1]))
    return offsets, flat


class ClusterState:
    """An immutable picture of a cluster, columnar underneath, friendly on top.

    Build one with `from_partitions` (value objects) or `from_arrays` (columns, for big inputs).
    Row `i` is the i-th partition in (topic, partition) order.
    """

    __slots__ = (
        "brokers", "topics", "topic_index", "partition", "replica_offsets", "replica_ids",
        "leader", "isr_offsets", "isr_ids", "size_bytes", "produce_bps", "consume_bps",
        "reassignments", "throttles", "cluster_id", "captured_at", "write_rates", "_topic_start",
        "_topic_pos", "_broker_pos",
    )

    def __init__(
        self,
        *,
        brokers: Sequence[Broker],
        topics: Sequence[str],
        topic_index: np.ndarray,
        partition: np.ndarray,
        replica_offsets: np.ndarray,
        replica_ids: np.ndarray,
        leader: np.ndarray,
        isr_offsets: np.ndarray,
        isr_ids: np.ndarray,
        size_bytes: np.ndarray,
        produce_bps: np.ndarray,
        consume_bps: np.ndarray,
        reassignments: Mapping[TopicPartition, Reassignment] | None = None,
        throttles: ThrottleConfigs | None = None,
        cluster_id: str | None = None,
        captured_at: str | None = None,
        write_rates: WriteRates | None = None,
    ) -> None:
        """Use `from_arrays` or `from_partitions`; this expects sorted, validated columns."""
        self.brokers: tuple[Broker, ...] = tuple(sorted(brokers, key=lambda b: b.id))
        self.topics: tuple[str, ...] = tuple(topics)
        self.topic_index = topic_index
        self.partition = partition
        self.replica_offsets = replica_offsets
        self.replica_ids = replica_ids
        self.leader = leader
        self.isr_offsets = isr_offsets
        self.isr_ids = isr_ids
        self.size_bytes = size_bytes
        self.produce_bps = produce_bps
        self.consume_bps = consume_bps
        self.reassignments: dict[TopicPartition, Reassignment] = dict(reassignments or {})
        self.throttles = throttles or ThrottleConfigs()
        self.cluster_id = cluster_id
        self.captured_at = captured_at
        self.write_rates = write_rates
        self._topic_pos = {t: i for i, t in enumerate(self.topics)}
        self._topic_start = np.searchsorted(topic_index, np.arange(len(self.topics) + 1))
        self._broker_pos = {b.id: i for i, b in enumerate(self.brokers)}
        for arr in (topic_index, partition, replica_offsets, replica_ids, leader, isr_offsets,
                    isr_ids, size_bytes, produce_bps, consume_bps):
            arr.setflags(write=False)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        *,
        brokers: Sequence[Broker],
        topic: Sequence[str] | np.ndarray,
        partition: Sequence[int] | np.ndarray,
        replica_offsets: np.ndarray,
        replica_ids: np.ndarray,
        leader: Sequence[int] | np.ndarray | None = None,
        isr_offsets: np.ndarray | None = None,
        isr_ids: np.ndarray | None = None,
        size_bytes: Sequence[int] | np.ndarray | None = None,
        produce_bps: Sequence[float] | np.ndarray | None = None,
        consume_bps: Sequence[float] | np.ndarray | None = None,
        reassignments: Mapping[TopicPartition, Reassignment] | None = None,
        throttles: ThrottleConfigs | None = None,
        cluster_id: str | None = None,
        captured_at: str | None = None,
        write_rates: WriteRates | None = None,
    ) -> ClusterState:
        """Build from columns (any order); sorts rows and checks consistency.

        Missing leader defaults to the first replica, missing ISR to all replicas, missing
        sizes and rates to zero.

        Raises:
            InputError: duplicate partitions, negative ids or sizes, ragged arrays that disagree.
        """
        topic_arr = np.asarray(topic, dtype=object)
        n = len(topic_arr)
        part = np.asarray(partition, dtype=np.int64)
        roff = np.asarray(replica_offsets, dtype=np.int64)
        rids = np.asarray(replica_ids, dtype=np.int64)
        if len(part) != n or len(roff) != n + 1 or (n and (roff[0] != 0 or roff[-1] != len(rids))):
            raise InputError("partition columns have different lengths")
        if n and np.any(np.diff(roff) < 0):
            raise InputError("replica offsets must not decrease")
        if np.any(part < 0):
            raise InputError("partition numbers must not be negative")
        if np.any(rids < 0):
            raise InputError("broker ids in replica lists must not be negative")
        names, tidx = np.unique(topic_arr.astype(str), return_inverse=True) if n else (np.array([], dtype=str), np.zeros(0, dtype=np.int64))
        order = np.lexsort((part, tidx))
        lengths = np.diff(roff)
        starts = roff[:-1]
        if leader is None:
            lead = np.full(n, NO_LEADER, dtype=np.int64)
            lead[lengths > 0] = rids[starts[lengths > 0]]
        else:
            lead = np.asarray(leader, dtype=np.int64)
        if isr_offsets is None or isr_ids is None:
            ioff, iids = roff, rids
        else:
            ioff = np.asarray(isr_offsets, dtype=np.int64)
            iids = np.asarray(isr_ids, dtype=np.int64)
            if len(ioff) != n + 1 or (n and (ioff[0] != 0 or ioff[-1] != len(iids))):
                raise InputError("ISR columns have a different length from the partitions")
        size = np.zeros(n, dtype=np.int64) if size_bytes is None else np.asarray(size_bytes, dtype=np.int64)
        prod = np.zeros(n) if produce_bps is None else np.asarray(produce_bps, dtype=np.float64)
        cons = np.zeros(n) if consume_bps is None else np.asarray(consume_bps, dtype=np.float64)
        for name, arr in (("leader", lead), ("size_bytes", size), ("produce_bps", prod), ("consume_bps", cons)):
            if len(arr) != n:
                raise InputError(f"column {name} has {len(arr)} values for {n} partitions")
        if np.any(size < 0) or np.any(prod < 0) or np.any(cons < 0):
            raise InputError("partition sizes and byte rates must not be negative")
        if np.any(~np.isfinite(prod)) or np.any(~np.isfinite(cons)):
            raise InputError("partition byte rates must be finite numbers")

        tidx_s = tidx[order].astype(np.int32)
        part_s = part[order].astype(np.int32)
        if n > 1:
            dup = (tidx_s[1:] == tidx_s[:-1]) & (part_s[1:] == part_s[:-1])
            if dup.any():
                i = int(np.argmax(dup))
                raise InputError(f"partition {names[tidx_s[i]]}-{part_s[i]} is listed more than once")
        roff_s, rids_s = _take_ragged(roff, rids, order)
        ioff_s, iids_s = _take_ragged(ioff, iids, order)
        if len(set(b.id for b in brokers)) != len(brokers):
            raise InputError("a broker id is listed more than once")
        return cls(
            brokers=brokers, topics=[str(x) for x in names], topic_index=tidx_s, partition=part_s,
            replica_offsets=roff_s, replica_ids=rids_s.astype(np.int32),
            leader=lead[order].astype(np.int32), isr_offsets=ioff_s, isr_ids=iids_s.astype(np.int32),
            size_bytes=size[order], produce_bps=prod[order], consume_bps=cons[order],
            reassignments=reassignments, throttles=throttles, cluster_id=cluster_id,
            captured_at=captured_at, write_rates=write_rates,
        )

    @classmethod
    def from_partitions(
        cls,
        brokers: Iterable[Broker],
        partitions: Iterable[PartitionInfo],
        *,
        reassignments: Mapping[TopicPartition, Reassignment] | None = None,
        throttles: ThrottleConfigs | None = None,
        cluster_id: str | None = None,
        captured_at: str | None = None,
        write_rates: WriteRates | None = None,
    ) -> ClusterState:
        """Build from value objects; convenient for tests and small clusters."""
        parts = list(partitions)
        roff, rids = _ragged([p.replicas for p in parts])
        ioff, iids = _ragged([p.replicas if p.isr is None else p.isr for p in parts])
        leader = [_leader_value(p) for p in parts]
        return cls.from_arrays(
            brokers=list(brokers), topic=[p.topic for p in parts],
            partition=[p.partition for p in parts], replica_offsets=roff, replica_ids=rids,
            leader=leader, isr_offsets=ioff, isr_ids=iids,
            size_bytes=[p.size_bytes for p in parts], produce_bps=[p.produce_bps for p in parts],
            consume_bps=[p.consume_bps for p in parts], reassignments=reassignments,
            throttles=throttles, cluster_id=cluster_id, captured_at=captured_at,
            write_rates=write_rates,
        )

    # ---- lookups ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.partition)

    def __repr__(self) -> str:
        return (f"ClusterState(brokers={len(self.brokers)}, topics={len(self.topics)}, "
                f"partitions={len(self)}, reassignments={len(self.reassignments)})")

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.brokers)

    def broker(self, broker_id: int) -> Broker:
        """The broker with this id. Raises KeyError if it is not in the cluster."""
        return self.brokers[self._broker_pos[broker_id]]

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self._broker_pos

    def has_topic(self, topic: str) -> bool:
        return topic in self._topic_pos

    def topic_rows(self, topic: str) -> range:
        """Rows of a topic's partitions, in partition order (empty if unknown)."""
        pos = self._topic_pos.get(topic)
        if pos is None:
            return range(0)
        return range(int(self._topic_start[pos]), int(self._topic_start[pos + 1]))

    def find_row(self, topic: str, partition: int) -> int:
        """Row of a partition, or -1 if the cluster has no such partition."""
        rows = self.topic_rows(topic)
        if not rows:
            return -1
        parts = self.partition[rows.start:rows.stop]
        i = int(np.searchsorted(parts, partition))
        return rows.start + i if i < len(parts) and parts[i] == partition else -1

    def find_rows(self, topics: Sequence[str], partitions: Sequence[int] | np.ndarray) -> np.ndarray:
        """Vectorised `find_row`: rows for many (topic, partition) pairs, -1 where unknown."""
        part = np.asarray(partitions, dtype=np.int64)
        tpos = np.fromiter((self._topic_pos.get(t, -1) for t in topics), dtype=np.int64, count=len(part))
        key = self.topic_index.astype(np.int64) * (1 << 32) + self.partition
        want = np.where(tpos >= 0, tpos * (1 << 32) + part, -1)
        idx = np.searchsorted(key, want)
        idx_c = np.minimum(idx, max(len(key) - 1, 0))
        ok = (tpos >= 0) & (idx < len(key)) & (key[idx_c] == want) if len(key) else np.zeros(len(part), bool)
        return np.where(ok, idx_c, -1)

    def topic_of(self, row: int) -> str:
        return self.topics[int(self.topic_index[row])]

    def tp(self, row: int) -> TopicPartition:
        return TopicPartition(self.topics[int(self.topic_index[row])], int(self.partition[row]))

    def replicas(self, row: int) -> tuple[int, ...]:
        return tuple(int(x) for x in self.replica_ids[self.replica_offsets[row]:self.replica_offsets[row + 1]])

    def isr(self, row: int) -> tuple[int, ...]:
        return tuple(int(x) for x in self.isr_ids[self.isr_offsets[row]:self.isr_offsets[row + 1]])

    def leader_of(self, row: int) -> int | None:
        value = int(self.leader[row])
        return None if value == NO_LEADER else value

    def partition_info(self, row: int) -> PartitionInfo:
        return PartitionInfo(
            topic=self.topic_of(row), partition=int(self.partition[row]),
            replicas=self.replicas(row), leader=self.leader_of(row), isr=self.isr(row),
            size_bytes=int(self.size_bytes[row]), produce_bps=float(self.produce_bps[row]),
            consume_bps=float(self.consume_bps[row]),
        )

    def iter_partitions(self) -> Iterator[PartitionInfo]:
        for row in range(len(self)):
            yield self.partition_info(row)

    def assignment(self, topics: Iterable[str] | None = None) -> dict[TopicPartition, tuple[int, ...]]:
        """Current replica lists, by partition, for some topics or all."""
        names = self.topics if topics is None else topics
        return {self.tp(r): self.replicas(r) for t in names for r in self.topic_rows(t)}

    @property
    def replication_factors(self) -> np.ndarray:
        return np.diff(self.replica_offsets)

    def replica_matrix(self) -> np.ndarray:
        """Replica ids as an (n, max RF) matrix padded with -1, for vectorised planners."""
        rf = self.replication_factors
        width = int(rf.max()) if len(rf) else 0
        out = np.full((len(self), width), -1, dtype=np.int32)
        rows = np.repeat(np.arange(len(self)), rf)
        cols = np.arange(len(self.replica_ids)) - np.repeat(self.replica_offsets[:-1], rf)
        out[rows, cols] = self.replica_ids
        return out

    # ---- per-broker aggregates ---------------------------------------------------------
    def _per_broker(self, ids: np.ndarray, weights: np.ndarray | None = None) -> dict[int, float]:
        """Sum per broker of the cluster (ids of brokers the cluster does not list are ignored)."""
        known = np.array(self.broker_ids, dtype=np.int64)
        pos = np.searchsorted(known, ids)
        ok = (pos < len(known)) & (known[np.minimum(pos, max(len(known) - 1, 0))] == ids) if len(known) \
            else np.zeros(len(ids), dtype=bool)
        counts = np.bincount(pos[ok], weights=None if weights is None else weights[ok],
                             minlength=len(known))
        return {b: counts[i].item() for i, b in enumerate(self.broker_ids)}

    def replicas_per_broker(self) -> dict[int, int]:
        return {k: int(v) for k, v in self._per_broker(self.replica_ids).items()}

    def leaders_per_broker(self) -> dict[int, int]:
        lead = self.leader[self.leader != NO_LEADER]
        return {k: int(v) for k, v in self._per_broker(lead).items()}

    def bytes_per_broker(self) -> dict[int, int]:
        weights = np.repeat(self.size_bytes, self.replication_factors).astype(np.float64)
        return {k: int(v) for k, v in self._per_broker(self.replica_ids, weights).items()}

    def racks(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers}

    # ---- derived states -------------------------------------------------------------------
    def _rows_of(self, keys: Sequence[TopicPartition]) -> np.ndarray:
        rows = self.find_rows([tp.topic for tp in keys], [tp.partition for tp in keys]) if keys \
            else np.zeros(0, dtype=np.int64)
        if np.any(rows < 0):
            raise InputError(f"partition {keys[int(np.argmax(rows < 0))]} does not exist in the cluster")
        return rows

    def _replica_lists_with(self, rows: np.ndarray, t_off: np.ndarray,
                            t_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, ids) of every row's replica list, those of `rows` replaced by the ragged targets."""
        lengths = np.diff(self.replica_offsets)
        starts = self.replica_offsets[:-1].copy()
        lengths[rows] = np.diff(t_off)
        starts[rows] = len(self.replica_ids) + t_off[:-1]
        source = np.concatenate([self.replica_ids, t_ids.astype(np.int32)])
        roff = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(lengths, out=roff[1:])
        return roff, source[np.repeat(starts - roff[:-1], lengths) + np.arange(int(roff[-1]))]

    def with_copies_pending(self) -> ClusterState:
        """The state as the copies still to do see it: each in-flight reassignment's adding
        replicas that are not in sync yet leave its replica list, since they hold no complete
        copy; a diff against the plan then counts them as moves (of what `Reassignment.copied`
        says is left). Leaders, ISR and the reassignments stay. Without reassignments: `self`."""
        pending: dict[TopicPartition, list[int]] = {}
        for tp, move in self.reassignments.items():
            row = self.find_row(tp.topic, tp.partition)
            copying = set(move.adding) - set(self.isr(row)) if row >= 0 else set()
            if copying:
                pending[tp] = [r for r in self.replicas(row) if r not in copying]
        if not pending:
            return self
        keys = list(pending)
        roff, rids = self._replica_lists_with(self._rows_of(keys), *_ragged([pending[tp] for tp in keys]))
        return ClusterState(
            brokers=self.brokers, topics=self.topics, topic_index=self.topic_index,
            partition=self.partition, replica_offsets=roff, replica_ids=rids, leader=self.leader,
            isr_offsets=self.isr_offsets, isr_ids=self.isr_ids, size_bytes=self.size_bytes,
            produce_bps=self.produce_bps, consume_bps=self.consume_bps, reassignments=self.reassignments,
            throttles=self.throttles, cluster_id=self.cluster_id, captured_at=self.captured_at,
            write_rates=self.write_rates,
        )

    def with_assignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> ClusterState:
        """The state after `targets` complete: replicas replaced, leader kept if still a
        replica (else the first target replica), ISR = the new replicas, no reassignments."""
        keys = list(targets)
        rows = self._rows_of(keys)
        t_off, t_ids = _ragged([targets[tp] for tp in keys])
        t_len = np.diff(t_off)
        roff, rids = self._replica_lists_with(rows, t_off, t_ids)
        leaders = self.leader.astype(np.int64).copy()
        seg = np.repeat(np.arange(len(rows)), t_len)
        kept = np.bincount(seg, weights=(t_ids == np.repeat(leaders[rows], t_len)), minlength=len(rows)) > 0
        first = np.where(t_len > 0, t_ids[np.minimum(t_off[:-1], max(len(t_ids) - 1, 0))] if len(t_ids) else NO_LEADER,
                         NO_LEADER)
        leaders[rows] = np.where(kept, leaders[rows], first)
        return ClusterState(
            brokers=self.brokers, topics=self.topics, topic_index=self.topic_index,
            partition=self.partition, replica_offsets=roff, replica_ids=rids,
            leader=leaders.astype(np.int32), isr_offsets=roff, isr_ids=rids,
            size_bytes=self.size_bytes, produce_bps=self.produce_bps,
            consume_bps=self.consume_bps, reassignments={}, throttles=self.throttles,
            cluster_id=self.cluster_id, captured_at=self.captured_at, write_rates=self.write_rates,
        )

    @property
    def rates_known(self) -> bool:
        """Whether `produce_bps` are rates someone measured or gave, rather than 0 for unknown."""
        return self.write_rates is not None or bool(np.any(self.produce_bps > 0))

    def rates_origin(self) -> WriteRates | None:
        """How the write rates were obtained; None when they are unknown."""
        if self.write_rates is not None:
            return self.write_rates
        return WriteRates("given") if self.rates_known else None

    def describe(self) -> dict[str, Any]:
        return {"brokers": len(self.brokers), "topics": len(self.topics), "partitions": len(self),
                "replicas": int(len(self.replica_ids)), "bytes": int(self.size_bytes.sum())}


def _leader_value(p: PartitionInfo) -> int:
    if p.leader is None:
        return NO_LEADER
    if p.leader == FIRST_REPLICA:
        return p.replicas[0] if p.replicas else NO_LEADER
    return p.leader


def _take_ragged(offsets: np.ndarray, ids: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reorder a ragged array's rows by `order` without a Python loop."""
    lengths = np.diff(offsets)[order]
    new_off = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_off[1:])
    starts = offsets[:-1][order]
    idx = np.repeat(starts - new_off[:-1], lengths) + np.arange(int(new_off[-1]))
    return new_off, ids[idx]


@dataclass(frozen=True)
class PartitionTarget:
    """One entry of a reassignment: the replicas (and optional log dirs) a partition should have.

    `log_dirs` is None when every replica may use any log dir ("any" in Kafka's JSON).
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def dirs(self) -> tuple[str, ...]:
        """The log dir of each replica, "any" where none was given."""
        return self.log_dirs if self.log_dirs is not None else ("any",) * len(self.replicas)
