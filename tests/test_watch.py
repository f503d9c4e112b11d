"""The watch loop on a fake cluster whose replicas grow with (fake) time: progress, stalls with
the rates that would work, completion with throttles restored, timeout, JSON lines, rendering."""
from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from fake_cluster import FakeCluster
from cli_helpers import Kreassign
from kreassign.cli.watch_render import OVER_THROTTLE_NOTE, WatchScreen, event_lines, summary_line
from kreassign.cli.runtime import Runtime
from kreassign.cluster.client_latency import Impact
from kreassign.cluster.errors import ExitStatus
from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import LogDirReport, ReplicaLogDir
from kreassign.throttle.configs import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    parse_throttled_replicas,
)
from kreassign.predict.model import FetchLimits
from kreassign.execute.auto_throttle import AutoThrottlePolicy
from kreassign.execute.journal import JournalStore
from kreassign.execute.live_throttle import ThrottleSetRequest, apply_throttle_change, plan_throttle_set
from kreassign.cluster.write_sample import OFFSETS_MISSING
from kreassign.execute.watch import watch
from kreassign.execute.watch_events import (
    CompleteEvent,
    ProgressEvent,
    StalledEvent,
    ThrottleEvent,
    TimeoutEvent,
    WaitingEvent,
    WatchEvent,
)
from kreassign.execute.watch_hold import Held
from kreassign.execute.watch_request import WatchRequest
from kreassign.cluster.units import format_duration

MB = 1_000_000
TP = TopicPartition("t", 0)


class GrowingCluster(FakeCluster):
    """Leaders take writes; a new replica copies at 10 MB/s, or less under the KIP-73 throttles
    of its partition's listed replicas (the leader quota also counts in-sync followers); a move
    completes when its new replicas have caught up."""

    def __init__(self) -> None:
        super().__init__((1, 2, 3, 4))
        self.add_topic("t", [[1, 2], [3, 4]])
        self.size = {TP: 100 * MB, TopicPartition("t", 1): 50 * MB}
        self.write = {TP: 1 * MB, TopicPartition("t", 1): 0.0}
        self.copied: dict[tuple[TopicPartition, int], float] = {}
        self.now = 0.0

    def listed(self, tp: TopicPartition, key: str, broker: int) -> bool:
        value = parse_throttled_replicas(self.topic_configs[tp.topic].get(key, ""))
        return value == "*" or (tp.partition, broker) in value  # type: ignore[operator]

    def rate(self, tp: TopicPartition, broker: int) -> float:
        part = self.partitions[tp]
        rate = 10.0 * MB
        if self.listed(tp, FOLLOWER_REPLICAS, broker) and FOLLOWER_RATE in self.broker_configs[broker]:
            rate = min(rate, float(self.broker_configs[broker][FOLLOWER_RATE]))
        leader = part.leader
        if leader is not None and self.listed(tp, LEADER_REPLICAS, leader) and LEADER_RATE in self.broker_configs[leader]:
            in_sync = len([b for b in part.isr if b != leader])
            rate = min(rate, float(self.broker_configs[leader][LEADER_RATE]) - self.write[tp] * in_sync)
        return max(rate, 0.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for tp, r in self.list_reassignments().items():
            self.size[tp] += self.write[tp] * seconds
            for b in r.adding:
                done = self.copied.get((tp, b), 0.0) + self.rate(tp, b) * seconds
                self.copied[(tp, b)] = min(done, self.size[tp])
            if all(self.copied[(tp, b)] >= self.size[tp] for b in r.adding):
                self.complete(tp)

    def log_dir_sizes(self, brokers: Iterable[int] | None = None, *,
                      partitions: Iterable[TopicPartition] | None = None) -> LogDirReport:
        self._enter("log_dir_sizes")
        wanted = set(self.brokers if brokers is None else brokers)
        out = {}
        for tp, part in self.partitions.items():
            if partitions is not None and tp not in set(partitions):
                continue
            for b in part.replicas:
                if b in wanted:
                    size = self.copied.get((tp, b), 0.0) if b in part.adding else self.size[tp]
                    out[TopicPartitionReplica(tp.topic, tp.partition, b)] = ReplicaLogDir("/d", int(size), 0)
        return LogDirReport(replicas=out)


def run(fake: GrowingCluster, request: WatchRequest, store: JournalStore | None) -> tuple[Any, list[WatchEvent]]:
    events: list[WatchEvent] = []
    result = watch(fake, request, store=store, clock=lambda: fake.now, sleep=fake.advance, emit=events.append)
    return result, events


def test_the_first_screen_shows_the_model_eta_at_once_while_the_write_sample_runs() -> None:
    """Issue 30: the screen was blank for the 10 s write sample. The first poll now comes at once,
    with the model's ETA from the rates known so far, and says that the sample still runs."""
    fake = GrowingCluster()
    fake.alter_reassignments({TP: [1, 3]})
    screens: list[str] = []
    screen = WatchScreen()

    def emit(event: WatchEvent) -> None:
        screen.update(event)
        screens.append(screen_text(screen))

    watch(fake, WatchRequest(targets=(PartitionTarget("t", 0, (1, 3)),), interval_s=5, sample_s=10, timeout_s=5),
          store=None, clock=lambda: fake.now, sleep=fake.advance, emit=emit)
    first = screens[0].splitlines()
    assert first[0].split() == ["overall", "0.0%", "0", "B/100.0", "MB", "1", "moving,", "0", "done"]
    assert first[1] == ("ETA 1.0s (replication model; write rates still being sampled (10s): those known so far "
                        "used, the others taken as 0); observed after two polls; throughput -")
    assert first[6].split() == ["t-0->3", "0.0%", "0", "B/100.0", "MB", "-", "-", "1.0s"]
    assert "ETA 0.5s (replication model; write rates still being sampled (10s)" in screens[1]


def test_a_standing_throttle_set_while_nothing_moved_outlives_a_watch(tmp_path: Path) -> None:
    """`throttle set` while nothing moves is the operator's standing throttle: a watch that sees
    nothing moving leaves it (and its journal) for `throttle clear`; one set during a move ends
    with the move (found walking through a decommission on Kafka 4.4.0)."""
    fake = GrowingCluster()
    store = JournalStore(tmp_path)
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=7 * MB, brokers=(3,))),
                          store=store)
    (standing,) = store.journals(fake.cluster_id, open_only=True)
    assert standing.standing
    result, events = run(fake, WatchRequest(targets=None, interval_s=5), store)
    assert result.status == ExitStatus.OK and isinstance(events[-1], CompleteEvent)
    assert fake.broker_configs[3] == {LEADER_RATE: str(7 * MB)}
    assert [j.path for j in store.journals(fake.cluster_id, open_only=True)] == [standing.path]

    fake.alter_reassignments({TP: [1, 3]})
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(follower_rate=5 * MB)), store=store)
    result, events = run(fake, WatchRequest(targets=(PartitionTarget("t", 0, (1, 3)),), interval_s=5), store)
    assert result.status == ExitStatus.OK
    assert fake.broker_configs[3] == {LEADER_RATE: str(7 * MB)}  # the move's rate went, the standing one stays
    assert [j.path for j in store.journals(fake.cluster_id, open_only=True)] == [standing.path]

def test_watch_to_completion_restores_throttles(tmp_path: Path) -> None:
    fake = GrowingCluster()
    fake.broker_configs[3][FOLLOWER_RATE] = "4000000"  # the operator's, before the move
    store = JournalStore(tmp_path)
    fake.alter_reassignments({TP: [1, 3]})
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=5 * MB, follower_rate=5 * MB)),
                          store=store)
    result, events = run(fake, WatchRequest(targets=(PartitionTarget("t", 0, (1, 3)),), interval_s=5), store)
    assert result.status == ExitStatus.OK
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    # Broker 1's leader quota (5 MB/s) also counts the 1 MB/s its in-sync follower 2 replicates,
    # so the new replica copies 4 MB/s against 1 MB/s of writes: 100 MB + t = 4 t at t = 33.3 s.
    assert [round(e.at) for e in progress] == [0, 5, 10, 15, 20, 25, 30, 35]
    second = progress[1].view.moves[0]
    assert (second.copy_bps, second.write_bps, second.copied, second.total) == (4 * MB, 1 * MB, 20 * MB, 105 * MB)
    assert second.eta_s == pytest.approx(85 / 3)
    # the model counts what fetches get of the 5 MB/s on a real broker (FetchLimits.leader_share /
    # follower_share: the written partition wakes the leader's parked fetches, so the leader gets
    # a bit more than this fake cluster's exact 5 MB/s, the follower a bit less); the leader,
    # which also carries the 1 MB/s in sync, binds
    lead = 5 * MB * float(FetchLimits().leader_share(np.array(5 * MB), written=True))
    fol = 5 * MB * float(FetchLimits().follower_share(np.array(5 * MB)))
    assert progress[1].model is not None
    assert progress[1].model.seconds == pytest.approx(85 * MB / (min(lead - 1 * MB, fol) - 1 * MB), rel=0.01)
    done = events[-1]
    assert isinstance(done, CompleteEvent) and done.kept_reason is None and done.mismatched == ()
    assert fake.broker_configs == {1: {}, 2: {}, 3: {FOLLOWER_RATE: "4000000"}, 4: {}}
    assert fake.topic_configs["t"] == {}
    assert store.journals(fake.cluster_id, open_only=True) == []
    assert json.loads(json.dumps(done.to_dict()))["throttles_cleared"]["complete"] is True


def test_keep_throttles(tmp_path: Path) -> None:
    fake = GrowingCluster()
    fake.alter_reassignments({TP: [1, 3]})
    fake.broker_configs[3][FOLLOWER_RATE] = "50000000"
    result, events = run(fake, WatchRequest(interval_s=5, keep_throttles=True), JournalStore(tmp_path))
    assert result.status == ExitStatus.OK and fake.broker_configs[3] == {FOLLOWER_RATE: "50000000"}
    assert isinstance(events[-1], CompleteEvent) and events[-1].kept_reason == "--keep-throttles was given"


def stalled_cluster() -> GrowingCluster:
    fake = GrowingCluster()
    fake.write[TP] = 2 * MB
    fake.alter_reassignments({TP: [1, 3]})
    fake.broker_configs[3][FOLLOWER_RATE] = "1000000"
    fake.topic_configs["t"] = {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}
    return fake


def test_stall_is_detected_and_the_working_rate_named() -> None:
    fake = stalled_cluster()
    result, events = run(fake, WatchRequest(interval_s=10, stall_after_s=30, fail_on_stall=True), None)
    assert result.status == ExitStatus.CANNOT_COMPLETE
    stalled = [e for e in events if isinstance(e, StalledEvent)]
    assert [e.at for e in stalled] == [30.0]
    stall = stalled[0].stall
    # The follower quota of broker 3 (1 MB/s) is below the 2 MB/s of writes: it must exceed 2 MB/s,
    # and 2.5 MB/s (25% more) is what the model suggests; the leader side is unthrottled.
    assert (stall.reason, stall.limit, stall.broker, stall.needed_bps) == ("model", "follower-throttle", 3, 2 * MB)
    assert [f.command() for f in stall.fixes] == ["kreassign throttle set --follower-rate 2500000 --brokers 3"]
    assert event_lines(stalled[0]) == [
        "STALLED: t-0 (new replica on broker 3) cannot finish: its partition takes 2.0 MB/s of writes, more than "
        "its share of the follower-throttle on broker 3 (which must exceed 2.0 MB/s); these rates would work: "
        "kreassign throttle set --follower-rate 2500000 --brokers 3"]
    assert fake.broker_configs[3] == {FOLLOWER_RATE: "1000000"}  # nothing cleared on a stall


def test_timeout_is_in_progress() -> None:
    result, events = run(stalled_cluster(), WatchRequest(interval_s=10, timeout_s=20), None)
    assert result.status == ExitStatus.IN_PROGRESS and events[-1].to_dict()["event"] == "timeout"


def test_cli_json_lines(tmp_path: Path, kreassign: Kreassign) -> None:
    fake = stalled_cluster()
    ran = kreassign.run("watch", "--output", "json", "--interval", "10s", "--stall-after", "20s",
                        "--fail-on-stall", "--journal-dir", str(tmp_path),
                        runtime=Runtime(clock=lambda: fake.now, sleep=fake.advance), connect=fake, columns=160)
    assert ran.exit_code == 4, ran.output
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [d["event"] for d in lines] == ["progress", "progress", "progress", "stalled"]
    assert [d["write_rates"]["state"] for d in lines[:3]] == ["sampling", "measured", "measured"]
    assert lines[1]["moves"][0]["write_bps"] == 2 * MB and lines[1]["eta_model_s"] is None
    assert lines[-1]["fixes"][0]["rate"] == 2_500_000


def test_rendering() -> None:
    fake = GrowingCluster()
    fake.alter_reassignments({TP: [1, 3]})
    fake.broker_configs[3][FOLLOWER_RATE] = "5000000"
    fake.topic_configs["t"] = {FOLLOWER_REPLICAS: "0:3"}
    _, events = run(fake, WatchRequest(interval_s=5, timeout_s=5), None)
    progress = [e for e in events if isinstance(e, ProgressEvent)][1]
    # 25 MB of 105 MB; 5 MB/s against 1 MB/s of writes leaves 80 MB at 4 MB/s: 20 s observed; the
    # model counts what fetches get of 5 MB/s on a real broker (4.59 MB/s): 80 / 3.59 = 22 s.
    assert summary_line(progress) == ("[5.0s] 23.8% 25.0 MB/105.0 MB, 1 moving, 0 done, throughput 5.0 MB/s, "
                                      "ETA observed 20s, model 22s")
    assert summary_line(progress, "binary").startswith("[5.0s] 23.8% 23.8 MiB/100.1 MiB, 1 moving, 0 done, "
                                                       "throughput 4.8 MiB/s")
    screen = WatchScreen()
    screen.update(progress)
    lines = screen_text(screen).splitlines()
    assert lines[0].startswith("overall ") and lines[0].endswith("23.8% 25.0 MB/105.0 MB 1 moving, 0 done")
    assert lines[1] == ("ETA 22s (replication model; writes measured from the polls); observed 20s; "
                        "throughput 5.0 MB/s")
    assert lines[2].split() == ["broker", "sends", "receives", "leader", "throttle", "follower", "throttle",
                                "throttle", "used"]
    assert lines[3].split() == ["1", "5.0", "MB/s", "0", "B/s", "none", "none", "-"]
    assert lines[4].split() == ["3", "0", "B/s", "5.0", "MB/s", "none", "5.0", "MB/s", "100%"]
    assert lines[6].startswith("t-0->3 ") and lines[6].split()[-9:] == [
        "23.8%", "25.0", "MB/105.0", "MB", "5.0", "MB/s", "1.0", "MB/s", "22s"]  # the model's, as the overall
    assert "above the throttle" not in screen_text(screen)
    burst = replace(progress, brokers=tuple(replace(b, in_bps=b.in_bps * 1.34) for b in progress.brokers))
    screen.update(burst)
    lines = screen_text(screen).splitlines()
    assert lines[4].split()[-1] == "134%*" and " ".join(line.strip() for line in lines[5:7]).startswith(OVER_THROTTLE_NOTE)
    down = ProgressEvent(progress.at, progress.view, progress.model, progress.in_flight, down=(3, 4))
    assert summary_line(down) == summary_line(progress) + "; brokers 3,4 not answering"
    assert down.to_dict()["brokers_not_answering"] == [3, 4]
    canary = replace(progress, canary_impact=(Impact(1, 0.35, False, 0), Impact(2, 1.5, False, 0), Impact(3, None, False, 0)))
    assert summary_line(canary) == summary_line(progress) + ", clients: canary p99 +150% on broker 2"
    timed_out = replace(canary, canary_impact=canary.canary_impact + (Impact(4, 0.1, False, 2),))
    assert summary_line(timed_out) == summary_line(progress) + ", clients: canary 2 timeout(s) on broker 4"
    screen.update(down)
    assert "Brokers 3,4 do not answer: their moves cannot progress." in screen_text(screen)


def screen_text(screen: WatchScreen) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(screen.render())
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_screen_at_three_moments_reports_a_stall_once_and_its_end_once() -> None:
    fake = stalled_cluster()
    screen = WatchScreen(units="binary")
    shots: dict[str, str] = {}

    def emit(event: WatchEvent) -> None:
        screen.update(event)
        if isinstance(event, ProgressEvent) and int(event.at) in (20, 90):
            shots["before" if event.at < 30 else "stalled"] = screen_text(screen)
        if isinstance(event, (CompleteEvent, TimeoutEvent)):
            shots["after"] = screen_text(screen)

    def sleep(seconds: float) -> None:
        fake.advance(seconds)
        if fake.now >= 100 and fake.broker_configs[3][FOLLOWER_RATE] == "1000000":
            fake.broker_configs[3][FOLLOWER_RATE] = "10000000"  # the operator raises the throttle

    watch(fake, WatchRequest(interval_s=10, stall_after_s=30, timeout_s=150), store=None, clock=lambda: fake.now,
          sleep=sleep, emit=emit)
    assert set(shots) == {"before", "stalled", "after"}
    assert "Stalled now" not in shots["before"] and "STALLED" not in shots["before"]
    during = shots["stalled"]
    # six polls into the stall it is listed once as in force and logged once, and the message's
    # numbers agree with the rows above it (2 MB/s of writes, a 1 MB/s follower throttle)
    assert during.count("Stalled now:") == 1 and during.count("STALLED:") == 1
    assert during.count("t-0 (new replica on broker 3) cannot finish") == 2
    assert "takes 1.9 MiB/s of writes, more than its share of the follower-throttle on broker 3" in during
    assert "none        976.6 KiB/s           100%" in during  # broker 3: a 1 MB/s follower throttle, all used
    after = shots["after"]
    assert "Stalled now" not in after and after.count("STALLED:") == 1
    assert after.count("Stall over: t-0 (new replica on broker 3)") == 1
    for shot in shots.values():  # one unit system: binary sizes and rates only
        assert not re.search(r"\d (kB|MB|GB)(/s)?\b", shot), shot


def test_auto_throttle_toward_a_deadline_is_journaled(tmp_path: Path) -> None:
    fake = GrowingCluster()
    store = JournalStore(tmp_path)
    fake.alter_reassignments({TP: [1, 3]})
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=1 * MB, follower_rate=1 * MB)), store=store)
    policy = AutoThrottlePolicy(deadline_s=100.0, min_rate=1 * MB, max_rate=50 * MB, min_interval_s=10)
    result, events = run(fake, WatchRequest(interval_s=5, auto=policy), store)
    assert result.status == ExitStatus.OK
    changes = [e for e in events if isinstance(e, ThrottleEvent)]
    assert changes and changes[0].at == 5.0  # the first poll with measured write rates
    # Finishing 100 MB + 1 MB/s of writes within 90% of the 95 s left needs ~2.2 MB/s of
    # catch-up; the leader quota also carries the 1 MB/s its in-sync follower replicates.
    leader, follower = changes[0].decision.rates[1][0], changes[0].decision.rates[3][1]
    assert leader == pytest.approx(follower + 1 * MB, rel=0.01) and 2 * MB < follower < 2.6 * MB
    done = events[-1]
    assert isinstance(done, CompleteEvent) and done.at <= 100.0
    journal = JournalStore(tmp_path).journals(fake.cluster_id)[0]
    assert any(s.step == "auto-throttle: rates" and s.status == "done" for s in journal.steps)
    assert fake.broker_configs == {1: {}, 2: {}, 3: {}, 4: {}}  # restored at the end


def test_pace_dry_run_names_the_first_wave(tmp_path: Path, kreassign: Kreassign) -> None:
    fake = GrowingCluster()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 3]}, {"topic": "t", "partition": 1, "replicas": [3, 2]}]}))
    ran = kreassign.run("watch", "--pace", str(plan), "--max-moves-per-broker", "1", "--dry-run",
                        runtime=Runtime(clock=lambda: fake.now, sleep=fake.advance), connect=fake, columns=160)
    assert ran.exit_code == 0, ran.output
    # t-0: 1 sends to 3; t-1: 3 sends to 2. One move per broker each way: both fit.
    assert ran.stdout == "Would submit 2 partition(s) in waves; the first wave: t-0,t-1. Nothing was changed.\n"
    assert fake.list_reassignments() == {}


def test_the_first_poll_uses_the_rates_known_so_far_and_the_sample_s_end_its_rates(tmp_path: Path) -> None:
    fake = GrowingCluster()
    store = JournalStore(tmp_path)
    fake.alter_reassignments({TP: [1, 3]})
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=5 * MB, follower_rate=5 * MB)),
                          store=store)
    fake.advance(10.0)  # 110 MB written, 40 MB copied
    _, events = run(fake, WatchRequest(targets=(PartitionTarget("t", 0, (1, 3)),), interval_s=30, sample_s=10,
                                       timeout_s=10), store)
    first, second = [e for e in events if isinstance(e, ProgressEvent)]
    assert first.view.moves[0].lag == 70 * MB and first.model is not None and second.model is not None
    assert second.at == 10.0  # the poll after the first comes at the end of the sample's window, not the interval
    # at once: the model takes the writes as 0 (none known yet): 70 MB at what fetches get of the
    # 5 MB/s (the follower's share binds); at the sample's end, the leader quota also carries the
    # in-sync follower's 1 MB/s (so the leader binds, its parked fetches woken by the writes) and
    # the lag grows by 1 MB/s
    fetches = FetchLimits()
    lead = 5 * MB * float(fetches.leader_share(np.array([5 * MB]))[0])
    written = 5 * MB * float(fetches.leader_share(np.array([5 * MB]), written=True)[0])
    fol = 5 * MB * float(fetches.follower_share(np.array([5 * MB]))[0])
    assert first.model.seconds == pytest.approx(70 * MB / min(lead, fol), rel=0.01)
    assert first.to_dict()["write_rates"]["state"] == "sampling" and first.to_dict()["write_rates"]["known"] is False
    lag = second.view.moves[0].lag
    assert second.model.seconds == pytest.approx(lag / (min(written - 1 * MB, fol) - 1 * MB), rel=0.01)
    assert second.to_dict()["write_rates"] == {
        "known": True, "source": "measured", "window_s": 10.0, "method": "sizes", "measured_at": None,
        "note": OFFSETS_MISSING, "state": "measured", "age_s": 0.0, "sample_window_s": None}


def test_topic_bytes_in_fill_the_rates_the_polls_do_not_have() -> None:
    from kreassign.execute.watch import _Loop

    loop = _Loop(GrowingCluster(), WatchRequest(), None, lambda e: None, [1, 2, 3, 4])
    loop.topic_bytes_in = {"t": 4_000_000.0}
    loop.sampled = {TP: 1_000_000.0}
    partitions = {TP: None, TopicPartition("t", 1): None, TopicPartition("u", 0): None}
    assert loop.write_rates(partitions) == {TP: 1_000_000.0, TopicPartition("t", 1): 2_000_000.0}  # type: ignore[arg-type]


def test_moves_the_pacer_has_yet_to_submit_take_their_topics_writes() -> None:
    """Paced, one move per broker: u-0 waits for t-0 to leave broker 1. The brokers' metrics say
    topic u takes 8 MB/s, which the model of u-0's wave counts although no poll has read u-0."""
    from kreassign.execute.progress import sample_moves
    from kreassign.execute.watch import _Loop
    from kreassign.execute.pacing import PaceLimits, Pacer
    from kreassign.execute.live_throttle import read_throttle_view

    def model_eta(metrics: dict[str, float]) -> tuple[float, set[TopicPartition]]:
        fake = GrowingCluster()
        fake.add_topic("u", [[1, 2]])
        fake.size[TopicPartition("u", 0)], fake.write[TopicPartition("u", 0)] = 100 * MB, 8 * MB
        targets = [PartitionTarget("t", 0, (1, 3)), PartitionTarget("u", 0, (1, 4))]
        request = WatchRequest(targets=targets, pace=PaceLimits(max_moves_per_broker=1), leader_rate=5 * MB,
                               follower_rate=5 * MB)
        loop = _Loop(fake, request, None, lambda e: None, [1, 2, 3, 4])
        loop.pacer = Pacer(fake, targets, request.pace, leader_rate=5 * MB, follower_rate=5 * MB, store=None)
        loop.pacer.start()
        loop.topic_bytes_in = metrics
        poll = loop.poll(0.0)
        assert set(poll.watched) == {TP} and [t.tp for t in loop.pacer.pending] == [TopicPartition("u", 0)]
        view = loop.tracker.update(sample_moves(0.0, poll.watched, poll.partitions, poll.report),
                                   pending_bytes=loop.pacer.pending_bytes)
        throttles = read_throttle_view(fake, brokers=[1, 2, 3, 4], topics=["t", "u"], in_flight=poll.in_flight)
        _, eta = loop.model(view, poll, throttles)
        assert eta is not None
        return eta.seconds, set(poll.waiting)

    idle, waiting = model_eta({})
    written, _ = model_eta({"u": 8 * MB})
    assert waiting == {TopicPartition("u", 0)}
    # u-0 starts from 0 bytes copied, its lag growing by 8 MB/s while the leader's quota is 5 MB/s
    assert math.isfinite(idle) and math.isinf(written)


def test_the_live_model_reads_what_each_fetcher_session_also_carries() -> None:
    from kreassign.cluster.model import PartitionInfo, TopicPartition
    from kreassign.execute.live_eta import _sessions
    from kreassign.predict.model import Session

    parts = {TopicPartition("w", 0): PartitionInfo("w", 0, (1, 2), leader=1, isr=(1, 2)),
             TopicPartition("i", 0): PartitionInfo("i", 0, (1, 3), leader=1, isr=(1, 3)),
             TopicPartition("o", 0): PartitionInfo("o", 0, (4, 2), leader=4, isr=(4,))}
    rates = {TopicPartition("w", 0): 1 * MB}
    # moves into 2, 3 and 4 from leader 1, and into 2 from leader 4 (2 is out of sync there)
    assert _sessions(parts, rates, [1, 1, 1, 4], [2, 3, 4, 2]) == [
        Session.WRITTEN_ISR, Session.IDLE_ISR, Session.ALONE, Session.ALONE]


def test_watch_timeout_is_a_deprecated_alias_of_stop_after(kreassign: Kreassign) -> None:
    both = kreassign.run("watch", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1s", "--stop-after", "2s")
    assert both.code == 2 and "--timeout is the old name of --stop-after: give one of them" in both.err
    alone = kreassign.run("watch", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1s", "--request-timeout",
                          "1s")
    assert alone.err.startswith("Note: watch --timeout is deprecated: use --stop-after (same meaning)")
    assert alone.code == 5  # and it went on as --stop-after 1s would: to the (unreachable) cluster


def test_a_poll_without_a_reading_holds_the_last_figures_and_the_rate_source_stays_measured() -> None:
    """Issue 30: `observed` and `throughput` flipped to `-` and the write-rate source back to "not
    measured yet" whenever a poll lacked a reading (here: a second move starts, with one sample
    of its own, and at the end nothing moves)."""
    fake = GrowingCluster()
    fake.alter_reassignments({TP: [1, 3]})
    t1 = TopicPartition("t", 1)
    fake.size[t1] = 200 * MB

    def sleep(seconds: float) -> None:
        fake.advance(seconds)
        if fake.now == 10.0:
            fake.alter_reassignments({t1: [3, 2]})  # another reassignment appears between polls

    events: list[WatchEvent] = []
    watch(fake, WatchRequest(interval_s=5, timeout_s=60), store=None, clock=lambda: fake.now, sleep=sleep,
          emit=events.append)
    polls = [e for e in events if isinstance(e, ProgressEvent)]
    at = {e.at: e for e in polls}
    assert [e.source.state for e in polls] == ["unknown"] + ["measured"] * (len(polls) - 1)
    assert [e.source.age_s(e.at) for e in polls[1:4]] == [0.0, 5.0, 0.0]  # 10 s: t-1 has one sample
    before, lacking = at[5.0], at[10.0]
    assert lacking.view.throughput_bps is None and lacking.view.eta_s is None  # what the poll itself has
    shown = lacking.figures
    assert shown["throughput"] == Held(10 * MB, 5.0, held=True)
    assert shown["observed"].held and shown["observed"].value == pytest.approx(before.view.eta_s - 5.0)
    assert lacking.to_dict()["held"] == {"throughput_bps": 5.0, "eta_observed_s": 5.0}
    assert lacking.to_dict()["throughput_bps"] == 10 * MB
    line = summary_line(lacking)
    assert ", throughput 10.0 MB/s (held: last read at 5.0s), ETA observed " in line
    assert "(held: last read at 5.0s), model " in line and "-" not in line.split("ETA")[1]
    screen = WatchScreen()
    screen.update(lacking)
    assert screen_text(screen).splitlines()[1] == (
        f"ETA {format_duration(lacking.model.seconds)} (replication model; writes measured from the polls, 5.0s ago); "  # type: ignore[union-attr]
        f"observed {format_duration(shown['observed'].value)} (held: last read at 5.0s); throughput 10.0 MB/s "  # type: ignore[arg-type]
        "(held: last read at 5.0s)")
    # every figure once known stays known to the end, and the last screen says "done"
    for name in ("throughput", "observed", "eta"):
        known = [e.figures[name].value is not None for e in polls]
        assert known == sorted(known), name
    screen.update(polls[-1])
    assert screen_text(screen).splitlines()[1].startswith("ETA done (replication model; writes measured from the polls")
    last = polls[-1].to_dict()  # the same keys as every other poll's, the ETA 0
    assert (last["eta_model_s"], last["critical"], last["eta_with_suggestions_s"]) == (0.0, [], None)
    assert set(last) == set(polls[1].to_dict())


def test_per_move_etas_come_from_the_model_run_of_the_overall_eta() -> None:
    """Issue 30: moves that finished within minutes showed `never` and `20h47m` (their observed
    slopes still held the stalled minutes) while the overall ETA, from the model, was right."""
    fake = stalled_cluster()
    fake.alter_reassignments({TopicPartition("t", 1): [3, 2]})
    fake.topic_configs["t"] = {LEADER_REPLICAS: "0:1,0:2,1:3,1:4", FOLLOWER_REPLICAS: "0:3,1:2"}
    screen = WatchScreen()
    shots: list[tuple[ProgressEvent, str]] = []

    def emit(event: WatchEvent) -> None:
        screen.update(event)
        if isinstance(event, ProgressEvent):
            shots.append((event, screen_text(screen)))

    def sleep(seconds: float) -> None:
        fake.advance(seconds)
        if fake.now == 60.0:
            fake.broker_configs[3][FOLLOWER_RATE] = "10000000"  # the operator raises the throttle

    watch(fake, WatchRequest(interval_s=10, stall_after_s=30, timeout_s=200), store=None, clock=lambda: fake.now,
          sleep=sleep, emit=emit)
    raised = next((e, text) for e, text in shots if e.at == 70.0)
    event, text = raised
    move = next(m for m in event.view.active if m.key.partition == 0)
    assert move.eta_s == math.inf  # the observed slope still holds the stalled minute
    assert event.model is not None and math.isfinite(event.model.seconds)
    row = next(line for line in text.splitlines() if line.startswith("t-0->3 "))
    assert row.split()[-1] == format_duration(event.model.finish[move.key])
    for e, text in shots:
        if e.model is None or not e.view.active:
            continue
        ends = [e.model.finish[m.key] for m in e.view.active]
        assert e.model.seconds == max(ends)  # the overall ETA is the last move's end, same model run
        moves = e.to_dict()["moves"]
        assert max((m["eta_model_s"] for m in moves if m["eta_model_s"] is not None), default=None) == \
            e.to_dict()["eta_model_s"] or math.isinf(e.model.seconds)
        rows = [line for line in text.splitlines() if line.startswith("t-")]
        assert rows and all(row.split()[-1] != "never" for row in rows) or math.isinf(e.model.seconds)
