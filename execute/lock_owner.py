"""Who holds a cluster's execution lock (`Owner`), as the lock's marker records it."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

LOCK_FORMAT = 1


@dataclass(frozen=True)
class Owner:
    """Who holds the execution lock of a cluster."""

    host: str
    pid: int
    command: str
    journal: str
    """the plan's journal id (`<cluster>/<plan hash>`), the same on every host"""
    started_at: float
    lease_until: float
    token: str
    version: int = LOCK_FORMAT

    def to_value(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_value(cls, value: str | None) -> Owner | None:
        """The owner recorded in a marker value; a value kreassign cannot read counts as held
        by an unknown owner whose lease never ends (never taken over without --force)."""
        if not value:
            return None
        try:
            data = json.loads(value)
            return cls(str(data["host"]), int(data["pid"]), str(data["command"]), str(data["journal"]),
                       float(data["started_at"]), float(data["lease_until"]), str(data["token"]),
                       int(data.get("version", LOCK_FORMAT)))
        except (ValueError, KeyError, TypeError):
            return cls("unknown", 0, "unknown", "unknown", 0.0, float("inf"), value[:64], 0)

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at))
        return f"`kreassign {self.command}` (host {self.host}, pid {self.pid}, since {started}, journal {self.journal})"
