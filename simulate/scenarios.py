"""Scenario axes and their grid: every combination of throttle, schedule, write load, failure
and seed is one scenario, run as one Spark task."""
from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kreassign.cluster.errors import InputError
from kreassign.cluster.units import DEFAULT_UNITS, Units, format_duration, format_rate, parse_duration

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RANDOM_BROKER = -1
_FAILURE = re.compile(r"^\s*(random|\d+)\s*@\s*(\S+?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """A broker that fails mid-move and stays down.

    `broker` is RANDOM_BROKER for one drawn from the scenario seed among brokers that move
    data. The time is absolute (`at_s`) or a fraction of the makespan without the failure.
    """

    broker: int
    at_s: float | None = None
    at_fraction: float | None = None

    def __post_init__(self) -> None:
        if (self.at_s is None) == (self.at_fraction is None):
            raise InputError("a failure needs exactly one of a time or a fraction of the run")


def parse_failure(text: str) -> Failure | None:
    """`none`, `7@10m`, `7@600`, `random@50%` -> a Failure (None for `none`).

    Raises:
        InputError: anything else.
    """
    if text.strip().lower() == "none":
        return None
    match = _FAILURE.match(text)
    if not match:
        raise InputError(f"'{text}' is not a failure: use BROKER@TIME (7@10m), random@50% or none")
    who, when = match.groups()
    broker = RANDOM_BROKER if who.lower() == "random" else int(who)
    if when.endswith("%"):
        try:
            fraction = float(when[:-1]) / 100.0
        except ValueError:
            raise InputError(f"'{when}' is not a percentage such as 50%") from None
        if not 0.0 <= fraction <= 1.0:
            raise InputError(f"'{when}': the failure must come between 0% and 100% of the run")
        return Failure(broker, at_fraction=fraction)
    return Failure(broker, at_s=parse_duration(when))


@dataclass(frozen=True)
class Scenario:
    """One point of the grid. None means: no throttle, no batching, no failure."""

    scenario_id: int
    throttle_bps: float | None = None
    moves_per_broker: int | None = None
    write_multiplier: float = 1.0
    failure: Failure | None = None
    seed: int = 0

    def name(self, units: Units = DEFAULT_UNITS) -> str:
        """The scenario's one name, in the summary, the report's tables and legends, the JSON and
        the Parquet summary: its throttle, then only what else it sets
        (`50.0 MB/s, 2/broker, writes x1.5, broker 7 fails @ 30m00s`; the seed only picks a
        random broker, so it is named only then)."""
        parts = ["unthrottled" if self.throttle_bps is None else format_rate(self.throttle_bps, units)]
        if self.moves_per_broker is not None:
            parts.append(f"{self.moves_per_broker}/broker")
        if self.write_multiplier != 1.0:
            parts.append(f"writes x{self.write_multiplier:g}")
        if self.failure is not None:
            who = "a random broker" if self.failure.broker == RANDOM_BROKER else f"broker {self.failure.broker}"
            when = (format_duration(self.failure.at_s) if self.failure.at_s is not None
                    else f"{(self.failure.at_fraction or 0.0):.0%} of the run")
            parts.append(f"{who} fails @ {when}")
            if self.failure.broker == RANDOM_BROKER:
                parts.append(f"seed {self.seed}")
        return ", ".join(parts)


@dataclass(frozen=True)
class ScenarioAxes:
    """The values to sweep; the grid is their cartesian product, in this field order."""

    throttles: tuple[float | None, ...] = (None,)
    moves_per_broker: tuple[int | None, ...] = (None,)
    write_multipliers: tuple[float, ...] = (1.0,)
    failures: tuple[Failure | None, ...] = (None,)
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        for name in ("throttles", "moves_per_broker", "write_multipliers", "failures", "seeds"):
            if not getattr(self, name):
                raise InputError(f"the scenario axis {name.replace('_', ' ')} has no values")
        if any(t is not None and t <= 0 for t in self.throttles):
            raise InputError("throttle rates must be positive (leave the axis out for no throttle)")
        if any(m is not None and m < 1 for m in self.moves_per_broker):
            raise InputError("moves per broker must be at least 1")
        if any(not w > 0 for w in self.write_multipliers):
            raise InputError("write-rate multipliers must be positive")

    @property
    def size(self) -> int:
        return (len(self.throttles) * len(self.moves_per_broker) * len(self.write_multipliers)
                * len(self.failures) * len(self.seeds))


def scenario_grid(axes: ScenarioAxes) -> tuple[Scenario, ...]:
    """Every combination of the axes, numbered from 0 in a stable order."""
    combos = itertools.product(axes.throttles, axes.moves_per_broker, axes.write_multipliers,
                               axes.failures, axes.seeds)
    return tuple(
        Scenario(scenario_id=i, throttle_bps=throttle, moves_per_broker=per_broker,
                 write_multiplier=mult, failure=failure, seed=seed)
        for i, (throttle, per_broker, mult, failure, seed) in enumerate(combos)
    )


def scenarios_frame(spark: SparkSession, scenarios: Sequence[Scenario], units: Units = DEFAULT_UNITS) -> DataFrame:
    """The grid as a DataFrame of schema SCENARIOS (a few rows, built on the driver), each
    scenario named in `units`.

    Built from an Arrow table: rows as Python tuples would go through a pickled RDD, which
    starts a Python worker daemon of its own (about 2 CPU s on the 1M-move case; none for this)."""
    import pyarrow as pa

    from kreassign.simulate.inputs import arrow_schema
    from kreassign.simulate.schemas import SCENARIOS

    rows = [
        (s.scenario_id, s.name(units), s.throttle_bps, s.moves_per_broker, float(s.write_multiplier),
         None if s.failure is None else s.failure.broker,
         None if s.failure is None else s.failure.at_s,
         None if s.failure is None else s.failure.at_fraction, int(s.seed))
        for s in scenarios
    ]
    schema = arrow_schema(SCENARIOS)
    table = pa.Table.from_pydict({f.name: [row[i] for row in rows] for i, f in enumerate(schema)}, schema=schema)
    return spark.createDataFrame(table, schema=SCENARIOS)
