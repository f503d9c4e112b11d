"""What the replication model predicts (`ModelResult`) and the constraints that decide its
makespan (`Critical`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.predict.model.bounds import LowerBound
from kreassign.predict.model.kafka import Limit

@dataclass(frozen=True)
class Critical:
    """A constraint that decides the makespan: a broker's throttle or NIC, or a fetch limit."""

    limit: Limit
    broker: int | None
    moves: int

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit.label, "broker": self.broker, "moves": self.moves}


@dataclass(frozen=True, eq=False)
class ModelResult:
    """What the model predicts, per move and per broker. Times are seconds from the start.

    Per move: `start_s`/`finish_s` (inf: never), `limit`/`limit_broker` (what bound it last;
    broker position or -1), `needed_bps` (for a stalled move, the value of that limit it needs
    to exceed to progress; NaN otherwise), `copied_bytes` (its bytes plus the writes during its
    catch-up). Per broker: catch-up bytes sent and received, and when its last move finished.
    Timelines: `times`/`remaining_bytes` (bytes still to copy, for plots) and a change log of
    each broker's average catch-up rate (`rate_time`, `rate_broker`, `rate_out`, `rate_in`):
    a broker's rates hold from one entry until its next one.
    """

    broker_ids: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    limit: np.ndarray
    limit_broker: np.ndarray
    needed_bps: np.ndarray
    copied_bytes: np.ndarray
    bytes_out: np.ndarray
    bytes_in: np.ndarray
    busy_until: np.ndarray
    times: np.ndarray
    remaining_bytes: np.ndarray
    rate_time: np.ndarray
    rate_broker: np.ndarray
    rate_out: np.ndarray
    rate_in: np.ndarray
    critical: tuple[Critical, ...]
    lower: LowerBound
    steps: int

    @property
    def stalled(self) -> np.ndarray:
        """Moves that never complete."""
        out: np.ndarray = np.isinf(self.finish_s)
        return out

    @property
    def makespan(self) -> float:
        """When the last move completes; inf if some never do."""
        return float(self.finish_s.max()) if len(self.finish_s) else 0.0

    @property
    def completable_makespan(self) -> float:
        """When the last move that does complete completes."""
        done = self.finish_s[np.isfinite(self.finish_s)]
        return float(done.max()) if len(done) else 0.0

    def broker_timeline(self, broker_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times, bytes/s out, bytes/s in) breakpoints of one broker's catch-up traffic.

        Raises:
            InputError: the broker is not in the model.
        """
        pos = np.flatnonzero(self.broker_ids == broker_id)
        if not len(pos):
            raise InputError(f"broker {broker_id} is not in the model")
        sel = self.rate_broker == pos[0]
        return self.rate_time[sel], self.rate_out[sel], self.rate_in[sel]
