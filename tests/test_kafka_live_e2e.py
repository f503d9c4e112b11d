"""End to end: the real CLI, in a subprocess, over TCP, against both engines (`live`: the emulator
and real Kafka brokers).

A move of HOLD_BYTES under a HOLD_RATE throttle stays in flight until a test raises the throttle
and lets it finish. Client timeouts are shortened through --command-config so that a stopped
broker is reported within seconds.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import KREASSIGN

from kreassign.cluster.kafka_json import format_reassignment
from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica

from live import HOLD_BYTES, HOLD_RATE, RUN_RATE, LiveCli, rates, replicas, write_plan

pytestmark = pytest.mark.e2e

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
ROLLBACK = "\n\nSave this to use as the --reassignment-json-file option during rollback\n"
WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
           "the throttle is removed.\n")


@pytest.fixture
def cli(live: Any, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    runner = LiveCli(live, tmp_path)

    def run(*argv: str, kafka_style: bool = True) -> subprocess.CompletedProcess[str]:
        return runner.run(*argv, kafka_style=kafka_style)

    return run


def test_e2e_execute_verify_complete_restores_the_operators_rate(
        live: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    topic = live.topic(assignment={0: [1, 2, 3]})
    live.produce(topic, 0, HOLD_BYTES)
    with live.admin() as admin:
        assert admin.incremental_alter_configs({1: {FOLLOWER: "12345"}}).ok
    tp = TopicPartition(topic, 0)
    plan = write_plan(tmp_path, {tp: [1, 2, 4]})
    with live.admin() as admin:
        dirs = {r: d.log_dir for r, d in admin.log_dir_sizes([1, 2, 3], partitions=[tp]).replicas.items()}
    rollback = [PartitionTarget(topic, 0, (1, 2, 3), tuple(dirs[TopicPartitionReplica(topic, 0, b)] for b in (1, 2, 3)))]

    done = cli("--reassignment-json-file", plan, "--execute", "--throttle", str(HOLD_RATE))
    assert done.returncode == 0, done.stdout + done.stderr
    # the rollback JSON names each replica's log dir, as Kafka 4.2+ does (KAFKA-19582)
    assert done.stdout == ("Current partition replica assignment\n\n" + format_reassignment(rollback)
                           + ROLLBACK + WARNING + f"The inter-broker throttle limit was set to {HOLD_RATE} B/s\n"
                           f"Successfully started partition reassignment for {topic}-0\n")
    assert {b for b, v in rates(live).items() if v.get(LEADER) == str(HOLD_RATE)} == {1, 2, 3, 4}

    status = cli("--reassignment-json-file", plan, "--verify")
    assert status.stdout == f"Status of partition reassignment:\nReassignment of partition {topic}-0 is still in progress.\n\n"
    listed = cli("--list")
    assert listed.stdout.startswith(f"Current partition reassignments:\n{topic}-0: replicas: ")
    exit_status = cli("verify", "--reassignment-json-file", plan, "--exit-status", kafka_style=False)
    assert exit_status.returncode == 3

    raised = cli("--reassignment-json-file", plan, "--execute", "--additional", "--throttle", str(RUN_RATE))
    assert raised.returncode == 0, raised.stdout + raised.stderr
    live.finish_moves()
    status = cli("--reassignment-json-file", plan, "--verify")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout == (f"Status of partition reassignment:\nReassignment of partition {topic}-0 is completed.\n\n"
                             "Clearing broker-level throttles on brokers 1,2,3,4,5\n"
                             f"Clearing topic-level throttles on topic {topic}\n")
    assert "on broker 1: follower.replication.throttled.rate=12345" in status.stderr
    assert rates(live) == {b: ({FOLLOWER: "12345"} if b == 1 else {}) for b in live.brokers}
    assert replicas(live, topic) == (1, 2, 4)
    assert cli("--list").stdout == "No partition reassignments found.\n"


def test_e2e_cancel(live: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    topic = live.topic(assignment={0: [2, 3, 4], 1: [3, 4, 5]})
    live.produce(topic, 1, HOLD_BYTES)
    plan = write_plan(tmp_path, {TopicPartition(topic, 1): [3, 4, 1]})
    assert cli("--reassignment-json-file", plan, "--execute", "--throttle", str(HOLD_RATE)).returncode == 0
    done = cli("--reassignment-json-file", plan, "--cancel")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (f"Successfully cancelled partition reassignment for: {topic}-1\n"
                           "None of the specified partition moves are active.\n"
                           "Clearing broker-level throttles on brokers 1,2,3,4,5\n"
                           f"Clearing topic-level throttles on topic {topic}\n")
    assert replicas(live, topic, 1) == (3, 4, 5)
    with live.admin() as admin:
        assert admin.list_reassignments() == {}
    assert all(not v for v in rates(live).values())


def test_e2e_broker_stopped_mid_move_is_cleared_by_resume(
        live: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    topic = live.topic(assignment={0: [1, 2, 3]})
    live.produce(topic, 0, 1_000_000)
    plan = write_plan(tmp_path, {TopicPartition(topic, 0): [1, 2, 4]})
    assert cli("--reassignment-json-file", plan, "--execute", "--throttle", str(RUN_RATE)).returncode == 0
    live.stop_broker(3)
    live.finish_moves()

    status = cli("--reassignment-json-file", plan, "--verify")
    assert status.returncode == 1, status.stdout + status.stderr
    assert f"Reassignment of partition {topic}-0 is completed." in status.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3,4,5\n" in status.stdout
    assert "broker 3 did not answer" in status.stderr and "still set" in status.stderr
    journal = json.loads(next((tmp_path / "journal").rglob("*.json")).read_text())
    assert journal["state"] == "clearing" and list(journal["pending"]["brokers"]) == ["3"]

    live.start_broker(3)
    resumed = cli("resume", kafka_style=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "(clearing -> finished)" in resumed.stdout
    assert all(not v for v in rates(live).values())


def test_e2e_unknown_broker_and_unreachable_bootstrap(live: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    topic = live.topic(assignment={0: [1, 2, 3]})
    plan = write_plan(tmp_path, {TopicPartition(topic, 0): [1, 2, 9]})
    done = cli("--reassignment-json-file", plan, "--execute", "--throttle", "1000")
    assert (done.returncode, done.stdout) == (1, "Error: Unknown broker id 9\n")
    assert all(not v for v in rates(live).values())
    nowhere = KREASSIGN.subprocess("list", "--bootstrap-server", "127.0.0.1:1", "--request-timeout", "2s", timeout=60)
    assert nowhere.returncode == 5 and "Could not reach any broker at 127.0.0.1:1" in nowhere.stderr


def test_e2e_brokers_report_the_rates_when_execute_and_throttle_set_return(
        live: Any, cli: Callable[..., Any], tmp_path: Path) -> None:
    """A broker applies a config change a moment after the controller accepted it (seconds on a
    loaded machine): `execute` submits, and `throttle set` returns, only once each changed broker
    reads its new rates back, so one read right after (no retry loop: that is the point) sees them."""
    topic = live.topic(assignment={0: [1, 2, 3]})
    live.produce(topic, 0, HOLD_BYTES)
    plan = write_plan(tmp_path, {TopicPartition(topic, 0): [1, 2, 4]})
    started = cli("execute", "-f", plan, "--throttle", str(HOLD_RATE), kafka_style=False)
    assert started.returncode == 0, started.stdout + started.stderr
    assert "had not applied" not in started.stdout + started.stderr
    held = {LEADER: str(HOLD_RATE), FOLLOWER: str(HOLD_RATE)}
    assert rates(live) == {b: held if b in (1, 2, 3, 4) else {} for b in live.brokers}

    changed = cli("throttle", "set", "--throttle", "2", kafka_style=False)
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "had not applied" not in changed.stdout + changed.stderr
    shown = cli("throttle", "show", "-o", "json", kafka_style=False)
    assert [(b["broker"], b["leader_rate"], b["follower_rate"]) for b in json.loads(shown.stdout)["brokers"]] == [
        (b, 2, 2) if b in (1, 2, 3, 4) else (b, None, None) for b in live.brokers]
