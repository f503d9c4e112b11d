"""Impact-bounded throttling: steer the replication throttle by what clients measure.

While the worst broker's client impact (produce p99 relative to its baseline, from the canary or
the brokers' metrics) is below the bound by more than the hysteresis band, the rate goes up one
step; above the bound it goes down one step; in between it holds. Steps are multiplicative and
clamped, and `auto_throttle.decide` rate-limits and journals the changes as for every other
auto-throttle goal. With a deadline, a rate the bound forces below what the deadline needs is
reported: the two cannot both hold. Pure: no clock, no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass

from kreassign.cluster.errors import InputError

RAISE_FACTOR = 1.25
LOWER_FACTOR = 0.7
"""lower faster than raise: clients suffering matters more than a few minutes of ETA"""


@dataclass(frozen=True)
class ImpactBound:
    """`max_impact` 0.2: clients' produce p99 may be at most 20% above its baseline."""

    max_impact: float
    hysteresis: float = 0.5
    """raise only while the impact is below (1 - hysteresis) x the bound"""

    def __post_init__(self) -> None:
        if not 0 < self.max_impact <= 10:
            raise InputError("--max-impact must be above 0% (and at most 1000%)")
        if not 0 <= self.hysteresis < 1:
            raise InputError("the hysteresis must be in [0, 1)")


@dataclass(frozen=True)
class ImpactStep:
    """The rate to aim for and why; `conflict` names a deadline the bound does not allow."""

    rate: int
    reason: str
    conflict: str | None = None


def impact_step(bound: ImpactBound, current: int, measured: float | None, *, min_rate: int, max_rate: int | None,
                deadline_rate: float | None = None) -> ImpactStep:
    """The next rate from the current one and the measured impact (None: not measured yet).

    `deadline_rate` is the catch-up rate the deadline needs (from the replication model), if any."""
    top = max_rate if max_rate is not None else None
    if measured is None:
        return ImpactStep(current, "client impact not measured yet; holding")
    if measured > bound.max_impact:
        rate = max(int(current * LOWER_FACTOR), min_rate)
        why = f"client impact {_pct(measured)} is above the bound {_pct(bound.max_impact)}"
    elif measured < bound.max_impact * (1 - bound.hysteresis):
        rate = int(current * RAISE_FACTOR)
        rate = min(rate, top) if top is not None else rate
        why = f"client impact {_pct(measured)} leaves room below the bound {_pct(bound.max_impact)}"
    else:
        rate, why = current, f"client impact {_pct(measured)} is near the bound {_pct(bound.max_impact)}; holding"
    conflict = None
    if deadline_rate is not None and rate < deadline_rate and measured > bound.max_impact * (1 - bound.hysteresis):
        conflict = (f"the deadline needs about {int(deadline_rate)} B/s but the impact bound "
                    f"{_pct(bound.max_impact)} holds the rate at {rate} B/s: they cannot both hold")
    return ImpactStep(rate, why, conflict)


def _pct(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.0%}"
