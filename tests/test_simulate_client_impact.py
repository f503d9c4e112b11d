from __future__ import annotations

import statistics

import numpy as np
import pytest

from kreassign.cluster.errors import InputError
from kreassign.simulate.client_impact import (
    BrokerTraffic,
    ClientModel,
    assess,
    follower_fetch_ms,
    headroom_share,
    queue_delay_ms,
    quota_window_s,
    sustained_throttle_ms,
    throttle_time_ms,
)

MB = 1_000_000.0


@pytest.mark.parametrize(
    ("elapsed", "window"),
    [(0.0, 10.0), (0.4, 10.4), (3.5, 10.5), (9.99, 10.99), (10.0, 10.0), (10.7, 10.7), (12.0, 12.0)],
)
def test_quota_window_pads_to_ten_full_samples(elapsed: float, window: float) -> None:
    assert quota_window_s(elapsed) == pytest.approx(window)


def test_throttle_time_is_the_overshoot_times_the_window() -> None:
    got = throttle_time_ms(np.array([5 * MB, 10 * MB, 15 * MB, 30 * MB]), 10 * MB, 10.0)
    assert got.tolist() == [0.0, 0.0, 5000.0, 20000.0]


def test_throttle_time_rounds_to_whole_ms_and_has_no_cap() -> None:
    assert throttle_time_ms(10 * MB + 1, 10 * MB, 11.0).tolist() == 0.0
    assert throttle_time_ms(10 * MB + 500, 10 * MB, 11.0).tolist() == 1.0
    assert throttle_time_ms(1000 * MB, 10 * MB, 10.0).tolist() == 990_000.0


def test_sustained_throttle_uses_the_steady_window_and_none_means_no_quota() -> None:
    assert sustained_throttle_ms(np.array([20 * MB]), 10 * MB).tolist() == [10_500.0]
    assert sustained_throttle_ms(np.array([20 * MB]), None).tolist() == [0.0]


def test_headroom_share_goes_negative_when_oversubscribed() -> None:
    assert headroom_share(np.array([100.0, 100.0]), np.array([25.0, 150.0])).tolist() == [0.75, -0.5]


def test_queue_delay_grows_while_demand_exceeds_service_then_drains() -> None:
    demand = np.array([[10.0, 10.0, 10.0, 10.0]])
    available = np.array([[5.0, 5.0, 20.0, 20.0]])
    delay = queue_delay_ms(demand, available, dt_s=1.0)
    # backlog 5, 10, then drains by 10 per second: 0, 0
    assert delay.tolist() == [[1000.0, 2000.0, 0.0, 0.0]]


def test_queue_delay_is_infinite_while_nothing_is_left_for_clients() -> None:
    delay = queue_delay_ms(np.array([[1.0, 1.0]]), np.array([[0.0, -5.0]]), dt_s=1.0)
    assert np.isinf(delay).all()


def test_follower_fetch_idle_copying_busy_and_saturated() -> None:
    model = ClientModel(fetch_rtt_ms=1.0, fetch_response_max_bytes=10_000_000, request_timeout_ms=30_000)
    capacity = np.full(5, 100 * MB)
    used = np.array([0.0, 50 * MB, 100 * MB, 100 * MB, 100 * MB])
    catchup = np.array([0.0, 50 * MB, 50 * MB, 100 * MB, 0.0])
    got = follower_fetch_ms(model, capacity, used, catchup)
    # idle: one round trip; copying half the time: half of two 10 MB responses (the one in flight
    # and the next, 100 ms) ahead; with clients on the other half: stretched by 1 / 0.5; copying
    # all the time: two whole responses (catch-up is elastic: no timeouts); clients saturating
    # it: timeouts
    assert got.tolist() == pytest.approx([1.0, 101.0, 202.0, 201.0, 30_000.0], rel=1e-12)


def _traffic(**overrides: np.ndarray) -> BrokerTraffic:
    base = dict(
        capacity_in=np.array([[100 * MB], [100 * MB]]),
        capacity_out=np.array([[100 * MB], [100 * MB]]),
        client_in=np.array([[40 * MB], [10 * MB]]),
        client_out=np.array([[10 * MB], [10 * MB]]),
        replication_in=np.array([[10 * MB, 50 * MB, 10 * MB], [0.0, 0.0, 0.0]]),
        replication_out=np.zeros((2, 3)),
        catchup_in=np.array([[0.0, 40 * MB, 0.0], [0.0, 0.0, 0.0]]),
        catchup_out=np.zeros((2, 3)),
    )
    base.update(overrides)
    return BrokerTraffic(**base)


def test_assess_counts_time_and_brokers_below_the_target() -> None:
    impact = assess(ClientModel(headroom_target=0.2), _traffic(), dt_s=60.0)
    assert impact.headroom.tolist() == [[0.5, 0.1, 0.5], [0.9, 0.9, 0.9]]
    assert impact.minutes_below_target == 1.0
    assert impact.brokers_at_risk == 1
    assert impact.brokers_saturated == 0
    assert impact.timed_out_requests == 0.0
    assert impact.max_throttle_ms == 0.0


def test_assess_quota_throttle_follows_the_rate_clients_can_reach() -> None:
    model = ClientModel(produce_quota_bps=2 * MB, clients_per_broker=10)
    squeezed = _traffic(replication_in=np.array([[10 * MB, 80 * MB, 10 * MB], [0.0, 0.0, 0.0]]))
    impact = assess(model, squeezed, dt_s=1.0)
    # broker 0: 40 MB/s over 10 clients = 4 MB/s against 2 MB/s, except while catch-up leaves 20
    assert impact.throttle_ms[0].tolist() == [10_500.0, 0.0, 10_500.0]
    assert impact.throttle_ms[1].tolist() == [0.0, 0.0, 0.0]


def test_assess_produce_remote_time_takes_the_slower_of_both_links() -> None:
    model = ClientModel(fetch_rtt_ms=1.0, fetch_response_max_bytes=10_000_000)
    sending = np.array([[0.0, 0.0, 50 * MB], [0.0, 0.0, 0.0]])
    impact = assess(model, _traffic(replication_out=sending, catchup_out=sending), dt_s=1.0)
    # broker 0 receives 40 MB/s of catch-up in the second sample (two responses at 40% of the link,
    # other traffic half of it: (1 + 80 ms) / 0.5) and sends 50 MB/s of it in the third
    # ((1 + 100 ms) / 0.9, its consumers using a tenth of the link); idle links take one round
    # trip stretched by their client traffic
    assert impact.produce_remote_ms.ravel().tolist() == pytest.approx([2.0, 162.0, 101 / 0.9] + [1 / 0.9] * 3,
                                                                      rel=1e-12)


def test_assess_counts_requests_that_wait_past_the_timeout() -> None:
    model = ClientModel(request_bytes=1_000_000, request_timeout_ms=30_000)
    traffic = _traffic(
        client_in=np.array([[40 * MB], [0.0]]),
        replication_in=np.array([[100 * MB] * 3, [0.0] * 3]),
    )
    impact = assess(model, traffic, dt_s=60.0)
    assert impact.brokers_saturated == 1
    # nothing is left for broker 0's clients: every request of every sample waits forever
    assert impact.timed_out_requests == pytest.approx(40 * 60 * 3)


@pytest.mark.parametrize("kwargs", [dict(headroom_target=1.0), dict(clients_per_broker=0),
                                    dict(produce_quota_bps=0.0), dict(request_bytes=0)])
def test_client_model_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(InputError):
        ClientModel(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("rtt_ms", "bps", "p99_ms"), [
    (8.63, 19_995_000, [112.74, 111.85, 105.73]),  # unthrottled, 00:39:52Z: the copy fills the links
    (12.07, 19_933_000, [105.51, 121.98, 116.65]),  # unthrottled, 00:40:44Z
    (12.74, 10_900_000, [98.96, 107.75, 47.69]),  # 8 MB/s throttle, 00:41:37Z: the copy in bursts
    (8.63, 3_300_000, [33.75, 41.06, 17.76]),  # 2 MB/s throttle, 00:39:52Z
])
def test_follower_fetch_matches_real_kafkas_canary(rtt_ms: float, bps: float, p99_ms: list[float]) -> None:
    """Points recorded by `bench/bench_client_impact.py --engine kafka` (2026-11-29, real Kafka
    4.4.0, 20 MB/s replication links, one 1 MiB catch-up response per fetcher session, the canary
    baseline's idle round trip, each link's measured catch-up rate as traffic): the model is the
    tail of 20 produces per broker, within 10% of the brokers' median p99 where the copy fills the
    links and within their spread where a throttle lets it through in bursts."""
    model = ClientModel(fetch_rtt_ms=rtt_ms, fetch_response_max_bytes=1024 * 1024)
    got = float(follower_fetch_ms(model, np.array([20e6]), np.array([bps]), np.array([bps]))[0])
    if bps > 19e6:
        assert abs(got / statistics.median(p99_ms) - 1) <= 0.10
    else:
        assert min(p99_ms) <= got <= max(p99_ms)
