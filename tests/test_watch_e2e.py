"""`watch`, `watch --pace`, paced `execute`, `verify --watch` and `throttle set` over TCP against
the sandbox, in sandbox time."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kreassign.cli.runtime import Runtime
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec
from kreassign.throttle.configs import FOLLOWER_RATE, LEADER_RATE
from test_throttle_cmd import Ran, invoke

pytestmark = pytest.mark.e2e
MB = 1_000_000


@pytest.fixture
def small(sandbox_factory: Callable[..., SandboxCluster]) -> SandboxCluster:
    return sandbox_factory(brokers=4, racks=0, topics=[TopicSpec("t", 4, 2, 20 * MB, 50_000.0, 0.2)])


@pytest.fixture
def admin(small: SandboxCluster) -> Iterator[KafkaAdmin]:
    config = build_client_config({}, bootstrap_server=small.bootstrap)
    client = KafkaAdmin.connect(dataclasses.replace(
        config, timeouts=AdminTimeouts(request_timeout_s=5.0, api_timeout_s=10.0, connect_timeout_s=1.0)))
    yield client
    client.close()


def cli(sb: SandboxCluster, journals: Path, *args: str) -> Ran:
    return invoke(None, *args, "--bootstrap-server", sb.bootstrap, "--journal-dir", str(journals),
                  runtime=Runtime(clock=lambda: sb.now, sleep=sb.advance))


def plan_moving_second_replica(admin: KafkaAdmin, topic: str, path: Path) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's follower replaced by a broker that has no replica of it."""
    targets = {}
    for p in admin.describe_topics([topic]):
        spare = next(b for b in (1, 2, 3, 4) if b not in p.replicas)
        targets[p.tp] = (p.replicas[0], spare)
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)} for tp, r in sorted(targets.items())]}))
    return targets


def rates(admin: KafkaAdmin) -> dict[int, dict[str, str]]:
    result = admin.describe_broker_configs([b.id for b in admin.describe_brokers().brokers],
                                           [LEADER_RATE, FOLLOWER_RATE])
    return {b: {k: e.value for k, e in entries.items() if e.source == "DYNAMIC_BROKER_CONFIG" and e.value}
            for b, entries in sorted(result.configs.items())}


def events(ran: Ran) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ran.stdout.splitlines()]


def paced_to_the_end(ran: Ran, targets: dict[TopicPartition, tuple[int, ...]]) -> None:
    """The events of a paced run at 2 MB/s and one move per broker, checked: every partition
    submitted in waves, the throughput bounded, the model's ETA shown, the run complete."""
    assert ran.exit_code == 0, ran.output
    seen = events(ran)
    waves = [e for e in seen if e["event"] == "wave"]
    assert len(waves) >= 2 and sorted(p for w in waves for p in w["partitions"]) == sorted(map(str, targets))
    progress = [e for e in seen if e["event"] == "progress" and e["throughput_bps"]]
    # At most one move per broker, each leader throttled at 2 MB/s: never more than 4 x 2 MB/s.
    assert all(e["throughput_bps"] <= 8.5 * MB for e in progress)
    assert any(e["eta_model_s"] for e in progress)
    assert seen[-1]["event"] == "complete" and seen[-1]["mismatched"] == []


def test_paced_watch_to_completion_restores_throttles(small: SandboxCluster, admin: KafkaAdmin,
                                                       tmp_path: Path) -> None:
    admin.incremental_alter_configs({2: {FOLLOWER_RATE: "77000000"}})  # the operator's own
    plan = tmp_path / "plan.json"
    targets = plan_moving_second_replica(admin, "t", plan)
    ran = cli(small, tmp_path / "j", "watch", "--pace", str(plan), "--max-moves-per-broker", "1",
              "--throttle", "2MB/s", "--interval", "5s", "--stop-after", "10m", "--output", "json")
    paced_to_the_end(ran, targets)
    assert {tp: tuple(p.replicas) for tp, p in ((p.tp, p) for p in admin.describe_topics(["t"]))} == targets
    assert rates(admin) == {1: {}, 2: {FOLLOWER_RATE: "77000000"}, 3: {}, 4: {}}
    assert admin.describe_topic_configs(["t"]).configs["t"]["leader.replication.throttled.replicas"].value in ("", None)


def test_stalled_move_is_named_and_the_named_rates_work(sandbox_factory: Callable[..., SandboxCluster],
                                                        tmp_path: Path) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("hot", 1, 2, 10 * MB, 3 * MB, 0.0)])
    config = build_client_config({}, bootstrap_server=sb.bootstrap)
    with KafkaAdmin.connect(config) as admin:
        (p,) = admin.describe_topics(["hot"])
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        admin.alter_reassignments({p.tp: [p.replicas[0], spare]})
    journals = tmp_path / "j"
    assert cli(sb, journals, "throttle", "set", "--rate", "1MB/s").exit_code == 0
    ran = cli(sb, journals, "watch", "--interval", "5s", "--stall-after", "20s", "--fail-on-stall", "--output", "json")
    assert ran.exit_code == 4, ran.output
    stall = events(ran)[-1]
    assert stall["event"] == "stalled" and stall["reason"] == "model"
    assert stall["write_bps"] > 1 * MB and all(f["rate"] > stall["write_bps"] for f in stall["fixes"])
    for fix in stall["fixes"]:
        assert cli(sb, journals, "throttle", "set", fix["option"], str(fix["rate"]),
                   "--brokers", str(fix["broker"])).exit_code == 0
    done = cli(sb, journals, "watch", "--interval", "5s", "--stop-after", "30m", "--output", "json")
    assert done.exit_code == 0, done.output[-2000:]
    assert events(done)[-1]["event"] == "complete"


def test_throttle_set_on_a_running_move_speeds_it_up(sandbox_factory: Callable[..., SandboxCluster],
                                                      tmp_path: Path) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("big", 1, 2, 1500 * MB, 10_000.0, 0.0)])
    with KafkaAdmin.connect(build_client_config({}, bootstrap_server=sb.bootstrap)) as admin:
        (p,) = admin.describe_topics(["big"])
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        admin.alter_reassignments({p.tp: [p.replicas[0], spare]})
        journals = tmp_path / "j"
        assert cli(sb, journals, "throttle", "set", "--rate", "2MB/s").exit_code == 0

        def throughput(window: str) -> float:
            ran = cli(sb, journals, "watch", "--interval", "5s", "--stop-after", window, "--output", "json")
            assert ran.exit_code == 3, ran.output[-2000:]
            return [e for e in events(ran) if e["event"] == "progress"][-1]["throughput_bps"]

        # The quota lets a burst through at first (its sampled window starts empty, as in Kafka),
        # so measure over a minute: the rate settles near the throttle.
        throughput("30s")
        slow = throughput("60s")
        assert cli(sb, journals, "throttle", "set", "--rate", "20MB/s").exit_code == 0
        throughput("10s")
        fast = throughput("20s")
        # The sandbox, like a broker, overshoots a little: a fetch is granted whole once the
        # measured rate is under the bound.
        assert 1.5 * MB < slow < 3.5 * MB and 12 * MB < fast < 25 * MB
        finished = cli(sb, journals, "watch", "--interval", "5s", "--stop-after", "10m", "--output", "json")
        assert finished.exit_code == 0, finished.output[-2000:]
        assert rates(admin) == {1: {}, 2: {}, 3: {}}


def test_paced_execute_runs_the_plan_to_the_end(small: SandboxCluster, admin: KafkaAdmin, tmp_path: Path) -> None:
    admin.incremental_alter_configs({3: {LEADER_RATE: "66000000"}})  # the operator's own
    plan = tmp_path / "plan.json"
    targets = plan_moving_second_replica(admin, "t", plan)
    ran = cli(small, tmp_path / "j", "execute", "-f", str(plan), "--max-moves-per-broker", "1",
              "--throttle", "2MB/s", "--interval", "5s", "--output", "json")
    paced_to_the_end(ran, targets)
    assert {p.tp: tuple(p.replicas) for p in admin.describe_topics(["t"])} == targets
    assert rates(admin) == {1: {}, 2: {}, 3: {LEADER_RATE: "66000000"}, 4: {}}
    journal = ran.stderr.removeprefix("Journal: ").strip()
    assert json.loads(Path(journal).read_text())["state"] == "finished"


def test_verify_watch_follows_an_execute_to_the_end(small: SandboxCluster, admin: KafkaAdmin, tmp_path: Path) -> None:
    admin.incremental_alter_configs({2: {FOLLOWER_RATE: "77000000"}})
    plan = tmp_path / "plan.json"
    targets = plan_moving_second_replica(admin, "t", plan)
    journals = tmp_path / "j"
    started = cli(small, journals, "execute", "-f", str(plan), "--throttle", "5MB/s")
    assert started.exit_code == 0, started.output
    assert rates(admin)[1] == {LEADER_RATE: "5000000", FOLLOWER_RATE: "5000000"}
    ran = cli(small, journals, "verify", "-f", str(plan), "--watch", "--interval", "5s", "--output", "json")
    assert ran.exit_code == 0, ran.output
    seen = events(ran)
    progress = [e for e in seen if e["event"] == "progress"]
    assert len(progress) >= 2 and progress[0]["fraction"] < 1 and any(e["eta_model_s"] for e in progress)
    assert seen[-1]["event"] == "complete" and seen[-1]["mismatched"] == []
    assert {p.tp: tuple(p.replicas) for p in admin.describe_topics(["t"])} == targets
    assert rates(admin) == {1: {}, 2: {FOLLOWER_RATE: "77000000"}, 3: {}, 4: {}}
    assert admin.describe_topic_configs(["t"]).configs["t"]["leader.replication.throttled.replicas"].value in ("", None)
