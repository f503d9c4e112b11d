"""Fault drills over TCP: a paced `kreassign execute` in a real process is killed with SIGKILL
at a seeded wave, then `kreassign resume` (also a real process) finishes the plan.

The sandbox runs on a manual clock: the test reads the runs' JSON events line by line and moves
sandbox time forward only between them, so the moves progress exactly when the test says and
nothing waits on wall-clock time. At every event the test checks the cluster: every move in flight
is in its topic's throttled-replica lists with a rate on its receiving broker, and no broker
receives more than the pacing limit. At the end: the plan's replicas, no throttle left, the
operator's own rate back, no lock marker.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kreassign.cluster.kafka_json import format_reassignment
from kreassign.cluster.model import TopicPartition
from kreassign.execute.lock import LOCK_KEY
from kreassign.sandbox.topics import TopicSpec
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

pytestmark = [pytest.mark.e2e, pytest.mark.drill]

OPERATOR_RATE = "777777"


def cli(sandbox: Any, tmp_path: Path, *argv: str) -> subprocess.Popen[str]:
    config = tmp_path / "client.properties"
    config.write_text("request.timeout.ms=2000\ndefault.api.timeout.ms=4000\n")
    env = {**os.environ, "KREASSIGN_JOURNAL_DIR": str(tmp_path / "journal")}
    return subprocess.Popen([sys.executable, "-m", "kreassign.cli.main", argv[0], "--bootstrap-server",
                             sandbox.bootstrap, "--command-config", str(config), *argv[1:]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def check(admin: Any, violations: list[str]) -> None:
    """Every move in flight throttled; at most one move into each broker."""
    in_flight = admin.list_reassignments()
    topics = sorted({tp.topic for tp in in_flight})
    configs = admin.describe_topic_configs(topics, [FOLLOWER_REPLICAS]).configs if topics else {}
    brokers = sorted({b for r in in_flight.values() for b in r.adding})
    rates = admin.describe_broker_configs(brokers, [FOLLOWER_RATE]).configs if brokers else {}
    into: dict[int, int] = {}
    for tp, r in in_flight.items():
        entry = configs.get(tp.topic, {}).get(FOLLOWER_REPLICAS)
        listed = set((entry.value or "").split(",")) if entry is not None else set()
        for b in r.adding:
            into[b] = into.get(b, 0) + 1
            rate = rates.get(b, {}).get(FOLLOWER_RATE)
            if f"{tp.partition}:{b}" not in listed or rate is None or rate.value is None:
                violations.append(f"unthrottled {tp} -> {b}")
    violations.extend(f"{n} moves into broker {b}" for b, n in into.items() if n > 1)


def follow(proc: subprocess.Popen[str], on_event: Callable[[dict[str, Any]], bool]) -> None:
    """Hand each JSON event of the run to `on_event` until it returns False or the run ends."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{") and not on_event(json.loads(line)):
            return


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kill_9_of_a_paced_execute_then_resume(seed: int, sandbox_factory: Callable[..., Any], tmp_path: Path) -> None:
    from kreassign.cluster.admin import open_admin

    rng = random.Random(seed)
    sandbox = sandbox_factory(brokers=4, racks=0, topics=[TopicSpec("t", 6, 2, 2_000_000, 100.0)])
    with open_admin(sandbox.bootstrap) as admin:
        current = {p.tp: p.replicas for p in admin.describe_topics(["t"])}
        targets = {tp: list(reversed([b for b in (1, 2, 3, 4) if b not in r][:2])) for tp, r in current.items()}
        plan = tmp_path / "plan.json"
        plan.write_text(format_reassignment(targets))
        admin.incremental_alter_configs({2: {LEADER_RATE: OPERATOR_RATE}})
        violations: list[str] = []
        kill_at = rng.randint(1, 3)

        execute = cli(sandbox, tmp_path, "execute", "-f", str(plan), "--throttle", "1MB/s",
                      "--max-moves-per-broker", "1", "--interval", "1s", "-o", "json")

        def on_execute(event: dict[str, Any]) -> bool:
            check(admin, violations)
            if event["event"] == "wave" and event["wave"] == kill_at:
                return False
            if event["event"] == "progress":
                sandbox.advance(rng.choice([0.5, 1.0, 3.0]))
            return True

        follow(execute, on_execute)
        execute.send_signal(signal.SIGKILL)
        execute.wait(timeout=30)
        assert execute.returncode == -signal.SIGKILL
        assert LOCK_KEY in admin.read_markers([LOCK_KEY])  # the dead run's marker is still there

        resume = cli(sandbox, tmp_path, "resume", "-f", str(plan), "-o", "json")

        def on_resume(event: dict[str, Any]) -> bool:
            check(admin, violations)
            if event["event"] == "progress":
                sandbox.advance(3.0)
            return True

        follow(resume, on_resume)
        assert resume.wait(timeout=60) == 0, resume.stderr.read() if resume.stderr else ""
        assert resume.stderr is not None and "Took over the execution lock" in resume.stderr.read()
        assert violations == []
        final = {p.tp: list(p.replicas) for p in admin.describe_topics(["t"])}
        assert {tp: sorted(r) for tp, r in final.items()} == {tp: sorted(r) for tp, r in targets.items()}
        rates = admin.describe_broker_configs([1, 2, 3, 4], [LEADER_RATE, FOLLOWER_RATE]).configs
        assert {b: {k: e.value for k, e in c.items() if e.value is not None and e.source.startswith("DYNAMIC")}
                for b, c in rates.items()} == {1: {}, 2: {LEADER_RATE: OPERATOR_RATE}, 3: {}, 4: {}}
        lists = admin.describe_topic_configs(["t"], [LEADER_REPLICAS, FOLLOWER_REPLICAS]).configs["t"]
        assert all(not e.value for e in lists.values())
        assert admin.read_markers([LOCK_KEY]) == {}
        assert TopicPartition("t", 0) in final
