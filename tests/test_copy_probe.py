"""The calibration probe (`sandbox/copy_probe.py`): how a trace becomes copy rate / quota, the
throttle configs a scenario sets, the emulator's run of a scenario, and (marked kafka) the
emulator against real Kafka on a scenario the replication model's constants rest on."""
from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kreassign.sandbox.copy_probe import (
    MB,
    PROBE_FETCH,
    KafkaProbe,
    Sample,
    Scenario,
    Trace,
    leader_start,
    run_emulator,
    summarize,
    throttle_ops,
)

from live import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_real_eta import QUOTA_FORGET_S  # noqa: E402
from bench.bench_real_throttle import machine_speed  # noqa: E402


def trace(samples: list[tuple[float, int, int, bool]], rate: float = 1 * MB) -> Trace:
    return Trace(Scenario(rate, "both", "idle", 30 * MB), "test", [Sample(*s) for s in samples])


def test_summary_of_a_copy_at_a_steady_rate() -> None:
    # 1.5 MB/s from t=1 s: 30 MB caught between the samples at 20.5 and 21 s (midpoint 20.75 s)
    points = [(t / 2, min(max(int((t / 2 - 1) * 1.5 * MB), 0), 30 * MB), 30 * MB, t / 2 < 21) for t in range(0, 46)]
    summary = summarize(trace(points))
    assert summary["caught_s"] == 20.75
    assert summary["copied_bytes"] == 30 * MB
    assert summary["copy_over_quota"] == round(30 / 20.75, 4)
    assert summary["steady_over_quota"] == pytest.approx(1.5)  # the slope after the first 12 s
    # the first bytes came between the samples at 1.0 and 1.5 s
    assert summary["started_s"] == 1.25 and summary["active_over_quota"] == round(30 / (20.75 - 1.25), 4)


def test_a_short_copy_has_no_steady_rate_and_an_unfinished_one_no_rate() -> None:
    short = summarize(trace([(0.0, 0, 30 * MB, True), (5.0, 10 * MB, 30 * MB, True), (10.0, 30 * MB, 30 * MB, False)]))
    assert short["caught_s"] == 7.5 and short["steady_over_quota"] is None
    assert short["copy_over_quota"] == round(30 / 7.5, 4)
    assert summarize(trace([(0.0, 0, 30 * MB, True), (5.0, 10 * MB, 30 * MB, True)]))["copy_over_quota"] is None


def test_a_written_move_is_done_when_the_reassignment_is() -> None:
    # the leader keeps growing; the follower is never seen level with it, the move ends by 10 s
    summary = summarize(trace([(0.0, 0, 30 * MB, True), (5.0, 15 * MB, 31 * MB, True), (10.0, 32 * MB, 33 * MB, False)]))
    assert summary["caught_s"] == 7.5 and summary["copied_bytes"] == 33 * MB  # the leader's log as it completed


def test_a_move_seen_complete_before_its_last_copy_holds_the_leader_log() -> None:
    # the sizes were read just before the reassignment completed, its listing just after
    summary = summarize(trace([(0.0, 0, 30 * MB, True), (10.0, 20 * MB, 30 * MB, False)]))
    assert summary["copied_bytes"] == 30 * MB and summary["copy_over_quota"] == round(30 / 5.0, 4)


def test_throttle_configs_are_the_ones_execute_sets() -> None:
    both = Scenario(2 * MB, "both", "idle", MB)
    assert throttle_ops(both, "t", 1, 2) == (
        {1: {"leader.replication.throttled.rate": "2000000"}, 2: {"follower.replication.throttled.rate": "2000000"}},
        {"t": {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}})
    assert throttle_ops(Scenario(2 * MB, "follower", "idle", MB), "t", 1, 2, clear=True) == (
        {2: {"follower.replication.throttled.rate": None}}, {"t": {"follower.replication.throttled.replicas": None}})
    assert throttle_ops(Scenario(2 * MB, "none", "idle", MB), "t", 1, 2) == ({}, {"t": {}})


def test_written_shapes_write_a_tenth_of_the_throttle() -> None:
    assert Scenario(10 * MB, "leader", "written", MB).write_bps == 1 * MB
    assert Scenario(50_000, "leader", "isr_written", MB).write_bps == 10_000  # at least 10 kB/s
    assert Scenario(10 * MB, "leader", "isr_idle", MB).write_bps == 0
    with pytest.raises(ValueError):
        Scenario(MB, "sideways", "idle", MB)


def test_the_emulator_copies_the_whole_partition_and_reports_it() -> None:
    result = run_emulator(Scenario(10 * MB, "both", "idle", 100 * MB))
    last = result.samples[-1]
    assert not last.reassigning and last.follower_bytes == last.leader_bytes == 100 * MB
    assert all(a.follower_bytes <= b.follower_bytes for a, b in zip(result.samples, result.samples[1:]))
    assert all(s.reassigning for s in result.samples[:-1])
    unthrottled = summarize(run_emulator(Scenario(10 * MB, "none", "idle", 100 * MB)))
    assert unthrottled["caught_s"] < summarize(result)["caught_s"]


def test_a_leader_start_is_warm_when_the_first_seconds_carry_a_flood() -> None:
    """Real Kafka 4.4.0, 1 MB/s leader throttle (bench_real_throttle, 2026-11-28): a cold leader
    lets 1 s of its rate through and then the rate, a warm one 11 batches of 983,266 bytes at once."""
    def trace(throttle: str, sizes: list[tuple[float, int]]) -> Trace:
        return Trace(Scenario(MB, throttle, "written", 20 * MB), "kafka",
                     [Sample(t, size, 20 * MB, True) for t, size in sizes])

    cold = [(0.29, 0), (0.54, 983_266), (1.29, 983_266), (1.54, 1_966_532), (2.04, 1_966_532), (2.54, 2_949_798)]
    warm = [(0.29, 10_815_926), (1.04, 10_815_926), (2.04, 10_815_926)]
    assert [leader_start(trace("leader", cold)), leader_start(trace("leader", warm))] == ["cold", "warm"]
    assert leader_start(trace("both", warm)) == "warm"
    # no leader throttle: the leader's history decides nothing
    assert leader_start(trace("follower", warm)) is None


def test_the_machines_speed_is_its_quiet_unthrottled_copy() -> None:
    def run(throttle: str, load: float, active: float) -> dict[str, Any]:
        return {"throttle": throttle, "rate": 50 * MB, "loadavg_before": [load], "active_over_quota": active}

    rows = [run("none", 1.0, 6.0), run("none", 2.0, 6.4), run("none", 30.0, 1.3), run("leader", 1.0, 0.9),
            run("none", 0.5, 6.2)]
    assert machine_speed(rows, quiet_load=4.0) == pytest.approx(6.2 * 50 * MB)
    assert machine_speed(rows[2:4], quiet_load=4.0) is None  # no quiet unthrottled copy: the defaults


def test_a_warm_flood_drains_at_the_brokers_speed() -> None:
    """`isr_written/leader/50MB/s` on a quiet machine (bench/results/real_throttle_4.4.0.md): two
    floods of 550 MB; the real brokers took them at loopback speed and copied at 1.18 and 1.55 of
    the quota. The emulator's 100 MB/s NICs drain a flood three times slower."""
    scenario = Scenario(50 * MB, "leader", "isr_written", 750 * MB)
    fast = replace(PROBE_FETCH, round_s=PROBE_FETCH.partition_max_bytes / 329e6)
    slow = summarize(run_emulator(scenario))["copy_over_quota"]
    quick = summarize(run_emulator(scenario, fetch=fast, network_bps=329e6))["copy_over_quota"]
    assert slow < 1.1 < 1.15 < quick < 1.6


@pytest.mark.parametrize("shape", ["idle", "written"])
def test_the_emulator_starts_a_leader_warm_or_cold_as_asked(shape: str) -> None:
    scenario = Scenario(MB, "leader", shape, 20 * MB)
    cold, warm = run_emulator(scenario), run_emulator(scenario, warm=True)
    assert [leader_start(cold), leader_start(warm)] == ["cold", "warm"]
    # the warm leader's flood (11-12 s of the rate at once) ends the copy in two floods, the
    # cold one copies at about the rate
    assert summarize(warm)["caught_s"] < 13.0 < 19.0 < summarize(cold)["caught_s"]


ENGINE_AGREEMENT = 0.10
"""issue 27: where the emulator's copy rate differs from the real broker's by more than this, the
emulator is fixed (bench/results/real_throttle_4.4.0.md has every scenario)"""
REAL_SCENARIOS = [
    # a follower throttle with writes into the moving partition (appends wake its fetches), 20 s
    # of quota: the real broker's runs agree within 1.5% at load 75-87 (0.911-0.924 of the quota
    # from the first bytes), the emulator gives 0.925. Not a leader throttle: the session
    # cluster's leaders lead __consumer_offsets with in-sync followers, so they start warm (6 s
    # of credit, 1.5-1.8x the quota on a 20 s copy here) where the probe's emulator leader is
    # cold. Not 100 kB/s: there a 1 MiB fetch is 10 s of quota, and the real broker's own runs
    # spread from 0.91 to 2.2 of it by where the quota windows fall.
    Scenario(1 * MB, "follower", "written", 20 * MB),
    # a warm leader (its in-sync partition replicated first): 11 reads of 1 MiB at once, each
    # keeping one 983,266-byte batch, then nothing for a quota span; 24 MB is three floods
    # whether the broker's other in-sync followers make them 11 batches or 12
    # (tests/test_emulator_quota_real.py has the real broker's log of it)
    Scenario(1 * MB, "leader", "isr_idle", 24 * MB),
]


def free_pair(port: Any, brokers: list[int]) -> tuple[int, int]:
    """A leader and a follower that share no partition (a fetcher session of its own)."""
    taken = {(p.leader, r) for p in port.describe_topics() for r in p.replicas}
    return next((a, b) for a in brokers for b in brokers if a != b and (a, b) not in taken)


def sensors_quiet(cluster: Any, leader: int, follower: int, below: float) -> bool:
    """The brokers' replication quota sensors have forgotten earlier tests' copies, as the JMX
    exporter reads them: under `below` B/s, or never used. (Not 0: a leader records the size of
    every response to its followers, empty or not, about 30 B/s of headers.)"""
    return all((gauge(cluster.metrics_ports[b], name) or 0.0) < below for b, name in (
        (leader, "kafka_server_leaderreplication_byte_rate"), (follower, "kafka_server_followerreplication_byte_rate")))


def sensors_cold(cluster: Any, pairs: Sequence[tuple[int, int]], below: float) -> None:
    """Wait until `sensors_quiet` holds for every (leader, follower) pair, then one quota span
    (`QUOTA_FORGET_S`) without reading them. Reading a sensor purges its expired samples, and
    Kafka's `SimpleRate` resets a purged sample's window start to the moment of that read, so
    for a quota span after a scrape the sensor divides by the time since the scrape: a copy
    that starts then has that much of the rate in credit (a 1 s scraper took 2 s off a 25 s
    copy at 1 MB/s; bench/results/real_eta_4.4.0.md). After a quiet span the first fetch finds
    every sample expired, as on a broker nobody scrapes."""
    for leader, follower in pairs:
        wait_until(lambda a=leader, b=follower: sensors_quiet(cluster, a, b, below),
                   "the quota sensors to forget earlier tests' copies")
    time.sleep(QUOTA_FORGET_S)


def gauge(port: int, name: str) -> float | None:
    """The value of an unlabelled gauge on a broker's /metrics (None: not there)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


@pytest.mark.kafka
@pytest.mark.timing
@pytest.mark.parametrize("scenario", REAL_SCENARIOS, ids=lambda s: str(s.label))
def test_the_emulator_copies_at_the_real_brokers_rate(kafka_cluster: Any, scenario: Scenario) -> None:
    topic = f"probe-{scenario.shape}-{int(scenario.rate)}"
    with kafka_cluster.admin() as port:
        leader, follower = free_pair(port, kafka_cluster.brokers)
        wait_until(lambda: sensors_quiet(kafka_cluster, leader, follower, scenario.rate / 100),
                   "the quota sensors to forget earlier copies")
        probe = KafkaProbe(kafka_cluster.internal_bootstrap, port)
        try:
            probe.prepare(topic, leader, scenario.size)
            real = summarize(probe.run(scenario, topic, leader, follower))
        finally:
            port.delete_topic(topic)
    emulated = summarize(run_emulator(scenario))
    # from the first bytes on: the time a loaded machine takes to start the fetcher is not the throttle's
    assert real["active_over_quota"] is not None
    assert abs(emulated["active_over_quota"] / real["active_over_quota"] - 1) <= ENGINE_AGREEMENT, (real, emulated)
