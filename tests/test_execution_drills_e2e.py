"""Fault drills over TCP, on both engines (`live`): a paced `kreassign execute` in a real process
is killed with SIGKILL at a seeded wave, then `kreassign resume` (also a real process) finishes
the plan; or the resume is killed as well and `kreassign abort` undoes the run.

The tests read the runs' JSON events line by line. On the emulator, whose clock is manual, they
move sandbox time forward between events (`live.tick`), so the moves progress exactly when the
test says; real Kafka moves on in real time. At every event the test checks the cluster: every
move in flight is in its topic's throttled-replica lists with a rate on its receiving broker, and
no broker receives more than the pacing limit. At the end an independent client (confluent-kafka)
checks: every partition where the drill says, no throttle left, the operator's own rate exactly
as before, no lock marker.
"""
from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kreassign.cluster.model import TopicPartition
from kreassign.execute.lock import LOCK_KEY
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE

from live import LiveCli, events, independent_view, write_plan

pytestmark = [pytest.mark.e2e, pytest.mark.drill]

OPERATOR_RATE = "777777"
SIZE = 600_000
"""bytes per partition: one fetch of a new replica copies it (on real Kafka the throttle's quota
starts empty and lets the first fetch through whole)"""


def check(admin: Any, violations: list[str]) -> None:
    """Every move in flight throttled; at most one move into each broker.

    A move counts if it is in flight both before and after the configs are read: it was then in
    flight while they were read (a move that finished in between may already be off the lists).
    A move seen unthrottled is read again for up to 3 s and counts only if it stays so: the broker
    that answers DescribeConfigs may not have replayed the controller's latest change yet (one
    SIGCONTed a moment ago lags by seconds), while the brokers that copy apply it before the move."""
    for _ in range(6):
        found: list[str] = []
        _check_once(admin, found)
        unthrottled = [v for v in found if v.startswith("unthrottled")]
        if not unthrottled:
            break
        time.sleep(0.5)
    violations.extend(found)


def _check_once(admin: Any, violations: list[str]) -> None:
    before = admin.list_reassignments()
    topics = sorted({tp.topic for tp in before})
    configs = admin.describe_topic_configs(topics, [FOLLOWER_REPLICAS]).configs if topics else {}
    brokers = sorted({b for r in before.values() for b in r.adding})
    described = admin.describe_broker_configs(brokers, [FOLLOWER_RATE]) if brokers else None
    rates = described.configs if described is not None else {}
    # a broker that is down (a drill stopped it) cannot be read, by us or anyone: judged once back
    silent = set(described.errors) if described is not None else set()
    after = admin.list_reassignments()
    into: dict[int, int] = {}
    for tp, r in before.items():
        for b in r.adding:
            into[b] = into.get(b, 0) + 1
        if tp not in after:
            continue
        entry = configs.get(tp.topic, {}).get(FOLLOWER_REPLICAS)
        listed = set((entry.value or "").split(",")) if entry is not None else set()
        for b in r.adding:
            if b in silent:
                continue
            rate = rates.get(b, {}).get(FOLLOWER_RATE)
            if f"{tp.partition}:{b}" not in listed or rate is None or rate.value is None:
                violations.append(f"unthrottled {tp} -> {b}")
    violations.extend(f"{n} moves into broker {b}" for b, n in into.items() if n > 1)


def follow(proc: subprocess.Popen[str], on_event: Callable[[dict[str, Any]], bool]) -> None:
    """Hand each JSON event of the run to `on_event` until it returns False or the run ends."""
    for event in events(proc):
        if not on_event(event):
            return


def until_wave(live: Any, admin: Any, violations: list[str], wave: int | None, rng: random.Random) -> Callable[
        [dict[str, Any]], bool]:
    """An event handler: check the cluster, let a seeded bit of sandbox time pass at each poll, and
    stop at wave `wave` (None: the first wave the run submits)."""
    def on_event(event: dict[str, Any]) -> bool:
        check(admin, violations)
        if event["event"] == "wave" and (wave is None or event["wave"] == wave):
            return False
        if event["event"] == "progress":
            live.tick(rng.choice([0.2, 0.5, 1.0]))
        return True

    return on_event


def partition_of(name: str) -> TopicPartition:
    topic, partition = name.rsplit("-", 1)
    return TopicPartition(topic, int(partition))


def kill_9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def drill_cluster(live: Any, tmp_path: Path) -> tuple[str, dict[TopicPartition, tuple[int, ...]],
                                                     dict[TopicPartition, list[int]], str]:
    """Six partitions of two replicas on brokers 1-4 holding SIZE bytes each, the operator's own
    rate on broker 2, and a plan moving every partition onto the two brokers of 1-4 it is not on
    (broker 5 stays out). Returns the topic, the replicas before, the targets and the plan file."""
    topic = live.topic(assignment={p: [p % 4 + 1, (p + 1 + p // 4) % 4 + 1] for p in range(6)})
    for p in range(6):
        live.produce(topic, p, SIZE)
    with live.admin() as admin:
        current = {p.tp: p.replicas for p in admin.describe_topics([topic])}
        assert admin.incremental_alter_configs({2: {LEADER_RATE: OPERATOR_RATE}}).ok
    targets = {tp: list(reversed([b for b in (1, 2, 3, 4) if b not in r][:2])) for tp, r in current.items()}
    return topic, current, targets, write_plan(tmp_path, targets)


def paced(cli: LiveCli, plan: str) -> subprocess.Popen[str]:
    return cli.start("execute", "-f", plan, "--throttle", "1MB/s", "--max-moves-per-broker", "1",
                     "--interval", "1s", "-o", "json")


def paced_to_wave(live: Any, admin: Any, cli: LiveCli, plan: str, violations: list[str], wave: int | None,
                  rng: random.Random) -> subprocess.Popen[str]:
    """A paced execute followed (and checked) up to its wave `wave` (None: its first)."""
    execute = paced(cli, plan)
    follow(execute, until_wave(live, admin, violations, wave, rng))
    return execute


def assert_clean(live: Any, topic: str, where: dict[TopicPartition, list[int]]) -> None:
    """Checked by confluent-kafka: partitions where they should be (as sets: a reassignment keeps
    the target's order, a cancelled one the original's), no throttle left but the operator's, no
    lock marker."""
    seen = independent_view(live, [topic])
    assert {tp: sorted(r) for tp, r in seen.replicas.items()} == {tp: sorted(r) for tp, r in where.items()}
    assert seen.broker_throttles == {b: ({LEADER_RATE: OPERATOR_RATE} if b == 2 else {}) for b in live.brokers}
    assert seen.topic_throttles == {topic: {}}
    assert seen.markers == {}
    with live.admin() as admin:
        assert admin.list_reassignments() == {}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kill_9_of_a_paced_execute_then_resume(seed: int, live: Any, tmp_path: Path) -> None:
    rng = random.Random(seed)
    topic, _current, targets, plan = drill_cluster(live, tmp_path)
    cli = LiveCli(live, tmp_path)
    violations: list[str] = []
    kill_at = rng.randint(1, 3)
    with live.admin() as admin:
        execute = paced(cli, plan)
        follow(execute, until_wave(live, admin, violations, kill_at, rng))
        kill_9(execute)
        assert LOCK_KEY in admin.read_markers([LOCK_KEY])  # the dead run's marker is still there

        resume = cli.start("resume", "-f", plan, "-o", "json")
        follow(resume, until_wave(live, admin, violations, -1, rng))  # to its end
        assert resume.wait(timeout=120) == 0, resume.stderr.read() if resume.stderr else ""
        assert resume.stderr is not None and "Took over the execution lock" in resume.stderr.read()
    assert violations == []
    assert_clean(live, topic, targets)


def test_kill_9_of_execute_and_of_its_resume_then_abort(live: Any, tmp_path: Path) -> None:
    """The second drill: the resume dies too, and abort undoes what is left. Abort cancels the
    moves in flight (they go back) and leaves finished ones where they are."""
    rng = random.Random(3)
    topic, current, targets, plan = drill_cluster(live, tmp_path)
    cli = LiveCli(live, tmp_path)
    violations: list[str] = []
    with live.admin() as admin:
        execute = paced(cli, plan)
        follow(execute, until_wave(live, admin, violations, None, rng))
        kill_9(execute)
        resume = cli.start("resume", "-f", plan, "-o", "json")
        follow(resume, until_wave(live, admin, violations, None, rng))
        kill_9(resume)
        moving = set(admin.list_reassignments())
    aborted = cli.run("abort", "-f", plan, "-o", "json")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert violations == []
    report = json.loads(aborted.stdout)
    cancelled = {partition_of(name) for name in report["cancelled"]}
    not_back = {partition_of(name): r for name, r in report["completed_before_abort"].items()}
    # What moved at the last kill was cancelled, unless it finished before the abort reached it
    # (real Kafka goes on copying between the two); nothing else was moving.
    assert cancelled <= moving <= cancelled | set(not_back)
    assert not_back == {tp: list(current[tp]) for tp in not_back}
    with live.admin() as admin:
        now = {p.tp: p.replicas for p in admin.describe_topics([topic])}
    for tp in current:
        if tp in cancelled:  # a cancel keeps replicas - adding, in the order of target + removing (KRaft)
            assert sorted(now[tp]) == sorted(current[tp]) and (now[tp] != current[tp]) == (tp in not_back)
        elif tp in not_back:
            assert now[tp] == tuple(targets[tp])
        else:
            assert now[tp] == current[tp]
    assert_clean(live, topic, {tp: list(now[tp]) for tp in current})
