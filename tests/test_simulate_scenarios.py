from __future__ import annotations

import pytest

from kreassign.cluster.errors import InputError
from kreassign.simulate.scenarios import (
    RANDOM_BROKER,
    Failure,
    Scenario,
    ScenarioAxes,
    parse_failure,
    scenario_grid,
)
from kreassign.simulate.synthetic import SyntheticSpec, parse_synthetic


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", None),
        ("7@600", Failure(7, at_s=600.0)),
        ("7@10m", Failure(7, at_s=600.0)),
        ("random@50%", Failure(RANDOM_BROKER, at_fraction=0.5)),
        (" RANDOM @ 0% ", Failure(RANDOM_BROKER, at_fraction=0.0)),
    ],
)
def test_parse_failure(text: str, expected: Failure | None) -> None:
    assert parse_failure(text) == expected


@pytest.mark.parametrize("text", ["7", "@5m", "x@5m", "7@150%", "7@soon", "7@abc%"])
def test_parse_failure_rejects(text: str) -> None:
    with pytest.raises(InputError):
        parse_failure(text)


@pytest.mark.parametrize(
    ("scenario", "decimal", "binary"),
    [
        (Scenario(0, throttle_bps=50e6), "50.0 MB/s", "47.7 MiB/s"),
        (Scenario(1), "unthrottled", "unthrottled"),
        (Scenario(2, throttle_bps=1e6, moves_per_broker=2, write_multiplier=1.5, failure=Failure(7, at_s=1800.0)),
         "1.0 MB/s, 2/broker, writes x1.5, broker 7 fails @ 30m00s",
         "976.6 KiB/s, 2/broker, writes x1.5, broker 7 fails @ 30m00s"),
        (Scenario(3, failure=Failure(RANDOM_BROKER, at_fraction=0.5), seed=4),
         "unthrottled, a random broker fails @ 50% of the run, seed 4",
         "unthrottled, a random broker fails @ 50% of the run, seed 4"),
    ],
)
def test_a_scenario_has_one_name_in_each_unit_system(scenario: Scenario, decimal: str, binary: str) -> None:
    assert (scenario.name(), scenario.name("decimal"), scenario.name("binary")) == (decimal, decimal, binary)


def test_names_tell_every_scenario_of_a_grid_apart() -> None:
    grid = scenario_grid(ScenarioAxes(throttles=(10e6, None), moves_per_broker=(None, 2), write_multipliers=(1.0, 2.0),
                                      failures=(None, Failure(RANDOM_BROKER, at_fraction=0.5)), seeds=(1, 2)))
    names = [s.name() for s in grid if s.failure is not None or s.seed == 1]  # the seed picks only a failure
    assert len(set(names)) == len(names) == 24


def test_grid_is_the_cartesian_product_in_axis_order() -> None:
    axes = ScenarioAxes(throttles=(10.0, 20.0), moves_per_broker=(None, 2), seeds=(1, 2))
    grid = scenario_grid(axes)
    assert axes.size == len(grid) == 8
    assert [s.scenario_id for s in grid] == list(range(8))
    assert [(s.throttle_bps, s.moves_per_broker, s.seed) for s in grid[:4]] == [
        (10.0, None, 1), (10.0, None, 2), (10.0, 2, 1), (10.0, 2, 2)]
    assert grid[-1].throttle_bps == 20.0


@pytest.mark.parametrize(
    "kwargs",
    [dict(throttles=()), dict(throttles=(0.0,)), dict(moves_per_broker=(0,)),
     dict(write_multipliers=(-1.0,)), dict(seeds=())],
)
def test_axes_reject_nonsense(kwargs: dict[str, tuple[object, ...]]) -> None:
    with pytest.raises(InputError):
        ScenarioAxes(**kwargs)  # type: ignore[arg-type]


def test_parse_synthetic_accepts_units_and_exponents() -> None:
    spec = parse_synthetic("brokers=10000,racks=20,partitions=2e6,rf=3,size=2GB,write=1MB/s,seed=7")
    assert spec == SyntheticSpec(brokers=10000, racks=20, partitions=2_000_000, rf=3,
                                 size=2_000_000_000, write=1_000_000.0, seed=7)
    assert spec.topic_count == 20_000
    assert spec.added == 1000


def test_synthetic_move_probability() -> None:
    assert SyntheticSpec(brokers=90, rf=3, add=10).move_probability == pytest.approx(0.3)
    assert SyntheticSpec(partitions=1000, add=5, moves=250).move_probability == 0.25
    assert SyntheticSpec(partitions=1000, add=5, moves=5000).move_probability == 1.0


@pytest.mark.parametrize(
    "text",
    ["brokers", "colour=red", "brokers=ten", "partitions=2.5", "rf=5,brokers=3", "add=1,remove=1",
     "brokers=4,remove=2,rf=3"],
)
def test_parse_synthetic_rejects(text: str) -> None:
    with pytest.raises(InputError):
        parse_synthetic(text)
