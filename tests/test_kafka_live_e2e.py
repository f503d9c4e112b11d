"""End to end: the real CLI, in a subprocess, against the sandbox cluster over TCP.

The sandbox runs on a manual clock, so a reassignment stays in progress until the test advances
sandbox time. Client timeouts are shortened through --command-config so that a stopped broker is
reported within seconds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kreassign.cluster.kafka_json import format_reassignment
from kreassign.cluster.model import TopicPartition

pytestmark = pytest.mark.e2e

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
ROLLBACK = "\n\nSave this to use as the --reassignment-json-file option during rollback\n"
WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
           "the throttle is removed.\n")


@pytest.fixture
def cli(sandbox: Any, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    config = tmp_path / "client.properties"
    config.write_text("request.timeout.ms=1500\ndefault.api.timeout.ms=3000\n")
    env = {**os.environ, "KREASSIGN_JOURNAL_DIR": str(tmp_path / "journal")}

    def run(*argv: str, kafka_style: bool = True) -> subprocess.CompletedProcess[str]:
        common = ["--bootstrap-server", sandbox.bootstrap, "--command-config", str(config)]
        args = [*common, *argv] if kafka_style else [argv[0], *common, *argv[1:]]
        return subprocess.run([sys.executable, "-m", "kreassign.cli.main", *args], capture_output=True,
                              text=True, env=env, timeout=120, check=False)

    return run


@pytest.fixture
def admin(sandbox: Any) -> Iterator[Any]:
    from kreassign.cluster.admin import open_admin

    with open_admin(sandbox.bootstrap) as port:
        yield port


def write_plan(tmp_path: Path, targets: dict[TopicPartition, list[int]], name: str = "plan.json") -> str:
    path = tmp_path / name
    path.write_text(format_reassignment(targets))
    return str(path)


def rates(admin: Any) -> dict[int, dict[str, str]]:
    configs = admin.describe_broker_configs(range(1, 7), [LEADER, FOLLOWER]).configs
    return {b: {k: e.value for k, e in v.items() if e.value} for b, v in configs.items()}


def moved(replicas: tuple[int, ...]) -> list[int]:
    spare = next(b for b in range(1, 7) if b not in replicas)
    return [*replicas[:-1], spare]


def test_e2e_execute_verify_complete_restores_the_operators_rate(
        sandbox: Any, cli: Callable[..., Any], admin: Any, tmp_path: Path) -> None:
    part = admin.describe_topics(["orders"])[0]
    target = moved(part.replicas)
    operator_broker = part.replicas[0]
    assert admin.incremental_alter_configs({operator_broker: {FOLLOWER: "12345"}}).ok
    plan = write_plan(tmp_path, {part.tp: target})

    done = cli("--reassignment-json-file", plan, "--execute", "--throttle", "10000000")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ("Current partition replica assignment\n\n" + format_reassignment({part.tp: part.replicas})
                           + ROLLBACK + WARNING + "The inter-broker throttle limit was set to 10000000 B/s\n"
                           "Successfully started partition reassignment for orders-0\n")
    involved = set(part.replicas) | set(target)
    assert {b for b, v in rates(admin).items() if v.get(LEADER) == "10000000"} == involved

    status = cli("--reassignment-json-file", plan, "--verify")
    assert status.stdout == "Status of partition reassignment:\nReassignment of partition orders-0 is still in progress.\n\n"
    listed = cli("--list")
    assert listed.stdout.startswith("Current partition reassignments:\norders-0: replicas: ")
    exit_status = cli("verify", "--reassignment-json-file", plan, "--exit-status", kafka_style=False)
    assert exit_status.returncode == 3

    sandbox.advance(600)
    status = cli("--reassignment-json-file", plan, "--verify")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout == ("Status of partition reassignment:\nReassignment of partition orders-0 is completed.\n\n"
                             "Clearing broker-level throttles on brokers 1,2,3,4,5,6\n"
                             "Clearing topic-level throttles on topic orders\n")
    assert f"on broker {operator_broker}: follower.replication.throttled.rate=12345" in status.stderr
    assert rates(admin) == {b: ({FOLLOWER: "12345"} if b == operator_broker else {}) for b in range(1, 7)}
    assert admin.describe_topics(["orders"])[0].replicas == tuple(target)
    assert cli("--list").stdout == "No partition reassignments found.\n"


def test_e2e_cancel(sandbox: Any, cli: Callable[..., Any], admin: Any, tmp_path: Path) -> None:
    part = admin.describe_topics(["orders"])[1]
    plan = write_plan(tmp_path, {part.tp: moved(part.replicas)})
    assert cli("--reassignment-json-file", plan, "--execute", "--throttle", "1000000").returncode == 0
    done = cli("--reassignment-json-file", plan, "--cancel")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ("Successfully cancelled partition reassignment for: orders-1\n"
                           "None of the specified partition moves are active.\n"
                           "Clearing broker-level throttles on brokers 1,2,3,4,5,6\n"
                           "Clearing topic-level throttles on topic orders\n")
    assert admin.describe_topics(["orders"])[1].replicas == part.replicas
    assert admin.list_reassignments() == {} and all(not v for v in rates(admin).values())


def test_e2e_broker_stopped_mid_move_is_cleared_by_resume(
        sandbox: Any, cli: Callable[..., Any], admin: Any, tmp_path: Path) -> None:
    part = admin.describe_topics(["payments"])[0]
    target = moved(part.replicas)
    removed = part.replicas[-1]
    plan = write_plan(tmp_path, {part.tp: target})
    assert cli("--reassignment-json-file", plan, "--execute", "--throttle", "10000000").returncode == 0
    sandbox.stop_broker(removed)
    sandbox.advance(600)

    status = cli("--reassignment-json-file", plan, "--verify")
    assert status.returncode == 1
    assert "Reassignment of partition payments-0 is completed." in status.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3,4,5,6\n" in status.stdout
    assert f"broker {removed} did not answer" in status.stderr and "still set" in status.stderr
    journal = json.loads(next((tmp_path / "journal").rglob("*.json")).read_text())
    assert journal["state"] == "clearing" and list(journal["pending"]["brokers"]) == [str(removed)]

    sandbox.start_broker(removed)
    resumed = cli("resume", kafka_style=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "(clearing -> finished)" in resumed.stdout
    assert all(not v for v in rates(admin).values())


def test_e2e_unknown_broker_and_unreachable_bootstrap(cli: Callable[..., Any], admin: Any, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {TopicPartition("orders", 0): [1, 2, 9]})
    done = cli("--reassignment-json-file", plan, "--execute", "--throttle", "1000")
    assert (done.returncode, done.stdout) == (1, "Error: Unknown broker id 9\n")
    assert all(not v for v in rates(admin).values())
    nowhere = subprocess.run([sys.executable, "-m", "kreassign.cli.main", "list", "--bootstrap-server",
                              "127.0.0.1:1", "--request-timeout", "2s"], capture_output=True, text=True, timeout=60,
                             check=False)
    assert nowhere.returncode == 5 and "Could not reach any broker at 127.0.0.1:1" in nowhere.stderr
