"""When a reassignment completes, in the broker's own terms: a thread that polls
ListPartitionReassignments and the partitions' replicas (Metadata) of a plan, and says when its
first partition started moving and when the last one reached its target replicas and left the
reassignment list (issue 27 item 2: an ETA is judged against this, not against a client's
clock). Used by bench/bench_real_eta.py and tests/test_real_eta.py. With `adding` replicas it
also records how many bytes they hold at each poll (DescribeLogDirs), which `floods` reads as the
bursts a warm leader throttle lets through.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kreassign.cluster.errors import ClusterError
from kreassign.cluster.model import TopicPartition, TopicPartitionReplica


def changing(port: Any, targets: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, tuple[int, ...]]:
    """The partitions of a plan whose replica set changes (a new order alone moves no bytes and
    completes at once), with their target replicas."""
    current = {TopicPartition(p.topic, p.partition): set(p.replicas)
               for p in port.describe_topics(sorted({tp.topic for tp in targets}))}
    return {tp: tuple(r) for tp, r in targets.items() if set(r) != current.get(tp, set())}


class CompletionWatch:
    """Polls every `poll_s` (in a thread of its own, with its own cluster port) which partitions
    of `targets` are being reassigned and which have their target replicas. `started_s`: the
    first poll that saw one of them moving or moved; `completed_s`: the first poll that saw all
    of them with their target replica set and none in ListPartitionReassignments. Times are
    `clock()` readings (monotonic seconds); each is known to within one poll."""

    def __init__(self, port: Any, targets: Mapping[TopicPartition, Sequence[int]], *, poll_s: float = 0.25,
                 clock: Callable[[], float] = time.monotonic, adding: Sequence[TopicPartitionReplica] = ()) -> None:
        self.port = port
        self.adding = list(adding)
        self._adding_partitions = sorted({TopicPartition(r.topic, r.partition) for r in self.adding})
        self.copied: list[tuple[float, int]] = []
        """(poll time, bytes the `adding` replicas hold), one per poll when `adding` is given"""
        self.targets = {tp: set(r) for tp, r in targets.items()}
        self.poll_s = poll_s
        self.clock = clock
        self.started_s: float | None = None
        self.completed_s: float | None = None
        self.done_at: dict[TopicPartition, float] = {}
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="completion-watch", daemon=True)

    def start(self) -> CompletionWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def wait(self, timeout_s: float) -> float:
        """Block until the plan completed (a condition on the cluster, with a deadline); returns
        the seconds from `started_s` to `completed_s`.

        Raises:
            ClusterError: it did not complete in `timeout_s`.
        """
        deadline = self.clock() + timeout_s
        while self.completed_s is None:
            if self.clock() > deadline or not self._thread.is_alive():
                raise ClusterError(f"the reassignment did not complete in {timeout_s:.0f}s")
            time.sleep(self.poll_s)
        assert self.started_s is not None
        return self.completed_s - self.started_s

    @property
    def duration_s(self) -> float | None:
        if self.started_s is None or self.completed_s is None:
            return None
        return self.completed_s - self.started_s

    def _run(self) -> None:
        topics = sorted({tp.topic for tp in self.targets})
        while not self._stop.is_set() and self.completed_s is None:
            before = self.clock()
            try:
                moving = set(self.port.list_reassignments(list(self.targets)))
                replicas = {TopicPartition(p.topic, p.partition): set(p.replicas)
                            for p in self.port.describe_topics(topics)}
                sizes = self.port.log_dir_sizes(partitions=self._adding_partitions).sizes() if self.adding else {}
            except ClusterError:  # a poll lost to a loaded broker is retried at the next
                self.errors += 1
                self._stop.wait(self.poll_s)
                continue
            at = (before + self.clock()) / 2
            self.polls += 1
            if self.adding:
                self.copied.append((at, sum(sizes.get(r, 0) for r in self.adding)))
            there = {tp for tp, want in self.targets.items() if replicas.get(tp) == want and tp not in moving}
            for tp in there:
                self.done_at.setdefault(tp, at)
            if self.started_s is None and (moving & set(self.targets) or there):
                self.started_s = at
            if len(there) == len(self.targets) and self.started_s is not None:
                self.completed_s = at
            self._stop.wait(max(0.0, self.poll_s - (self.clock() - before)))


def floods(copied: Sequence[tuple[float, int]], *, gap_s: float = 2.0) -> list[tuple[float, int]]:
    """The bursts of a copy: (time of the first poll that saw it grow, bytes it added) for each run
    of growth that follows at least `gap_s` without any (the first burst starts at the first
    growth). A warm leader throttle lets its copies through in such floods, one per quota span
    (bench/results/real_eta_4.4.0.md, leader-bound)."""
    out: list[tuple[float, int]] = []
    last_t: float | None = None
    prev = copied[0][1] if copied else 0
    for t, total in copied[1:]:
        if total > prev:
            if last_t is None or t - last_t >= gap_s:
                out.append((t, 0))
            out[-1] = (out[-1][0], out[-1][1] + total - prev)
            last_t = t
        prev = total
    return out
