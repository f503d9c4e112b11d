"""Moves of a replica between log dirs of one broker (KIP-113), paced like Kafka's
ReplicaAlterLogDirsThread.

AlterReplicaLogDirs creates a *future* replica in the target dir; the broker copies the current
replica into it at most at `replica.alter.log.dirs.io.max.bytes.per.second` (shared by the
broker's moves, unlimited when unset), and swaps the two once the future replica has caught up
with the current one, which keeps growing while clients write. Until then DescribeLogDirs shows
both (the future one with `is_future_key`), so `--verify` reports the move as still active.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kreassign.sandbox import codes
from kreassign.sandbox.configs import ALTER_LOG_DIRS_RATE
from kreassign.sandbox.engine import Engine


@dataclass
class FutureReplica:
    broker: int
    topic: str
    index: int
    target_dir: str
    copied: float = 0.0


class LogDirMoves:
    """The future replicas of a sandbox; `advance` copies bytes, call it with the engine lock held."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.moves: dict[tuple[int, str, int], FutureReplica] = {}
        self.now: float | None = None

    def start(self, broker_id: int, path: str, topic: str, index: int) -> int:
        """AlterReplicaLogDirs for one replica: Kafka's error code."""
        b = self.engine.brokers[broker_id]
        if path not in b.log_dirs:
            return codes.LOG_DIR_NOT_FOUND
        p = self.engine.partition(topic, index)
        if p is None:
            return codes.UNKNOWN_TOPIC_OR_PARTITION
        if broker_id not in p.replicas:
            return codes.REPLICA_NOT_AVAILABLE
        key = (broker_id, topic, index)
        if p.log_dirs.get(broker_id, b.log_dirs[0]) == path:
            self.moves.pop(key, None)  # back to where it is: the future replica is dropped
        elif key not in self.moves or self.moves[key].target_dir != path:
            self.moves[key] = FutureReplica(broker_id, topic, index, path)
        return codes.NONE

    def forget(self, topic: str) -> None:
        """The topic was deleted: its future replicas go with it."""
        for key in [k for k in self.moves if k[1] == topic]:
            del self.moves[key]

    def future(self, broker_id: int, topic: str, index: int) -> FutureReplica | None:
        return self.moves.get((broker_id, topic, index))

    def advance(self, now: float) -> None:
        """Copy for the time since the last call; swap the replicas that caught up."""
        last, self.now = self.now, now
        if last is None or now <= last or not self.moves:
            return
        dt = now - last
        per_broker: dict[int, list[FutureReplica]] = {}
        for f in list(self.moves.values()):
            p = self.engine.partition(f.topic, f.index)
            if p is None or f.broker not in p.replicas:
                del self.moves[(f.broker, f.topic, f.index)]  # the replica left the broker
            elif self.engine.brokers[f.broker].alive:
                per_broker.setdefault(f.broker, []).append(f)
        for broker_id, futures in per_broker.items():
            budget = self.engine.configs.rate(broker_id, ALTER_LOG_DIRS_RATE) * dt
            needs = sorted(((self._size(f) - f.copied, i) for i, f in enumerate(futures)))
            for k, (need, i) in enumerate(needs):  # smallest first: max-min fair shares in one pass
                got = min(budget / (len(needs) - k), max(need, 0.0))
                futures[i].copied += got
                budget -= got
            for f in futures:
                if f.copied >= self._size(f) - 1e-6:
                    p = self.engine.partition(f.topic, f.index)
                    assert p is not None
                    p.log_dirs[broker_id] = f.target_dir
                    del self.moves[(broker_id, f.topic, f.index)]

    def _size(self, f: FutureReplica) -> float:
        p = self.engine.partition(f.topic, f.index)
        assert p is not None
        return float(self.engine.replica_size(p, f.broker))

    def to_json(self) -> list[dict[str, Any]]:
        return [{"broker": f.broker, "topic": f.topic, "partition": f.index, "dir": f.target_dir, "copied": f.copied}
                for f in self.moves.values()]

    def load(self, data: list[Mapping[str, Any]]) -> None:
        for d in data:
            f = FutureReplica(int(d["broker"]), str(d["topic"]), int(d["partition"]), str(d["dir"]), float(d["copied"]))
            self.moves[(f.broker, f.topic, f.index)] = f
