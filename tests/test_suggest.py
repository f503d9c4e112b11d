"""`throttle suggest`: impact-bounded rates, deadline verdicts and remedies, by hand and by property."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, PartitionTarget
from kreassign.cluster.units import format_rate
from kreassign.planner.diff import diff_plan
from kreassign.predict.model import WAVE_START_S, FetchLimits, from_moves
from kreassign.cluster.client_latency import Impact
from kreassign.predict.suggest import (
    MeasuredImpact,
    SuggestRequest,
    finish_at_rate,
    rate_for_deadline,
    suggest_throttle,
)

MB = 1_000_000


def share(rate: float) -> float:
    """What fetches get of a follower throttle (the model's `follower_share`)."""
    return float(FetchLimits().follower_share(np.array(rate)))


def state(cap: float | None = 100 * MB) -> ClusterState:
    brokers = [Broker(b, network_in_bps=cap, network_out_bps=cap) for b in (1, 2, 3)]
    return ClusterState.from_partitions(brokers, [PartitionInfo("t", 0, (1, 2), 1, (1, 2), size_bytes=1000 * MB,
                                                                produce_bps=1 * MB, consume_bps=2 * MB)])


PLAN = [PartitionTarget("t", 0, (1, 3))]


def test_rates_by_hand() -> None:
    s = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2, deadline_s=60))
    one, three = s.brokers
    # Broker 1 leads: clients take 1 MB/s in, 2 (consumers) + 1 (replication to 2) out.
    assert (one.client_in, one.client_out) == (1 * MB, 3 * MB)
    # 20% of 100 MB/s for catch-up, plus the 1 MB/s of in-sync replication the quota also counts.
    assert (one.leader_rate, three.follower_rate) == (21 * MB, 20 * MB)
    assert (s.leader_rate, s.follower_rate) == (21 * MB, 20 * MB)
    # 1000 MB at what fetches get of 20 MB/s (the leader's 21 MB/s less 1 MB/s in sync gets a
    # little less), while 1 MB/s of writes keep arriving.
    catch_up = min(21 * MB * float(FetchLimits().leader_share(np.array(21 * MB), written=True)) - 1 * MB,
                   20 * MB * share(20 * MB))
    assert s.eta_s == pytest.approx(1000 * MB / (catch_up - 1 * MB), rel=1e-6)
    assert s.reachable is True and s.remedies == ()


def test_the_suggestion_says_its_bound_is_a_capacity_share_in_text_and_json() -> None:
    from rich.console import Console

    from kreassign.cli.watch_render import render_suggestion

    s = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2))
    assert s.to_dict()["bound"] == {"kind": "network-capacity-share", "note": (
        "--max-impact bounds the moves' share of each broker's network capacity: no client measurement of the "
        "move exists before it starts (watch --auto-throttle --max-impact bounds measured produce p99 while it runs)")}
    console = Console(width=300, record=True)
    console.print(render_suggestion(s))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines[0] == "Suggested throttles (moves take at most 20% of each broker's network)"
    assert lines[-1] == "Note: " + s.to_dict()["bound"]["note"] + "."


def test_a_plan_already_in_place_is_said_to_need_no_throttle() -> None:
    from rich.console import Console

    from kreassign.cli.watch_render import render_suggestion

    s = suggest_throttle(state(), [PartitionTarget("t", 0, (1, 2))], SuggestRequest(max_impact=0.2))
    assert (s.brokers, s.eta_s) == ((), 0.0)
    console = Console(width=300, record=True)
    console.print(render_suggestion(s))
    assert console.export_text().strip() == (
        "Nothing to copy: every partition of the plan has its target replicas in sync, so it needs no throttle.")


def test_client_traffic_limits_the_budget() -> None:
    busy = ClusterState.from_partitions(
        [Broker(b, network_in_bps=100 * MB, network_out_bps=100 * MB) for b in (1, 2, 3)],
        [PartitionInfo("t", 0, (1, 2), 1, (1, 2), size_bytes=100 * MB, produce_bps=10 * MB, consume_bps=85 * MB)])
    s = suggest_throttle(busy, PLAN, SuggestRequest(max_impact=0.5))
    # Broker 1 sends 85 + 10 to clients: 5 MB/s are left, plus the 10 MB/s in-sync share.
    assert s.brokers[0].leader_rate == 15 * MB


def test_missed_deadline_names_the_rate_and_bottleneck() -> None:
    s = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2, deadline_s=30))
    assert s.reachable is False
    kinds = [r.kind for r in s.remedies]
    assert kinds == ["rate", "bottleneck"]
    # 1000 MB in 30 s with 1 MB/s of writes: 34.33 MB/s of catch-up, which fetches get of about 37.5 MB/s
    value = s.remedies[0].value
    assert value * share(value) == pytest.approx(1000 * MB / 30 + MB, rel=5e-3)
    assert f"{value / (100 * MB):.0%} of a broker's capacity" in s.remedies[0].text
    # at equal rates the follower's share (1 s backoff) is the smaller: broker 3's throttle binds
    assert "broker 3 (follower-throttle" in s.remedies[1].text
    binary = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2, deadline_s=30, units="binary"))
    for remedy, units in ((s.remedies[0], "decimal"), (binary.remedies[0], "binary")):  # the text follows --units
        assert remedy.text.startswith(f"a catch-up rate of {format_rate(math.ceil(value), units)} on every broker")
    assert "iB/s" in binary.remedies[0].text and "iB/s" not in s.remedies[0].text


def test_unreachable_at_any_rate() -> None:
    s = suggest_throttle(state(cap=10 * MB), PLAN, SuggestRequest(max_impact=1.0, deadline_s=10))
    assert s.remedies[0].kind == "unreachable"


def test_concurrency_remedy() -> None:
    # A lagging partition catches up at most 1 MiB per 10 ms fetch (~105 MB/s): on 1 GB/s NICs,
    # one move at a time is bound by that, four at once by the network. Each 500 MB move takes
    # 4.77 s, and the pacer starts the next at its next poll (every 10 s), WAVE_START_S later.
    many = ClusterState.from_partitions(
        [Broker(b, network_in_bps=1000 * MB, network_out_bps=1000 * MB) for b in (1, 2, 3)],
        [PartitionInfo("t", p, (1, 2), 1, size_bytes=500 * MB) for p in range(4)])
    plan = [PartitionTarget("t", p, (1, 3)) for p in range(4)]
    s = suggest_throttle(many, plan, SuggestRequest(max_impact=1.0, deadline_s=16, max_moves_per_broker=1))
    move = 500 * MB / (1024 * 1024 / 0.01)
    assert s.eta_s == pytest.approx(30 + WAVE_START_S + move, rel=1e-6)  # polls at 10, 20 and 30 s
    assert s.reachable is False
    remedy = next(r for r in s.remedies if r.kind == "concurrency")
    # Two at a time: two rounds of 500 MB at ~105 MB/s each, the second from the poll at 10 s: 15.1 s.
    assert 10 + WAVE_START_S + move == pytest.approx(15.1, abs=0.05)
    assert remedy.value == 2 and remedy.text == "--max-moves-per-broker 2 would finish in 15s at the network limit"


def test_unknown_capacity_is_an_input_error() -> None:
    with pytest.raises(InputError, match="--network-capacity"):
        suggest_throttle(state(cap=None), PLAN, SuggestRequest(max_impact=0.2))
    s = suggest_throttle(state(cap=None), PLAN, SuggestRequest(max_impact=0.2, network_capacity=(50 * MB, 50 * MB)))
    assert s.brokers[1].follower_rate == 10 * MB


def test_request_validation() -> None:
    with pytest.raises(InputError, match="max-impact"):
        SuggestRequest(max_impact=0)


def test_to_dict_has_no_infinity() -> None:
    s = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2))
    assert s.to_dict()["eta_s"] == pytest.approx(s.eta_s, rel=1e-3) and math.isfinite(s.to_dict()["eta_s"])


clusters = st.fixed_dictionaries({
    "caps": st.lists(st.floats(10 * MB, 1000 * MB), min_size=4, max_size=4),
    "produce": st.lists(st.floats(0, 20 * MB), min_size=3, max_size=3),
    "consume": st.lists(st.floats(0, 60 * MB), min_size=3, max_size=3),
    "impact": st.floats(0.01, 1.0),
})


def random_case(d: dict) -> tuple[ClusterState, list[PartitionTarget]]:
    brokers = [Broker(b + 1, network_in_bps=c, network_out_bps=c * 0.9) for b, c in enumerate(d["caps"])]
    parts = [PartitionInfo("t", p, (p % 4 + 1, (p + 1) % 4 + 1), p % 4 + 1, size_bytes=50 * MB,
                           produce_bps=d["produce"][p], consume_bps=d["consume"][p]) for p in range(3)]
    plan = [PartitionTarget("t", p, (p % 4 + 1, (p + 2) % 4 + 1)) for p in range(3)]
    return ClusterState.from_partitions(brokers, parts), plan


@settings(max_examples=40, deadline=None)
@given(clusters)
def test_suggested_rates_never_exceed_the_impact_bound(d: dict) -> None:
    cluster, plan = random_case(d)
    s = suggest_throttle(cluster, plan, SuggestRequest(max_impact=d["impact"]))
    for b in s.brokers:
        catch_up_out = b.leader_rate - b.in_sync_base
        assert catch_up_out <= d["impact"] * b.capacity_out + 1
        assert catch_up_out <= max(b.capacity_out - b.client_out, 0.0) + 1
        assert b.follower_rate <= d["impact"] * b.capacity_in + 1
        assert b.follower_rate <= max(b.capacity_in - b.client_in, 0.0) + 1


@settings(max_examples=40, deadline=None)
@given(clusters, st.floats(1 * MB, 200 * MB), st.floats(1.01, 5.0))
def test_higher_rate_never_slower(d: dict, rate: float, factor: float) -> None:
    cluster, plan = random_case(d)
    inp = from_moves(cluster, diff_plan(cluster, plan).moves)
    slow = finish_at_rate(inp, rate, None, 0.0)
    fast = finish_at_rate(inp, rate * factor, None, 0.0)
    assert fast <= slow * (1 + 1e-9) or math.isinf(slow)


def test_rate_for_deadline_is_the_smallest_that_works() -> None:
    cluster = state()
    inp = from_moves(cluster, diff_plan(cluster, PLAN).moves)
    rate = rate_for_deadline(inp, 100.0, tolerance=0.0)
    assert rate is not None
    assert finish_at_rate(inp, rate, None, 0.0) <= 100.0 < finish_at_rate(inp, rate / 1.01, None, 0.0)
    assert rate_for_deadline(inp, 0.5, high=float(np.float64(50 * MB))) is None


def test_a_share_above_the_limit_never_prints_as_the_limit() -> None:
    from kreassign.predict.suggest import _share

    assert _share(0.204, 0.20) == "20.4%"
    assert _share(0.35, 0.20) == "35%"
    assert _share(0.2001, 0.20) == "20.01%"


# ---- the measured bound: a canary during the move against its baseline ----------------------------------------
def measured(rises: dict[int, Impact], rates: dict[int, tuple[int | None, int | None]]) -> MeasuredImpact:
    return MeasuredImpact("canary", rises, rates)


def test_measured_impact_scales_the_catch_up_it_was_measured_with() -> None:
    # broker 1 sends at 21 MB/s (1 MB/s of it in-sync replication) and its canary p99 rose 40%;
    # broker 3 receives at 11 MB/s and rose 10%: with a 20% bound, broker 1's catch-up halves and
    # broker 3's doubles (the rise taken in proportion to the catch-up traffic)
    m = measured({1: Impact(1, 0.4, False, 0), 3: Impact(3, 0.1, False, 0)},
                 {1: (21 * MB, 21 * MB), 3: (None, 11 * MB)})
    s = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2, measured=m))
    one, three = s.brokers
    assert (one.leader_rate, three.follower_rate) == (1 * MB + 10 * MB, 22 * MB)
    assert (s.leader_rate, s.follower_rate) == (11 * MB, 22 * MB)
    assert s.to_dict()["bound"] == {"kind": "measured-impact", "source": "canary", "note": (
        "--max-impact bounds the rise of the canary's produce p99 over its baseline, in proportion to the "
        "catch-up traffic measured with it; brokers without a measured rise keep the capacity share")}
    assert s.to_dict()["brokers"][0]["impact"] == {"broker": 1, "p99_increase": 0.4, "measured_increase": None,
                                                   "within_noise": False, "throttled": False, "timeouts": 0}


def test_measured_impact_never_exceeds_what_clients_leave_of_the_network() -> None:
    # a 1% rise at 21 MB/s would allow 401 MB/s; broker 1's 100 MB/s less 3 MB/s of clients caps it
    m = measured({1: Impact(1, 0.01, False, 0)}, {1: (21 * MB, None)})
    one, three = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2, measured=m)).brokers
    assert one.leader_rate == 100 * MB - 3 * MB + 1 * MB
    assert three.follower_rate == 20 * MB  # not measured there: 20% of its capacity


def test_throttled_clients_hold_the_rate_and_no_rise_keeps_the_capacity_share() -> None:
    m = measured({1: Impact(1, 0.05, True, 0), 3: Impact(3, 0.0, False, 0)}, {1: (15 * MB, None), 3: (None, 9 * MB)})
    s = suggest_throttle(state(), PLAN, SuggestRequest(max_impact=0.2, measured=m))
    one, three = s.brokers
    assert (one.leader_rate, three.follower_rate) == (15 * MB, 20 * MB)
    assert s.warnings[0] == ("broker 1's clients were throttled or timed out during the measurement, which no rate "
                             "can be scaled from: its rates stay at the throttles in force; lower them by hand if "
                             "the move caused it")


def test_a_measured_rate_needs_no_capacity_but_an_unmeasured_side_does() -> None:
    m = measured({1: Impact(1, 0.2, False, 0), 3: Impact(3, 0.2, False, 0)}, {1: (5 * MB, None), 3: (None, 5 * MB)})
    one, three = suggest_throttle(state(cap=None), PLAN, SuggestRequest(max_impact=0.2, measured=m)).brokers
    assert (one.leader_rate, three.follower_rate, one.capacity_out) == (5 * MB, 5 * MB, math.inf)
    with pytest.raises(InputError, match=r"network capacity of broker\(s\) 3 is unknown"):
        suggest_throttle(state(cap=None), PLAN, SuggestRequest(max_impact=0.2, measured=measured(
            {1: Impact(1, 0.2, False, 0)}, {1: (5 * MB, None)})))
