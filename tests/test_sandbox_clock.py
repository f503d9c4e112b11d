"""The emulator keeps its own clock or says so (issue 27 item 7): a scaled clock never runs
ahead of the work its engine did; the time it gives up is measured and `sandbox status` shows
it. Wall time, engine work time and the engine are all injected: nothing here reads the wall
clock."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import Kreassign
from kreassign.sandbox.clock import ClockKeeper, ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.daemon import PID_FILE, DaemonInfo
from kreassign.sandbox.topics import TopicSpec


class Counter:
    """A clock that moves only when told (`wall`), or by `step` at every reading (`work`)."""

    def __init__(self, step: float = 0.0) -> None:
        self.t = 0.0
        self.step = step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def sandbox(wall: Counter, speed: float = 60.0) -> SandboxCluster:
    return SandboxCluster(brokers=2, racks=0, topics=[TopicSpec("t", 1, 2, 0, 0.0)],
                          clock=ScaledClock(speed, monotonic=wall))


def test_a_clock_the_engine_cannot_follow_is_held_to_the_work_done_then_slowed() -> None:
    wall = Counter()
    sb = sandbox(wall)
    assert sb.server.keeper is not None
    # each engine tick (0.1 sandbox s) costs one unit of work; a slice may spend 4.5 units:
    # 4 ticks, 0.4 sandbox s, per slice, against the 60 s one wall second asks for
    wall.t += 1.0
    assert sb.server.keep_up(budget_s=4.5, work=Counter(1.0)) is True
    assert sb.now == pytest.approx(0.4)
    assert sb.clock.now() == pytest.approx(1.4)  # the clock waits, one quota window (1 s) ahead
    assert sb.clock.given_up == pytest.approx(58.6) and sb.server.keeper.lag_s == pytest.approx(59.6)
    for beat in range(2, 4):
        wall.t += 1.0
        assert sb.server.keep_up(budget_s=4.5, work=Counter(1.0)) is True
        assert sb.now == pytest.approx(0.4 * beat) and sb.clock.now() == pytest.approx(sb.now + 1.0)
        assert sb.clock.given_up == pytest.approx(58.6 + (beat - 1) * 59.6)
    assert sb.server.keeper.kept_speed() == pytest.approx(60 - (58.6 + 2 * 59.6) / 3)
    assert sb.clock_status() == {"speed": 60.0, "running_speed": 60.0, "kept_speed": round(60 - 177.8 / 3, 3),
                                 "kept_share": round((60 - 177.8 / 3) / 60, 4), "given_up_s": pytest.approx(177.8),
                                 "lag_s": pytest.approx(60.6)}
    for _ in range(7):  # a whole window (10 s) kept 0.5x: the clock slows to 90% of that
        wall.t += 1.0
        sb.server.keep_up(budget_s=4.5, work=Counter(1.0))
    kept = 60 - (58.6 + 9 * 59.6) / 10
    assert sb.clock.speed == pytest.approx(0.9 * kept) == pytest.approx(0.45)
    assert sb.engine.time_scale == pytest.approx(0.45)  # what kreassign.sandbox.time.scale reports
    given_up = sb.clock.given_up
    for _ in range(5):  # an engine that keeps up with the slower clock: nothing more is given up
        wall.t += 1.0
        sb.server.keep_up(budget_s=4.5, work=Counter(0.5))
    assert sb.clock.given_up == given_up
    assert sb.clock.now() == pytest.approx(sb.now)  # and the second it was behind is made up
    assert sb.clock_status()["running_speed"] == 0.45
    sb.stop()


def test_a_moment_behind_is_made_up_not_given_up() -> None:
    wall = Counter()
    sb = sandbox(wall, speed=1.0)
    wall.t += 0.5  # a slice that ran out 0.3 s short (a preempted thread), within one quota window
    assert sb.server.keep_up(budget_s=2.5, work=Counter(1.0)) is True
    assert sb.now == pytest.approx(0.2) and sb.clock.given_up == 0.0
    assert sb.server.keep_up(budget_s=4.5, work=Counter(1.0)) is False  # the next slice catches up
    assert sb.now == pytest.approx(sb.clock.now()) and sb.clock.given_up == 0.0
    sb.stop()


def test_a_clock_the_engine_follows_gives_nothing_up() -> None:
    wall = Counter()
    sb = sandbox(wall, speed=10.0)
    for _ in range(3):
        wall.t += 1.0
        assert sb.server.keep_up(budget_s=4.5, work=Counter(0.0)) is False
    assert sb.now == pytest.approx(30.0)
    assert sb.clock.now() == pytest.approx(30.0) and sb.clock.given_up == 0.0
    assert sb.clock_status() == {"speed": 10.0, "running_speed": 10.0, "kept_speed": 10.0, "kept_share": 1.0,
                                 "given_up_s": 0.0, "lag_s": 0.0}
    assert sb.engine.time_scale == 10.0
    sb.stop()


def test_the_kept_speed_is_measured_over_the_last_seconds_only() -> None:
    wall = Counter()
    clock = ScaledClock(60.0, monotonic=wall)
    keeper = ClockKeeper(clock, window_s=10.0)
    wall.t += 1.0  # one second at 57.6x (3.4 s behind: 2.4 sandbox s given up, 1 s allowed) ...
    keeper.beat(clock.now() - 3.4, behind=True)
    assert keeper.kept_speed() == pytest.approx(57.6)
    for _ in range(12):  # ... then 12 s at full speed: over 10 s that was 59.76x, not slow enough to
        wall.t += 1.0     # slow down, and the window has since forgotten it
        keeper.beat(clock.now(), behind=False)
    assert keeper.kept_speed() == pytest.approx(60.0) and clock.speed == 60.0
    assert clock.given_up == pytest.approx(2.4)


def test_a_slower_clock_stays_continuous() -> None:
    wall = Counter()
    clock = ScaledClock(60.0, monotonic=wall)
    wall.t = 2.0
    clock.slow_to(6.0)
    assert clock.now() == pytest.approx(120.0)
    wall.t = 3.0
    assert clock.now() == pytest.approx(126.0) and clock.asked == 60.0


def write_status(tmp_path: Path, clock: dict[str, Any]) -> str:
    state = tmp_path / "sb"
    state.mkdir()
    DaemonInfo(os.getpid(), "127.0.0.1:1", {1: 1}, str(state), 60.0, "2026-11-27T00:00:00+00:00", "",
               {"kafka_version": "4.4.0", "clock": clock}).write(state / PID_FILE)
    return str(state)


def test_status_shows_the_speed_kept_and_the_time_given_up(tmp_path: Path, kreassign: Kreassign) -> None:
    state = write_status(tmp_path, {"speed": 60.0, "running_speed": 12.8, "kept_speed": 14.2, "kept_share": 0.2367,
                                    "given_up_s": 912.5, "lag_s": 2.5})
    code, out, _ = kreassign.run("sandbox", "status", "--state-dir", state)
    assert code == 0
    assert ("speed:     60x asked, runs at 12.8x (14.2x kept over the last seconds): the engine cannot do more "
            "work on this machine, so sandbox time waits for it (912.5 sandbox s given up since start)\n") in out
    code, out, _ = kreassign.run("sandbox", "status", "--state-dir", state, "-o", "json")
    assert json.loads(out)["extra"]["clock"]["kept_speed"] == 14.2


def test_status_of_a_sandbox_that_keeps_its_speed(tmp_path: Path, kreassign: Kreassign) -> None:
    state = write_status(tmp_path, {"speed": 60.0, "running_speed": 60.0, "kept_speed": 60.0, "kept_share": 1.0,
                                    "given_up_s": 0.0, "lag_s": 0.0})
    code, out, _ = kreassign.run("sandbox", "status", "--state-dir", state)
    assert code == 0 and "speed:     60x\n" in out
