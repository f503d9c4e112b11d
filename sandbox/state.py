"""Mutable records the engine keeps per broker, topic and partition."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

NO_LEADER = -1


@dataclass
class BrokerState:
    """A registered broker; `alive` False means stopped (fenced: registered but not serving).

    `fence_at` is set while a killed broker (its process gone, kill -9) still counts as alive:
    the controller fences it only when its session times out, at that sandbox time. Until then
    it is registered and keeps its leaderships and ISR places, but serves and fetches nothing.
    """

    id: int
    rack: str | None
    log_dirs: tuple[str, ...]
    alive: bool = True
    fence_at: float | None = None

    @property
    def serving(self) -> bool:
        """Its process runs and the controller has not fenced it."""
        return self.alive and self.fence_at is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "rack": self.rack, "log_dirs": list(self.log_dirs), "alive": self.alive}
        if self.fence_at is not None:
            out["fence_at"] = self.fence_at
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerState:
        fence_at = d.get("fence_at")
        return cls(int(d["id"]), d.get("rack"), tuple(d["log_dirs"]), bool(d.get("alive", True)),
                   None if fence_at is None else float(fence_at))


@dataclass
class PartitionState:
    """One partition. During a move `replicas` is the KRaft union: target then removing.

    `lagging` holds the size in bytes of each out-of-sync replica; in-sync replicas are exactly
    as long as the leader's log (`Engine.log_end[row]`).
    """

    topic: str
    index: int
    row: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    lagging: dict[int, float] = field(default_factory=dict)
    log_dirs: dict[int, str] = field(default_factory=dict)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> list[int]:
        removing = set(self.removing)
        return [r for r in self.replicas if r not in removing]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "replicas": self.replicas, "isr": self.isr, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "adding": self.adding, "removing": self.removing,
                "lagging": {str(k): v for k, v in self.lagging.items()},
                "log_dirs": {str(k): v for k, v in self.log_dirs.items()}}

    @classmethod
    def from_json(cls, topic: str, row: int, d: dict[str, Any]) -> PartitionState:
        return cls(topic=topic, index=int(d["index"]), row=row, replicas=list(d["replicas"]),
                   isr=list(d["isr"]), leader=int(d["leader"]), leader_epoch=int(d["leader_epoch"]),
                   partition_epoch=int(d["partition_epoch"]), adding=list(d["adding"]),
                   removing=list(d["removing"]),
                   lagging={int(k): float(v) for k, v in d["lagging"].items()},
                   log_dirs={int(k): str(v) for k, v in d["log_dirs"].items()})


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState] = field(default_factory=list)
