"""What `run_simulation` takes and returns: typed values, no Spark objects."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.errors import InputError
from kreassign.cluster.units import DEFAULT_UNITS, Units
from kreassign.simulate.client_impact import ClientModel
from kreassign.simulate.inputs import PlanFile, PlannerRun, SnapshotInput
from kreassign.simulate.plots import never_finishes
from kreassign.simulate.scenarios import Scenario, ScenarioAxes
from kreassign.simulate.session import SparkOptions
from kreassign.simulate.synthetic import SyntheticSpec


@dataclass(frozen=True)
class SimulationRequest:
    """One sweep: a cluster, a plan, the scenario axes, and where results go.

    A synthetic cluster brings its own plan (its `add=` or `remove=`); a snapshot needs a plan
    file or a planner run.
    """

    cluster: SnapshotInput | SyntheticSpec
    output_dir: str
    plan: PlanFile | PlannerRun | None = None
    axes: ScenarioAxes = field(default_factory=ScenarioAxes)
    clients: ClientModel = field(default_factory=ClientModel)
    spark: SparkOptions = field(default_factory=SparkOptions)
    timeline_points: int = 120
    plots: bool = True
    report_path: str | None = None
    """where to write the one-file HTML report (None: no report)"""
    default_network_bps: float | None = None
    """NIC capacity, each way, for snapshot brokers that do not give one (None: unlimited)"""
    units: Units = DEFAULT_UNITS
    """how sizes and rates are shown: the scenarios' names, the report, the plots' axes"""

    def __post_init__(self) -> None:
        if isinstance(self.cluster, SnapshotInput) and self.plan is None:
            raise InputError("a snapshot needs a plan: give --reassignment-json-file FILE or "
                             "--planner rebalance")
        if isinstance(self.cluster, SyntheticSpec) and self.plan is not None:
            raise InputError("a synthetic cluster makes its own plan (add=N or remove=N in "
                             "--synthetic); drop the plan option")
        if not 2 <= self.timeline_points <= 10_000:
            raise InputError("timeline points must be between 2 and 10000")


@dataclass(frozen=True)
class ScenarioOutcome:
    """One row of the summary (schema SCENARIO_SUMMARY)."""

    scenario_id: int
    name: str
    """the scenario's one name (`Scenario.name`), as the table, legends and Parquet give it"""
    throttle_bps: float | None
    moves_per_broker: int | None
    write_multiplier: float
    seed: int
    failed_broker: int | None
    failed_at_s: float | None
    moves: int
    bytes: int
    makespan_s: float
    lower_bound_s: float
    bottleneck_broker: int | None
    stalled_moves: int
    max_client_throttle_ms: float
    minutes_below_headroom: float
    brokers_at_risk: int
    brokers_saturated: int
    max_produce_remote_ms: float
    timed_out_requests: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ScenarioOutcome:
        return cls(**row)

    @property
    def makespan_text(self) -> str:
        """The makespan as a duration, or how many moves never finish."""
        from kreassign.cluster.units import format_duration

        return format_duration(self.makespan_s) if self.stalled_moves == 0 else never_finishes(self.stalled_moves)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: a makespan that never ends (a stalled move) becomes null."""
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class SimulationResult:
    """The summary rows (small), where the full results were written, and stage timings."""

    outcomes: tuple[ScenarioOutcome, ...]
    scenarios: tuple[Scenario, ...]
    output_dir: str
    files: tuple[str, ...]
    brokers: int
    partitions: int
    headroom_target: float
    timings_s: dict[str, float] = field(default_factory=dict)
    units: Units = DEFAULT_UNITS

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for `--output json`."""
        return {
            "output_dir": self.output_dir,
            "files": list(self.files),
            "brokers": self.brokers,
            "partitions": self.partitions,
            "headroom_target": self.headroom_target,
            "units": self.units,
            "scenarios": [o.to_dict() for o in self.outcomes],
            "timings_s": dict(self.timings_s),
        }
