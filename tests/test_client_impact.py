"""Client impact, pure: latency percentiles per broker, impact against a baseline, and the
impact-steered throttle step (hysteresis, bounds, the deadline conflict)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli_helpers import Kreassign
from kreassign.cluster.client_latency import (
    LatencySample, exceeds_baseline, impact, measure_baseline, percentile, quantile_interval,
    quantile_ranks, summarize, worst,
)
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
    now = summarize([LatencySample(1, 12.0)] * 40 + [LatencySample(2, 10.0, throttle_ms=5.0), LatencySample(3, 4.0)])
    baseline = summarize([LatencySample(1, 10.0)] * 40 + [LatencySample(2, 10.0)]).values()
    impacts = impact(baseline, now)
    assert impacts[1].p99_increase == pytest.approx(0.2) and impacts[3].p99_increase is None
    assert impacts[2].over_everything and worst(impacts) == math.inf
    # one request against one: a 10% rise is as likely as not, so it is no impact
    one = summarize([LatencySample(1, 10.0)]).values()
    alone = impact(one, summarize([LatencySample(1, 11.0)]))
    assert (worst(alone), alone[1].measured_increase) == (0.0, pytest.approx(0.1))
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


def test_a_bad_canary_baseline_is_an_input_error_wherever_it_is_read(tmp_path: Path, kreassign: Kreassign) -> None:
    """One exit status (1) and one line for a baseline file that cannot serve, before any connection."""
    import json

    bad = tmp_path / "bad.json"
    bad.write_text('{"brokers": [{"broker": 1}]}', encoding="utf-8")
    ran = kreassign.run("canary", "--bootstrap-server", "127.0.0.1:1", "--baseline", str(bad))
    assert (ran.code, ran.err.strip()) == (1, f"Error: {bad} is not the JSON of `kreassign canary -o json`")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"brokers": [{"broker": 1, "requests": 0, "timeouts": 0}]}), encoding="utf-8")
    snapshot = Path(__file__).resolve().parent.parent / "demo" / "sample-snapshot.json"
    ran = kreassign.run("simulate", "--snapshot", str(snapshot), "-f", str(bad), "--client-baseline", str(empty))
    assert (ran.code, ran.err.strip()) == (1, f"Error: {empty} has no produce latency to use as the baseline")


def test_quantile_ranks_are_the_exact_binomial_order_statistics() -> None:
    assert quantile_ranks(100, 0.5) == (40, 61)  # the textbook 95% interval of a median of 100
    assert quantile_ranks(20, 0.99) == (19, None)  # 20 requests cannot bound a p99 from above
    assert quantile_ranks(367, 0.99)[1] is None and quantile_ranks(368, 0.99)[1] == 368
    assert quantile_ranks(71, 0.95)[1] is None and quantile_ranks(72, 0.95)[1] == 72
    assert quantile_ranks(0, 0.99) == (None, None)
    assert quantile_interval([float(v) for v in range(1, 101)], 0.5) == (40.0, 61.0)


def test_the_p99_interval_covers_the_true_p99_at_least_95_percent_of_the_time() -> None:
    """2,000 samples of 400 exponential latencies (seeded): the true p99 is ln(100)."""
    import numpy as np

    rng = np.random.default_rng(7)
    truth = math.log(100.0)
    hits = 0
    for _ in range(2000):
        low, high = quantile_interval(list(rng.exponential(size=400)), 0.99)
        assert low is not None and high is not None
        hits += low <= truth <= high
    assert hits / 2000 >= 0.94  # >= 0.95 in theory; 0.94 leaves three standard errors of 2,000 draws


def test_the_impact_test_seldom_cries_wolf_and_sees_a_doubling() -> None:
    """Seeded lognormal latencies, 1,000 trials per case. From the same distribution at most 1%
    (+3 standard errors) of the windows are reported as impact; watch's 80-request baseline sees
    a tripling nearly always, the canary command's 400 a doubling."""
    import numpy as np

    rng = np.random.default_rng(11)

    def seen(baseline: int, window: int, factor: float) -> float:
        hits = 0
        for _ in range(1000):
            threshold = percentile(list(rng.lognormal(size=baseline)), 0.9)
            assert threshold is not None
            hits += exceeds_baseline(list(factor * rng.lognormal(size=window)), threshold, baseline)
        return hits / 1000

    assert seen(80, 120, 1.0) <= 0.01 + 3 * 0.003 and seen(400, 120, 1.0) <= 0.01 + 3 * 0.003
    assert seen(80, 120, 3.0) >= 0.98 and seen(400, 120, 2.0) >= 0.95


def test_the_exceedance_null_is_the_beta_binomial() -> None:
    """With n = 1 baseline value and k = 1, each of m new values lies above it with a uniform
    chance: the count above is uniform on 0..m (P >= j is (m - j + 1) / (m + 1))."""
    from kreassign.cluster.client_latency import _beta_binomial_tail

    assert [round(_beta_binomial_tail(4, 1, 1, j), 12) for j in range(5)] == [1.0, 0.8, 0.6, 0.4, 0.2]


def test_a_rise_within_the_noise_is_no_impact() -> None:
    base = summarize([LatencySample(b, float(v)) for v in range(1, 81) for b in (1, 2)])
    assert (base[1].tail_ms, base[1].p99_low_ms, base[1].p99_high_ms) == (72.0, 77.0, None)
    # broker 1: one slow request among 40 (above the baseline's tail, as chance allows);
    # broker 2: half of them slower than anything in the baseline
    now = summarize([LatencySample(1, float(v)) for v in range(1, 40)] + [LatencySample(1, 200.0)]
                    + [LatencySample(2, float(v)) for v in range(1, 21)] + [LatencySample(2, 160.0)] * 20)
    found = impact(base.values(), now)
    assert (found[1].within_noise, found[1].p99_increase, found[1].measured_increase) == (True, 0.0, 200.0 / 80 - 1)
    # broker 2's tail rose more than its p99 (the baseline's p99 was its slowest request): the larger
    assert (found[2].within_noise, found[2].measured_increase) == (False, 160.0 / 80 - 1)
    assert found[2].p99_increase == pytest.approx(160.0 / 72 - 1) and worst(found) == found[2].p99_increase


def test_a_baseline_without_tail_bounds_reports_the_raw_rise() -> None:
    """A baseline document written before the tail was recorded tells nothing from noise."""
    from kreassign.cluster.client_latency import BrokerLatency

    old = BrokerLatency(1, 3, 0, 10.0, 10.0, None, 0.0)  # as read from such a document
    found = impact([old], summarize([LatencySample(1, 12.0)] * 3))
    assert (found[1].within_noise, found[1].p99_increase) == (False, pytest.approx(0.2))


def test_a_baseline_measures_until_every_broker_has_its_requests() -> None:
    calls = []

    def measure() -> list[LatencySample]:
        calls.append(1)
        return [LatencySample(1, 1.0)] * 10 + [LatencySample(2, None)] + [LatencySample(2, 2.0)] * 9

    base = measure_baseline(measure, want=30)
    assert len(calls) == 4 and (base[1].requests, base[2].requests, base[2].timeouts) == (40, 40, 4)
    assert len(measure_baseline(lambda: [LatencySample(1, None)], want=5, max_measurements=3)) == 1


def test_a_rise_within_the_noise_may_hold_a_throttle_but_never_lowers_one() -> None:
    from kreassign.cluster.client_latency import Impact, steering_impact

    noisy_high = {1: Impact(1, 0.0, False, 0, 1.5, True), 2: Impact(2, 0.1, False, 0, 0.1)}
    assert steering_impact(noisy_high, 0.2) == 0.2  # at the bound: held, not lowered
    noisy_low = {1: Impact(1, 0.0, False, 0, -0.3, True)}
    assert steering_impact(noisy_low, 0.2) == 0.0  # room: may go up
    assert steering_impact({1: Impact(1, 0.5, False, 0, 0.5)}, 0.2) == 0.5  # evidence: lowered
    assert steering_impact(noisy_high, None) == 0.1
