"""Plan diff and plan metrics: what a reassignment changes, and what it costs, per broker.

Everything is computed on numpy columns so a 1,000,000-entry plan diffs in seconds; per-partition
value objects (`PartitionChange`) are only built when asked for.

Conventions:
- A *move* is one replica a partition gains. Its bytes are the partition's size (less what the
  replica holds already when it is an adding replica of an in-flight reassignment whose size is
  known); they flow from the partition's current leader (followers fetch from the leader) to the new replica.
  So `bytes_out_per_broker` is counted on the current leader, and moves of a partition that
  has no leader have source -1 and count in no broker's bytes out.
- "current" is the replica list the cluster reports now (during an in-flight reassignment it
  holds the adding and removing replicas too, as Kafka's describeTopics does). ETAs diff
  against `ClusterState.with_copies_pending()` instead, where adding replicas not in sync yet
  still have their copy to do.
- After the plan, each planned partition's leader is taken to be its preferred leader (the
  first target replica), which is where leadership ends after a preferred-leader election.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kreassign.cluster.errors import InputError, clip
from kreassign.cluster.model import NO_LEADER, ClusterState, PartitionTarget, TopicPartition

_MAX_LISTED = 5


@dataclass(frozen=True, eq=False)
class Moves:
    """One row per replica added by a plan, as numpy columns in (topic, partition) order."""

    row: np.ndarray
    """partition row in the cluster state (int64)"""
    dest: np.ndarray
    """broker that gains the replica (int64)"""
    source: np.ndarray
    """broker the data is fetched from: the current leader, -1 if the partition has none"""
    bytes: np.ndarray
    """bytes to copy: the partition's size (int64)"""
    write_bps: np.ndarray
    """the partition's produce rate, which the new replica must also keep up with (float64)"""
    released_bps: np.ndarray
    """the in-sync replication the leader stops sending when the partition's move completes: the
    writes times the in-sync followers the plan removes, shared among its moves (float64)"""

    def __len__(self) -> int:
        return len(self.row)

    @classmethod
    def empty(cls) -> Moves:
        i = np.zeros(0, dtype=np.int64)
        return cls(row=i, dest=i, source=i, bytes=i, write_bps=np.zeros(0), released_bps=np.zeros(0))

    @property
    def total_bytes(self) -> int:
        return int(self.bytes.sum())

    def select(self, mask: np.ndarray) -> Moves:
        """The moves where `mask` (boolean or index array) selects."""
        return Moves(row=self.row[mask], dest=self.dest[mask], source=self.source[mask],
                     bytes=self.bytes[mask], write_bps=self.write_bps[mask], released_bps=self.released_bps[mask])

    def bytes_in(self) -> dict[int, int]:
        """Bytes each destination broker receives, by broker id (only brokers that receive)."""
        return _sum_by(self.dest, self.bytes)

    def bytes_out(self) -> dict[int, int]:
        """Bytes each source broker (current leader) sends, by broker id; leaderless excluded."""
        known = self.source >= 0
        return _sum_by(self.source[known], self.bytes[known])

    def brokers(self) -> tuple[int, ...]:
        """Every broker that sends or receives, ascending."""
        ids = np.union1d(self.dest, self.source[self.source >= 0])
        return tuple(int(b) for b in ids)

    def topic_partitions(self, state: ClusterState) -> list[TopicPartition]:
        """The partition of each move (materialised; for small selections and display)."""
        return [state.tp(int(r)) for r in self.row]


@dataclass(frozen=True)
class PartitionChange:
    """What a plan does to one partition."""

    tp: TopicPartition
    current: tuple[int, ...]
    target: tuple[int, ...]
    adding: tuple[int, ...]
    """target replicas the partition does not have yet, in target order"""
    removing: tuple[int, ...]
    """current replicas the target drops, in current order"""
    leader_before: int | None
    preferred_leader_after: int
    reorder_only: bool
    """same replica set, different order (only the preferred leader or order changes)"""

    @property
    def unchanged(self) -> bool:
        return self.current == self.target

    @property
    def leader_changes(self) -> bool:
        return self.leader_before != self.preferred_leader_after


@dataclass(frozen=True, eq=False)
class PlanDiff:
    """A plan compared with the cluster: per-partition columns, moves, totals, per-broker load.

    Per-partition columns are in (topic, partition) order; ragged lists are (offsets, ids).
    Per-broker dicts cover every broker of the cluster plus any broker the plan or the current
    assignment names (see `unknown_brokers`), with zeros where nothing applies.
    """

    state: ClusterState
    rows: np.ndarray
    target_offsets: np.ndarray
    target_ids: np.ndarray
    current_offsets: np.ndarray
    current_ids: np.ndarray
    adding_offsets: np.ndarray
    adding_ids: np.ndarray
    removing_offsets: np.ndarray
    removing_ids: np.ndarray
    leader_before: np.ndarray
    """current leader per planned partition, NO_LEADER (-1) if none"""
    preferred_leader_after: np.ndarray
    changed: np.ndarray
    """boolean: the target differs from the current list (set or order)"""
    reorder_only: np.ndarray
    moves: Moves
    bytes_in_per_broker: dict[int, int]
    bytes_out_per_broker: dict[int, int]
    replicas_before: dict[int, int]
    replicas_after: dict[int, int]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    unknown_brokers: tuple[int, ...]
    """brokers named by the plan that the cluster does not list"""

    # ---- totals ----------------------------------------------------------------------
    @property
    def partitions_in_plan(self) -> int:
        return len(self.rows)

    @property
    def partitions_moved(self) -> int:
        """Partitions that gain at least one replica (and so copy data)."""
        return int(np.count_nonzero(np.diff(self.adding_offsets)))

    @property
    def partitions_changed(self) -> int:
        return int(np.count_nonzero(self.changed))

    @property
    def replicas_added(self) -> int:
        return len(self.adding_ids)

    @property
    def replicas_removed(self) -> int:
        return len(self.removing_ids)

    @property
    def bytes_moved(self) -> int:
        return self.moves.total_bytes

    @property
    def leader_changes(self) -> int:
        """Planned partitions whose preferred leader after differs from the current leader."""
        return int(np.count_nonzero(self.leader_before != self.preferred_leader_after))

    def totals(self) -> dict[str, int]:
        """The headline numbers, for rendering and `--output json`."""
        return {
            "partitions": self.partitions_in_plan,
            "partitions_changed": self.partitions_changed,
            "partitions_moved": self.partitions_moved,
            "replicas_added": self.replicas_added,
            "replicas_removed": self.replicas_removed,
            "bytes_moved": self.bytes_moved,
            "leader_changes": self.leader_changes,
        }

    # ---- per-partition value objects (built on demand) --------------------------------
    def current_assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The replicas the cluster reports now for every planned partition, changed or not."""
        ids = self.current_ids.tolist()
        bounds = self.current_offsets.tolist()
        return {self.state.tp(int(row)): tuple(ids[bounds[i]:bounds[i + 1]])
                for i, row in enumerate(self.rows.tolist())}

    def change_at(self, i: int) -> PartitionChange:
        """The i-th planned partition (in topic, partition order) as a value object."""
        def seg(off: np.ndarray, ids: np.ndarray) -> tuple[int, ...]:
            return tuple(int(x) for x in ids[off[i]:off[i + 1]])

        leader = int(self.leader_before[i])
        return PartitionChange(
            tp=self.state.tp(int(self.rows[i])),
            current=seg(self.current_offsets, self.current_ids),
            target=seg(self.target_offsets, self.target_ids),
            adding=seg(self.adding_offsets, self.adding_ids),
            removing=seg(self.removing_offsets, self.removing_ids),
            leader_before=None if leader == NO_LEADER else leader,
            preferred_leader_after=int(self.preferred_leader_after[i]),
            reorder_only=bool(self.reorder_only[i]),
        )

    @cached_property
    def partition_changes(self) -> tuple[PartitionChange, ...]:
        """Every planned partition that changes, as value objects (built on first use)."""
        return tuple(self.change_at(int(i)) for i in np.flatnonzero(self.changed))

    def change(self, tp: TopicPartition) -> PartitionChange:
        """The change for one partition. Raises KeyError if the plan does not name it."""
        row = self.state.find_row(tp.topic, tp.partition)
        i = int(np.searchsorted(self.rows, row))
        if row < 0 or i >= len(self.rows) or self.rows[i] != row:
            raise KeyError(tp)
        return self.change_at(i)


def diff_plan(
    state: ClusterState,
    targets: Iterable[PartitionTarget] | Mapping[TopicPartition, Sequence[int]],
) -> PlanDiff:
    """Compare a plan with the cluster.

    Args:
        state: the cluster now.
        targets: the plan, as reassignment entries or a partition -> replicas mapping.

    Raises:
        InputError: the plan names a partition the cluster does not have, names a partition
            twice, or has an empty replica list, a duplicate or a negative broker id.
    """
    if isinstance(targets, Mapping):
        keys = list(targets.keys())
        topics = [tp.topic for tp in keys]
        parts = [tp.partition for tp in keys]
        lists: list[Sequence[int]] = list(targets.values())
    else:
        entries = list(targets)
        topics = [t.topic for t in entries]
        parts = [t.partition for t in entries]
        lists = [t.replicas for t in entries]
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(offsets[-1]))
    rows = state.find_rows(topics, parts) if topics else np.zeros(0, dtype=np.int64)
    if np.any(rows < 0):
        raise InputError(_unknown_partitions_message(state, topics, parts, rows))
    return diff_rows(state, rows, offsets, ids)


def diff_rows(state: ClusterState, rows: np.ndarray, target_offsets: np.ndarray,
              target_ids: np.ndarray) -> PlanDiff:
    """`diff_plan` for planners that already hold the plan as columns.

    Args:
        rows: partition rows of the state, any order, each at most once.
        target_offsets, target_ids: the target replica lists of those rows, ragged.

    Raises:
        InputError: as `diff_plan`.
    """
    rows = np.asarray(rows, dtype=np.int64)
    t_off = np.asarray(target_offsets, dtype=np.int64)
    t_ids = np.asarray(target_ids, dtype=np.int64)
    n = len(rows)
    if len(t_off) != n + 1 or t_off[-1] != len(t_ids):
        raise InputError("target offsets do not match the number of planned partitions")
    if np.any((rows < 0) | (rows >= len(state))):
        raise InputError("a planned partition row is outside the cluster state")
    order = np.argsort(rows, kind="stable")
    rows = rows[order]
    t_off, t_ids = _take(t_off, t_ids, order)
    _validate(state, rows, t_off, t_ids)

    c_off, c_ids = _take(state.replica_offsets, state.replica_ids.astype(np.int64), rows)
    t_seg = np.repeat(np.arange(n, dtype=np.int64), np.diff(t_off))
    c_seg = np.repeat(np.arange(n, dtype=np.int64), np.diff(c_off))
    is_new = ~_in_row(t_ids, t_seg, _padded(c_off, c_ids))
    is_gone = ~_in_row(c_ids, c_seg, _padded(t_off, t_ids))
    a_off = _offsets(np.bincount(t_seg[is_new], minlength=n))
    r_off = _offsets(np.bincount(c_seg[is_gone], minlength=n))
    same_set = (np.diff(a_off) == 0) & (np.diff(r_off) == 0)
    # Same set, so same length: compare position by position to find reordered lists.
    idx = np.flatnonzero(same_set[t_seg])
    seg = t_seg[idx]
    differs = t_ids[idx] != c_ids[c_off[seg] + idx - t_off[seg]]
    reorder_only = same_set & (np.bincount(seg[differs], minlength=n) > 0)
    changed = ~same_set | reorder_only

    leader_before = state.leader[rows].astype(np.int64)
    preferred_after = t_ids[t_off[:-1]] if n else np.zeros(0, dtype=np.int64)
    move_seg = t_seg[is_new]
    move_rows = rows[move_seg]
    # In-sync followers the plan removes: the leader quota counts their fetches until the move ends.
    i_off, i_ids = _take(state.isr_offsets, state.isr_ids.astype(np.int64), rows)
    in_sync = _in_row(c_ids, c_seg, _padded(i_off, i_ids)) & (c_ids != leader_before[c_seg])
    gone_in_sync = np.bincount(c_seg[is_gone & in_sync], minlength=n)
    adding = np.maximum(np.diff(a_off), 1)
    produce = state.produce_bps[move_rows].astype(np.float64)
    size = state.size_bytes[move_rows].astype(np.int64)
    if state.reassignments:
        size = _left_to_copy(state, move_rows, t_ids[is_new], size)
    moves = Moves(row=move_rows, dest=t_ids[is_new], source=leader_before[move_seg],
                  bytes=size, write_bps=produce,
                  released_bps=produce * gone_in_sync[move_seg] / adding[move_seg])

    cluster_ids = np.asarray(state.broker_ids, dtype=np.int64)
    all_leaders = state.leader.astype(np.int64)
    all_leaders = all_leaders[all_leaders != NO_LEADER]
    universe = _distinct(np.concatenate([cluster_ids, _distinct(state.replica_ids),
                                         _distinct(all_leaders), _distinct(t_ids)]))
    replicas_before = _count(universe, state.replica_ids.astype(np.int64))
    replicas_after = replicas_before + _count(universe, t_ids[is_new]) - _count(universe, c_ids[is_gone])
    leaders_before = _count(universe, all_leaders)
    leaders_after = (leaders_before - _count(universe, leader_before[leader_before != NO_LEADER])
                     + _count(universe, preferred_after))
    bytes_in = _count(universe, moves.dest, moves.bytes)
    known_src = moves.source >= 0
    bytes_out = _count(universe, moves.source[known_src], moves.bytes[known_src])
    unknown = np.setdiff1d(_distinct(t_ids), cluster_ids)

    return PlanDiff(
        state=state, rows=rows, target_offsets=t_off, target_ids=t_ids,
        current_offsets=c_off, current_ids=c_ids,
        adding_offsets=a_off, adding_ids=t_ids[is_new],
        removing_offsets=r_off, removing_ids=c_ids[is_gone],
        leader_before=leader_before, preferred_leader_after=preferred_after,
        changed=changed, reorder_only=reorder_only, moves=moves,
        bytes_in_per_broker=_as_dict(universe, bytes_in),
        bytes_out_per_broker=_as_dict(universe, bytes_out),
        replicas_before=_as_dict(universe, replicas_before),
        replicas_after=_as_dict(universe, replicas_after),
        leaders_before=_as_dict(universe, leaders_before),
        leaders_after=_as_dict(universe, leaders_after),
        unknown_brokers=tuple(int(b) for b in unknown),
    )


# ---- helpers ------------------------------------------------------------------------------
def _distinct(ids: np.ndarray) -> np.ndarray:
    """Sorted distinct non-negative ids; a bincount when ids are small (broker ids are)."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) and 0 <= ids.min() and ids.max() < (1 << 22):
        return np.flatnonzero(np.bincount(ids)).astype(np.int64)
    return np.unique(ids)


def _padded(offsets: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A ragged array as an (n, widest) matrix padded with -1 (replica lists are short)."""
    lengths = np.diff(offsets)
    out = np.full((len(lengths), int(lengths.max(initial=0))), -1, dtype=np.int64)
    seg = np.repeat(np.arange(len(lengths)), lengths)
    out[seg, np.arange(len(ids)) - offsets[:-1][seg]] = ids
    return out


def _left_to_copy(state: ClusterState, rows: np.ndarray, dest: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Move bytes less what the new replica already holds, where it is an adding replica of an
    in-flight reassignment whose log size is known (`Reassignment.copied`)."""
    copying = {state.find_row(tp.topic, tp.partition): move
               for tp, move in state.reassignments.items() if move.copied}
    out = size.copy()
    for i in np.flatnonzero(np.isin(rows, list(copying))):
        done = copying[int(rows[i])].copied_by(int(dest[i]))
        if done is not None:
            out[i] = max(int(out[i]) - done, 0)
    return out


def _in_row(ids: np.ndarray, seg: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """For each entry, whether its id appears in its own row of `matrix`."""
    found = np.zeros(len(ids), dtype=bool)
    for col in range(matrix.shape[1]):
        found |= matrix[seg, col] == ids
    return found


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _take(offsets: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows `rows` of a ragged array, in that order, without a Python loop."""
    lengths = np.diff(offsets)[rows]
    new_off = _offsets(lengths)
    idx = np.repeat(offsets[:-1][rows] - new_off[:-1], lengths) + np.arange(int(new_off[-1]))
    return new_off, ids[idx]


def _count(universe: np.ndarray, ids: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Per-broker totals of `ids` (every id must be in the sorted `universe`)."""
    if len(universe) and universe[-1] < (1 << 22):
        lookup = np.zeros(int(universe[-1]) + 1, dtype=np.int64)
        lookup[universe] = np.arange(len(universe))
        pos = lookup[ids]
    else:
        pos = np.searchsorted(universe, ids)
    # float64 sums of whole numbers stay exact below 2**53 bytes (8 PiB) per broker.
    counts = np.bincount(pos, weights=None if weights is None else weights.astype(np.float64),
                         minlength=len(universe))
    return counts.astype(np.int64)


def _as_dict(universe: np.ndarray, values: np.ndarray) -> dict[int, int]:
    return dict(zip(universe.tolist(), values.tolist()))


def _sum_by(ids: np.ndarray, weights: np.ndarray) -> dict[int, int]:
    universe = _distinct(ids)
    return _as_dict(universe, _count(universe, ids, weights))


def _validate(state: ClusterState, rows: np.ndarray, t_off: np.ndarray, t_ids: np.ndarray) -> None:
    """Reject what no reassignment may contain, naming the partitions."""
    def names(idx: np.ndarray) -> str:
        shown = ", ".join(clip(state.tp(int(rows[i]))) for i in idx[:_MAX_LISTED])
        more = len(idx) - _MAX_LISTED
        return shown + (f" and {more} more" if more > 0 else "")

    dup_rows = np.flatnonzero(rows[1:] == rows[:-1])
    if len(dup_rows):
        raise InputError(f"The plan lists these partitions more than once: {names(dup_rows)}. "
                         "Keep one entry per partition.")
    lengths = np.diff(t_off)
    empty = np.flatnonzero(lengths == 0)
    if len(empty):
        raise InputError(f"The plan gives these partitions an empty replica list: {names(empty)}. "
                         "Every partition needs at least one replica.")
    seg = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    negative = np.unique(seg[t_ids < 0])
    if len(negative):
        raise InputError(f"The plan has negative broker ids for: {names(negative)}.")
    matrix = _padded(t_off, t_ids)
    hits = np.zeros(len(t_ids), dtype=np.int64)
    for col in range(matrix.shape[1]):
        hits += matrix[seg, col] == t_ids
    dup = np.unique(seg[hits > 1])
    if len(dup):
        raise InputError(f"The plan lists a broker twice in the replicas of: {names(dup)}. "
                         "Each replica must be on a different broker.")


def _unknown_partitions_message(state: ClusterState, topics: Sequence[str], parts: Sequence[int],
                                rows: np.ndarray) -> str:
    bad = sorted({TopicPartition(topics[i], int(parts[i])) for i in np.flatnonzero(rows < 0)})
    described = []
    for tp in bad[:_MAX_LISTED]:
        if state.has_topic(tp.topic):
            described.append(f"{clip(tp)} (topic {clip(tp.topic)} has {len(state.topic_rows(tp.topic))} partitions)")
        else:
            described.append(f"{clip(tp)} (no topic {clip(tp.topic)})")
    more = len(bad) - _MAX_LISTED
    listed = ", ".join(described) + (f" and {more} more" if more > 0 else "")
    plural = "s" if len(bad) != 1 else ""
    return (f"The plan names {len(bad)} partition{plural} the cluster does not have: {listed}. "
            "Check that the plan was made for this cluster.")
