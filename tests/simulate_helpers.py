"""A scenario outcome with plausible defaults, for the simulate tests that render results."""
from __future__ import annotations

from kreassign.simulate.request import ScenarioOutcome


def outcome(**overrides: object) -> ScenarioOutcome:
    values: dict[str, object] = dict(
        scenario_id=0, name="50.0 MB/s", throttle_bps=50e6, moves_per_broker=None, write_multiplier=1.0, seed=0,
        failed_broker=None, failed_at_s=None, moves=1200, bytes=3 * 1024**4, makespan_s=7260.0,
        lower_bound_s=7000.0, bottleneck_broker=4, stalled_moves=0, max_client_throttle_ms=0.0,
        minutes_below_headroom=12.5, brokers_at_risk=3, brokers_saturated=0,
        max_produce_remote_ms=9.6, timed_out_requests=0.0,
    )
    values.update(overrides)
    return ScenarioOutcome(**values)  # type: ignore[arg-type]
