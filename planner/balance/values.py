"""Values the balanced planner takes and returns: options, per-broker metrics, the plan.

Everything here is frozen and turns into plain JSON-ready dicts (`to_dict`), so a plan can be
written, diffed and read back by scripts (`--output json`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import PartitionTarget, TopicPartitionReplica

Goal = Literal["rack", "replicas", "disk", "leaders", "leader_bytes", "topic"]
ALL_GOALS: tuple[Goal, ...] = ("rack", "replicas", "disk", "leaders", "leader_bytes", "topic")
DEFAULT_GOALS: tuple[Goal, ...] = ALL_GOALS
DATA_GOALS: frozenset[str] = frozenset({"rack", "replicas", "disk", "topic"})


def parse_goals(goals: Sequence[str]) -> tuple[Goal, ...]:
    """Validate a goal list given by the user, keeping its order.

    Raises:
        InputError: an unknown or repeated goal.
    """
    out: list[Goal] = []
    for g in goals:
        if g not in ALL_GOALS:
            raise InputError(f"unknown goal '{g}'; choose from {', '.join(ALL_GOALS)}")
        if g in out:
            raise InputError(f"goal '{g}' is listed twice")
        out.append(g)
    return tuple(out)


@dataclass(frozen=True)
class BalanceOptions:
    """Goals (in priority order) and the constraints every plan must respect.

    `disk_tolerance` is the accepted relative deviation of a broker's bytes from its target;
    `disk_headroom` the fraction of a broker's known disk capacity that must stay free;
    `leader_bytes_tolerance` the same as disk_tolerance for produce bytes/s led per broker;
    `allow_partial` returns a plan even when replicas that must move found no broker (they are
    reported as a warning) instead of raising `InfeasiblePlanError`.
    """

    goals: tuple[Goal, ...] = DEFAULT_GOALS
    exclude_topics: frozenset[str] = frozenset()
    exclude_brokers: frozenset[int] = frozenset()
    pinned: frozenset[TopicPartitionReplica] = frozenset()
    max_moves: int | None = None
    max_bytes: int | None = None
    disk_tolerance: float = 0.03
    disk_headroom: float = 0.0
    leader_bytes_tolerance: float = 0.10
    seed: int = 0
    allow_partial: bool = False

    def __post_init__(self) -> None:
        parse_goals(self.goals)
        if not 0.0 < self.disk_tolerance < 1.0:
            raise InputError("disk tolerance must be between 0 and 1 (e.g. 0.03 for 3%)")
        if not 0.0 <= self.disk_headroom < 1.0:
            raise InputError("disk headroom must be between 0 and 1 (e.g. 0.15 keeps 15% free)")
        if not 0.0 < self.leader_bytes_tolerance < 1.0:
            raise InputError("leader bytes tolerance must be between 0 and 1")
        for name in ("max_moves", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InputError(f"{name.replace('_', ' ')} must not be negative")

    def has(self, goal: str) -> bool:
        return goal in self.goals

    def before(self, first: str, second: str) -> bool:
        """True when goal `first` is active and ranks above `second` (or `second` is off)."""
        if first not in self.goals:
            return False
        return second not in self.goals or self.goals.index(first) < self.goals.index(second)


@dataclass(frozen=True)
class Spread:
    """min, max, mean and population standard deviation of a per-broker quantity."""

    min: float
    max: float
    mean: float
    stddev: float

    @property
    def spread(self) -> float:
        return self.max - self.min

    def to_dict(self) -> dict[str, float]:
        return {"min": self.min, "max": self.max, "mean": self.mean, "stddev": self.stddev}


@dataclass(frozen=True)
class BrokerLoad:
    """One broker's load: replicas, preferred leaders, bytes on disk and produce bytes/s led."""

    broker: int
    rack: str | None
    replicas: int
    leaders: int
    bytes: int
    leader_bps: float

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "rack": self.rack, "replicas": self.replicas,
                "leaders": self.leaders, "bytes": self.bytes, "leader_bps": self.leader_bps}


@dataclass(frozen=True)
class BalanceMetrics:
    """Balance of one assignment over the brokers that take part in balancing.

    `bytes_over_target` is the largest broker's bytes divided by its target (the rack-allowed,
    capacity-weighted fair share); `replica_spread_allowed` the smallest replica-count spread
    the racks allow; `rack_violations` the partitions whose replicas do not span min(RF, racks)
    racks with per-rack counts within one of each other (see `racks`); `topic_excess` the
    replicas above each topic's even share per broker.
    """

    brokers: tuple[BrokerLoad, ...]
    replicas: Spread
    leaders: Spread
    bytes: Spread
    leader_bps: Spread
    bytes_over_target: float
    bytes_under_target: float
    replica_spread_allowed: int
    rack_violations: int
    topic_excess: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokers": [b.to_dict() for b in self.brokers],
            "replicas": self.replicas.to_dict(), "leaders": self.leaders.to_dict(),
            "bytes": self.bytes.to_dict(), "leader_bps": self.leader_bps.to_dict(),
            "bytes_over_target": self.bytes_over_target,
            "bytes_under_target": self.bytes_under_target,
            "replica_spread_allowed": self.replica_spread_allowed,
            "rack_violations": self.rack_violations, "topic_excess": self.topic_excess,
        }


LOWER_BOUND_METHOD = (
    "for the balance the plan reaches (per-broker replica counts between the rack's after-plan "
    "min and max; bytes between the after-plan min and max ratio to each broker's target): "
    "replica moves >= max(sum of replicas above the max, sum below the min, replicas that must "
    "leave removed brokers); bytes >= max(sum over brokers of max(bytes above the max ratio, "
    "the k smallest movable replicas where k is the count above the max), bytes above the max "
    "ratio plus what brokers must shed to take the replicas of emptied brokers (the j largest of "
    "those land on at most j brokers, which have at most the j largest rooms below the max "
    "ratio), sum of bytes below the min ratio); where the worst brokers are forced there by one "
    "replica larger than the next broker's ratio allows, the first two terms again with that next "
    "ratio as every other broker's max"
)


@dataclass(frozen=True)
class LowerBounds:
    """Least replica moves and bytes any plan needs to reach the same balance (see METHOD)."""

    replica_moves: int
    bytes_moved: int
    method: str = LOWER_BOUND_METHOD

    def to_dict(self) -> dict[str, Any]:
        return {"replica_moves": self.replica_moves, "bytes_moved": self.bytes_moved,
                "method": self.method}


@dataclass(frozen=True)
class BalancePlan:
    """A pure, serialisable plan: target replicas per changed partition plus its effects."""

    command: str
    targets: tuple[PartitionTarget, ...]
    rollback: tuple[PartitionTarget, ...]
    before: BalanceMetrics
    after: BalanceMetrics
    lower_bounds: LowerBounds
    replica_moves: int
    bytes_moved: int
    leader_changes: int
    goals: tuple[str, ...]
    seed: int
    warnings: tuple[str, ...] = field(default=())

    @property
    def is_empty(self) -> bool:
        return not self.targets

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command, "goals": list(self.goals), "seed": self.seed,
            "replica_moves": self.replica_moves, "bytes_moved": self.bytes_moved,
            "leader_changes": self.leader_changes, "partitions_changed": len(self.targets),
            "lower_bounds": self.lower_bounds.to_dict(),
            "before": self.before.to_dict(), "after": self.after.to_dict(),
            "warnings": list(self.warnings),
            "targets": [_target_dict(t) for t in self.targets],
            "rollback": [_target_dict(t) for t in self.rollback],
        }

    def assignment(self) -> Mapping[tuple[str, int], tuple[int, ...]]:
        return {(t.topic, t.partition): t.replicas for t in self.targets}


def _target_dict(t: PartitionTarget) -> dict[str, Any]:
    return {"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)}
