"""An accelerated sandbox advertises its time scale, and `watch` measures in sandbox seconds.

The sandbox runs on a `ScaledClock` (60 sandbox seconds per wall second) over a fake monotonic
clock that only the watch loop's sleeper moves, so the runs are deterministic and never wait.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import KREASSIGN, Ran
from kreassign.cli.runtime import Runtime
from kreassign.cli.watch_render import time_header
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.errors import ClusterError
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.configs import TIME_SCALE_KEY
from kreassign.sandbox.topics import TopicSpec
from kreassign.cluster.time_scale import TIME_SCALE_KEY as WATCH_TIME_SCALE_KEY
from kreassign.cluster.time_scale import read_time_scale
from fake_cluster import FakeCluster
pytestmark = pytest.mark.e2e
MB = 1_000_000
SPEED = 60.0
THROTTLE = 5 * MB


class WallClock:
    """A monotonic clock that moves only when the watch loop sleeps; each sleep lets the sandbox
    catch up to the new time, as its ticker would."""

    def __init__(self) -> None:
        self.now = 5000.0
        self.cluster: SandboxCluster | None = None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        assert self.cluster is not None
        self.cluster.catch_up()


@pytest.fixture
def wall() -> WallClock:
    return WallClock()


@pytest.fixture
def fast(sandbox_factory: Callable[..., SandboxCluster], wall: WallClock) -> SandboxCluster:
    """Three brokers at 60x, one 1.5 GB partition (with light writes) moving to a new broker."""
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("big", 1, 2, 1500 * MB, 100_000.0, 0.0)],
                         clock=ScaledClock(SPEED, monotonic=wall))
    wall.cluster = sb
    with connect(sb) as admin:
        (p,) = admin.describe_topics(["big"])
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        assert admin.alter_reassignments({p.tp: [p.replicas[0], spare]}) == {p.tp: None}
    return sb


def connect(sb: SandboxCluster) -> KafkaAdmin:
    config = build_client_config({}, bootstrap_server=sb.bootstrap)
    return KafkaAdmin.connect(dataclasses.replace(
        config, timeouts=AdminTimeouts(request_timeout_s=5.0, api_timeout_s=10.0, connect_timeout_s=1.0)))


def cli(sb: SandboxCluster, wall: WallClock, journals: Path, *args: str) -> Ran:
    return KREASSIGN.run(*args, "--bootstrap-server", sb.bootstrap, "--journal-dir", str(journals),
                         runtime=Runtime(clock=wall, sleep=wall.sleep), columns=160)


def progress(ran: Ran) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, ran.stdout.splitlines()) if e["event"] == "progress"]


def test_brokers_report_the_time_scale_as_a_read_only_static_config(fast: SandboxCluster,
                                                                      sandbox: SandboxCluster) -> None:
    assert TIME_SCALE_KEY == WATCH_TIME_SCALE_KEY
    for sb, expected in ((fast, "60"), (sandbox, "1")):  # a manual clock has no wall-clock speed
        with connect(sb) as admin:
            entry = admin.describe_broker_configs([1], [TIME_SCALE_KEY]).configs[1][TIME_SCALE_KEY]
            assert (entry.value, entry.source, entry.read_only) == (expected, "STATIC_BROKER_CONFIG", True)
            refused = admin.incremental_alter_configs({1: {TIME_SCALE_KEY: "1"}}).brokers[1]
            assert refused is not None and "Cannot update these configs dynamically" in refused.message
            assert read_time_scale(admin, [1, 2, 3]) == float(expected)


def test_watch_measures_rates_and_etas_in_sandbox_seconds(fast: SandboxCluster, wall: WallClock,
                                                          tmp_path: Path) -> None:
    journals = tmp_path / "j"
    assert cli(fast, wall, journals, "throttle", "set", "--throttle", str(THROTTLE)).exit_code == 0
    # the quota window starts empty, so let the first burst age out of the fitted window
    warm = cli(fast, wall, journals, "watch", "--interval", "10s", "--stop-after", "60s", "--output", "json")
    assert warm.exit_code == 3, warm.output[-2000:]
    wall_before = wall.now
    ran = cli(fast, wall, journals, "watch", "--interval", "10s", "--stop-after", "120s", "--output", "json")
    assert ran.exit_code == 3, ran.output[-2000:]
    # sleeps are wall seconds: 120 s of polls (the 10 s write-rate sample runs under the first ones)
    assert wall.now - wall_before == pytest.approx(120 / SPEED)
    last = progress(ran)[-1]
    assert last["time_scale"] == SPEED and last["at"] == pytest.approx(120)
    assert last["write_rates"]["known"] and last["write_rates"]["window_s"] == pytest.approx(10, rel=1e-3)
    # the leader quota also counts the in-sync follower's 0.1 MB/s, so the copy gets a bit less
    assert last["throughput_bps"] == pytest.approx(THROTTLE, rel=0.15)
    assert last["eta_model_s"] is not None
    lag = last["moves"][0]["lag_bytes"]
    assert last["eta_model_s"] == pytest.approx(lag / (THROTTLE - 2 * 100_000), rel=0.15)


def test_time_scale_option_overrides_what_the_cluster_reports(fast: SandboxCluster, wall: WallClock,
                                                              tmp_path: Path) -> None:
    journals = tmp_path / "j"
    assert cli(fast, wall, journals, "throttle", "set", "--throttle", str(THROTTLE)).exit_code == 0
    cli(fast, wall, journals, "watch", "--interval", "10s", "--stop-after", "60s", "--output", "json")
    # measured against the wall clock (scale 1), the sandbox seems 60 times faster than its throttle,
    # and the model, which knows the throttle, says the move never finishes
    naive = cli(fast, wall, journals, "watch", "--time-scale", "1", "--interval", "1s", "--stop-after", "2s",
                "--sample", "0", "--output", "json")
    last = progress(naive)[-1]
    assert last["time_scale"] == 1.0 and last["throughput_bps"] == pytest.approx(SPEED * THROTTLE, rel=0.15)
    assert last["eta_model_s"] is None
    plain = cli(fast, wall, journals, "watch", "--interval", "10s", "--stop-after", "30s")
    lines = plain.stdout.splitlines()
    assert lines[0] == "kreassign watch (sandbox time, x60)" and lines.count(lines[0]) == 1
    assert lines[1].startswith("[0.0s] ") and ", model " in lines[1] and not lines[1].endswith("model -")
    assert lines[-1].startswith("Timed out after 30s ")


def test_time_header_only_when_the_scale_is_not_one() -> None:
    assert time_header(1.0) is None
    assert time_header(60.0) == "kreassign watch (sandbox time, x60)"
    assert time_header(0.5) == "kreassign watch (sandbox time, x0.5)"


@pytest.mark.parametrize("configs, down, expected", [
    ({}, set(), 1.0),                                   # Kafka: no such config
    ({1: {TIME_SCALE_KEY: "60"}}, set(), 60.0),
    ({2: {TIME_SCALE_KEY: "30"}}, {1}, 30.0),           # the first broker does not answer
    ({1: {TIME_SCALE_KEY: "fast"}}, set(), 1.0),        # nonsense is ignored
    ({1: {TIME_SCALE_KEY: "-2"}}, set(), 1.0),
    ({1: {TIME_SCALE_KEY: "nan"}}, set(), 1.0),
])
def test_read_time_scale(configs: dict[int, dict[str, str]], down: set[int], expected: float) -> None:
    fake = FakeCluster([1, 2, 3])
    for b, entries in configs.items():
        fake.broker_configs[b].update(entries)
    fake.unreachable |= down
    assert read_time_scale(fake, [1, 2, 3]) == expected


def test_read_time_scale_is_one_when_nothing_answers() -> None:
    fake = FakeCluster([1, 2])
    fake.unreachable |= {1, 2}
    assert read_time_scale(fake, [1, 2]) == 1.0
    fake.unreachable.clear()
    fake.fail_next("describe_broker_configs", ClusterError("authorization failed"))
    assert read_time_scale(fake, [1, 2]) == 1.0
