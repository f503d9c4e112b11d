"""`kreassign estimate`: the library call, its JSON schema, the renderer and the command."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import Kreassign
from rich.console import Console

from kreassign.cli.estimate_cmd import render_estimate
from kreassign.cluster.errors import InputError
from kreassign.cluster.model import (
    Broker,
    ClusterState,
    PartitionInfo,
    PartitionTarget,
    Reassignment,
    ThrottleConfigs,
    TopicPartition,
)
from kreassign.cluster.snapshot import write_snapshot
from kreassign.predict.estimate import RateRequest, estimate_plan, resolve_rates
from kreassign.predict.model import NO_FETCH_LIMITS, WAVE_START_S, Limit

MB = 1_000_000


@pytest.fixture
def state() -> ClusterState:
    brokers = [Broker(i) for i in (1, 2, 3, 4)]
    parts = [PartitionInfo("orders", p, (1, 2), leader=1, isr=(1, 2), size_bytes=(p + 1) * 100 * MB) for p in range(2)]
    parts.append(PartitionInfo("clicks", 0, (2, 3), leader=2, isr=(2, 3), size_bytes=100 * MB, produce_bps=30 * MB))
    throttles = ThrottleConfigs(broker={4: {"follower.replication.throttled.rate": "5000000"}})
    return ClusterState.from_partitions(brokers, parts, throttles=throttles)


@pytest.fixture
def stuck_state(state: ClusterState) -> ClusterState:
    """`state` with clicks-0 (1000 MB) larger than what a 50 MB/s leader throttle's floods let
    through while the model follows them (`ModelInput.leader_flood`): its move stalls once they
    end."""
    parts = [p if p.topic != "clicks" else PartitionInfo("clicks", 0, (2, 3), leader=2, isr=(2, 3), size_bytes=1000 * MB,
                                                         produce_bps=30 * MB) for p in state.iter_partitions()]
    return ClusterState.from_partitions(state.brokers, parts, throttles=state.throttles)


PLAN = [PartitionTarget("orders", 0, (3, 2)), PartitionTarget("orders", 1, (3, 2)), PartitionTarget("clicks", 0, (2, 4))]


def test_rates_most_specific_wins(state: ClusterState) -> None:
    leader, follower = resolve_rates(state, RateRequest())
    assert math.isinf(leader[0]) and follower.tolist()[3] == 5 * MB  # configured in the cluster
    leader, follower = resolve_rates(state, RateRequest(throttle=50 * MB, follower_rate=40 * MB, broker_rates={2: 10 * MB}))
    assert leader.tolist() == [50 * MB, 10 * MB, 50 * MB, 50 * MB]
    assert follower.tolist() == [40 * MB, 10 * MB, 40 * MB, 40 * MB]
    with pytest.raises(InputError, match="broker\\(s\\) 9"):
        resolve_rates(state, RateRequest(broker_rates={9: MB}))


def test_estimate_plan_times_bounds_and_stalls(state: ClusterState) -> None:
    result = estimate_plan(state, PLAN, rates=RateRequest(throttle=50 * MB), fetch=NO_FETCH_LIMITS, tolerance=0)
    # Two orders moves share leader 1's 50 MB/s: 100 MB at 25, then 100 MB more at 50 -> 6 s.
    assert result.completable_eta_s == pytest.approx(6.0)
    assert not result.completes and math.isinf(result.eta_s)
    (stuck,) = result.stalled
    # clicks-0 writes 30 MB/s; its in-sync follower on 3 already takes 30 of leader 2's 50.
    assert (stuck.tp, stuck.source, stuck.dest, stuck.limit, stuck.broker) == (
        TopicPartition("clicks", 0), 2, 4, Limit.LEADER_THROTTLE, 2)
    assert stuck.needed_bps == pytest.approx(60 * MB)
    assert [(b.broker, b.bytes_out, b.bytes_in) for b in result.brokers] == [
        (1, 300 * MB, 0), (2, 100 * MB, 0), (3, 0, 300 * MB), (4, 0, 100 * MB)]
    assert result.brokers[0].busy_until_s == pytest.approx(6.0) and math.isinf(result.brokers[3].busy_until_s)


def test_estimate_with_enough_rate_completes_and_respects_the_lower_bound(state: ClusterState) -> None:
    result = estimate_plan(state, PLAN, rates=RateRequest(throttle=100 * MB), fetch=NO_FETCH_LIMITS, tolerance=0)
    assert result.completes and not result.stalled
    assert result.eta_s >= result.lower.seconds
    # clicks-0 alone: 100 MB at 100 - 30 (in sync) - 30 (its writes) = 40 net -> 2.5 s; the
    # broker-4 follower throttle of 5 MB/s configured in the cluster was overridden.
    assert result.eta_s == pytest.approx(3.0)
    assert result.critical[0].broker == 1


def test_json_schema_is_stable_and_strict(stuck_state: ClusterState) -> None:
    doc = estimate_plan(stuck_state, PLAN, rates=RateRequest(throttle=50 * MB), max_moves_per_broker=1).to_dict()
    assert list(doc) == ["schema", "eta_s", "completes", "completable_eta_s", "lower_bound", "ratio_to_lower_bound",
                         "moves", "partitions", "bytes", "schedule", "critical", "stalled", "write_rates", "fix",
                         "brokers", "model"]
    assert doc["schema"] == "kreassign.estimate/2" and doc["eta_s"] is None
    assert doc["write_rates"] == {"known": True, "source": "given", "window_s": None, "method": None,
                                  "measured_at": None, "note": None}
    assert doc["schedule"] == {"max_moves_per_broker": 1, "max_inflight_bytes": None, "order": "plan",
                               "poll_s": 10.0, "wave_start_s": WAVE_START_S}
    assert list(doc["stalled"][0]) == ["topic", "partition", "source", "dest", "bytes", "write_bps", "limit",
                                       "broker", "needed_bps", "suggested_rate"]
    assert list(doc["brokers"][0]) == ["broker", "leader_rate", "follower_rate", "bytes_out", "bytes_in", "busy_until_s"]
    json.dumps(doc, allow_nan=False)


def test_render(state: ClusterState) -> None:
    result = estimate_plan(state, PLAN, rates=RateRequest(throttle=50 * MB), fetch=NO_FETCH_LIMITS, tolerance=0)
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(render_estimate(result))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert text.startswith("ETA never (lower bound never: leader-throttle on broker 2); 3 move(s) of 3 partition(s)")
    assert "The moves that do complete are done after 6.0s." in text
    assert "Critical: broker 2 (leader-throttle, 1 move(s))" in text
    assert "│ clicks-0  │    2 │  4 │  30.0 MB/s │ leader-throttle on broker 2 │       60.0 MB/s │" in text


def _files(tmp_path: Path, state: ClusterState) -> tuple[str, str]:
    snap = tmp_path / "snap.json"
    write_snapshot(state, snap)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)} for t in PLAN]}))
    return str(plan), str(snap)


def test_command_text_and_json(tmp_path: Path, state: ClusterState, kreassign: Kreassign) -> None:
    plan, snap = _files(tmp_path, state)
    text = kreassign.run("estimate", "--reassignment-json-file", plan, "--snapshot", snap, "--throttle", "100MB/s")
    assert text.exit_code == 0 and text.stdout.startswith("ETA ")
    as_json = kreassign.run("estimate", "--reassignment-json-file", plan, "--snapshot", snap,
                            "--throttle", "50MB/s", "--broker-rate", "2=70MB/s", "--max-moves-per-broker", "1",
                            "--order", "large-first", "-o", "json")
    assert as_json.exit_code == 0
    doc = json.loads(as_json.stdout)
    assert doc["completes"] is True and doc["schedule"]["order"] == "large-first"
    assert [b["leader_rate"] for b in doc["brokers"]] == [50e6, 70e6, 50e6, 50e6]
    assert doc["eta_s"] >= doc["lower_bound"]["seconds"] * (1 - 1e-12)  # equal here, up to rounding


def test_command_rejects_a_bad_broker_rate(tmp_path: Path, state: ClusterState, kreassign: Kreassign) -> None:
    plan, snap = _files(tmp_path, state)
    run = kreassign.run("estimate", "--reassignment-json-file", plan, "--snapshot", snap, "--broker-rate", "two=5MB/s")
    assert run.exit_code == 2 and "'two=5MB/s' is not ID=RATE" in run.stderr


def test_schedules_never_start_more_than_allowed(state: ClusterState) -> None:
    result = estimate_plan(state, PLAN, rates=RateRequest(throttle=100 * MB), max_moves_per_broker=1,
                           fetch=NO_FETCH_LIMITS, tolerance=0)
    starts = np.sort(result.model.start_s)
    # orders-1 waits for orders-0 on broker 1 (done at 1 s), for the pacer's poll at 10 s (its
    # default --interval), and starts copying WAVE_START_S after it
    assert starts.tolist() == pytest.approx([0.0, 0.0, 10.0 + WAVE_START_S])
    polled = estimate_plan(state, PLAN, rates=RateRequest(throttle=100 * MB), max_moves_per_broker=1,
                           fetch=NO_FETCH_LIMITS, tolerance=0, poll_s=0.5)
    assert np.sort(polled.model.start_s).tolist() == pytest.approx([0.0, 0.0, 1.0 + WAVE_START_S])
    assert polled.to_dict()["schedule"]["poll_s"] == 0.5
    unpaced = estimate_plan(state, PLAN, rates=RateRequest(throttle=100 * MB), fetch=NO_FETCH_LIMITS).to_dict()
    assert unpaced["schedule"]["poll_s"] is None and unpaced["schedule"]["wave_start_s"] is None


def test_stalled_move_names_the_throttle_that_lets_it_finish(state: ClusterState) -> None:
    result = estimate_plan(state, PLAN, rates=RateRequest(throttle=50 * MB), fetch=NO_FETCH_LIMITS, tolerance=0)
    (stuck,) = result.stalled
    assert stuck.suggested_rate == 75 * MB  # needs more than 60 MB/s, plus 25%
    assert result.fix_rate == 75 * MB and result.fix_eta_s == pytest.approx(100 / 15)  # clicks-0: 75 - 30 in sync - 30 writes
    fixed = estimate_plan(state, PLAN, rates=RateRequest(throttle=50 * MB, broker_rates={2: stuck.suggested_rate}),
                          fetch=NO_FETCH_LIMITS, tolerance=0)
    assert fixed.completes and not fixed.stalled


def test_unknown_write_rates_are_said_in_text_and_json() -> None:
    brokers = [Broker(1), Broker(2), Broker(3)]
    quiet = ClusterState.from_partitions(brokers, [PartitionInfo("t", 0, (1, 2), size_bytes=100 * MB)])
    result = estimate_plan(quiet, [PartitionTarget("t", 0, (3, 2))], rates=RateRequest(throttle=10 * MB))
    assert result.write_rates is None
    doc = result.to_dict()
    assert doc["write_rates"]["known"] is False and "write rates unknown, taken as 0" in doc["write_rates"]["note"]
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(render_estimate(result))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Write rates unknown, taken as 0: the ETA is optimistic" in text


def test_plan_names_moves_that_never_finish_before_they_start(stuck_state: ClusterState) -> None:
    from kreassign.predict.plan_report import build_plan_report

    state = stuck_state
    report = build_plan_report(state, PLAN, rate=50 * MB)
    assert report.eta_s == math.inf and [str(s.tp) for s in report.stalled] == ["clicks-0"]
    assert report.warnings[-2:] == (
        "clicks-0 (new replica on broker 4) never finishes: its partition takes 30.0 MB/s of writes, more than "
        "its share of the leader-throttle on broker 2; --leader-rate 75000000 (75.0 MB/s) on broker 2 lifts that limit",
        # with Kafka's fetch limits: leader 2 is warm, so it floods: 900 MB a span (12 s of 75 MB/s,
        # less what its in-sync follower on 3 takes, 30 MB/s, which the window also holds), copied at
        # broker 4's follower share of 75 MB/s (68.8: its session carries nothing else) for 8.2-8.4 s,
        # then nothing until the span (11.5 s) ends while the copy falls 30 MB/s behind its writes;
        # the fourth flood finishes it
        "--throttle 75000000 (75.0 MB/s) lets every move finish (ETA 41s)")
    doc = report.to_dict()
    assert doc["eta_s"] is None and doc["stalled"][0]["suggested_rate"] == 75 * MB
    assert doc["write_rates"]["source"] == "given"
    assert build_plan_report(state, PLAN).eta_s is None  # no throttle, no ETA
    binary = build_plan_report(state, PLAN, rate=50 * MB, units="binary")  # the warnings follow --units
    assert binary.warnings[-2:] == (
        "clicks-0 (new replica on broker 4) never finishes: its partition takes 28.6 MiB/s of writes, more than "
        "its share of the leader-throttle on broker 2; --leader-rate 75000000 (71.5 MiB/s) on broker 2 lifts that limit",
        "--throttle 75000000 (71.5 MiB/s) lets every move finish (ETA 41s)")


def test_moves_release_the_in_sync_replication_of_the_followers_they_replace() -> None:
    from kreassign.planner.diff import diff_plan

    brokers = [Broker(i) for i in (1, 2, 3, 4, 5)]
    parts = [PartitionInfo("a", 0, (1, 2, 3), leader=1, isr=(1, 2, 3), produce_bps=6.0),  # replace 3: in sync
             PartitionInfo("a", 1, (1, 2, 3), leader=1, isr=(1, 2), produce_bps=6.0),  # replace 3: out of sync
             PartitionInfo("a", 2, (1, 2), leader=1, isr=(1, 2), produce_bps=6.0),  # grow to RF 3: nothing goes
             PartitionInfo("a", 3, (1, 2, 3), leader=1, isr=(1, 2, 3), produce_bps=6.0)]  # replace 2 and 3 by 4 and 5
    state = ClusterState.from_partitions(brokers, parts)
    moves = diff_plan(state, [PartitionTarget("a", 0, (1, 2, 4)), PartitionTarget("a", 1, (1, 2, 4)),
                              PartitionTarget("a", 2, (1, 2, 4)), PartitionTarget("a", 3, (1, 4, 5))]).moves
    assert moves.released_bps.tolist() == [6.0, 0.0, 0.0, 6.0, 6.0]


def test_a_move_under_way_counts_what_its_new_replica_still_lacks() -> None:
    """Mid-move, Kafka lists the adding replica among the replicas; until it is in sync the
    estimate still has its copy to do, less what DescribeLogDirs says it holds."""
    brokers = [Broker(i) for i in (1, 2, 3)]
    tp = TopicPartition("t", 0)
    moving = PartitionInfo("t", 0, (1, 2, 3), leader=1, isr=(1, 2), size_bytes=100 * MB)
    plan = [PartitionTarget("t", 0, (1, 3))]

    def estimate(copied: tuple[tuple[int, int], ...], isr: tuple[int, ...] = (1, 2)) -> tuple[int, int]:
        state = ClusterState.from_partitions(
            brokers, [PartitionInfo("t", 0, (1, 2, 3), leader=1, isr=isr, size_bytes=100 * MB)],
            reassignments={tp: Reassignment((1, 2, 3), adding=(3,), removing=(2,), copied=copied)})
        result = estimate_plan(state, plan, rates=RateRequest(throttle=10 * MB), fetch=NO_FETCH_LIMITS)
        return result.moves, result.bytes

    assert estimate(((3, 30 * MB),)) == (1, 70 * MB)
    assert estimate(()) == (1, 100 * MB)  # its size unknown: the whole partition, never 0
    assert estimate(((3, 100 * MB),), isr=(1, 2, 3)) == (0, 0)  # in sync: only the removal is left
    state = ClusterState.from_partitions(brokers, [moving], reassignments={tp: Reassignment((1, 2, 3), adding=(3,),
                                                                                            removing=(2,))})
    assert state.with_copies_pending().replicas(0) == (1, 2) and state.replicas(0) == (1, 2, 3)
    assert ClusterState.from_partitions(brokers, [moving]).with_copies_pending().replicas(0) == (1, 2, 3)
