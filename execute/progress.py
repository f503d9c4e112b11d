"""Progress of running moves from replica sizes: bytes copied, throughput, write rates, ETA.

A move is one replica being added. Its progress is the size of the new replica against the
leader's (DescribeLogDirs); its lag is the difference. Over successive samples the tracker fits
straight lines to both sizes within a sliding window: the slope of the new replica is the copy
rate, the slope of the leader is the partition's write rate, and the lag shrinks at their
difference. Pure: samples come in, views go out; the watch loop does the reading.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.model import PartitionInfo, Reassignment, TopicPartition
from kreassign.cluster.port import LogDirReport

INF = math.inf


@dataclass(frozen=True, order=True)
class MoveKey:
    """A replica being added: partition and destination broker."""

    topic: str
    partition: int
    broker: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}->{self.broker}"


@dataclass(frozen=True)
class MoveSample:
    """One move at one instant. Sizes are None when the broker holding them did not answer."""

    key: MoveKey
    leader: int | None
    copied: int | None
    leader_size: int | None


@dataclass(frozen=True)
class Sample:
    """Every watched move at one instant (`at` in seconds of the watch clock)."""

    at: float
    moves: tuple[MoveSample, ...]


def sample_moves(at: float, in_flight: Mapping[TopicPartition, Reassignment],
                 partitions: Mapping[TopicPartition, PartitionInfo], report: LogDirReport) -> Sample:
    """Build a sample from what the cluster reported: the reassignments, the partitions (for
    their leaders) and DescribeLogDirs over the leaders and the adding brokers."""
    moves = []
    for tp, reassignment in sorted(in_flight.items()):
        info = partitions.get(tp)
        leader = info.leader if info is not None else None
        leader_size = report.size(tp, leader) if leader is not None else None
        for broker in sorted(reassignment.adding):
            moves.append(MoveSample(MoveKey(tp.topic, tp.partition, broker), leader,
                                    report.size(tp, broker), leader_size))
    return Sample(at, tuple(moves))


def _slope(points: Iterable[tuple[float, float]]) -> float | None:
    """Least-squares slope of (t, y) points; None with fewer than two distinct times."""
    pts = list(points)
    if len(pts) < 2:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    my = sum(y for _, y in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    if var <= 0:
        return None
    return sum((t - mt) * (y - my) for t, y in pts) / var


@dataclass(frozen=True)
class MoveProgress:
    """One move now: bytes copied out of the leader's size, rates and an observed ETA.

    `copy_bps`, `write_bps` are None until two samples exist; `eta_s` is inf when the lag is
    not shrinking; `stalled` is True once the lag has not shrunk over the stall window.
    """

    key: MoveKey
    leader: int | None
    copied: int
    total: int
    copy_bps: float | None
    write_bps: float | None
    eta_s: float | None
    stalled: bool
    done: bool = False
    observed_s: float = 0.0
    """how long this move has been watched"""

    @property
    def lag(self) -> int:
        return max(self.total - self.copied, 0)

    @property
    def fraction(self) -> float:
        if self.done:
            return 1.0
        return min(self.copied / self.total, 1.0) if self.total > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.key.topic, "partition": self.key.partition, "broker": self.key.broker,
                "leader": self.leader, "copied_bytes": self.copied, "total_bytes": self.total,
                "lag_bytes": self.lag, "fraction": round(self.fraction, 6),
                "copy_bps": json_number(self.copy_bps), "write_bps": json_number(self.write_bps),
                "eta_s": json_number(self.eta_s), "stalled": self.stalled, "done": self.done}


def json_number(value: float | None) -> float | None:
    """JSON has no infinity: None stands for unknown or never."""
    if value is None or math.isinf(value) or math.isnan(value):
        return None
    return round(float(value), 3)


@dataclass(frozen=True)
class ProgressView:
    """All watched moves now, plus totals. `pending_bytes` are bytes of moves not yet started
    (a paced plan's later waves); they count in `total` but not in throughput."""

    at: float
    moves: tuple[MoveProgress, ...]
    pending_bytes: int = 0

    @property
    def active(self) -> tuple[MoveProgress, ...]:
        return tuple(m for m in self.moves if not m.done)

    @property
    def copied(self) -> int:
        return sum(m.total if m.done else m.copied for m in self.moves)

    @property
    def total(self) -> int:
        return sum(m.total for m in self.moves) + self.pending_bytes

    @property
    def fraction(self) -> float:
        total = self.total
        return min(self.copied / total, 1.0) if total > 0 else (1.0 if not self.active else 0.0)

    @property
    def throughput_bps(self) -> float | None:
        """Bytes per second being copied by the active moves (None before two samples)."""
        rates = [m.copy_bps for m in self.active]
        if not rates:
            return 0.0
        if any(r is None for r in rates):
            return None
        return float(sum(max(r, 0.0) for r in rates if r is not None))

    @property
    def eta_s(self) -> float | None:
        """Observed ETA: remaining lag (plus pending bytes) over the rate the lag shrinks at.

        inf when some move's lag is not shrinking; None before two samples.
        """
        active = self.active
        if not active:
            return 0.0 if not self.pending_bytes else None
        if any(m.copy_bps is None or m.write_bps is None for m in active):
            return None
        if any(m.stalled or m.eta_s is None or math.isinf(m.eta_s) for m in active):
            return INF
        closing = sum(m.copy_bps - m.write_bps for m in active)  # type: ignore[operator]
        remaining = sum(m.lag for m in active) + self.pending_bytes
        return remaining / closing if closing > 0 else INF

    def to_dict(self) -> dict[str, Any]:
        return {"copied_bytes": self.copied, "total_bytes": self.total,
                "fraction": round(self.fraction, 6), "throughput_bps": json_number(self.throughput_bps),
                "eta_observed_s": json_number(self.eta_s), "active_moves": len(self.active),
                "completed_moves": len(self.moves) - len(self.active), "pending_bytes": self.pending_bytes}


@dataclass
class _History:
    leader: int | None = None
    points: deque[tuple[float, float, float]] = field(default_factory=deque)
    """(t, copied, leader size)"""
    first_seen: float = 0.0
    last_copied: int = 0
    last_total: int = 0
    done: bool = False


class ProgressTracker:
    """Turns successive samples into progress views.

    Args:
        window_s: rates are fitted over the samples of the last `window_s` seconds.
        stall_after_s: a move whose lag has not shrunk over this long is stalled.
    """

    def __init__(self, *, window_s: float = 120.0, stall_after_s: float = 60.0) -> None:
        # Stall detection compares with a sample `stall_after_s` old, so keep at least that much.
        self.window_s = max(window_s, 2 * stall_after_s)
        self.stall_after_s = stall_after_s
        self._moves: dict[MoveKey, _History] = {}

    def update(self, sample: Sample, *, pending_bytes: int = 0) -> ProgressView:
        """Add a sample. Moves seen before and absent now are complete (their last leader size
        counts as copied)."""
        now = sample.at
        present = set()
        for m in sample.moves:
            present.add(m.key)
            hist = self._moves.get(m.key)
            if hist is None or hist.done:
                hist = self._moves[m.key] = _History(first_seen=now)
            hist.leader = m.leader
            if m.copied is None or m.leader_size is None:
                continue
            hist.points.append((now, float(m.copied), float(m.leader_size)))
            hist.last_copied, hist.last_total = m.copied, max(m.leader_size, m.copied)
            while hist.points and hist.points[0][0] < now - self.window_s:
                hist.points.popleft()
        for key, hist in self._moves.items():
            if key not in present:
                hist.done = True
        return ProgressView(now, tuple(self._progress(k, h, now) for k, h in sorted(self._moves.items())),
                            pending_bytes)

    def _progress(self, key: MoveKey, hist: _History, now: float) -> MoveProgress:
        if hist.done:
            return MoveProgress(key, hist.leader, hist.last_total, hist.last_total, None, None, 0.0,
                                False, done=True, observed_s=now - hist.first_seen)
        copy = _slope((t, c) for t, c, _ in hist.points)
        write = _slope((t, w) for t, _, w in hist.points)
        lag = max(hist.last_total - hist.last_copied, 0)
        eta: float | None = None
        if copy is not None and write is not None:
            closing = copy - write
            eta = 0.0 if lag == 0 else (lag / closing if closing > 0 else INF)
        return MoveProgress(key, hist.leader, hist.last_copied, hist.last_total, copy,
                            None if write is None else max(write, 0.0), eta,
                            self._stalled(hist, now), observed_s=now - hist.first_seen)

    def _stalled(self, hist: _History, now: float) -> bool:
        """The lag now is no smaller than it was `stall_after_s` ago (and the move is not idle
        because it is complete: a zero lag is never stalled)."""
        if now - hist.first_seen < self.stall_after_s or not hist.points:
            return False
        past = [p for p in hist.points if p[0] <= now - self.stall_after_s]
        if not past:
            return False
        t0, c0, w0 = past[-1]
        _, c1, w1 = hist.points[-1]
        lag_then, lag_now = w0 - c0, w1 - c1
        return lag_now > 0 and lag_now >= lag_then

    def write_rates(self) -> dict[TopicPartition, float]:
        """The latest write-rate estimate of every partition seen (moving or finished)."""
        out: dict[TopicPartition, float] = {}
        for key, hist in self._moves.items():
            rate = _slope((t, w) for t, _, w in hist.points)
            if rate is not None:
                out[key.tp] = max(rate, 0.0)
        return out
