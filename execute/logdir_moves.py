"""Moves of replicas between log directories of one broker (KIP-113), as Kafka's tool runs them.

A move to a dir can only start once the replica exists on its broker, so the start loop retries
`alter_replica_log_dirs` every 100 ms until all moves started or the timeout passes (reference
§5 step 9). The clock and sleep are injectable so tests never wait.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from kreassign.cluster.errors import AdminCommandFailed
from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import ClusterPort

RETRY_INTERVAL_S = 0.1
REPLICA_NOT_AVAILABLE = "REPLICA_NOT_AVAILABLE"

MoveState = Literal["missing-replica", "missing-log-dir", "in-progress", "moving-elsewhere",
                    "not-moving", "completed"]


def explicit_log_dirs(targets: Iterable[PartitionTarget]) -> dict[TopicPartitionReplica, str]:
    """Replicas of a plan given an explicit (non-"any") log dir, with that dir."""
    out: dict[TopicPartitionReplica, str] = {}
    for t in targets:
        for broker, log_dir in zip(t.replicas, t.dirs()):
            if log_dir != "any":
                out[TopicPartitionReplica(t.topic, t.partition, broker)] = log_dir
    return out


@dataclass(frozen=True)
class LogDirStatus:
    """Where one replica with an explicit target dir stands."""

    replica: TopicPartitionReplica
    state: MoveState
    target_dir: str
    current_dir: str | None = None
    future_dir: str | None = None

    @property
    def done(self) -> bool:
        """Kafka counts only completed and cancelled (not moving) replicas as done."""
        return self.state in ("completed", "not-moving")

    @property
    def active(self) -> bool:
        return self.state in ("in-progress", "moving-elsewhere")


def log_dir_states(port: ClusterPort, targets: Mapping[TopicPartitionReplica, str],
                   ) -> tuple[dict[TopicPartitionReplica, LogDirStatus], dict[int, str]]:
    """The state of each replica move, and the brokers that did not answer (id -> reason).

    A replica on a broker that did not answer counts as missing, as a replica the broker no
    longer reports does.
    """
    if not targets:
        return {}, {}
    report = port.log_dir_sizes(sorted({r.broker for r in targets}),
                                partitions=sorted({TopicPartition(r.topic, r.partition) for r in targets}))
    states: dict[TopicPartitionReplica, LogDirStatus] = {}
    for replica, target in sorted(targets.items(), key=lambda kv: (kv[0].broker, kv[0].topic, kv[0].partition)):
        info = report.replicas.get(replica)
        if info is None:
            states[replica] = LogDirStatus(replica, "missing-replica", target)
        elif info.log_dir is None:
            states[replica] = LogDirStatus(replica, "missing-log-dir", target)
        elif info.future_dir is None:
            state: MoveState = "completed" if info.log_dir == target else "not-moving"
            states[replica] = LogDirStatus(replica, state, target, info.log_dir)
        else:
            state = "in-progress" if info.future_dir == target else "moving-elsewhere"
            states[replica] = LogDirStatus(replica, state, target, info.log_dir, info.future_dir)
    return states, {b: e.message for b, e in report.unreachable.items()}


@dataclass(frozen=True)
class MoveStart:
    """Replicas whose move started, in the order Kafka prints them, and those that timed out."""

    started: tuple[tuple[TopicPartitionReplica, str], ...]
    timed_out: tuple[TopicPartitionReplica, ...] = ()


def start_log_dir_moves(
    port: ClusterPort,
    moves: Mapping[TopicPartitionReplica, str],
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_started: Callable[[list[tuple[TopicPartitionReplica, str]]], None] | None = None,
) -> MoveStart:
    """Start every move, retrying replicas that do not exist on their broker yet (or whose
    broker does not answer) until `timeout_s` passes.

    Raises:
        AdminCommandFailed: `Failed to alter dir for <t-p-b>` when a broker refuses a move for
            another reason (e.g. the dir does not exist).
    """
    pending = dict(moves)
    started: list[tuple[TopicPartitionReplica, str]] = []
    deadline = clock() + timeout_s
    while pending:
        results = port.alter_replica_log_dirs(pending)
        batch = []
        for replica, error in sorted(results.items(), key=lambda kv: (kv[0].broker, kv[0].topic, kv[0].partition)):
            if error is None:
                batch.append((replica, pending.pop(replica)))
            elif error.name != REPLICA_NOT_AVAILABLE and not error.unreachable:
                raise AdminCommandFailed(f"Failed to alter dir for {replica} ({error.message})")
        if batch:
            started.extend(batch)
            if on_started is not None:
                on_started(batch)
        if not pending:
            break
        if clock() >= deadline:
            order = sorted(pending, key=lambda r: (r.broker, r.topic, r.partition))
            return MoveStart(tuple(started), tuple(order))
        sleep(RETRY_INTERVAL_S)
    return MoveStart(tuple(started))


def timed_out_message(replicas: tuple[TopicPartitionReplica, ...]) -> str:
    """Kafka's terse message when log-dir moves did not start in time."""
    plural = "" if len(replicas) == 1 else "s"
    return (f"Timed out before log directory move{plural} could be started for: "
            + ",".join(str(r) for r in replicas))
