"""Measured write rates end to end: `estimate --bootstrap-server` samples the sandbox's writes
(its load generator) and its ETA lands within 5% of the measured completion of the same plan
executed under the same throttle, for a leader-bound and a follower-bound plan; a move whose
writes exceed its share of the throttle is named before it starts, indeed stalls, and finishes
at the throttle the estimate names. Sandbox time only: a manual clock the commands advance.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_helpers import KREASSIGN, Ran
from kreassign.cli.runtime import Runtime
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import build_client_config
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timing]
MB = 1_000_000
TICK = 0.01  # one fetch round: the quota is checked as often as Kafka checks it


def cli(sb: SandboxCluster, tmp: Path, *args: str) -> Ran:
    return KREASSIGN.run(*args, "--bootstrap-server", sb.bootstrap,
                         runtime=Runtime(clock=lambda: sb.now, sleep=sb.advance), columns=160)


def write_plan(tmp: Path, moves: dict[TopicPartition, tuple[int, ...]]) -> str:
    path = tmp / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)} for tp, r in moves.items()]}))
    return str(path)


def execute_and_time(sb: SandboxCluster, tmp: Path, plan: str, throttle: int, limit_s: float) -> float:
    ran = cli(sb, tmp, "execute", "-f", plan, "--throttle", str(throttle), "--journal-dir", str(tmp / "j"))
    assert ran.exit_code == 0, ran.output
    start = sb.now
    with KafkaAdmin.connect(build_client_config({}, bootstrap_server=sb.bootstrap)) as admin:
        while admin.list_reassignments():
            sb.advance(1.0)
            assert sb.now - start < limit_s, "the plan did not complete"
    return sb.now - start


def leader_bound(sb: SandboxCluster) -> dict[TopicPartition, tuple[int, ...]]:
    """Every partition led by broker 1 sends a replica to a different broker."""
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    used: set[int] = set()
    for p in sb.engine.rows:
        if p.leader == 1:
            follower = next(b for b in p.replicas if b != 1)
            dest = next(b for b in sorted(sb.engine.brokers) if b not in p.replicas and b not in used)
            used.add(dest)
            moves[TopicPartition(p.topic, p.index)] = tuple(dest if b == follower else b for b in p.replicas)
    return moves


def follower_bound(sb: SandboxCluster) -> dict[TopicPartition, tuple[int, ...]]:
    """Partitions with different leaders each send a replica to broker 5."""
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    leaders: set[int] = set()
    for p in sb.engine.rows:
        if 5 not in p.replicas and p.leader not in leaders:
            leaders.add(p.leader)
            follower = next(b for b in p.replicas if b != p.leader)
            moves[TopicPartition(p.topic, p.index)] = tuple(5 if b == follower else b for b in p.replicas)
    return moves


@pytest.mark.parametrize("shape", [leader_bound, follower_bound])
def test_estimate_with_sampled_writes_is_within_5_percent_of_the_measured_completion(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path,
        shape: Callable[[SandboxCluster], dict[TopicPartition, tuple[int, ...]]]) -> None:
    sb = sandbox_factory(brokers=5, racks=0, tick=TICK, seed=3,
                         topics=[TopicSpec("w", 8, 2, 1200 * MB, 2_000_000.0, 0.5)])
    plan = write_plan(tmp_path, shape(sb))
    throttle = 20 * MB
    # a cluster that has served any consumer group (execute's lock is one) holds __consumer_offsets,
    # whose idle in-sync partitions share the followers' fetch sessions: make it before the estimate
    with KafkaAdmin.connect(build_client_config({}, bootstrap_server=sb.bootstrap)) as admin:
        admin.read_markers(["kreassign.tests.probe"])
    ran = cli(sb, tmp_path, "estimate", "--reassignment-json-file", plan, "--throttle", str(throttle),
              "--sample", "60s", "--output", "json")
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    assert doc["write_rates"]["known"] and doc["write_rates"]["window_s"] == pytest.approx(60.0, rel=1e-3)
    measured = execute_and_time(sb, tmp_path, plan, throttle, limit_s=3 * doc["eta_s"])
    assert doc["eta_s"] == pytest.approx(measured, rel=0.05)


def test_a_stall_named_before_the_move_stalls_and_the_named_throttle_finishes_it(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    # one hot partition (3 MB/s of writes) moving under a 2 MB/s throttle can never catch up
    sb = sandbox_factory(brokers=3, racks=0, seed=1, topics=[TopicSpec("hot", 1, 2, 50 * MB, 3 * MB, 0.0)])
    (p,) = sb.engine.rows
    spare = next(b for b in (1, 2, 3) if b not in p.replicas)
    tp = TopicPartition("hot", 0)
    plan = write_plan(tmp_path, {tp: (p.leader, spare)})
    ran = cli(sb, tmp_path, "estimate", "--reassignment-json-file", plan, "--throttle", str(2 * MB), "--output", "json")
    doc = json.loads(ran.stdout)
    (stall,) = doc["stalled"]
    assert doc["eta_s"] is None and (stall["topic"], stall["dest"]) == ("hot", spare)
    assert stall["write_bps"] == pytest.approx(float(sb.engine.produce_bps[p.row]), rel=1e-3)
    fix = doc["fix"]["throttle"]
    text = cli(sb, tmp_path, "plan", "--reassignment-json-file", plan, "--throttle", str(2 * MB), "--sample", "30s")
    assert f"hot-0 (new replica on broker {spare}) never finishes" in text.stdout
    assert f"--throttle {fix} " in text.stdout

    ran = cli(sb, tmp_path, "execute", "-f", plan, "--throttle", str(2 * MB), "--journal-dir", str(tmp_path / "j"))
    assert ran.exit_code == 0, ran.output
    with KafkaAdmin.connect(build_client_config({}, bootstrap_server=sb.bootstrap)) as admin:
        def lag() -> float:
            report = admin.log_dir_sizes(partitions=[tp])
            return float(report.size(tp, p.leader) - report.size(tp, spare))  # type: ignore[operator]

        sb.advance(30.0)
        before = lag()
        sb.advance(120.0)
        assert admin.list_reassignments() and lag() >= before  # it stalls, as named
        ran = cli(sb, tmp_path, "throttle", "set", "--throttle", str(fix), "--journal-dir", str(tmp_path / "j"))
        assert ran.exit_code == 0, ran.output
        catch_up = lag() / (fix - 2 * float(sb.engine.produce_bps[p.row]))  # the named rate beats the writes
        for _ in range(int(2 * catch_up / 10) + 2):
            if not admin.list_reassignments():
                break
            sb.advance(10.0)
        assert not admin.list_reassignments()  # the named throttle lets it finish


def test_an_estimate_taken_mid_move_counts_what_the_copy_has_left(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    """A move under way is not done: `estimate`, `throttle suggest` and `snapshot` taken while it
    copies count the bytes its new replica still lacks (DescribeLogDirs), not 0 and not all."""
    sb = sandbox_factory(brokers=3, racks=0, seed=1, topics=[TopicSpec("t", 1, 2, 50 * MB, 0.0, 0.0)])
    (p,) = sb.engine.rows
    spare = next(b for b in (1, 2, 3) if b not in p.replicas)
    tp = TopicPartition("t", 0)
    plan = write_plan(tmp_path, {tp: (p.leader, spare)})
    ran = cli(sb, tmp_path, "execute", "-f", plan, "--throttle", str(MB), "--journal-dir", str(tmp_path / "j"))
    assert ran.exit_code == 0, ran.output
    sb.advance(20.0)
    with KafkaAdmin.connect(build_client_config({}, bootstrap_server=sb.bootstrap)) as admin:
        report = admin.log_dir_sizes(partitions=[tp])
        size, copied = report.size(tp, p.leader), report.size(tp, spare)
        assert size is not None and copied is not None and 0 < copied < size
        # the manual clock holds the copy where it is: without --sample nothing below sleeps
        ran = cli(sb, tmp_path, "estimate", "-f", plan, "--throttle", str(MB), "--sample", "0", "-o", "json")
        doc = json.loads(ran.stdout)
        assert (doc["moves"], doc["bytes"]) == (1, size - copied)
        ran = cli(sb, tmp_path, "throttle", "suggest", "-f", plan, "--max-impact", "20%", "--sample", "0",
                  "--network-capacity", "100MB/s", "-o", "json")
        doc = json.loads(ran.stdout)
        assert [(b["broker"], b["receives_bytes"]) for b in doc["brokers"] if b["receives_bytes"]] == [
            (spare, size - copied)]
        ran = cli(sb, tmp_path, "snapshot", "--sample", "0", "-f", str(tmp_path / "snap.json"))
        assert ran.exit_code == 0, ran.output
        (move,) = json.loads((tmp_path / "snap.json").read_text())["reassignments"]
        assert move["copied"] == [{"broker": spare, "bytes": copied}]
