"""The replication model: hand-computed cases, Kafka's accounting rules, and properties."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.cluster.java_order import java_string_hash
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo
from kreassign.predict.model import (
    NO_FETCH_LIMITS,
    LEADER_FLOOD_SPANS,
    LEADER_GRANULARITY,
    Admission,
    FetchLimits,
    Limit,
    ModelInput,
    Session,
    fetch_sessions,
    fetcher_ids,
    warm_leaders,
    from_moves,
    lower_bound,
    simulate,
)

MB = 1_000_000
MiB = 1024 * 1024


def model(**kw: object) -> ModelInput:
    kw.setdefault("fetch", NO_FETCH_LIMITS)
    return ModelInput.build(**kw)  # type: ignore[arg-type]


def exact(inp: ModelInput, **kw: object) -> object:
    return simulate(inp, tolerance=0.0, **kw)  # type: ignore[arg-type]


# ---- hand-computed cases ---------------------------------------------------------------------
def test_one_move_takes_bytes_over_rate() -> None:
    r = exact(model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[100 * MB], leader_rate=10 * MB))
    assert r.finish_s.tolist() == [10.0]
    assert r.makespan == 10.0 and r.lower.seconds == 10.0
    assert r.critical[0].limit is Limit.LEADER_THROTTLE and r.critical[0].broker == 1


def test_two_moves_share_a_leader_cap_and_the_survivor_speeds_up() -> None:
    r = exact(model(broker_ids=[1, 2, 3], source=[1, 1], dest=[2, 3], bytes=[50 * MB, 100 * MB], leader_rate=10 * MB))
    assert r.finish_s.tolist() == pytest.approx([10.0, 15.0])
    times, out, into = r.broker_timeline(1)
    assert times.tolist() == [0.0, 15.0] and out.tolist() == [10 * MB, 0.0] and into.tolist() == [0.0, 0.0]


def test_two_moves_share_a_follower_cap() -> None:
    r = exact(model(broker_ids=[1, 2, 3], source=[1, 2], dest=[3, 3], bytes=[50 * MB, 100 * MB], follower_rate=10 * MB))
    assert r.finish_s.tolist() == pytest.approx([10.0, 15.0])
    assert r.limit.tolist() == [int(Limit.FOLLOWER_THROTTLE)] * 2


def test_max_min_sharing_across_leader_and_follower_caps() -> None:
    # B (1->4) and C (2->4) split broker 4's follower cap 3/3; A (1->3) gets the rest of broker 1's 10.
    r = exact(model(broker_ids=[1, 2, 3, 4], source=[1, 1, 2], dest=[3, 4, 4], bytes=[21 * MB, 21 * MB, 42 * MB],
                    leader_rate={1: 10 * MB}, follower_rate={4: 6 * MB}))
    assert r.finish_s.tolist() == pytest.approx([3.0, 7.0, 10.5])


def test_write_rate_slows_catch_up_and_grows_the_copy() -> None:
    r = exact(model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[100 * MB], write_bps=[2 * MB], leader_rate=10 * MB))
    assert r.finish_s.tolist() == pytest.approx([12.5])
    assert r.copied_bytes.tolist() == pytest.approx([125 * MB])
    assert r.bytes_out[0] == pytest.approx(125 * MB)


def test_completed_moves_keep_counting_their_writes_against_the_quota() -> None:
    # A done at 10/3 s; then B gets 10 - 2 (A now in sync, still throttled and counted) = 8.
    r = exact(model(broker_ids=[1, 2, 3], source=[1, 1], dest=[2, 3], bytes=[10 * MB, 100 * MB],
                    write_bps=[2 * MB, 2 * MB], leader_rate=10 * MB))
    first = 10 / 3
    assert r.finish_s.tolist() == pytest.approx([first, first + (100 - 3 * first) / 6])


def test_a_move_whose_share_equals_its_write_rate_never_completes() -> None:
    r = exact(model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[100 * MB], write_bps=[10 * MB], leader_rate=10 * MB))
    assert r.stalled.tolist() == [True] and math.isinf(r.makespan) and math.isinf(r.lower.seconds)
    assert Limit(int(r.limit[0])) is Limit.LEADER_THROTTLE
    assert r.needed_bps.tolist() == [10 * MB]  # the leader rate must exceed this
    assert r.critical[0].limit is Limit.LEADER_THROTTLE and r.critical[0].broker == 1


def test_a_stall_ends_when_a_neighbour_finishes() -> None:
    # Each gets 5: the first (writes 5) waits until the second (writes 1) is in sync after 25 s,
    # then gets 10 - 1 = 9 and needs 25 s more.
    r = exact(model(broker_ids=[1, 2, 3], source=[1, 1], dest=[2, 3], bytes=[100 * MB, 100 * MB],
                    write_bps=[5 * MB, 1 * MB], leader_rate=10 * MB))
    assert r.finish_s.tolist() == pytest.approx([50.0, 25.0])
    assert not r.stalled.any()


def test_network_capacity_minus_client_traffic_bounds_the_copy() -> None:
    r = exact(model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[100 * MB], leader_rate=10 * MB,
                    network_out={1: 8 * MB}, client_out={1: 3 * MB}))
    assert r.finish_s.tolist() == pytest.approx([20.0])
    assert Limit(int(r.limit[0])) is Limit.NETWORK_OUT
    assert r.lower.seconds == pytest.approx(20.0) and r.lower.limit is Limit.NETWORK_OUT


def test_fetch_limits_bound_unthrottled_catch_up() -> None:
    fetch = FetchLimits(partition_max_bytes=MB, response_max_bytes=10 * MB, round_trip_s=0.01)
    one = exact(model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[100 * MB], fetch=fetch))
    assert one.finish_s.tolist() == pytest.approx([100 * MB / fetch.partition_bps])
    assert Limit(int(one.limit[0])) is Limit.FETCH_PARTITION
    many = exact(model(broker_ids=[1, 2], source=[1] * 20, dest=[2] * 20, bytes=[100 * MB] * 20, fetch=fetch))
    assert many.finish_s == pytest.approx(np.full(20, 100 * MB / (fetch.fetcher_bps / 20)))
    assert set(many.limit.tolist()) == {int(Limit.FETCH_RESPONSE)}


def test_more_fetchers_spread_the_response_limit() -> None:
    fetch = FetchLimits(num_fetchers=2, round_trip_s=0.01)
    r = exact(model(broker_ids=[1, 2], source=[1] * 20, dest=[2] * 20, bytes=[100 * MB] * 20,
                    fetcher=[0] * 10 + [1] * 10, fetch=fetch))
    assert r.finish_s == pytest.approx(np.full(20, 100 * MB / (fetch.fetcher_bps / 10)))


def test_no_leader_means_never_and_start_times_delay() -> None:
    r = exact(model(broker_ids=[1, 2], source=[-1, 1, 1], dest=[2, 2, 2], bytes=[MB, 10 * MB, 0],
                    start_s=[0.0, 5.0, 3.0], leader_rate=10 * MB))
    assert Limit(int(r.limit[0])) is Limit.NO_LEADER and math.isinf(r.finish_s[0])
    assert r.finish_s[1:].tolist() == pytest.approx([6.0, 3.0])
    assert r.start_s[1:].tolist() == [5.0, 3.0]


def test_admission_limits_moves_per_broker() -> None:
    inp = model(broker_ids=[1, 2, 3], source=[1, 1, 1], dest=[2, 3, 2], bytes=[100 * MB] * 3, leader_rate=10 * MB)
    r = exact(inp, admission=Admission(np.arange(3), max_moves_per_broker=1))
    assert r.start_s.tolist() == [0.0, 10.0, 20.0] and r.finish_s.tolist() == pytest.approx([10.0, 20.0, 30.0])


def test_moves_queued_behind_a_stalled_move_are_reported() -> None:
    inp = model(broker_ids=[1, 2], source=[1, 1], dest=[2, 2], bytes=[MB, MB], write_bps=[20 * MB, 0],
                leader_rate=10 * MB)
    r = exact(inp, admission=Admission(np.arange(2), max_moves_per_broker=1))
    assert [Limit(int(x)) for x in r.limit] == [Limit.LEADER_THROTTLE, Limit.QUEUED]
    assert r.stalled.all()


def test_lower_bound_is_bytes_over_rate_minus_writes_per_broker() -> None:
    inp = model(broker_ids=[1, 2, 3], source=[1, 1], dest=[2, 3], bytes=[60 * MB, 40 * MB],
                write_bps=[1 * MB, 1 * MB], leader_rate=12 * MB)
    lb = lower_bound(inp)
    assert lb.seconds == pytest.approx(100 / 10) and lb.limit is Limit.LEADER_THROTTLE and lb.broker == 1
    assert lb.out_s.tolist() == pytest.approx([10.0, 0.0, 0.0])


def test_batched_events_stay_close_to_exact() -> None:
    rng = np.random.default_rng(7)
    m, b = 400, 12
    src = rng.integers(0, b, m)
    inp = model(broker_ids=np.arange(b), source=src, dest=(src + rng.integers(1, b, m)) % b,
                bytes=rng.pareto(1.5, m) * 50 * MB + MB, write_bps=rng.uniform(0, 0.2 * MB, m),
                leader_rate=30 * MB, follower_rate=30 * MB)
    ref = exact(inp)
    approx = simulate(inp)
    assert approx.makespan == pytest.approx(ref.makespan, rel=0.02)
    assert np.median(np.abs(approx.finish_s / ref.finish_s - 1)) < 0.02
    assert approx.steps < ref.steps


# ---- inputs -----------------------------------------------------------------------------------
def test_build_rejects_bad_inputs() -> None:
    with pytest.raises(InputError, match="not in the cluster"):
        model(broker_ids=[1, 2], source=[1], dest=[9], bytes=[MB])
    with pytest.raises(InputError, match="onto the broker it comes from"):
        model(broker_ids=[1, 2], source=[1], dest=[1], bytes=[MB])
    with pytest.raises(InputError, match="must be finite"):
        model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[-1.0])
    inp = model(broker_ids=[1, 2], source=[1], dest=[2], bytes=[MB])
    with pytest.raises(InputError, match="tolerance"):
        simulate(inp, tolerance=1.5)
    with pytest.raises(InputError, match="exactly once"):
        simulate(inp, admission=Admission(np.array([0, 0])))


def test_java_hash_and_fetcher_ids_follow_kafka() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    state = ClusterState.from_partitions([Broker(1), Broker(2)], [PartitionInfo("t", p, (1, 2)) for p in range(4)])
    h = java_string_hash("t")
    want = [abs(31 * h + p) % 3 for p in range(4)]
    assert fetcher_ids(state, np.arange(4), 3).tolist() == want


def test_from_moves_takes_leaders_isr_traffic_and_nic_capacities() -> None:
    brokers = [Broker(1, network_out_bps=100 * MB), Broker(2), Broker(3)]
    parts = [PartitionInfo("a", 0, (1, 2), leader=1, isr=(1, 2), size_bytes=10 * MB, produce_bps=2 * MB,
                           consume_bps=5 * MB)]
    state = ClusterState.from_partitions(brokers, parts)

    class Moves:
        row = np.array([0])
        dest = np.array([3])
        source = np.array([2])  # ignored: followers fetch from the leader
        bytes = np.array([10 * MB])
        write_bps = np.array([2 * MB])

    inp = from_moves(state, Moves(), leader_rate=10 * MB)
    assert inp.source.tolist() == [0] and inp.dest.tolist() == [2]
    assert inp.leader_base.tolist() == [2 * MB, 0.0, 0.0]  # broker 2's in-sync fetches count on leader 1
    assert inp.client_out[0] == pytest.approx(5 * MB + 2 * MB)  # consumers + replication to broker 2
    assert inp.client_in.tolist() == pytest.approx([2 * MB, 2 * MB, 0.0])
    assert inp.network_out[0] == 100 * MB and math.isinf(inp.network_out[1])
    # the leader throttles, and the moving partition takes writes: each append re-checks the
    # fetch it parked, so it is answered one fetch cycle (0.01 s) after the rate is back under
    # the bound, and the leader's 11.5 s window holds a whole number of 1 MiB fetches
    share = 11 / 11.01 * math.ceil(10 * MB * 11.5 / MiB) * MiB / (10 * MB * 11.5)
    assert inp.leader_quota[0] == pytest.approx(10 * MB * share)
    assert inp.session.tolist() == [Session.ALONE]  # broker 3 follows nothing of leader 1
    # leader 1 answers its in-sync follower 2: its quota windows are warm and empty when the
    # throttle starts, so it floods: LEADER_FLOOD_S (12 s) of its rate at once, more than the move,
    # which then runs at what its NIC leaves (100 MB/s less 7 MB/s of consumers and replication)
    # less the writes it chases
    assert inp.warm.tolist() == [True] and inp.leader_flood.tolist() == [120 * MB, 0.0, 0.0]
    r = simulate(inp, tolerance=0.0)
    assert r.finish_s.tolist() == pytest.approx([10 * MB / (100 * MB - 7 * MB - 2 * MB)])
    assert r.lower.seconds <= r.finish_s[0]
    # an idle partition leaves the parked fetch to its 0.5 s wait
    idle = from_moves(state, Moves(), write_bps=np.array([0.0]), leader_rate=10 * MB)
    assert idle.leader_quota[0] == pytest.approx(10 * MB * 11 / 11.5 * (1 + LEADER_GRANULARITY * (MiB / (10 * MB)) / 11))


def test_the_follower_share_depends_on_what_the_session_also_carries() -> None:
    f = FetchLimits()
    rate = np.array([20 * MB])
    # alone: an empty request backs off 1 s, about one backoff lost per 11 s span
    alone = 11 / 12 * (1 + 0.045 * (MiB / (20 * MB)) / 11)
    assert float(f.follower_share(rate)[0]) == pytest.approx(alone)
    # written in-sync partitions: asked again one fetch cycle after the quota is back under
    whole = math.ceil(20 * MB * 11.5 / MiB) * MiB / (20 * MB * 11.5)
    assert float(f.follower_share(rate, Session.WRITTEN_ISR)[0]) == pytest.approx(11 / 11.01 * whole)
    # idle ones: the leader holds each request 0.5 s
    assert float(f.follower_share(rate, Session.IDLE_ISR)[0]) == pytest.approx(
        max(11 / 11.5 * (1 + 0.045 * (MiB / (20 * MB)) / 11), 11 / 11.5 * whole))
    shares = f.follower_share(np.array([5 * MB] * 3), np.array([Session.ALONE, Session.IDLE_ISR, Session.WRITTEN_ISR]))
    assert shares.round(4).tolist() == [0.9175, 0.9594, 1.0021]  # sandbox: 0.93, 0.96, 1.00
    assert f.follower_share(np.array([math.inf]), Session.WRITTEN_ISR).tolist() == [1.0]


def test_a_broker_fed_by_several_kinds_of_session_gets_the_harmonic_mean_of_their_shares() -> None:
    f = FetchLimits()
    inp = ModelInput.build(broker_ids=[1, 2, 3], source=[1, 2], dest=[3, 3], bytes=[100 * MB, 300 * MB],
                           follower_rate=10 * MB, session=[Session.ALONE, Session.WRITTEN_ISR])
    a, w = (float(f.follower_share(np.array([10 * MB]), k)[0]) for k in (Session.ALONE, Session.WRITTEN_ISR))
    mixed = (400 * MB + 2) / ((100 * MB + 1) / a + (300 * MB + 1) / w)
    assert inp.follower_quota[2] == pytest.approx(10 * MB * mixed, rel=1e-12)
    same = ModelInput.build(broker_ids=[1, 2, 3], source=[1, 2], dest=[3, 3], bytes=[100 * MB, 300 * MB],
                            follower_rate=10 * MB, session=Session.WRITTEN_ISR)
    assert same.follower_quota[2] == 10 * MB * w


def test_written_in_sync_partitions_of_a_session_wake_the_leader_too() -> None:
    f = FetchLimits()
    kw = dict(broker_ids=[1, 2], source=[1], dest=[2], bytes=[100 * MB], leader_rate=10 * MB)
    idle = ModelInput.build(**kw)  # type: ignore[arg-type]
    woken = ModelInput.build(session=Session.WRITTEN_ISR, **kw)  # type: ignore[arg-type]
    assert idle.leader_quota[0] == pytest.approx(10 * MB * float(f.leader_share(np.array(10 * MB))))
    assert woken.leader_quota[0] == pytest.approx(10 * MB * float(f.woken_share(np.array(10 * MB))))


def test_a_warm_leader_floods_once_a_span() -> None:
    f = FetchLimits()
    q = 10 * MB * float(f.leader_share(np.array(10 * MB)))
    kw = dict(broker_ids=[1, 2], source=[1], dest=[2], bytes=[500 * MB], leader_rate=10 * MB)
    cold = exact(ModelInput.build(**kw))  # type: ignore[arg-type]
    warm = exact(ModelInput.build(warm=True, **kw))  # type: ignore[arg-type]
    assert cold.makespan == pytest.approx(500 * MB / q)
    # a warm leader lets 12 s of its rate (120 MB) through at once, at what else limits the copy
    # (here one partition's fetches: 1 MiB per 0.01 s), then nothing until the span (11.5 s)
    # ends: four whole floods, then the last 20 MB at once (real Kafka 4.4.0: floods of 12 s of
    # the rate, one per 11.3-12.3 s)
    assert warm.makespan == pytest.approx(4 * 11.5 + 20 * MB / f.partition_bps)
    # the bound counts the first flood and what the followed floods carry above the steady share
    credit = 120 * MB + LEADER_FLOOD_SPANS * (120 * MB - 11.5 * q)
    assert ModelInput.build(warm=True, **kw).leader_credit.tolist() == pytest.approx([credit, 0])  # type: ignore[arg-type]
    assert warm.lower.seconds <= warm.makespan
    # after LEADER_FLOOD_SPANS spans the model takes the steady share: a long copy
    long = exact(ModelInput.build(warm=True, **{**kw, "bytes": [5000 * MB]}))  # type: ignore[arg-type]
    spans = LEADER_FLOOD_SPANS * 11.5
    assert long.makespan == pytest.approx(spans + (5000 * MB - LEADER_FLOOD_SPANS * 120 * MB) / q)
    # a cold leader whose throttle starts with the move lets one window (1 s) of its rate through
    # at once (SimpleRate's one-window floor; real Kafka 4.4.0: 9.8 MB in the first 0.8 s at 10 MB/s)
    fresh = exact(ModelInput.build(fresh=True, **kw))  # type: ignore[arg-type]
    assert fresh.lower.seconds == pytest.approx((500 * MB - 10 * MB) / q)  # tight: equal to the last ulp
    assert fresh.makespan == pytest.approx(11.5 + (500 * MB - 11.5 * q - 10 * MB) / q)
    assert ModelInput.build(fresh=True, warm=True, **kw).cold_credit.tolist() == [0, 0]  # type: ignore[arg-type]
    # no flood or credit without a finite leader throttle, or without fetch limits
    assert ModelInput.build(broker_ids=[1, 2], source=[1], dest=[2], bytes=[1.0], warm=True).leader_credit.tolist() == [0, 0]
    assert model(warm=True, **kw).leader_credit.tolist() == [0, 0]  # type: ignore[arg-type]


def test_a_fetch_carries_whole_batches() -> None:
    # real Kafka 4.4.0: every throttled fetch of 983,266-byte batches grew the replica by one batch
    big = FetchLimits(batch_bytes=983_266)
    assert big.fetch_bytes == 983_266 and big.batch_factor == pytest.approx(983_266 / MiB)
    assert FetchLimits().fetch_bytes == MiB and FetchLimits().batch_factor == 1.0  # 64 batches of 16 KiB
    assert FetchLimits(batch_bytes=3 * MiB).fetch_bytes == 3 * MiB  # one batch even if it does not fit (KIP-74)
    assert FetchLimits(batch_bytes=300_000).fetch_bytes == 900_000
    rate = np.array([MB])
    alone = 11 / 12 * (1 + 0.045 * (983_266 / MB) / 11) * 983_266 / MiB  # measured 0.854-0.912
    assert float(big.follower_share(rate)[0]) == pytest.approx(alone)
    assert float(big.leader_share(rate)[0]) == pytest.approx(  # measured active 0.922-0.963
        11 / 11.5 * (1 + LEADER_GRANULARITY * (983_266 / MB) / 11) * 983_266 / MiB)
    assert big.partition_bps == pytest.approx(983_266 / 0.01)
    with pytest.raises(InputError):
        FetchLimits(batch_bytes=0)


def test_fetch_sessions_reads_what_each_session_carries_from_the_isrs() -> None:
    brokers = [Broker(i) for i in (1, 2, 3, 4)]
    parts = [PartitionInfo("m", 0, (1,), leader=1, isr=(1,), size_bytes=MB),  # moves to 2, 3 and 4
             PartitionInfo("w", 0, (1, 2), leader=1, isr=(1, 2), produce_bps=MB),  # 2 follows 1, written
             PartitionInfo("i", 0, (1, 3), leader=1, isr=(1, 3)),  # 3 follows 1, idle
             PartitionInfo("o", 0, (4, 2), leader=4, isr=(4,)),  # 2 out of sync with 4: no session
             PartitionInfo("x", 0, (2,), leader=2, isr=(2,), size_bytes=MB)]  # moves to 4: 4 follows nothing of 2
    state = ClusterState.from_partitions(brokers, parts)
    rows = np.array([state.find_row("m", 0)] * 3 + [state.find_row("x", 0)])
    session = fetch_sessions(state, rows, np.array([2, 3, 4, 4]), 1)
    assert session.tolist() == [Session.WRITTEN_ISR, Session.IDLE_ISR, Session.ALONE, Session.ALONE]
    assert warm_leaders(state).tolist() == [1]  # 4 and 2 have no in-sync follower
    # with 2 fetcher threads a session is one thread's: the partitions must share it
    two = fetch_sessions(state, rows, np.array([2, 3, 4, 4]), 2)
    same = fetcher_ids(state, np.array([state.find_row("m", 0), state.find_row("w", 0)]), 2)
    assert two[0] == (Session.WRITTEN_ISR if same[0] == same[1] else Session.ALONE)


# ---- properties -------------------------------------------------------------------------------
@st.composite
def plans(draw: st.DrawFn) -> ModelInput:
    b = draw(st.integers(2, 5))
    m = draw(st.integers(1, 8))
    src = draw(st.lists(st.integers(0, b - 1), min_size=m, max_size=m))
    hop = draw(st.lists(st.integers(1, b - 1), min_size=m, max_size=m))
    size = draw(st.lists(st.integers(1, 200), min_size=m, max_size=m))
    writes = draw(st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0]), min_size=m, max_size=m))
    leader = draw(st.lists(st.sampled_from([5.0, 10.0, 20.0, math.inf]), min_size=b, max_size=b))
    follower = draw(st.lists(st.sampled_from([5.0, 10.0, 20.0, math.inf]), min_size=b, max_size=b))
    session = draw(st.lists(st.sampled_from(list(Session)), min_size=m, max_size=m))
    warm = draw(st.lists(st.booleans(), min_size=m, max_size=m))
    released = draw(st.lists(st.sampled_from([0.0, 0.5, 2.0]), min_size=m, max_size=m))
    return model(broker_ids=np.arange(b), source=src, dest=[(s + h) % b for s, h in zip(src, hop)],
                 bytes=np.array(size) * MB, write_bps=np.array(writes) * MB,
                 leader_rate=np.array(leader) * MB, follower_rate=np.array(follower) * MB,
                 fetch=FetchLimits(round_trip_s=0.05), session=session, warm=warm,
                 released_bps=np.array(released) * MB)


@settings(max_examples=60, deadline=None)
@given(plans(), st.sampled_from([1.0, 1.5, 2.0, 4.0]))
def test_a_higher_rate_is_never_slower(inp: ModelInput, factor: float) -> None:
    slow = exact(inp)
    fast = exact(inp.with_rates(leader_rate=inp.leader_rate * factor, follower_rate=inp.follower_rate * factor))
    assert fast.makespan <= slow.makespan * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(plans(), st.sampled_from([1.0, 1.5, 3.0]))
def test_more_writes_are_never_faster(inp: ModelInput, factor: float) -> None:
    from dataclasses import replace

    calm = exact(inp)
    busy = exact(replace(inp, write_bps=inp.write_bps * factor))
    # Max-min fair sharing is monotone only up to its order of completions: more writes on one
    # move can let another finish a hair sooner (3e-5 of the makespan seen once in generated plans).
    assert busy.makespan >= calm.makespan * (1 - 1e-4)


@settings(max_examples=80, deadline=None)
@given(plans(), st.sampled_from([0.0, 0.1]))
def test_the_eta_is_never_below_the_lower_bound(inp: ModelInput, tolerance: float) -> None:
    r = simulate(inp, tolerance=tolerance)
    assert r.makespan >= r.lower.seconds * (1 - 1e-9)


@settings(max_examples=80, deadline=None)
@given(plans())
def test_bytes_are_conserved(inp: ModelInput) -> None:
    r = exact(inp)
    done = ~r.stalled
    assert r.bytes_out.sum() == pytest.approx(r.bytes_in.sum(), rel=1e-9)
    if done.all():
        assert r.bytes_out.sum() == pytest.approx(r.copied_bytes.sum(), rel=1e-9)
        assert r.remaining_bytes[-1] == pytest.approx(0.0, abs=1e-3)
        assert r.remaining_bytes[0] == pytest.approx(inp.bytes.sum())


# ---- cross-check with the sandbox's broker emulation -----------------------------------------
Move = tuple[int, int, float, float]
CROSS_MOVES: list[Move] = [  # (leader, new replica, size, write rate): leaders keep their partitions
    (1, 2, 300 * MB, 0.0), (1, 3, 600 * MB, 1 * MB), (2, 3, 400 * MB, 0.0), (4, 3, 200 * MB, 2 * MB)]
# Unthrottled catch-up of many partitions on one follower: 30 from broker 1 share one fetcher
# session, 5 from broker 2 another; broker 3 sends 4 more to broker 4 over the network alone.
FAN_IN_MOVES: list[Move] = ([(1, 5, (100 + 17 * i) * MB, 0.0) for i in range(30)]
                            + [(2, 5, (200 + 90 * i) * MB, 0.0) for i in range(5)]
                            + [(3, 4, (500 + 250 * i) * MB, 0.0) for i in range(4)])


def sandbox_completion_times(leader_rate: float, follower_rate: float, network: float,
                             moves: Sequence[Move] = CROSS_MOVES, fetch: FetchLimits | None = None) -> np.ndarray:
    """Run the moves on the sandbox engine (Kafka's inclusion-based KIP-73 rules and fetch limits,
    virtual time stepped by hand), with the model's fetch limits (default: Kafka's)."""
    from kreassign.sandbox.codes import AlterOp
    from kreassign.sandbox.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
    from kreassign.sandbox.engine import Engine
    from kreassign.sandbox.fetch import FetchConfig

    f = fetch if fetch is not None else FetchLimits()
    engine = Engine({b: None for b in sorted({b for m in moves for b in m[:2]})}, network_bps=network,
                    fetch=FetchConfig(int(f.partition_max_bytes), int(f.response_max_bytes), f.num_fetchers,
                                      f.round_trip_s))
    assert engine.create_topic("t", assignments={i: [m[0]] for i, m in enumerate(moves)},
                               sizes=[m[2] for m in moves], rates=[m[3] for m in moves]) == (0, None)
    for b in engine.brokers:
        ops = [(name, AlterOp.SET, str(int(rate))) for name, rate in ((LEADER_RATE, leader_rate),
                                                                        (FOLLOWER_RATE, follower_rate))
               if math.isfinite(rate)]
        engine.configs.incremental_alter_broker(b, ops, False)
    leaders = ",".join(f"{i}:{m[0]}" for i, m in enumerate(moves))
    followers = ",".join(f"{i}:{m[1]}" for i, m in enumerate(moves))
    engine.configs.incremental_alter_topic("t", [(LEADER_REPLICAS, AlterOp.SET, leaders),
                                                 (FOLLOWER_REPLICAS, AlterOp.SET, followers)], False)
    engine.config_changed()
    for i, m in enumerate(moves):
        assert engine.alter_reassignment("t", i, [m[0], m[1]]) == (0, None)
    measured = np.full(len(moves), math.inf)
    while np.isinf(measured).any() and engine.now < 2000:
        engine.advance(0.25)
        for i in range(len(moves)):
            if math.isinf(measured[i]) and not engine.rows[i].reassigning:
                measured[i] = engine.now
    return measured


@pytest.mark.parametrize("leader_rate, follower_rate, per_move", [
    # one leader sends a written and an idle partition: appends re-check the written one's parked
    # fetch at once while the idle one waits out its fetch wait, so the written move takes the
    # quota first on a broker (the model shares fairly: the makespan holds, the order does not)
    (20 * MB, math.inf, False),
    (math.inf, 20 * MB, True),
    (20 * MB, 20 * MB, False),
])
def test_model_reproduces_the_sandbox_within_10_percent(leader_rate: float, follower_rate: float,
                                                        per_move: bool) -> None:
    network = 100 * MB
    measured = sandbox_completion_times(leader_rate, follower_rate, network)
    m = CROSS_MOVES
    predicted = simulate(ModelInput.build(
        broker_ids=[1, 2, 3, 4], source=[x[0] for x in m], dest=[x[1] for x in m], bytes=[x[2] for x in m],
        write_bps=[x[3] for x in m], leader_rate=leader_rate, follower_rate=follower_rate,
        network_in=network, network_out=network, fetch=FetchLimits())).finish_s
    assert predicted.max() == pytest.approx(measured.max(), rel=0.10)
    if per_move:
        assert predicted == pytest.approx(measured, rel=0.10)


@pytest.mark.parametrize("fetch, network, bound", [
    # 20 MiB/s a partition, 200 MiB/s a session: broker 1's session and broker 2's partitions bind
    (FetchLimits(round_trip_s=0.05), 400 * MB, {Limit.FETCH_RESPONSE, Limit.FETCH_PARTITION}),
    # Kafka's defaults (100 MiB/s a partition, 1000 MiB/s a session): broker 5's network in binds
    (FetchLimits(), 300 * MB, {Limit.NETWORK_IN, Limit.FETCH_PARTITION}),
    # two fetcher threads on each follower split broker 1's partitions between two sessions
    (FetchLimits(num_fetchers=2, round_trip_s=0.1), 1000 * MB, {Limit.FETCH_RESPONSE, Limit.FETCH_PARTITION}),
])
def test_model_reproduces_unthrottled_catch_up_bounded_by_fetch_limits(fetch: FetchLimits, network: float,
                                                                       bound: set[Limit]) -> None:
    m = FAN_IN_MOVES
    measured = sandbox_completion_times(math.inf, math.inf, network, moves=m, fetch=fetch)
    state = ClusterState.from_partitions([Broker(b, None) for b in (1, 2, 3, 4, 5)],
                                         [PartitionInfo("t", i, (x[0],), x[0], (x[0],), int(x[2]), 0.0)
                                          for i, x in enumerate(m)])
    result = simulate(ModelInput.build(
        broker_ids=[1, 2, 3, 4, 5], source=[x[0] for x in m], dest=[x[1] for x in m], bytes=[x[2] for x in m],
        fetcher=fetcher_ids(state, np.arange(len(m)), fetch.num_fetchers), network_in=network,
        network_out=network, fetch=fetch), tolerance=0.0)
    assert {Limit(v) for v in result.limit} >= bound
    assert result.finish_s == pytest.approx(measured, rel=0.10)
    # without the fetch limits the sandbox would be far off: they, not the network, decide
    if Limit.FETCH_RESPONSE in bound:
        unlimited = sandbox_completion_times(math.inf, math.inf, network, moves=m, fetch=NO_FETCH_LIMITS)
        assert unlimited.max() < 0.8 * measured.max()


def test_a_leaderless_move_never_completes_and_does_not_hold_back_the_others() -> None:
    inp = ModelInput.build(broker_ids=np.arange(3), source=np.array([0, -1]), dest=np.array([1, 2]),
                           bytes=np.full(2, 1e6), leader_rate=1e6, follower_rate=1e6, fetch=NO_FETCH_LIMITS)
    for tolerance in (0.0, 0.1):
        r = simulate(inp, tolerance=tolerance)
        assert r.finish_s[0] == pytest.approx(1.0)
        assert np.isinf(r.finish_s[1]) and r.limit[1] == Limit.NO_LEADER


def test_no_credit_once_a_reassignment_is_under_way() -> None:
    from kreassign.cluster.model import Reassignment, TopicPartition

    brokers = [Broker(1), Broker(2), Broker(3)]
    parts = [PartitionInfo("a", 0, (1, 2), leader=1, isr=(1, 2), size_bytes=10 * MB)]

    class Moves:
        row = np.array([0])
        dest = np.array([3])
        bytes = np.array([10 * MB])
        write_bps = np.array([0.0])

    fresh = from_moves(ClusterState.from_partitions(brokers, parts), Moves(), leader_rate=10 * MB)
    running = ClusterState.from_partitions(brokers, parts, reassignments={
        TopicPartition("a", 0): Reassignment((1, 2, 3), adding=(3,))})
    under_way = from_moves(running, Moves(), leader_rate=10 * MB)
    assert fresh.warm.tolist() == [True] and under_way.warm.tolist() == [False]
    assert under_way.leader_credit.tolist() == [0.0, 0.0, 0.0]
