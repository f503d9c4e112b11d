"""The canary against both engines (`live`): kafka-python's producer (acks=all) and consumer on a
topic the tool creates with a partition led by each broker, and removes. Latencies cannot be
known in advance, so they are checked for what they must be; what the canary leaves behind (no
topic, no consumer group) is checked exactly. The emulator runs on the wall clock here
(`live_wall_clock`): acks=all waits for its followers' fetches."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import Kreassign
from kreassign.cluster.canary import canary_assignment
from kreassign.cluster.model import TopicPartition

pytestmark = [pytest.mark.e2e, pytest.mark.timing]
CANARY_LINE = re.compile(r"  broker (\d): 1 produce\(s\), 0 timed out, p50 \d+\.\d ms, p99 \d+\.\d ms "
                         r"\[\d+\.\d, \? \(needs 368 produces\)\], end-to-end p99 \d+\.\d ms, throttled up to 0 ms")


def test_canary_assignment_puts_a_leader_on_every_broker() -> None:
    assert canary_assignment([3, 1, 2]) == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert canary_assignment([5], replication_factor=3) == {0: (5,)}


def leftovers(live: Any) -> tuple[set[str], set[str]]:
    """Every topic and consumer group of the cluster."""
    from kafka.admin import KafkaAdminClient

    with live.admin() as port:
        topics = {p.topic for p in port.describe_topics()}
    admin = KafkaAdminClient(bootstrap_servers=live.bootstrap, client_id="kreassign-tests")
    try:
        return topics, {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


@pytest.mark.live_wall_clock
def test_canary_measures_every_broker_reports_impact_and_leaves_nothing_behind(live: Any, tmp_path: Path,
                                                                               kreassign: Kreassign) -> None:
    live.topic()
    before = leftovers(live)
    ran = kreassign.run("canary", "--bootstrap-server", live.bootstrap, "--rounds", "3", "--interval", "0",
                        "--output", "json", columns=160)
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    assert (doc["topic"], doc["notes"]) == ("__kreassign_canary", [])
    brokers = {b["broker"]: b for b in doc["brokers"]}
    assert set(brokers) == set(live.brokers)
    for b in brokers.values():
        assert (b["requests"], b["timeouts"], b["throttle_max_ms"]) == (3, 0, 0.0)
        assert 0 < b["p50_ms"] <= b["p99_ms"] and b["end_to_end_p99_ms"] > 0
    assert leftovers(live) == before
    baseline = tmp_path / "baseline.json"
    baseline.write_text(ran.stdout, encoding="utf-8")
    again = kreassign.run("canary", "--bootstrap-server", live.bootstrap, "--rounds", "2", "--interval", "0",
                          "--baseline", str(baseline), "--output", "json", columns=160)
    assert again.exit_code == 0, again.output
    later = json.loads(again.stdout)
    rises = {i["broker"]: i["p99_increase"] for i in later["impact"]}
    assert set(rises) == set(live.brokers) and later["worst_impact"] == max(rises.values())
    text = kreassign.run("canary", "--bootstrap-server", live.bootstrap, "--rounds", "1", "--interval", "0",
                         columns=160)
    lines = text.stdout.splitlines()
    assert lines[0] == "Canary on __kreassign_canary (times in cluster ms; p99 with its 95% interval):"
    assert [int(m.group(1)) for m in map(CANARY_LINE.fullmatch, lines[1:]) if m] == live.brokers, text.stdout
    assert text.stderr == "" and leftovers(live) == before


def test_canary_reads_its_records_back_without_list_offsets(sandbox_factory: Any, kreassign: Kreassign) -> None:
    """Emulator only (fault injection): every ListOffsets fails, as it can for a moment on a real
    cluster whose brokers do not know the canary topic yet. The consumer starts after each
    partition's warm-up record, which the producer's answer placed, so no measured record is
    skipped by an offset reset that resolves after it was written."""
    from kreassign.sandbox.clock import ScaledClock

    sb = sandbox_factory(brokers=3, racks=0, topics=(), clock=ScaledClock(1.0))
    sb.inject_error("ListOffsets", 6, per_item=True)  # NOT_LEADER_OR_FOLLOWER
    ran = kreassign.run("canary", "--bootstrap-server", sb.bootstrap, "--rounds", "2", "--interval", "0", "-o",
                        "json", columns=160)
    assert ran.exit_code == 0, ran.output
    brokers = json.loads(ran.stdout)["brokers"]
    assert [(b["broker"], b["requests"], b["end_to_end_p99_ms"] is not None) for b in brokers] == [
        (1, 2, True), (2, 2, True), (3, 2, True)]


def test_watch_takes_a_canary_baseline_then_reports_the_impact_at_every_poll() -> None:
    """A canary whose produce latency grows with the move's copy rate (deterministic stand-in, ten
    requests per broker a poll): the baseline is taken before the first poll, each poll reports
    p99 and the rise over it (more than noise: every request is above the baseline's tail)."""
    from test_watch import GrowingCluster, TP

    from kreassign.cluster.client_latency import LatencySample
    from kreassign.execute.watch import watch
    from kreassign.execute.watch_events import ProgressEvent
    from kreassign.execute.watch_request import WatchRequest

    fake = GrowingCluster()
    latency = {"ms": 10.0}

    def canary() -> list[LatencySample]:
        return [LatencySample(b, latency["ms"]) for _ in range(10) for b in (1, 2)]

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


@pytest.mark.live_wall_clock
def test_watch_canary_while_a_move_holds(live: Any, tmp_path: Path, kreassign: Kreassign) -> None:
    from kreassign.cli.runtime import Runtime

    from live import HOLD_BYTES, HOLD_RATE

    topic = live.topic(assignment={0: [1, 2]})
    live.produce(topic, 0, HOLD_BYTES)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 3]}]}),
                    encoding="utf-8")
    journals = str(tmp_path / "j")
    executed = kreassign.run("execute", "-f", str(plan), "--throttle", str(HOLD_RATE), "--bootstrap-server",
                             live.bootstrap, "--journal-dir", journals, columns=160)
    assert executed.exit_code == 0, executed.output
    with live.admin() as admin:  # the move holds before the watch starts (CI runs twice saw it done)
        moving = [tp.partition for tp in admin.list_reassignments() if tp.topic == topic]
        if moving != [0]:  # what was copied, and where the partition is: the next such run says why
            sizes = admin.log_dir_sizes(partitions=[TopicPartition(topic, 0)]).sizes()
            journal = "\n".join(path.read_text() for path in Path(journals).rglob("*.json"))
            pytest.fail(f"the move did not hold: {admin.describe_topics([topic])}; sizes {sizes}; "
                        f"{executed.output}\n{journal}")
    ran = kreassign.run("watch", "--bootstrap-server", live.bootstrap, "--canary", "--interval", "5s",
                        "--stop-after", "15s", "--sample", "0", "--output", "json", "--journal-dir", journals,
                        runtime=Runtime(clock=time.monotonic, sleep=lambda s: None), columns=160)  # polls back to back
    assert ran.exit_code == 3, ran.output[-2000:]
    progress = [e for e in map(json.loads, ran.stdout.splitlines()) if e["event"] == "progress"]
    assert len(progress) >= 2 and {c["broker"] for c in progress[0]["canary"]} == set(live.brokers)
    from kreassign.cluster.client_latency import CANARY_POLL_ROUNDS

    assert all(c["requests"] == CANARY_POLL_ROUNDS and c["timeouts"] == 0 for c in progress[-1]["canary"])
    assert {i["broker"] for i in progress[-1]["canary_impact"]} == set(live.brokers)


@pytest.mark.live_wall_clock
def test_suggest_bounds_the_canarys_measured_rise_while_a_move_runs(live: Any, tmp_path: Path,
                                                                    kreassign: Kreassign) -> None:
    """A canary baseline before a move, the move under 100 kB/s, then `throttle suggest
    --canary-baseline` for the next move: each broker's rates are the catch-up it carries scaled
    by the bound over the rise the canary measured there (capped by what clients leave of
    100 MB/s)."""
    from kreassign.cli.runtime import Runtime

    topic = live.topic(assignment={0: [1], 1: [2]})
    live.produce(topic, 0, 8 * 1024 * 1024)
    live.produce(topic, 1, 1024 * 1024)

    def plan_of(index: int, replicas: list[int]) -> Path:
        path = tmp_path / f"plan{index}.json"
        path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": index,
                                                                  "replicas": replicas}]}))
        return path

    base = kreassign.run("canary", "--bootstrap-server", live.bootstrap, "--rounds", "3", "--interval", "0", "-o",
                         "json", columns=160)
    assert base.exit_code == 0, base.output
    # a baseline of 0.01 ms (its tail too) makes every rise positive and more than noise, so the
    # measured relation decides every side
    doc = json.loads(base.stdout)
    doc["brokers"] = [{**b, "p99_ms": 0.01, "tail_ms": 0.01} for b in doc["brokers"]]
    (tmp_path / "baseline.json").write_text(json.dumps(doc), encoding="utf-8")
    ran = kreassign.run("execute", "-f", str(plan_of(0, [2])), "--throttle", "100000", "--bootstrap-server",
                        live.bootstrap, "--journal-dir", str(tmp_path / "j"), columns=160)
    assert ran.exit_code == 0, ran.output
    shown = kreassign.run("throttle", "show", "--bootstrap-server", live.bootstrap, "-o", "json", columns=160)
    current = {b["broker"]: (b["leader_rate"], b["follower_rate"]) for b in json.loads(shown.stdout)["brokers"]}
    assert current[1] == current[2] == (100000, 100000)
    ran = kreassign.run("throttle", "suggest", "-f", str(plan_of(1, [1])), "--max-impact", "20%",
                        "--canary-baseline", str(tmp_path / "baseline.json"), "--bootstrap-server", live.bootstrap,
                        "--sample", "0", "--network-capacity", "100MB/s", "-o", "json",
                        runtime=Runtime(sleep=lambda _: None), columns=160)
    assert ran.exit_code == 0, ran.output
    assert live.reassigning(), "the first move must still run while the canary measures"
    doc = json.loads(ran.stdout)
    assert doc["bound"]["kind"] == "measured-impact" and doc["bound"]["source"] == "canary"
    assert [(b["broker"], b["sends_bytes"] > 0, b["receives_bytes"] > 0) for b in doc["brokers"]] == [
        (1, False, True), (2, True, False)]
    for b in doc["brokers"]:
        rise = b["impact"]["p99_increase"]
        assert not b["impact"]["throttled"] and not b["impact"]["timeouts"] and rise > 0
        for i, (side, rate, moved) in enumerate((("out", "leader_rate", b["sends_bytes"]),
                                                 ("in", "follower_rate", b["receives_bytes"]))):
            if not moved:
                continue
            room = 100_000_000 - b[f"client_{side}_bps"]
            assert b[rate] == int(min(current[b["broker"]][i] * 0.2 / rise, room))


@pytest.mark.live_wall_clock
def test_two_canaries_of_an_idle_cluster_agree_within_their_intervals(live: Any) -> None:
    """Two probes on an idle cluster, measuring in turns (so both see the same machine): for
    every broker their p99 intervals overlap and neither reports an impact over the other."""
    from kreassign.cluster.canary import CanaryProbe
    from kreassign.cluster.client_config import build_client_config
    from kreassign.cluster.client_latency import WATCH_BASELINE_REQUESTS, impact, summarize

    topic = live.topic(assignment=canary_assignment(live.brokers))
    with live.admin() as port:
        leaders = {p.partition: p.leader for p in port.describe_topics([topic])}
    config = build_client_config({}, bootstrap_server=live.bootstrap)
    first, second = CanaryProbe(config, topic, leaders), CanaryProbe(config, topic, leaders)
    try:
        a, b = [], []
        for _ in range(WATCH_BASELINE_REQUESTS // 10):
            a += first.measure(10)
            b += second.measure(10)
    finally:
        first.close()
        second.close()
    ours, theirs = summarize(a), summarize(b)
    assert set(ours) == set(theirs) == set(live.brokers)
    for broker in live.brokers:
        x, y = ours[broker], theirs[broker]
        assert (x.requests, x.timeouts, y.requests, y.timeouts) == (WATCH_BASELINE_REQUESTS, 0, WATCH_BASELINE_REQUESTS, 0)
        assert x.tail_ms is not None and y.tail_ms is not None
        top = [v if v is not None else float("inf") for v in (x.p99_high_ms, y.p99_high_ms)]
        assert (x.p99_low_ms or 0.0) <= top[1] and (y.p99_low_ms or 0.0) <= top[0], (x, y)
    # each broker's comparison reports an unchanged cluster as impacted with probability
    # IMPACT_ALPHA (1%), so one of these brokers does about once in ten runs (a CI run saw it).
    # A broker's two comparisons (each probe as the other's baseline) are one event, not two: the
    # same stray slow produces make both tails look apart (a CI run on real Kafka flagged broker 3
    # both ways). Two or more brokers is a rare event, and then the rule's noise is not what it states
    flagged = [(b, i) for baseline, now in ((ours, theirs), (theirs, ours))
               for b, i in impact(baseline.values(), now).items() if not (i.within_noise and i.p99_increase == 0.0)]
    assert len({b for b, _ in flagged}) <= 1, flagged
