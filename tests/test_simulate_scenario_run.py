from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from kreassign.cluster.errors import InputError
from kreassign.simulate.client_impact import ClientModel
from kreassign.simulate.scenario_run import (
    ScenarioArrays,
    model_input,
    run_model,
    run_scenario,
    scenario_row,
)
from kreassign.simulate.scenarios import RANDOM_BROKER, Failure, Scenario
from kreassign.simulate.schemas import SCENARIO_RESULT
from kreassign.predict.estimate import tolerance_for
from kreassign.predict.model import PACER_POLL_S, WAVE_START_S, simulate

MB = 1_000_000.0


def _arrays(throttle: float = 10 * MB) -> ScenarioArrays:
    """Brokers 1-4 (NIC 100 MB/s); five moves of 100-400 MB, two into broker 4, two out of 1."""
    b = np.array([1, 2, 3, 4])
    return ScenarioArrays(
        broker_ids=b, network_in=np.full(4, 100 * MB), network_out=np.full(4, 100 * MB),
        client_in=np.array([10 * MB, 5 * MB, 5 * MB, 0.0]), client_out=np.array([20 * MB, 5 * MB, 5 * MB, 0.0]),
        replication_in=np.array([1 * MB, 2 * MB, 2 * MB, 0.0]),
        replication_out=np.array([4 * MB, 1 * MB, 0.0, 0.0]),
        leader_base=np.array([1 * MB, 0.0, 0.0, 0.0]),
        leader_rate=np.full(4, throttle), follower_rate=np.full(4, throttle),
        move_id=np.arange(5), source=np.array([1, 1, 2, 3, 2]), dest=np.array([4, 3, 4, 1, 1]),
        bytes=np.array([100, 200, 300, 400, 150]) * 1_000_000, write_bps=np.array([1e5, 2e5, 0.0, 5e4, 0.0]),
        failover_source=np.array([2, 2, 3, 2, -1]), released_bps=np.array([1e5, 0.0, 0.0, 0.0, 0.0]),
    )


def test_a_scenario_without_failure_is_exactly_the_model() -> None:
    arrays, scenario = _arrays(), Scenario(0, throttle_bps=10 * MB)
    expected = simulate(model_input(arrays, scenario), tolerance=tolerance_for(len(arrays)))
    run = run_scenario(arrays, scenario, points=50)
    assert np.array_equal(run.finish_s, expected.finish_s)
    assert run.makespan_s == expected.makespan
    assert run.lower_bound_s == expected.lower.seconds
    assert run.bottleneck_broker == expected.lower.broker == 1
    assert run.failed_broker is None and run.stalled_moves == 0


def test_a_single_huge_move_decides_the_bound_and_names_its_broker() -> None:
    arrays = dataclasses.replace(_arrays(throttle=float("inf")), network_in=np.full(4, np.inf),
                                 network_out=np.full(4, np.inf))
    run = run_scenario(arrays, Scenario(0), points=5)
    # no throttle, no known NIC: one fetch per cycle per partition (1 MiB / 10 ms) is the limit,
    # which belongs to no broker; the largest move (400 MB, writes 50 kB/s) decides
    assert run.lower_bound_s == 400e6 / (1024 * 1024 / 0.01 - 5e4)
    assert run.bottleneck_broker is None


def test_grid_rates_carry_every_byte_the_model_copied() -> None:
    arrays, scenario = _arrays(), Scenario(0, throttle_bps=10 * MB)
    model = run_model(arrays, scenario)
    run = run_scenario(arrays, scenario, points=40)
    dt = run.grid_t_s[1] - run.grid_t_s[0]
    assert run.rate_in.sum(axis=1) * dt == pytest.approx(model.bytes_in, rel=1e-9)
    assert run.rate_out.sum(axis=1) * dt == pytest.approx(model.bytes_out, rel=1e-9)
    assert run.grid_t_s[0] == 0.0 and run.grid_t_s[-1] == run.makespan_s


def test_pending_and_remaining_go_from_everything_to_nothing() -> None:
    arrays, scenario = _arrays(), Scenario(0, throttle_bps=10 * MB)
    run = run_scenario(arrays, scenario, points=30)
    assert run.pending_bytes[:, 0].tolist() == [550e6, 0.0, 200e6, 400e6]
    assert run.pending_bytes[:, -1].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert run.bytes_remaining[0] == arrays.bytes.sum()
    assert run.bytes_remaining[-1] == 0.0
    assert np.all(np.diff(run.bytes_remaining) <= 0)


def test_write_multiplier_scales_the_moves_write_rates() -> None:
    arrays = _arrays()
    slow = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB, write_multiplier=20.0), points=10)
    fast = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB), points=10)
    assert slow.makespan_s > fast.makespan_s


def test_moves_per_broker_admits_in_plan_order() -> None:
    arrays = _arrays()
    one = run_model(arrays, Scenario(0, throttle_bps=10 * MB, moves_per_broker=1))
    # move 0 (1 -> 4) and move 1 (1 -> 3) share source broker 1: the second starts once the
    # pacer's poll (every PACER_POLL_S) has seen the first done, WAVE_START_S after that poll
    assert one.start_s[0] == 0.0
    assert one.start_s[1] == pytest.approx(math.ceil(one.finish_s[0] / PACER_POLL_S) * PACER_POLL_S + WAVE_START_S)
    assert one.start_s[1] < one.finish_s[1]
    free = run_model(arrays, Scenario(0, throttle_bps=10 * MB))
    assert free.start_s.tolist() == [0.0] * 5


def test_a_failed_destination_never_finishes_and_its_sources_fail_over() -> None:
    arrays = _arrays()
    scenario = Scenario(0, throttle_bps=10 * MB, failure=Failure(broker=1, at_s=5.0))
    run = run_scenario(arrays, scenario, points=20)
    assert (run.failed_broker, run.failed_at_s) == (1, 5.0)
    # moves 3 and 4 go to broker 1: stuck; moves 0 and 1 come from it and fail over to broker 2
    assert np.isinf(run.finish_s[[3, 4]]).all()
    assert np.isfinite(run.finish_s[[0, 1, 2]]).all()
    assert math.isinf(run.makespan_s) and run.stalled_moves == 2


def test_a_failure_at_a_fraction_of_the_run() -> None:
    arrays = _arrays()
    base = run_model(arrays, Scenario(0, throttle_bps=10 * MB))
    run = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB, failure=Failure(4, at_fraction=0.5)), 10)
    assert run.failed_at_s == pytest.approx(0.5 * base.makespan)


def test_a_random_failure_depends_only_on_the_seed() -> None:
    arrays = _arrays()
    picks = {
        seed: run_scenario(arrays, Scenario(0, throttle_bps=10 * MB, seed=seed,
                                            failure=Failure(RANDOM_BROKER, at_s=1.0)), 5).failed_broker
        for seed in range(8)
    }
    again = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB, seed=3,
                                          failure=Failure(RANDOM_BROKER, at_s=1.0)), 5).failed_broker
    assert again == picks[3]
    assert set(picks.values()) <= {1, 2, 3, 4} and len(set(picks.values())) > 1


def test_an_unknown_failed_broker_is_an_input_error() -> None:
    with pytest.raises(InputError, match="broker 9"):
        run_scenario(_arrays(), Scenario(0, failure=Failure(9, at_s=1.0)), 5)


def test_the_row_has_every_result_column_and_packs_broker_major() -> None:
    arrays, scenario = _arrays(), Scenario(7, throttle_bps=10 * MB)
    run = run_scenario(arrays, scenario, points=6)
    row = scenario_row(7, arrays, run, ClientModel())
    assert list(row) == SCENARIO_RESULT.fieldNames()
    assert row["tl_broker"].tolist() == [1] * 6 + [2] * 6 + [3] * 6 + [4] * 6
    assert row["tl_t_s"][:6].tolist() == run.grid_t_s.tolist()
    assert row["tl_replication_in_bps"][18:24].tolist() == run.rate_in[3].tolist()
    assert (row["moves"], row["bytes"], row["stalled_moves"]) == (5, 1_150_000_000, 0)


def test_a_move_slower_than_its_writes_never_finishes_and_the_curve_follows_what_is_copied() -> None:
    # move 4 (2 GB into broker 1) follows 20 MB/s of writes under a 10 MB/s throttle: it never
    # catches up (the model's lag only grows), yet it copies the plan's bytes all along
    arrays = dataclasses.replace(_arrays(), write_bps=np.array([1e5, 2e5, 0.0, 5e4, 2e7]),
                                 bytes=np.array([100, 200, 300, 400, 2000]) * 1_000_000)
    scenario = Scenario(0, throttle_bps=10 * MB)
    model = run_model(arrays, scenario)
    assert model.remaining_bytes.max() > arrays.bytes.sum()
    run = run_scenario(arrays, scenario, points=10)
    assert run.stalled_moves == 1 and math.isinf(run.makespan_s)
    # one timeline: the plan's bytes left go down by exactly what the brokers received
    dt = run.grid_t_s[1] - run.grid_t_s[0]
    copied = run.rate_in[:, :-1].sum(axis=0) * dt
    assert run.bytes_remaining[0] == 3_000_000_000
    fell = -np.diff(run.bytes_remaining)
    # exactly what was received, one for one on broker 1 (its move never ends), at the plan's
    # share elsewhere, until a move is done
    received = run.rate_in[:, :-1] * dt
    total = np.bincount(arrays.positions(arrays.dest), weights=arrays.bytes, minlength=4)
    share = np.divide(total, received.sum(axis=1), out=np.ones(4), where=received.sum(axis=1) > 0)
    share[arrays.positions(np.array([1]))] = 1.0
    assert (share[[2, 3]] < 1).all()  # brokers 3 and 4 also copy the writes of their moves
    assert fell[:2] == pytest.approx((received * share[:, None]).sum(axis=0)[:2], rel=1e-12)
    assert (fell <= copied * (1 + 1e-12)).all()
    assert (copied > 0).all() and (fell > 0).all()
    assert run.bytes_remaining[-1] > arrays.bytes[4] - run.rate_in[0].sum() * dt
    # the finite story ends at the model's last event; the grid runs a quarter past it
    assert run.horizon_s == model.times.max() == model.finish_s[3]
    assert run.grid_t_s[-1] == pytest.approx(1.25 * run.horizon_s)
    # everything is below a 99% headroom target, but only the samples before the horizon count
    row = scenario_row(0, arrays, run, ClientModel(headroom_target=0.99))
    assert np.count_nonzero(run.grid_t_s < run.horizon_s) == 8
    assert row["minutes_below_headroom"] == 8 * dt / 60.0


def test_moves_that_follow_heavy_writes_leave_plan_bytes_until_the_makespan() -> None:
    """Move 1 (200 MB into broker 3) follows 5 MB/s of writes under a 10 MB/s throttle: broker 3
    receives far more than 200 MB. The curve falls in proportion to what it receives and reaches
    0 at the makespan, not when 200 MB have arrived."""
    arrays = dataclasses.replace(_arrays(), write_bps=np.array([1e5, 5e6, 0.0, 5e4, 0.0]))
    run = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB), points=40)
    assert run.stalled_moves == 0 and run.grid_t_s[-1] == run.makespan_s == run.finish_s[1]
    assert (run.bytes_remaining[:-1] > 0).all() and run.bytes_remaining[-1] == 0.0
    # never flat while a broker copies, also when moves end (their bytes are not dropped at once)
    copying = run.rate_in[:, :-1].sum(axis=0) > 0
    assert copying.all() and (np.diff(run.bytes_remaining) < 0).all()
    three = arrays.positions(np.array([3]))[0]
    received = np.cumsum(run.rate_in[three, :-1] * np.diff(run.grid_t_s))
    assert received[-1] > 1.5 * 200e6
    # after moves into other brokers are done, the curve is broker 3's part alone: 200 MB less
    # the plan's share of what broker 3 has received
    alone = run.grid_t_s[1:] > run.finish_s[[0, 2, 3, 4]].max()
    expected = 200e6 * (1 - received / received[-1])
    assert alone.sum() >= 5
    assert run.bytes_remaining[1:][alone] == pytest.approx(expected[alone], rel=1e-9, abs=1e-3)


def _with_idle_broker(arrays: ScenarioArrays) -> ScenarioArrays:
    """`arrays` and a broker 5 with no clients, no replicas and no part in the plan."""
    def more(values: np.ndarray, value: float) -> np.ndarray:
        return np.append(values, value)

    return dataclasses.replace(
        arrays, broker_ids=more(arrays.broker_ids, 5), network_in=more(arrays.network_in, 100 * MB),
        network_out=more(arrays.network_out, 100 * MB), client_in=more(arrays.client_in, 0.0),
        client_out=more(arrays.client_out, 0.0), replication_in=more(arrays.replication_in, 0.0),
        replication_out=more(arrays.replication_out, 0.0), leader_base=more(arrays.leader_base, 0.0),
        leader_rate=more(arrays.leader_rate, arrays.leader_rate[0]),
        follower_rate=more(arrays.follower_rate, arrays.follower_rate[0]))


@pytest.mark.parametrize("writes", [np.array([1e5, 2e5, 0.0, 5e4, 0.0]), np.array([1e5, 5e6, 0.0, 5e4, 9e6])])
@pytest.mark.parametrize("fraction", [0.45, 0.6, 0.8])
def test_a_broker_with_no_part_in_the_plan_fails_and_nothing_changes(writes: np.ndarray, fraction: float) -> None:
    """The run after a failure starts where the first stood: the moves' lags (writes included,
    also beyond the plan's bytes) and the in-sync replication of the moves already done, which
    the throttles still count. A broker that neither sends, receives nor serves clients fails:
    every move ends when it would have. (Broker 27 of a 33-broker sweep failing cut a plan
    from 8h51m to 5h23m before.)"""
    arrays = _with_idle_broker(dataclasses.replace(_arrays(), write_bps=writes))
    calm = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB), points=10)
    at = fraction * calm.makespan_s
    assert math.isfinite(at) and 0 < (calm.finish_s <= at).sum() < len(arrays)  # some done, some not
    failed = run_scenario(arrays, Scenario(1, throttle_bps=10 * MB, failure=Failure(broker=5, at_s=at)), points=10)
    assert failed.failed_broker == 5 and failed.stalled_moves == 0
    assert failed.finish_s == pytest.approx(calm.finish_s, rel=1e-6)
    assert failed.lower_bound_s <= failed.makespan_s * (1 + 1e-9)


@pytest.mark.parametrize("fraction", [0.45, 0.6, 0.8])
def test_a_paced_run_keeps_released_moves_out_of_the_quotas_after_a_failure(fraction: float) -> None:
    """Paced (one move per broker), a finished move leaves the throttle lists: the run after a
    failure must not count its in-sync replication either. Move 4 follows 9 MB/s of writes into
    broker 1, whose follower quota the finished move 3 (50 kB/s) would otherwise share; it ended
    at 1,154 s instead of 940 s. (With light writes the pacer's polls, which restart at the
    failure, still move a slot's release by up to one poll.)"""
    arrays = _with_idle_broker(dataclasses.replace(_arrays(), write_bps=np.array([1e5, 5e6, 0.0, 5e4, 9e6])))
    calm = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB, moves_per_broker=1), points=10)
    failed = run_scenario(arrays, Scenario(1, throttle_bps=10 * MB, moves_per_broker=1,
                                           failure=Failure(broker=5, at_s=fraction * calm.makespan_s)), points=10)
    assert failed.finish_s == pytest.approx(calm.finish_s, rel=1e-6)


def test_what_a_failed_broker_was_to_receive_stays_left_flat_once_the_rest_is_done() -> None:
    arrays = _arrays()
    run = run_scenario(arrays, Scenario(0, throttle_bps=10 * MB, failure=Failure(broker=1, at_s=5.0)), points=20)
    done = run.rate_in.sum(axis=0) == 0.0  # nothing copies any more: the rest finished
    assert done[-4:].all() and not done[:-4].any()
    left = run.bytes_remaining[done]
    assert (left == left[0]).all()
    # moves 3 and 4 (400 + 150 MB into broker 1) keep what broker 1 had not received by 5 s
    assert left[0] == pytest.approx(550e6 - run.rate_in[0].sum() * (run.grid_t_s[1] - run.grid_t_s[0]), rel=1e-12)
    moving = ~done[:-1]
    assert (np.diff(run.bytes_remaining)[moving] < 0).all()


def test_a_finished_run_counts_headroom_up_to_its_makespan() -> None:
    arrays, scenario = _arrays(), Scenario(0, throttle_bps=10 * MB)
    run = run_scenario(arrays, scenario, points=11)
    assert run.horizon_s == run.makespan_s == run.grid_t_s[-1]
    row = scenario_row(0, arrays, run, ClientModel(headroom_target=0.99))
    assert row["minutes_below_headroom"] == 10 * (run.grid_t_s[1] - run.grid_t_s[0]) / 60.0
