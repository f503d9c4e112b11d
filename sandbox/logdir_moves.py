"""Moves of a replica between log dirs of one broker (KIP-113), fetch by fetch as Kafka's
ReplicaAlterLogDirsThread makes them (checked against Kafka 3.9.2 and 4.4.0 brokers).

AlterReplicaLogDirs creates a *future* replica in the target dir. A broker runs
`num.replica.alter.log.dirs.threads` copy threads (Kafka's default: one per log dir); a replica
belongs to thread `abs(31 * topic.hashCode() + partition) % threads`. Each thread copies one
replica at a time, the lowest (topic, partition) first, and keeps at it until it is done:

* before each fetch the broker's quota (`replica.alter.log.dirs.io.max.bytes.per.second`, a
  `SimpleRate` over 11 one-second windows, shared by the broker's threads) is checked: above the
  bound, the thread backs off `replica.fetch.backoff.ms` and looks again;
* a fetch reads whole batches, at most `replica.fetch.max.bytes` (at least one batch), from the
  current replica into the future one and records them in the quota; so the first fetch of an
  idle broker is never throttled, and at 1 B/s the next one waits until the windows forget it;
* the fetch that catches the future replica up asks for the swap (KRaft: the directory
  assignment), and the swap happens at the replica's next fetch if it is still caught up; the
  current replica keeps growing while clients write.

Until the swap DescribeLogDirs shows both replicas (the future one with `is_future_key`), so
`--verify` reports the move as still active. A replica moved back to the dir it is in drops
its future replica. A move asked for a replica the broker does not hold yet is refused with
REPLICA_NOT_AVAILABLE and the dir is remembered: the replica is created there when it arrives.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kreassign.sandbox import codes
from kreassign.sandbox.configs import ALTER_LOG_DIRS_RATE
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.fetch import fetcher_id
from kreassign.sandbox.quota import SampledRates
from kreassign.sandbox.state import PartitionState

BatchCut = Callable[[PartitionState, float, float], float]
"""(partition, from byte, up to byte) -> where a read of whole batches stops"""


@dataclass
class FutureReplica:
    broker: int
    topic: str
    index: int
    target_dir: str
    copied: float = 0.0
    caught_up: bool = False
    """the swap was asked for: the next fetch that finds the replica caught up makes it"""


def _bytes(_p: PartitionState, _start: float, limit: float) -> float:
    return limit


class LogDirMoves:
    """The future replicas of a sandbox; `advance` runs the copy threads' fetches up to a time.
    Call every method with the engine lock held."""

    def __init__(self, engine: Engine, *, cut: BatchCut = _bytes) -> None:
        self.engine = engine
        self.cut = cut
        self.moves: dict[tuple[int, str, int], FutureReplica] = {}
        self.now: float | None = None
        self._due: dict[tuple[int, int], float] = {}  # (broker, thread) -> when its next fetch goes out
        self._busy: dict[tuple[int, int], tuple[str, int]] = {}  # the replica a thread is copying
        self._quota: dict[int, SampledRates] = {}

    def start(self, broker_id: int, path: str, topic: str, index: int) -> int:
        """AlterReplicaLogDirs for one replica: Kafka's error code."""
        b = self.engine.brokers[broker_id]
        if path not in b.log_dirs:
            return codes.LOG_DIR_NOT_FOUND
        key = (broker_id, topic, index)
        p = self.engine.partition(topic, index)
        if p is None:
            return codes.UNKNOWN_TOPIC_OR_PARTITION  # as Kafka 3.9.2 and 4.4.0 answer
        if broker_id not in p.replicas:
            self.engine.preferred_dirs[key] = path
            return codes.REPLICA_NOT_AVAILABLE
        if p.log_dirs.get(broker_id, b.log_dirs[0]) == path:
            self.moves.pop(key, None)  # back to where it is: the future replica is dropped
        elif key not in self.moves or self.moves[key].target_dir != path:
            self.moves[key] = FutureReplica(broker_id, topic, index, path)
            self._wake(broker_id, topic, index)
        return codes.NONE

    def forget(self, topic: str) -> None:
        """The topic was deleted: its future replicas (and dirs asked for it) go with it."""
        for key in [k for k in self.moves if k[1] == topic]:
            del self.moves[key]
        for key in [k for k in self.engine.preferred_dirs if k[1] == topic]:
            del self.engine.preferred_dirs[key]

    def future(self, broker_id: int, topic: str, index: int) -> FutureReplica | None:
        return self.moves.get((broker_id, topic, index))

    def advance(self, now: float) -> None:
        """Run the copy threads' fetches due by `now`, in time order (a broker's threads share
        its quota)."""
        self.now = now
        for key in [k for k, f in self.moves.items() if not self._hosts(f)]:
            del self.moves[key]  # the replica left the broker
        for thread, at in list(self._due.items()):
            if at <= now and not self.engine.brokers[thread[0]].serving:
                self._due[thread] = math.nextafter(now, math.inf)  # a stopped broker copies nothing
        while ready := [(at, t) for t, at in self._due.items() if at <= now]:
            at, thread = min(ready)
            self._fetch(thread, at)

    def _fetch(self, thread: tuple[int, int], at: float) -> None:
        """One turn of a copy thread at time `at`: back off, fetch, or swap."""
        broker_id = thread[0]
        f = self._pick(thread)
        if f is None:
            del self._due[thread]
            return
        fetch = self.engine.fetch
        quota = self._quota.setdefault(broker_id, SampledRates(1))
        if quota.exceeded(np.array([self.engine.configs.rate(broker_id, ALTER_LOG_DIRS_RATE)]), at)[0]:
            self._due[thread] = at + fetch.backoff_s
            return
        p = self.engine.partition(f.topic, f.index)
        assert p is not None
        size = float(self.engine.replica_size(p, broker_id))
        if f.copied < size:
            end = min(self.cut(p, f.copied, f.copied + fetch.fetch_bytes[0]), size)
            got = max(end - f.copied, 0.0)
            f.copied += got
        else:
            got = 0.0
        quota.record(np.array([got]), at)
        self._due[thread] = at + fetch.cycle_s
        if f.copied < size - 1e-6:
            return
        if f.caught_up:
            self.engine.set_log_dir(p, broker_id, f.target_dir)
            del self.moves[(broker_id, f.topic, f.index)]
            self._busy.pop(thread, None)
        else:
            f.caught_up = True

    def _pick(self, thread: tuple[int, int]) -> FutureReplica | None:
        """The replica the thread is copying, else its lowest (topic, partition) one."""
        broker_id, n = thread
        busy = self._busy.get(thread)
        if busy is not None and (f := self.moves.get((broker_id, *busy))) is not None:
            return f
        mine = [f for (b, t, i), f in self.moves.items() if b == broker_id and self._thread(b, t, i) == n]
        if not mine:
            self._busy.pop(thread, None)
            return None
        f = min(mine, key=lambda x: (x.topic, x.index))
        self._busy[thread] = (f.topic, f.index)
        return f

    def _wake(self, broker_id: int, topic: str, index: int) -> None:
        """A replica was added to its thread: the thread looks at once (Kafka signals it)."""
        thread = (broker_id, self._thread(broker_id, topic, index))
        when = self.now if self.now is not None else self.engine.now
        self._due[thread] = min(self._due.get(thread, when), when)

    def _thread(self, broker_id: int, topic: str, index: int) -> int:
        return fetcher_id(topic, index, len(self.engine.brokers[broker_id].log_dirs))

    def _hosts(self, f: FutureReplica) -> bool:
        p = self.engine.partition(f.topic, f.index)
        return p is not None and f.broker in p.replicas

    def to_json(self) -> list[dict[str, Any]]:
        return [{"broker": f.broker, "topic": f.topic, "partition": f.index, "dir": f.target_dir, "copied": f.copied,
                 "caught_up": f.caught_up} for f in self.moves.values()]

    def load(self, data: list[Mapping[str, Any]]) -> None:
        for d in data:
            f = FutureReplica(int(d["broker"]), str(d["topic"]), int(d["partition"]), str(d["dir"]), float(d["copied"]),
                              bool(d.get("caught_up", False)))
            self.moves[(f.broker, f.topic, f.index)] = f
            self._wake(f.broker, f.topic, f.index)
