"""The execution lock over TCP on both engines (`live`): while a paced `kreassign execute` runs
(a real process, its move held in flight by a HOLD_RATE throttle, and on the emulator by its
manual clock), a second execute is refused, whether it shares the first one's journal dir (the
local lock file) or not (the marker in the cluster's group offsets); cancel is refused; `list`
names the holder; and `kreassign abort` stops the run, then cancels and restores.
"""
from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kreassign.cluster.model import TopicPartition
from kreassign.execute.lock import LOCK_KEY, STOP_KEY

from live import HOLD_BYTES, HOLD_RATE, LiveCli, events, independent_view, rates, write_plan

pytestmark = pytest.mark.e2e

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"


@pytest.fixture
def running(live: Any, tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str], LiveCli]]:
    """A paced execute of a two-partition plan whose first wave (partition 0, HOLD_BYTES) stays in
    flight and whose second (partition 1, also sent by broker 1) waits for it: the run keeps
    polling and holds the lock. Yields the topic, the plan, the process and its CLI."""
    topic = live.topic(assignment={0: [1, 2, 3], 1: [1, 3, 5]})
    live.produce(topic, 0, HOLD_BYTES)
    with live.admin() as admin:
        assert admin.incremental_alter_configs({1: {LEADER: "999"}, 5: {FOLLOWER: "12345"}}).ok
    plan = write_plan(tmp_path, {TopicPartition(topic, 0): [1, 2, 4], TopicPartition(topic, 1): [1, 3, 2]})
    cli = LiveCli(live, tmp_path)
    proc = cli.start("execute", "-f", plan, "--throttle", str(HOLD_RATE), "--max-moves-per-broker", "1",
                     "--interval", "1s", "-o", "json")
    try:
        first = next(e for e in events(proc) if e["event"] == "wave")
        assert first["partitions"] == [f"{topic}-0"]
        yield topic, plan, proc, cli
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_e2e_a_second_run_is_refused_and_abort_stops_the_live_one(
        live: Any, running: tuple[str, str, subprocess.Popen[str], LiveCli], tmp_path: Path) -> None:
    topic, plan, proc, cli = running
    other = write_plan(tmp_path, {TopicPartition(topic, 1): [1, 3, 4]}, name="other.json")
    holder = f"`kreassign execute` (host {socket.gethostname()}, pid {proc.pid}, since "
    held = ("; its process is running on this host. Wait for it, or stop it with `kreassign abort` on its "
            "journal\n")
    (tmp_path / "elsewhere").mkdir()
    for second in (cli, LiveCli(live, tmp_path / "elsewhere")):  # the same journal dir, and another one
        refused = second.run("execute", "-f", other, "--throttle", "1000", "--additional")
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.startswith("Error: another run holds the execution lock of this cluster: " + holder)
        assert refused.stderr.endswith(held)
    assert rates(live)[5] == {FOLLOWER: "12345"}  # the refused runs changed nothing

    cancel = cli.run("cancel", "-f", plan)
    assert cancel.returncode == 1 and cancel.stderr.startswith("Error: " + holder)
    assert "would go on submitting after a cancel" in cancel.stderr
    listed = cli.run("list")
    assert f"Execution lock held by {holder}" in listed.stderr
    assert json.loads(cli.run("list", "-o", "json").stdout)["execution_lock"]["pid"] == proc.pid
    verified = cli.run("verify", "-f", plan)
    assert verified.returncode == 0 and "Clearing" not in verified.stdout  # the run clears them itself

    aborted = cli.run("abort", "-f", plan)
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert aborted.stderr.startswith(f"Asked {holder}")
    assert "The running execute stopped; nothing more is submitted.\n" in aborted.stderr
    assert aborted.stdout == (f"Cancelled partition reassignments for: {topic}-0\n"
                              "Restoring broker-level throttles on brokers 1,2,3,4\n"
                              f"Restoring topic-level throttles on topic {topic}\n")
    assert proc.wait(timeout=60) == 1
    assert proc.stderr is not None and "`kreassign abort` asked this run to stop" in proc.stderr.read()

    seen = independent_view(live, [topic])
    assert seen.replicas == {TopicPartition(topic, 0): (1, 2, 3), TopicPartition(topic, 1): (1, 3, 5)}
    assert seen.broker_throttles == {1: {LEADER: "999"}, 2: {}, 3: {}, 4: {}, 5: {FOLLOWER: "12345"}}
    assert seen.topic_throttles == {topic: {}} and seen.markers == {}
    with live.admin() as admin:
        assert admin.list_reassignments() == {} and admin.read_markers([LOCK_KEY, STOP_KEY]) == {}
