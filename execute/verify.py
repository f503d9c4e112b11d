"""Verify a reassignment and list the running ones, with Kafka's semantics (reference §2.5, §2.7).

Verify reports each partition of the plan (moving, done, or at some other replica set), each
explicit log-dir move, and clears throttles when nothing moves anywhere in the cluster, restoring
the values recorded in the execution journal. Kafka's off-by-one on the partition count is fixed:
a partition number equal to the partition count is reported like any missing partition.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kreassign.cluster.errors import UnknownTopicError
from kreassign.cluster.model import PartitionTarget, Reassignment, TopicPartition
from kreassign.cluster.config_readback import Confirm
from kreassign.cluster.port import ClusterPort
from kreassign.throttle.configs import clear_targets
from kreassign.execute.journal import Journal, JournalStore
from kreassign.execute.clear import ClearResult, clear_throttles
from kreassign.execute.logdir_moves import LogDirStatus, explicit_log_dirs, log_dir_states

PartitionState = Literal["in-progress", "completed", "mismatch"]


@dataclass(frozen=True)
class PartitionStatus:
    """One partition of the plan: still moving, at its target, or at another replica set."""

    tp: TopicPartition
    state: PartitionState
    current: tuple[int, ...]
    """the replica list now (during a move: target then removing replicas); empty if unknown"""
    target: tuple[int, ...]


@dataclass(frozen=True)
class VerifyRequest:
    targets: tuple[PartitionTarget, ...]
    preserve_throttles: bool = False
    dry_run: bool = False
    """report what a clear would do without doing it"""
    foreign: bool = True
    """clear as Kafka's --verify does: the throttles of every live broker and of the plan's topics,
    deleting what no journal recorded (an operator's own). False (kreassign's `verify`): only what
    the plan's journal shows this run set, restored to the values found before it"""


@dataclass(frozen=True)
class VerifyResult:
    partitions: tuple[PartitionStatus, ...]
    log_dirs: tuple[LogDirStatus, ...] = ()
    reassignments_running: int = 0
    """reassignments in flight anywhere in the cluster (Kafka clears throttles only at 0)"""
    clear: ClearResult | None = None
    journal_path: Path | None = None
    unreachable: Mapping[int, str] = field(default_factory=dict)
    """brokers that did not answer DescribeLogDirs"""

    @property
    def moves_ongoing(self) -> bool:
        return not all(s.done for s in self.log_dirs)

    @property
    def in_progress(self) -> bool:
        """Some partition or log-dir move of the plan is still running."""
        return self.moves_ongoing or any(p.state == "in-progress" for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "partitions": [{"topic": p.tp.topic, "partition": p.tp.partition, "state": p.state,
                            "current": list(p.current), "target": list(p.target)} for p in self.partitions],
            "log_dirs": [{"replica": str(s.replica), "state": s.state, "target": s.target_dir,
                          "current": s.current_dir, "future": s.future_dir} for s in self.log_dirs],
            "in_progress": self.in_progress,
            "reassignments_running": self.reassignments_running,
            "throttles_cleared": None if self.clear is None else self.clear.as_dict(),
            "journal": str(self.journal_path) if self.journal_path else None,
            "unreachable_brokers": {str(b): m for b, m in self.unreachable.items()},
        }


def describe_known(port: ClusterPort, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, ...]]:
    """Replicas of every partition of the topics that exist (unknown topics are left out)."""
    wanted = set(topics)
    while wanted:
        try:
            return {p.tp: p.replicas for p in port.describe_topics(sorted(wanted))}
        except UnknownTopicError as exc:
            if not set(exc.topics) & wanted:
                raise
            wanted -= set(exc.topics)
    return {}


SETTLE_PAUSE_S = 0.1
SETTLE_LIMIT_S = 5.0
"""how long a read waits for the brokers' metadata to catch up with the controller"""


def shows_the_move(replicas: Sequence[int], target: Sequence[int]) -> bool:
    """The replica list of a move still in flight (KRaft's: the target, then the replicas leaving)."""
    return len(replicas) > len(target) and tuple(replicas[:len(target)]) == tuple(target)


def settled_replicas(port: ClusterPort, targets: Mapping[TopicPartition, Sequence[int]], *,
                     sleep: Callable[[float], None], limit_s: float = SETTLE_LIMIT_S,
                     pause_s: float = SETTLE_PAUSE_S) -> dict[TopicPartition, tuple[int, ...]]:
    """The replicas of partitions the controller no longer lists as moving (their moves finished
    or were cancelled), read from the brokers' metadata once it has caught up.

    A broker learns a completed or cancelled reassignment from the controller's metadata log a
    little later than ListPartitionReassignments stops listing it (tens of milliseconds on Kafka
    4.4; more on a loaded host): until then Metadata still gives the move's list, the target
    followed by the replicas leaving. Such partitions are read again every `pause_s`, for at
    most `limit_s` (a plan whose target is a prefix of the replicas, never executed, waits that
    long and is then reported as it is). Unknown topics are left out (`describe_known`).
    """
    topics = {tp.topic for tp in targets}
    current = describe_known(port, topics)
    for _ in range(round(limit_s / pause_s)):
        if not any(shows_the_move(current.get(tp, ()), t) for tp, t in targets.items()):
            break
        sleep(pause_s)
        current = describe_known(port, topics)
    return current


def partition_states(targets: Iterable[PartitionTarget], in_flight: Mapping[TopicPartition, Reassignment],
                     current: Mapping[TopicPartition, tuple[int, ...]]) -> tuple[PartitionStatus, ...]:
    """Kafka's per-partition verdicts, sorted by partition (a later duplicate entry wins)."""
    by_tp = {t.tp: t.replicas for t in targets}
    out = []
    for tp, target in sorted(by_tp.items()):
        if tp in in_flight:
            out.append(PartitionStatus(tp, "in-progress", in_flight[tp].replicas, target))
        else:
            now = current.get(tp, ())
            out.append(PartitionStatus(tp, "completed" if now == target else "mismatch", now, target))
    return tuple(out)


def clear_scope(live_brokers: Iterable[int], targets: Iterable[PartitionTarget],
                journal: Journal | None) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Kafka's clear targets (live brokers, the plan's brokers and topics), plus every broker the
    journal shows we throttled: a broker that is down now still has our rate once it is back."""
    brokers, topics = clear_targets(live_brokers, [(t.tp, t.replicas) for t in targets])
    if journal is not None:
        brokers = tuple(dict.fromkeys([*brokers, *sorted(set(journal.applied_brokers) | set(journal.pending_brokers))]))
    return brokers, topics


def own_scope(journal: Journal) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The brokers and topics whose throttles the run of `journal` set (planned, applied, or
    pending on a broker that was down): what kreassign's own clears restore, and nothing else."""
    brokers = set(journal.planned_brokers) | set(journal.applied_brokers) | set(journal.pending_brokers)
    topics = set(journal.planned_topics) | set(journal.applied_topics)
    return tuple(sorted(brokers)), tuple(sorted(topics))


def verify(port: ClusterPort, request: VerifyRequest, *, store: JournalStore | None = None,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> VerifyResult:
    """Report the plan's progress; clear (restore) throttles once nothing moves in the cluster.
    A partition whose move just finished is read until the brokers' metadata has caught up
    (`settled_replicas`, which waits with `sleep`).

    Raises:
        ClusterError: the cluster could not be read, or refused the throttle change.
    """
    in_flight = port.list_reassignments()
    current = settled_replicas(port, {t.tp: t.replicas for t in request.targets if t.tp not in in_flight},
                               sleep=sleep)
    statuses = partition_states(request.targets, in_flight, current)
    states, unreachable = log_dir_states(port, explicit_log_dirs(request.targets))
    moves = tuple(states.values())
    result = VerifyResult(statuses, moves, len(in_flight), unreachable=unreachable)
    if in_flight or not all(s.done for s in moves) or request.preserve_throttles:
        return result
    info = port.describe_brokers()
    journal = store.find(info.cluster_id, request.targets) if store is not None else None
    if request.foreign:
        brokers, topics = clear_scope([b.id for b in info.brokers], request.targets, journal)
    elif journal is None or not journal.is_open:
        return result  # no run of kreassign throttled this plan: nothing of ours to clear
    else:
        brokers, topics = own_scope(journal)
    clear = clear_throttles(port, brokers, topics, journal=journal, dry_run=request.dry_run,
                            confirm=Confirm(clock, sleep))
    return VerifyResult(statuses, moves, 0, clear, journal.path if journal else None, unreachable)


@dataclass(frozen=True)
class ListResult:
    """Every reassignment in flight in the cluster, by partition."""

    reassignments: Mapping[TopicPartition, Reassignment]

    def as_dict(self) -> dict[str, Any]:
        return {"reassignments": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(r.replicas),
             "adding": list(r.adding), "removing": list(r.removing), "target": list(r.target)}
            for tp, r in sorted(self.reassignments.items())]}


def list_reassignments(port: ClusterPort) -> ListResult:
    """The reassignments running anywhere in the cluster."""
    return ListResult(dict(sorted(port.list_reassignments().items())))
