"""The sandbox enforces KIP-73 throttles fetch by fetch as Kafka does (issue 19), and the
replication model behind `estimate` follows it.

Engine tests step a deterministic clock; one end-to-end test runs the real CLI over TCP.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.codes import AlterOp
from kreassign.sandbox.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.quota import SampledRates
from kreassign.sandbox.topics import TopicSpec
from kreassign.predict.model import FetchLimits, ModelInput, simulate
from test_sandbox_time_scale import WallClock, cli, connect

MB = 1_000_000
MiB = 1024 * 1024
RATES = [100_000, 1 * MB, 20 * MB, 100 * MB]


def set_rates(engine: Engine, rate: float, brokers: Sequence[int] | None = None, *, leader: bool = True,
              follower: bool = True) -> None:
    for b in brokers if brokers is not None else engine.brokers:
        ops = ([(LEADER_RATE, AlterOp.SET, str(int(rate)))] if leader else []) + (
            [(FOLLOWER_RATE, AlterOp.SET, str(int(rate)))] if follower else [])
        assert engine.configs.incremental_alter_broker(b, ops, False) == (0, None)
    engine.config_changed()


def set_lists(engine: Engine, topic: str, leaders: str, followers: str) -> None:
    ops = [(LEADER_REPLICAS, AlterOp.SET, leaders), (FOLLOWER_REPLICAS, AlterOp.SET, followers)]
    assert engine.configs.incremental_alter_topic(topic, ops, False) == (0, None)
    engine.config_changed()


def finish_times(engine: Engine, step: Callable[[int], float], limit: float = 20_000.0) -> np.ndarray:
    """Sandbox seconds until each partition's move completes, advancing by `step(i)` each time."""
    done = np.full(len(engine.rows), np.inf)
    start, i = engine.now, 0
    while np.isinf(done).any() and engine.now - start < limit:
        engine.advance(step(i))
        i += 1
        for k, p in enumerate(engine.rows):
            if np.isinf(done[k]) and not p.reassigning:
                done[k] = engine.now - start
    return done


def idle_copy(rate: float, step: Callable[[int], float]) -> float:
    """Copy rate / quota of one idle partition (at least 5 minutes of quota) moving from broker 1 to
    broker 2, with the leader and follower throttle at `rate` on both, as Kafka's tool sets them."""
    size = max(rate * 300, 100 * MB)
    engine = Engine({1: None, 2: None})
    engine.create_topic("t", assignments={0: [1]}, sizes=[size])
    set_rates(engine, rate)
    set_lists(engine, "t", "0:1", "0:2")
    assert engine.alter_reassignment("t", 0, [2]) == (0, None)
    return size / finish_times(engine, step)[0] / rate


# ---- SimpleRate -------------------------------------------------------------------------------------------
def test_simple_rate_keeps_a_placeholder_slot_and_purges_by_last_record() -> None:
    rates = SampledRates(1)
    rates.record(np.array([10.0]), 0.0)
    rates.record(np.array([5.0]), 0.9)          # same sample: started less than a window ago
    assert rates.rates(0.95)[0] == pytest.approx(15.0)  # elapsed floored at one window
    rates.record(np.array([7.0]), 1.0)          # a new sample starts at 1.0
    # the first sample's last record was at 0.9: obsolete at 11.9, not at 11.0 (its start)
    assert rates.rates(11.5)[0] == pytest.approx(22.0 / 11.5)
    # once purged it restarts empty at now and no longer anchors the window
    assert rates.rates(11.95)[0] == pytest.approx(7.0 / (11.95 - 1.0))
    for k in range(12):                          # 12 slots: samples + the overlapping one
        rates.record(np.array([1.0]), 20.0 + k)
    assert rates.value[0].sum() == pytest.approx(12.0)


def test_measuring_only_touches_the_sensors_asked() -> None:
    rates = SampledRates(2)
    rates.record(np.array([4.0, 0.0]), 0.0, np.array([True, False]))
    assert np.isinf(rates.start[1]).all()       # never recorded, never measured: no sample yet
    assert rates.rates(2.0, np.array([True, False])).tolist() == [2.0, 0.0]
    assert np.isinf(rates.start[1]).all()


# ---- one idle partition ---------------------------------------------------------------------------------
@pytest.mark.parametrize("rate", RATES)
def test_an_idle_copy_runs_at_the_quota_at_speed_1(rate: float) -> None:
    # --speed 1: the ticker hands the engine its fixed 0.1 s ticks
    assert 0.8 <= idle_copy(rate, lambda i: 0.1) <= 1.2


@pytest.mark.parametrize("rate", RATES[:-1])  # 100 MB/s: 60 GB in 3 s ticks, 30 s of CPU for no new case
def test_an_idle_copy_runs_at_the_same_rate_whatever_the_tick(rate: float) -> None:
    # --speed 60: each wall tick of about 50 ms covers about 3 sandbox seconds, with jitter
    jitter = np.random.default_rng(7).uniform(2.0, 4.5, 100_000)
    fast = idle_copy(rate, lambda i: float(jitter[i]))
    assert 0.8 <= fast <= 1.2
    assert fast == pytest.approx(idle_copy(rate, lambda i: 0.1), rel=0.02)


# ---- Kafka's ReplicationQuotasTest shapes ------------------------------------------------------------------
def asymmetric_topology(leader_throttle: bool) -> tuple[Engine, float]:
    """shouldMatchQuotaReplicatingThroughAnAsymmetricTopology: six throttled partitions led by
    100..105 replicate to 106 (0-2) and 107 (3-5); partitions 6 and 7 are not throttled; each
    partition holds 100 messages of 100 kB; the throttle is set so the copy should take 10 s."""
    engine = Engine({b: None for b in range(100, 108)})
    leaders = [100, 101, 102, 103, 104, 105, 100, 101]
    followers = [106, 106, 106, 107, 107, 107, 106, 107]
    engine.create_topic("topic1", assignments={i: [b] for i, b in enumerate(leaders)}, sizes=[10 * MB] * 8)
    throttle = 100 * 100_000 / 10 * (1 if leader_throttle else 3)
    set_rates(engine, throttle)
    if leader_throttle:
        set_lists(engine, "topic1", ",".join(f"{i}:{leaders[i]}" for i in range(6)), "")
    else:
        set_lists(engine, "topic1", "", ",".join(f"{i}:{followers[i]}" for i in range(6)))
    for i in range(8):
        assert engine.alter_reassignment("topic1", i, [leaders[i], followers[i]]) == (0, None)
    return engine, throttle


@pytest.mark.parametrize("leader_throttle", [True, False])
def test_kafkas_asymmetric_topology_shape(leader_throttle: bool) -> None:
    engine, throttle = asymmetric_topology(leader_throttle)
    took = finish_times(engine, lambda i: 0.1)
    unthrottled, throttled = took[6:].max(), took[:6].max()
    assert unthrottled < 9 < throttled < 30
    # the rate each throttled broker sustained (leaders 100..105 send 10 MB; 106, 107 take 30 MB)
    rate = 10 * MB / took[:6] if leader_throttle else 30 * MB / np.array([took[:3].max(), took[3:6].max()])
    assert 0.5 * throttle < rate.mean() < 1.1 * throttle


def test_kafkas_old_segments_shape() -> None:
    # shouldThrottleOldSegments: 20 MB, only the leader throttled at 5 MB/s: 3.6 s < took < 6 s
    engine = Engine({100: None, 101: None})
    engine.create_topic("topic1", assignments={0: [100]}, sizes=[200 * 100_000])
    set_rates(engine, 200 * 100_000 / 4, [100], follower=False)
    set_lists(engine, "topic1", "0:100", "")
    engine.alter_reassignment("topic1", 0, [100, 101])
    assert 3.6 < finish_times(engine, lambda i: 0.1)[0] < 6.0


# ---- the model follows the sandbox -------------------------------------------------------------------------
def fan_in(rate: float, moves: int) -> tuple[np.ndarray, np.ndarray]:
    """`moves` idle partitions led by brokers 1..3 move to broker 4 under a throttle of `rate` on
    every broker (both sides, as the tool sets it): sandbox and model finish times."""
    seconds = 600 if rate < 50 * MB else 120
    size = max(rate * seconds / moves, 50 * MB)
    engine = Engine({1: None, 2: None, 3: None, 4: None})
    src = [i % 3 + 1 for i in range(moves)]
    engine.create_topic("t", assignments={i: [b] for i, b in enumerate(src)}, sizes=[size] * moves)
    set_rates(engine, rate)
    set_lists(engine, "t", ",".join(f"{i}:{b}" for i, b in enumerate(src)), ",".join(f"{i}:4" for i in range(moves)))
    for i in range(moves):
        engine.alter_reassignment("t", i, [4])
    measured = finish_times(engine, lambda i: 0.5)
    predicted = simulate(ModelInput.build(
        broker_ids=[1, 2, 3, 4], source=src, dest=[4] * moves, bytes=[size] * moves,
        leader_rate=rate, follower_rate=rate, network_in=engine.network_bps, network_out=engine.network_bps),
        tolerance=0.0).finish_s
    return measured, predicted


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("moves", [1, 6])
def test_estimate_and_sandbox_agree_within_5_percent(rate: float, moves: int) -> None:
    measured, predicted = fan_in(rate, moves)
    assert predicted.max() == pytest.approx(measured.max(), rel=0.05)


def fan_out(rate: float, moves: int, write_share: float = 0.0) -> tuple[float, float]:
    """`moves` partitions led by broker 1 (each taking `write_share` x `rate` of writes) each move
    to a broker of their own under a throttle of `rate` on every broker: the leader's quota binds.
    Sandbox and model makespans."""
    seconds = 600 if rate < 50 * MB else 120
    size = max(rate * seconds / moves, 50 * MB)
    brokers = list(range(1, moves + 2))
    engine = Engine({b: None for b in brokers})
    writes = [write_share * rate] * moves
    engine.create_topic("t", assignments={i: [1] for i in range(moves)}, sizes=[size] * moves, rates=writes)
    set_rates(engine, rate)
    dest = [i + 2 for i in range(moves)]
    set_lists(engine, "t", ",".join(f"{i}:1" for i in range(moves)), ",".join(f"{i}:{d}" for i, d in enumerate(dest)))
    for i, d in enumerate(dest):
        engine.alter_reassignment("t", i, [d])
    measured = finish_times(engine, lambda i: 0.5)
    predicted = simulate(ModelInput.build(
        broker_ids=brokers, source=[1] * moves, dest=dest, bytes=[size] * moves, write_bps=writes,
        leader_rate=rate, follower_rate=rate, network_in=engine.network_bps, network_out=engine.network_bps),
        tolerance=0.0).finish_s
    return float(measured.max()), float(predicted.max())


@pytest.mark.parametrize("rate", [1 * MB, 20 * MB, 100 * MB])
def test_estimate_and_sandbox_agree_within_5_percent_when_the_leader_binds(rate: float) -> None:
    measured, predicted = fan_out(rate, 4)
    assert predicted == pytest.approx(measured, rel=0.05)


@pytest.mark.parametrize("rate", [1 * MB, 20 * MB, 100 * MB])
def test_written_partitions_wake_the_leaders_parked_fetches(rate: float) -> None:
    # writes of 5% of the throttle on each moving partition: appends answer the fetches the
    # leader parked as soon as its quota allows, so no 500 ms fetch wait is lost per quota span
    # and the leader's window holds a whole number of 1 MiB fetches (FetchLimits.woken_share)
    measured, predicted = fan_out(rate, 4, write_share=0.05)
    whole = math.ceil(rate * 11.5 / 2**20) * 2**20 / (rate * 11.5)
    assert float(FetchLimits().leader_share(np.array(rate), written=True)) == pytest.approx(11 / 11.01 * whole)
    assert predicted == pytest.approx(measured, rel=0.01)


def session_copy(rate: float, carries: str) -> tuple[float, float]:
    """One idle partition moves from broker 1 to 2 under a follower throttle `rate` only; broker 2
    also follows, in sync, a partition of leader 1 that is idle or written ('idle', 'written'),
    or nothing ('none'). Copy rate / quota measured on the engine, and the model's follower share
    for the session `fetch_sessions` reads from the same partitions."""
    from kreassign.cluster.model import Broker, ClusterState, PartitionInfo
    from kreassign.predict.model import fetch_sessions

    size = rate * 120
    engine = Engine({1: None, 2: None})
    engine.create_topic("t", assignments={0: [1]}, sizes=[size])
    infos = [PartitionInfo("t", 0, (1,), leader=1, isr=(1,), size_bytes=int(size))]
    if carries != "none":
        write = 20_000.0 if carries == "written" else 0.0
        engine.create_topic("s", assignments={0: [1, 2]}, sizes=[0], rates=[write])
        infos.append(PartitionInfo("s", 0, (1, 2), leader=1, isr=(1, 2), produce_bps=write))
    engine.advance(20.0)  # sessions as on a running cluster
    set_rates(engine, rate, leader=False)
    set_lists(engine, "t", "", "0:2")
    assert engine.alter_reassignment("t", 0, [2]) == (0, None)
    measured = size / finish_times(engine, lambda i: 0.5)[0] / rate
    state = ClusterState.from_partitions([Broker(1), Broker(2)], infos)
    session = fetch_sessions(state, np.array([state.find_row("t", 0)]), np.array([2]), 1)
    return measured, float(FetchLimits().follower_share(np.array(rate), session)[0])


@pytest.mark.parametrize("carries", ["none", "idle", "written"])
def test_a_follower_session_that_also_fetches_in_sync_partitions_uses_its_quota_whole(carries: str) -> None:
    # Kafka's follower leaves a throttled partition out of its request while its quota is over,
    # but never an in-sync one, and backs off replica.fetch.backoff.ms only when the request would
    # be empty: a session that also fetches in-sync partitions keeps asking (at the next append,
    # or after the leader's 500 ms wait when they are idle) and takes the quota back at once
    measured, share = session_copy(20 * MB, carries)
    assert share == pytest.approx({"none": 0.9168, "idle": 0.9594, "written": 1.0021}[carries], abs=1e-4)
    assert share == pytest.approx(measured, rel=0.01)


# ---- end to end: the real CLI over TCP -------------------------------------------------------------------
@pytest.mark.e2e
def test_the_cli_sees_an_idle_copy_at_the_throttle(sandbox_factory: Callable[..., SandboxCluster],
                                                   tmp_path: Path) -> None:
    """`throttle set` then `watch` to completion, at --speed 60 over a fake wall clock: the copy
    time watch reports (sandbox seconds) is size / (0.8-1.2 x the throttle)."""
    rate, size = 1 * MB, 300 * MB
    wall = WallClock()
    sb = sandbox_factory(brokers=2, racks=0, topics=[TopicSpec("idle", 1, 1, size, 0.0, 0.0)],
                         clock=ScaledClock(60.0, monotonic=wall))
    wall.cluster = sb
    with connect(sb) as admin:
        (p,) = admin.describe_topics(["idle"])
        spare = next(b for b in (1, 2) if b not in p.replicas)
        assert admin.alter_reassignments({p.tp: [spare]}) == {p.tp: None}
    journals = tmp_path / "j"
    assert cli(sb, wall, journals, "throttle", "set", "--throttle", str(rate)).exit_code == 0
    start = sb.now
    ran = cli(sb, wall, journals, "watch", "--interval", "5s", "--stop-after", "2000s", "--output", "json")
    assert ran.exit_code == 0, ran.output[-2000:]
    events = [json.loads(line) for line in ran.stdout.splitlines()]
    assert events[-1]["event"] == "complete"
    took = sb.now - start
    assert 0.8 <= size / took / rate <= 1.2
