"""What the watch screen keeps from one poll to the next, so that it holds still (issue 30).

Two rules, both pure:

* A reading that had a value never goes back to unknown. When a poll lacks it (a broker did not
  answer, a wave's new moves have one sample, a metrics window is empty), the last value is kept
  and marked held, with the poll it was read at; an ETA held that way counts down from it.
* The write rates behind the model are stated once and never alternate: "not measured yet (taken
  as 0)" only until the first measurement, "being sampled" while the sample before the first
  poll runs (the model uses the rates known so far meanwhile), then "measured" for the rest of the
  run, described by the first measurement (the sample's window, the polls, or the brokers'
  metrics) and aged since the last poll that refreshed them: a poll refreshes them when it has a
  write rate for every moving partition; one that has not keeps the last rates in use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from kreassign.cluster.model import WriteRates
from kreassign.cluster.write_sample import rates_to_dict
from kreassign.execute.progress import json_number


@dataclass(frozen=True)
class Held:
    """One figure of the screen: its value (None: never read) and the poll it was read at;
    `held` when this poll had no reading of its own."""

    value: float | None
    read_at: float | None = None
    held: bool = False

    def json_value(self) -> float | None:
        return json_number(self.value)


@dataclass
class Keeper:
    """The last value of each figure, to hold when a poll lacks it."""

    last: dict[str, tuple[float, float]] = field(default_factory=dict)

    def keep(self, name: str, value: float | None, now: float, *, counts_down: bool = False) -> Held:
        """This poll's value of `name`, or the last one held (an ETA, `counts_down`, less the
        time since it was read, never below 0)."""
        if value is not None:
            self.last[name] = (value, now)
            return Held(value, now)
        if name not in self.last:
            return Held(None)
        held, at = self.last[name]
        if counts_down and math.isfinite(held):
            held = max(held - (now - at), 0.0)
        return Held(held, at, held=True)


RateState = Literal["unknown", "sampling", "measured"]


@dataclass(frozen=True)
class RateSource:
    """What the model's write rates are at one poll (see the module's rule)."""

    state: RateState
    origin: WriteRates | None = None
    refreshed_at: float | None = None
    """the poll (watch clock) the rates were last measured at"""
    sample_s: float | None = None
    """while sampling: the sample's window"""

    def age_s(self, now: float) -> float | None:
        return None if self.refreshed_at is None else max(now - self.refreshed_at, 0.0)

    def to_dict(self, now: float) -> dict[str, Any]:
        age = self.age_s(now)
        return {**rates_to_dict(self.origin), "state": self.state,
                "age_s": None if age is None else round(age, 3), "sample_window_s": self.sample_s}


@dataclass
class RateSourceTracker:
    """Turns what each poll measured into a `RateSource` that never goes back to unknown."""

    origin: WriteRates | None = None
    refreshed_at: float | None = None
    sampling_s: float | None = None

    def start_sample(self, window_s: float) -> None:
        self.sampling_s = window_s

    def measured(self, origin: WriteRates | None, now: float) -> None:
        """This poll measured every moving partition's rate (`origin`: how; None: it did not)."""
        if origin is None:
            return
        if self.origin is None:
            self.origin = origin
        self.refreshed_at = now

    def sampled(self, origin: WriteRates, now: float) -> None:
        """The sample ended: it describes the rates from now on."""
        self.origin, self.refreshed_at, self.sampling_s = origin, now, None

    def now(self) -> RateSource:
        if self.sampling_s is not None:
            return RateSource("sampling", self.origin, self.refreshed_at, self.sampling_s)
        if self.origin is None:
            return RateSource("unknown")
        return RateSource("measured", self.origin, self.refreshed_at)
