"""`watch --pace`, paced `execute`, `verify --watch`, `watch` and `throttle set` over TCP.

The first tests run on both engines (`live`): the CLI runs in this process with `live.runtime()`,
whose sleeps move sandbox time on the emulator and real time on Kafka; they check what does not
depend on the engine's timing: the waves, the pacing limit at every poll, completion, the replicas
and the throttles left. The last two need the emulator (each says why).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import KREASSIGN, Ran
from kreassign.cli.runtime import Runtime
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from live import HOLD_BYTES, HOLD_RATE, RUN_RATE
from live import rates as live_rates
from live import write_plan

pytestmark = pytest.mark.e2e
MB = 1_000_000


def cli(bootstrap: str, journals: Path, runtime: Runtime, *args: str) -> Ran:
    return KREASSIGN.run(*args, "--bootstrap-server", bootstrap, "--journal-dir", str(journals), runtime=runtime,
                         columns=160)


def events(ran: Ran) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ran.stdout.splitlines()]


def plan_moving_second_replica(admin: KafkaAdmin, topic: str, path: Path) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's follower replaced by a broker of 1-4 that has no replica of it."""
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


def four_moves(live: Any, folder: Path, nbytes: int = 1 * MB) -> tuple[str, dict[TopicPartition, tuple[int, ...]], str]:
    """Four partitions of two replicas on brokers 1-4 holding `nbytes` each, and a plan replacing
    each one's follower by a broker of 1-4 that has no replica of it. Returns the topic, the
    targets and the plan file."""
    topic = live.topic(assignment={0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]})
    for p in range(4):
        live.produce(topic, p, nbytes)
    plan = folder / "plan.json"
    with live.admin() as admin:
        return topic, plan_moving_second_replica(admin, topic, plan), str(plan)


def paced_to_the_end(ran: Ran, topic: str) -> None:
    """A paced run at one move per broker, checked: the waves the limit allows (1->3, 2->1 and
    4->2 first; 3->1 waits for broker 1), never more than one move sent or received by a broker at
    any poll, the run complete."""
    assert ran.exit_code == 0, ran.output
    seen = events(ran)
    assert [e["partitions"] for e in seen if e["event"] == "wave"] == [
        [f"{topic}-0", f"{topic}-1", f"{topic}-3"], [f"{topic}-2"]]
    for event in seen:
        if event["event"] == "progress":
            moving = [m for m in event["moves"] if not m["done"]]
            for side in ("broker", "leader"):
                assert len({m[side] for m in moving}) == len(moving), event
    assert seen[-1]["event"] == "complete" and seen[-1]["mismatched"] == []


def placed(live: Any, topic: str) -> dict[TopicPartition, tuple[int, ...]]:
    with live.admin() as admin:
        return {p.tp: tuple(p.replicas) for p in admin.describe_topics([topic])}


def lists_left(live: Any, topic: str) -> dict[str, str]:
    with live.admin() as admin:
        entries = admin.describe_topic_configs([topic], [LEADER_REPLICAS, FOLLOWER_REPLICAS]).configs[topic]
    return {k: e.value for k, e in entries.items() if e.value}


def test_paced_watch_to_completion_restores_throttles(live: Any, tmp_path: Path) -> None:
    topic, targets, plan = four_moves(live, tmp_path)
    with live.admin() as admin:
        assert admin.incremental_alter_configs({2: {FOLLOWER_RATE: "77000000"}}).ok  # the operator's own
    ran = cli(live.bootstrap, tmp_path / "j", live.runtime(), "watch", "--pace", plan, "--max-moves-per-broker", "1",
              "--throttle", "2MB/s", "--interval", "1s", "--stop-after", "10m", "--output", "json")
    paced_to_the_end(ran, topic)
    assert placed(live, topic) == targets
    assert live_rates(live) == {1: {}, 2: {FOLLOWER_RATE: "77000000"}, 3: {}, 4: {}, 5: {}}
    assert lists_left(live, topic) == {}


def test_paced_execute_runs_the_plan_to_the_end(live: Any, tmp_path: Path) -> None:
    topic, targets, plan = four_moves(live, tmp_path)
    with live.admin() as admin:
        assert admin.incremental_alter_configs({3: {LEADER_RATE: "66000000"}}).ok  # the operator's own
    ran = cli(live.bootstrap, tmp_path / "j", live.runtime(), "execute", "-f", plan, "--max-moves-per-broker", "1",
              "--throttle", "2MB/s", "--interval", "1s", "--output", "json")
    paced_to_the_end(ran, topic)
    assert placed(live, topic) == targets
    assert live_rates(live) == {1: {}, 2: {}, 3: {LEADER_RATE: "66000000"}, 4: {}, 5: {}}
    journal = ran.stderr.removeprefix("Journal: ").strip()
    assert json.loads(Path(journal).read_text())["state"] == "finished"


def test_verify_watch_follows_an_execute_to_the_end(live: Any, tmp_path: Path) -> None:
    """The moves are held until the first poll of `verify --watch` has seen them, then raised."""
    topic, targets, plan = four_moves(live, tmp_path, nbytes=64 * 1024)
    live.produce(topic, 0, HOLD_BYTES)
    with live.admin() as admin:
        assert admin.incremental_alter_configs({2: {FOLLOWER_RATE: "77000000"}}).ok
    journals = tmp_path / "j"
    started = cli(live.bootstrap, journals, live.runtime(), "execute", "-f", plan, "--throttle", str(HOLD_RATE))
    assert started.exit_code == 0, started.output
    assert live_rates(live)[1] == {LEADER_RATE: str(HOLD_RATE), FOLLOWER_RATE: str(HOLD_RATE)}

    def raise_once() -> None:
        if live_rates(live)[1][LEADER_RATE] == str(HOLD_RATE):
            with live.admin() as admin:
                both = {LEADER_RATE: str(RUN_RATE), FOLLOWER_RATE: str(RUN_RATE)}
                assert admin.incremental_alter_configs({b: both for b in (1, 2, 3, 4)}).ok

    ran = cli(live.bootstrap, journals, live.runtime(before_sleep=raise_once), "verify", "-f", plan, "--watch",
              "--interval", "1s", "--output", "json")
    assert ran.exit_code == 0, ran.output
    seen = events(ran)
    progress = [e for e in seen if e["event"] == "progress"]
    assert progress[0]["fraction"] < 1 and progress[0]["active_moves"] >= 1
    assert seen[-1]["event"] == "complete" and seen[-1]["mismatched"] == []
    assert placed(live, topic) == targets
    assert live_rates(live) == {1: {}, 2: {FOLLOWER_RATE: "77000000"}, 3: {}, 4: {}, 5: {}}
    assert lists_left(live, topic) == {}


def test_the_first_poll_comes_at_once_and_the_write_sample_ends_on_time(live: Any, tmp_path: Path) -> None:
    """Issue 30: the first screen waited for the write sample. Now the first poll comes at once with
    the model's ETA (the sample still running, said so), the poll at the end of the sample's window
    brings its rates in, and the rates never go back to unknown. A held move keeps it in flight."""
    topic = live.topic(assignment={0: [1, 2]})
    live.produce(topic, 0, HOLD_BYTES)
    journals = tmp_path / "j"
    plan = write_plan(tmp_path, {TopicPartition(topic, 0): [1, 3]})
    started = cli(live.bootstrap, journals, live.runtime(), "execute", "-f", plan, "--throttle", str(HOLD_RATE))
    assert started.exit_code == 0, started.output  # (throttled before the move starts: it stays in flight)
    ran = cli(live.bootstrap, journals, live.runtime(), "watch", "--interval", "1s", "--sample", "2s",
              "--stop-after", "3s", "--output", "json")
    assert ran.exit_code == 3, ran.output[-2000:]
    polls = [e for e in events(ran) if e["event"] == "progress"]
    first = polls[0]
    assert first["at"] < 1.0 and first["active_moves"] == 1 and first["eta_model_s"] is not None
    assert first["write_rates"]["state"] == "sampling" and first["write_rates"]["sample_window_s"] == 2.0
    states = [p["write_rates"]["state"] for p in polls]
    ended = states.index("measured")
    assert states == ["sampling"] * ended + ["measured"] * (len(states) - ended) and ended >= 2
    sampled = polls[ended]["write_rates"]
    assert sampled["window_s"] is not None and 2.0 <= sampled["window_s"] < 4.0, sampled
    assert all(p["eta_model_s"] is not None for p in polls)  # a held move: finite, never blanked


# ---- emulator only: writes and rates in sandbox time ---------------------------------------------

def connect(sb: SandboxCluster) -> KafkaAdmin:
    config = build_client_config({}, bootstrap_server=sb.bootstrap)
    return KafkaAdmin.connect(dataclasses.replace(
        config, timeouts=AdminTimeouts(request_timeout_s=5.0, api_timeout_s=10.0, connect_timeout_s=1.0)))


def sandbox_cli(sb: SandboxCluster, journals: Path, *args: str) -> Ran:
    return cli(sb.bootstrap, journals, Runtime(clock=lambda: sb.now, sleep=sb.advance), *args)


@pytest.fixture
def hot(sandbox_factory: Callable[..., SandboxCluster]) -> Iterator[SandboxCluster]:
    yield sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("hot", 1, 2, 10 * MB, 3 * MB, 0.0)])


def test_stalled_move_is_named_and_the_named_rates_work(hot: SandboxCluster, tmp_path: Path) -> None:
    """Emulator only: the stall is a partition written at 3 MB/s, steadily, for minutes of
    sandbox time (the emulator's load generator) under a 1 MB/s throttle, and the diagnosis
    names the rates that beat those writes; on real Kafka this would take minutes of real
    writing at rates the shared test machine cannot hold steady."""
    with connect(hot) as admin:
        (p,) = admin.describe_topics(["hot"])
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        admin.alter_reassignments({p.tp: [p.replicas[0], spare]})
    journals = tmp_path / "j"
    assert sandbox_cli(hot, journals, "throttle", "set", "--throttle", "1MB/s").exit_code == 0
    ran = sandbox_cli(hot, journals, "watch", "--interval", "5s", "--stall-after", "20s", "--fail-on-stall",
                      "--output", "json")
    assert ran.exit_code == 4, ran.output
    stall = events(ran)[-1]
    assert stall["event"] == "stalled" and stall["reason"] == "model"
    assert stall["write_bps"] > 1 * MB and all(f["rate"] > stall["write_bps"] for f in stall["fixes"])
    for fix in stall["fixes"]:
        assert sandbox_cli(hot, journals, "throttle", "set", fix["option"], str(fix["rate"]),
                           "--brokers", str(fix["broker"])).exit_code == 0
    done = sandbox_cli(hot, journals, "watch", "--interval", "5s", "--stop-after", "30m", "--output", "json")
    assert done.exit_code == 0, done.output[-2000:]
    assert events(done)[-1]["event"] == "complete"


def test_throttle_set_on_a_running_move_speeds_it_up(sandbox_factory: Callable[..., SandboxCluster],
                                                      tmp_path: Path) -> None:
    """Emulator only: the copy rate measured over minutes of sandbox time at 2 MB/s, then at
    20 MB/s (1.5 GB). On real Kafka the replication quota's 10-second window lets the first
    seconds of any rate through at disk speed, so the same measurement needs minutes of real
    copying; the live tests check that a raised throttle lets a held move finish."""
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("big", 1, 2, 1500 * MB, 10_000.0, 0.0)])
    with connect(sb) as admin:
        (p,) = admin.describe_topics(["big"])
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        admin.alter_reassignments({p.tp: [p.replicas[0], spare]})
        journals = tmp_path / "j"
        assert sandbox_cli(sb, journals, "throttle", "set", "--throttle", "2MB/s").exit_code == 0

        def throughput(window: str) -> float:
            ran = sandbox_cli(sb, journals, "watch", "--interval", "5s", "--stop-after", window, "--output", "json")
            assert ran.exit_code == 3, ran.output[-2000:]
            return [e for e in events(ran) if e["event"] == "progress"][-1]["throughput_bps"]

        # The quota lets a burst through at first (its sampled window starts empty, as in Kafka),
        # so measure over a minute: the rate settles near the throttle.
        throughput("30s")
        slow = throughput("60s")
        assert sandbox_cli(sb, journals, "throttle", "set", "--throttle", "20MB/s").exit_code == 0
        throughput("10s")
        fast = throughput("20s")
        # The sandbox, like a broker, overshoots a little: a fetch is granted whole once the
        # measured rate is under the bound.
        assert 1.5 * MB < slow < 3.5 * MB and 12 * MB < fast < 25 * MB
        finished = sandbox_cli(sb, journals, "watch", "--interval", "5s", "--stop-after", "10m", "--output", "json")
        assert finished.exit_code == 0, finished.output[-2000:]
        assert rates(admin) == {1: {}, 2: {}, 3: {}}
