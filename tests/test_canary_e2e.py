"""The canary against the sandbox's real Produce/Fetch: kafka-python's producer (acks=all) and
consumer on a topic the tool creates with a partition led by each broker. The sandbox runs on a
scaled clock (its followers must fetch for acks=all to complete), so the numbers are checked for
what they must be, not for values."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kreassign.cluster.canary import canary_assignment
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec
from test_throttle_cmd import invoke

pytestmark = pytest.mark.e2e


def test_canary_assignment_puts_a_leader_on_every_broker() -> None:
    assert canary_assignment([3, 1, 2]) == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert canary_assignment([5], replication_factor=3) == {0: (5,)}


def test_canary_measures_every_broker_and_reports_impact_against_a_baseline(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 1, 1)], clock=ScaledClock(1.0))
    ran = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "5", "--interval", "0",
                 "--output", "json")
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    assert doc["topic"] == "__kreassign_canary"
    assert doc["notes"] == []  # the canary topic was removed (DeleteTopics), nothing left to delete by hand
    with sb.locked() as eng:
        assert sorted(eng.topics) == ["t"]
    brokers = {b["broker"]: b for b in doc["brokers"]}
    assert set(brokers) == {1, 2, 3}
    for b in brokers.values():
        assert b["requests"] == 5 and b["timeouts"] == 0
        assert 0 < b["p50_ms"] <= b["p99_ms"] and b["end_to_end_p99_ms"] is not None
    baseline = tmp_path / "baseline.json"
    baseline.write_text(ran.stdout, encoding="utf-8")
    again = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "3", "--interval", "0",
                   "--baseline", str(baseline), "--output", "json")
    assert again.exit_code == 0, again.output
    later = json.loads(again.stdout)
    assert {i["broker"] for i in later["impact"]} == {1, 2, 3} and later["worst_impact"] is not None
    text = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "2", "--interval", "0")
    assert text.stdout.startswith("Canary on __kreassign_canary (times in cluster ms):\n  broker 1: 2 produce(s), ")
    assert "could not remove" not in text.output
    with sb.locked() as eng:
        assert sorted(eng.topics) == ["t"]


def test_watch_takes_a_canary_baseline_then_reports_the_impact_at_every_poll() -> None:
    """A canary whose produce latency grows with the move's copy rate (deterministic stand-in):
    the baseline is taken before the first poll, each poll reports p99 and the rise over it."""
    from test_watch import GrowingCluster, TP

    from kreassign.cluster.client_latency import LatencySample
    from kreassign.execute.watch import ProgressEvent, WatchRequest, watch

    fake = GrowingCluster()
    latency = {"ms": 10.0}

    def canary() -> list[LatencySample]:
        return [LatencySample(b, latency["ms"]) for b in (1, 2)]

    def sleep(seconds: float) -> None:
        fake.advance(seconds)
        if fake.now >= 5 and not fake.list_reassignments() and fake.now < 6:
            fake.alter_reassignments({TP: [1, 3]})
        latency["ms"] = 15.0 if fake.list_reassignments() else 10.0

    fake.alter_reassignments({TP: [1, 3]})
    latency["ms"] = 10.0  # measured before the first poll: the baseline
    events: list[object] = []
    watch(fake, WatchRequest(interval_s=5, timeout_s=10, canary=canary), store=None, clock=lambda: fake.now,
          sleep=sleep, emit=events.append)
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    assert [c.p99_ms for c in progress[0].canary] == [10.0, 10.0]
    assert [i.p99_increase for i in progress[1].canary_impact] == [0.5, 0.5]
    doc = progress[1].to_dict()
    assert doc["canary"][0]["p99_ms"] == 15.0 and doc["canary_impact"][0]["p99_increase"] == 0.5


def test_watch_canary_on_the_sandbox(sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    import time

    from kreassign.cli.runtime import Runtime

    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 1, 2, 500_000_000, 100_000.0)],
                         clock=ScaledClock(20.0))
    (p,) = [r for r in sb.engine.rows if r.topic == "t"]
    spare = next(b for b in (1, 2, 3) if b not in p.replicas)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [p.leader, spare]}]}), encoding="utf-8")
    journals = str(tmp_path / "j")
    assert invoke(None, "execute", "-f", str(plan), "--throttle", "1MB/s", "--bootstrap-server", sb.bootstrap,
                  "--journal-dir", journals).exit_code == 0
    ran = invoke(None, "watch", "--bootstrap-server", sb.bootstrap, "--canary", "--interval", "5s", "--stop-after",
                 "10s", "--sample", "0", "--output", "json", "--journal-dir", journals,
                 runtime=Runtime(clock=time.monotonic, sleep=lambda s: None))  # polls back to back
    assert ran.exit_code == 3, ran.output[-2000:]
    progress = [e for e in map(json.loads, ran.stdout.splitlines()) if e["event"] == "progress"]
    assert {c["broker"] for c in progress[0]["canary"]} == {1, 2, 3}
    assert all(c["requests"] == 1 and c["timeouts"] == 0 for c in progress[-1]["canary"])
    assert {i["broker"] for i in progress[-1]["canary_impact"]} == {1, 2, 3}


def test_suggest_bounds_the_canarys_measured_rise_while_a_move_runs(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    """A canary baseline before a move, the move under 1 MB/s, then `throttle suggest
    --canary-baseline` for the next move: each broker's rates are the catch-up it carries scaled
    by the bound over the rise the canary measured there (capped by what clients leave of
    100 MB/s); a side without a throttle in force keeps the capacity share."""
    from kreassign.cli.runtime import Runtime

    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 2, 1, 2_000_000_000, 0.0, 0.0)],
                         clock=ScaledClock(1.0))

    def plan_of(row: int) -> Path:
        p = sb.engine.rows[row]
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        path = tmp_path / f"plan{row}.json"
        path.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": p.index,
                                                                  "replicas": [spare]}]}))
        return path

    base = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "5", "--interval", "0", "-o", "json")
    assert base.exit_code == 0, base.output
    # an idle sandbox's p99 hardly moves under a 1 MB/s copy: a baseline of 0.01 ms makes every rise
    # positive, so the measured relation decides every side with a throttle in force
    doc = json.loads(base.stdout)
    doc["brokers"] = [{**b, "p99_ms": 0.01} for b in doc["brokers"]]
    (tmp_path / "baseline.json").write_text(json.dumps(doc), encoding="utf-8")
    ran = invoke(None, "execute", "-f", str(plan_of(0)), "--throttle", "1000000", "--bootstrap-server", sb.bootstrap,
                 "--journal-dir", str(tmp_path / "j"))
    assert ran.exit_code == 0, ran.output
    shown = invoke(None, "throttle", "show", "--bootstrap-server", sb.bootstrap, "-o", "json")
    current = {b["broker"]: (b["leader_rate"], b["follower_rate"]) for b in json.loads(shown.stdout)["brokers"]}
    ran = invoke(None, "throttle", "suggest", "-f", str(plan_of(1)), "--max-impact", "20%", "--canary-baseline",
                 str(tmp_path / "baseline.json"), "--bootstrap-server", sb.bootstrap, "--sample", "0",
                 "--network-capacity", "100MB/s", "-o", "json", runtime=Runtime(sleep=lambda _: None))
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    assert doc["bound"]["kind"] == "measured-impact" and doc["bound"]["source"] == "canary"
    assert sum(b["sends_bytes"] > 0 for b in doc["brokers"]) == 1 and sum(b["receives_bytes"] > 0 for b in doc["brokers"]) == 1
    assert all(b["impact"]["p99_increase"] > 100 for b in doc["brokers"])
    for b in doc["brokers"]:
        rise = b["impact"]["p99_increase"]
        assert not b["impact"]["throttled"] and not b["impact"]["timeouts"] and rise > 0
        for i, (side, rate, moved) in enumerate((("out", "leader_rate", b["sends_bytes"]),
                                                 ("in", "follower_rate", b["receives_bytes"]))):
            if not moved:
                continue
            room = 100_000_000 - b[f"client_{side}_bps"]
            now = current[b["broker"]][i]
            want = min(now * 0.2 / rise, room) if now is not None else min(0.2 * 100_000_000, room)
            assert b[rate] == int(want)
