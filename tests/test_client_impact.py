"""Client impact, pure: latency percentiles per broker, impact against a baseline, and the
impact-steered throttle step (hysteresis, bounds, the deadline conflict)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.client_latency import LatencySample, impact, percentile, summarize, worst
from kreassign.cluster.errors import InputError
from kreassign.execute.impact_throttle import ImpactBound, impact_step


def test_percentiles_and_per_broker_summary() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0 and percentile([], 0.99) is None
    samples = [LatencySample(1, float(ms), end_to_end_ms=ms + 1.0) for ms in range(1, 101)]
    samples += [LatencySample(1, None), LatencySample(2, 7.0, throttle_ms=30.0)]
    s = summarize(samples)
    assert (s[1].requests, s[1].timeouts, s[1].p50_ms, s[1].p99_ms, s[1].end_to_end_p99_ms) == (101, 1, 50.0, 99.0, 100.0)
    assert (s[2].p99_ms, s[2].throttle_max_ms) == (7.0, 30.0)


@given(st.lists(st.floats(0.1, 1e4), min_size=1, max_size=200), st.floats(0.0, 1.0))
def test_percentile_is_one_of_the_values_and_monotone(values: list[float], q: float) -> None:
    p = percentile(values, q)
    assert p in values and p <= (percentile(values, min(q + 0.1, 1.0)) or 0.0)


def test_impact_is_the_p99_rise_over_the_baseline_and_throttling_counts_as_over() -> None:
    now = summarize([LatencySample(1, 12.0), LatencySample(2, 10.0, throttle_ms=5.0), LatencySample(3, 4.0)])
    baseline = summarize([LatencySample(1, 10.0), LatencySample(2, 10.0)]).values()
    impacts = impact(baseline, now)
    assert impacts[1].p99_increase == pytest.approx(0.2) and impacts[3].p99_increase is None
    assert impacts[2].over_everything and worst(impacts) == math.inf
    one = summarize([LatencySample(1, 10.0)]).values()
    assert worst(impact(one, summarize([LatencySample(1, 11.0)]))) == pytest.approx(0.1)
    assert worst({}) is None


def test_impact_step_raises_lowers_and_holds_with_hysteresis() -> None:
    bound = ImpactBound(0.2)
    assert impact_step(bound, 10_000_000, 0.05, min_rate=1_000_000, max_rate=None).rate == 12_500_000
    assert impact_step(bound, 10_000_000, 0.15, min_rate=1_000_000, max_rate=None).rate == 10_000_000  # in the band
    down = impact_step(bound, 10_000_000, 0.35, min_rate=1_000_000, max_rate=None)
    assert down.rate == 7_000_000 and down.reason == "client impact 35% is above the bound 20%"
    assert impact_step(bound, 1_200_000, 0.5, min_rate=1_000_000, max_rate=None).rate == 1_000_000
    assert impact_step(bound, 10_000_000, 0.0, min_rate=1, max_rate=11_000_000).rate == 11_000_000
    assert impact_step(bound, 10_000_000, None, min_rate=1, max_rate=None).rate == 10_000_000
    clash = impact_step(bound, 10_000_000, 0.3, min_rate=1, max_rate=None, deadline_rate=20_000_000)
    assert clash.conflict is not None and "cannot both hold" in clash.conflict
    with pytest.raises(InputError):
        ImpactBound(0.0)


def test_steering_converges_inside_the_bound() -> None:
    """Against a cluster whose clients' p99 rises linearly with the replication rate, the steps
    settle where the impact is within the bound, and stay there (no oscillation across it)."""
    bound = ImpactBound(0.2)
    rate = 5_000_000
    seen = []
    for _ in range(40):
        measured = rate / 100_000_000  # 20% impact at 20 MB/s
        rate = impact_step(bound, rate, measured, min_rate=1_000_000, max_rate=None).rate
        seen.append(measured)
    assert max(seen[-10:]) <= 0.2 and min(seen[-10:]) >= 0.1 and len(set(seen[-5:])) == 1


def test_a_canary_baseline_gives_the_simulators_idle_round_trip() -> None:
    from kreassign.cluster.client_latency import idle_round_trip_ms

    lat = summarize([LatencySample(1, 2.0), LatencySample(2, 4.0), LatencySample(3, 3.0), LatencySample(4, None)])
    assert idle_round_trip_ms(lat.values()) == 3.0
    assert idle_round_trip_ms([]) is None


def test_simulate_reads_the_canary_baseline(tmp_path: Path) -> None:
    import json

    from kreassign.cli.simulate_cmd import _baseline

    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"topic": "c", "notes": [], "brokers": [
        {"broker": 1, "requests": 5, "timeouts": 0, "p50_ms": 4.0, "p99_ms": 9.0, "end_to_end_p99_ms": 12.0,
         "throttle_max_ms": 0.0}]}), encoding="utf-8")
    assert _baseline(str(path)) == {"fetch_rtt_ms": 4.0} and _baseline(None) == {}


def test_a_bad_canary_baseline_is_an_input_error_wherever_it_is_read(tmp_path: Path) -> None:
    """One exit status (1) and one line for a baseline file that cannot serve, before any connection."""
    import json

    from cli_helpers import run_cli

    bad = tmp_path / "bad.json"
    bad.write_text('{"brokers": [{"broker": 1}]}', encoding="utf-8")
    ran = run_cli(["canary", "--bootstrap-server", "127.0.0.1:1", "--baseline", str(bad)])
    assert (ran.code, ran.err.strip()) == (1, f"Error: {bad} is not the JSON of `kreassign canary -o json`")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"brokers": [{"broker": 1, "requests": 0, "timeouts": 0}]}), encoding="utf-8")
    snapshot = Path(__file__).resolve().parent.parent / "demo" / "sample-snapshot.json"
    ran = run_cli(["simulate", "--snapshot", str(snapshot), "-f", str(bad), "--client-baseline", str(empty)])
    assert (ran.code, ran.err.strip()) == (1, f"Error: {empty} has no produce latency to use as the baseline")
