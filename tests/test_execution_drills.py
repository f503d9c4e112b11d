"""Fault drills: kill -9 of execute/resume/abort at any step, abort while execute lives, two
executes at once; after each drill no move ran unthrottled, no throttle is left behind, the
operator's own values are back and the replica counts are as planned.

The cluster is the in-memory fake driven by an injected clock: each sleep of a loop advances
simulated time and completes a seeded random subset of the moves in flight, after checking that
every move in flight is throttled and within the paced limits. kill -9 is a `Killed`
(BaseException, so nothing journals or cleans up) raised from the journal's guard before a
randomly chosen intent; the marker the dead process leaves on the cluster is put back as it was,
and its pid counts as gone.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fake_cluster import FakeCluster
from kreassign.cluster.errors import KreassignError
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.execute.errors import ExecutionLocked, JournalConflict, RetargetRefused, StopRequested
from kreassign.execute.executor import ExecuteRequest
from kreassign.execute.journal import JournalStore
from kreassign.execute.lock import LOCK_KEY, LockConfig
from kreassign.execute.pacing import PaceLimits
from kreassign.execute.run import RunControl, abort_run, refuse_while_running, resume_run, run_execute, verify_run
from kreassign.execute.verify import VerifyRequest, verify
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE

pytestmark = pytest.mark.drill

OPERATOR_RATE = "777"
DRILLS = 200


class Killed(BaseException):
    """kill -9: nothing below catches it, so nothing is journaled or cleaned up."""


@dataclass
class World:
    fake: FakeCluster
    store: JournalStore
    rng: random.Random
    limit: int | None = None
    throttled: bool = True
    now: float = 0.0
    alive: set[int] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    back_after: int | None = None
    """sleeps until a broker stopped by the drill starts again"""

    def check_in_flight(self) -> None:
        in_flight = self.fake.list_reassignments()
        into: dict[int, int] = {}
        for tp, r in in_flight.items():
            configs = self.fake.topic_configs.get(tp.topic, {})
            follower = set(configs.get(FOLLOWER_REPLICAS, "").split(","))
            for b in r.adding:
                into[b] = into.get(b, 0) + 1
                if b in self.fake.down:
                    continue  # a broker that is down copies nothing
                if self.throttled and (f"{tp.partition}:{b}" not in follower
                                       or FOLLOWER_RATE not in self.fake.broker_configs.get(b, {})):
                    self.violations.append(f"unthrottled move {tp} -> {b} at t={self.now}")
        if self.limit is not None:
            over = {b: n for b, n in into.items() if n > self.limit}
            if over:
                self.violations.append(f"more than {self.limit} moves into brokers {over} at t={self.now}")

    def sleep(self, seconds: float) -> None:
        self.check_in_flight()
        if self.back_after is not None:
            self.back_after -= 1
            if self.back_after <= 0:
                self.restart()
        self.now += seconds
        moving = sorted(self.fake.list_reassignments())
        done = [tp for tp in moving if self.rng.random() < 0.6]
        if done:
            self.fake.complete(*done)

    def control(self, pid: int, crash: Callable[[str], None] | None = None, force: bool = False) -> RunControl:
        self.alive.add(pid)
        lock = LockConfig(wall=lambda: 1_000_000.0 + self.now, sleep=lambda s: None, settle_s=0.0,
                          host="drill-host", pid=pid, alive=lambda p: p in self.alive)
        return RunControl(lock=lock, force=force, clock=lambda: self.now, sleep=self.sleep, crash=crash)

    def restart(self) -> None:
        for b in sorted(self.fake.down):
            self.fake.start_broker(b)
        self.back_after = None

    def killer(self, pid: int, at: int, *, down_at: int | None = None, race_at: int | None = None,
               race: Callable[[], None] | None = None) -> Callable[[str], None]:
        """A crash hook: kill -9 of `pid` before its `at`-th journal intent; a broker stopped
        before the `down_at`-th (back two polls later); another run started before the `race_at`-th."""
        seen = [0]
        marker = {}

        def crash(step: str) -> None:
            self.check_in_flight()
            seen[0] += 1
            if seen[0] == down_at and not self.fake.down:
                self.fake.stop_broker(self.rng.choice(sorted(self.fake.brokers)))
                self.back_after = 2
            if seen[0] == race_at and race is not None:
                race()
            if seen[0] == at:
                marker.update(self.fake.markers)
                self.alive.discard(pid)
                raise Killed(step)
        crash.marker = marker  # type: ignore[attr-defined]
        return crash

    def killed(self, crash: Callable[[str], None]) -> None:
        """What kill -9 leaves: the lock marker as the dead process last wrote it."""
        self.fake.markers.clear()
        self.fake.markers.update(crash.marker)  # type: ignore[attr-defined]


def build(seed: int, tmp_path: Path) -> tuple[World, list[PartitionTarget], dict[TopicPartition, tuple[int, ...]]]:
    rng = random.Random(seed)
    fake = FakeCluster([1, 2, 3, 4, 5])
    original: dict[TopicPartition, tuple[int, ...]] = {}
    targets = []
    for t in range(rng.randint(1, 3)):
        topic = f"t{t}"
        assignment = [rng.sample([1, 2, 3, 4, 5], 2) for _ in range(rng.randint(2, 5))]
        fake.add_topic(topic, assignment)
        for p, replicas in enumerate(assignment):
            original[TopicPartition(topic, p)] = tuple(replicas)
            if rng.random() < 0.8:
                targets.append(PartitionTarget(topic, p, tuple(rng.sample([1, 2, 3, 4, 5], 2))))
    if not targets:
        targets.append(PartitionTarget("t0", 0, (5, 4) if original[TopicPartition("t0", 0)] != (5, 4) else (1, 2)))
    fake.broker_configs[2][LEADER_RATE] = OPERATOR_RATE  # the operator's own throttle
    store = JournalStore(tmp_path / f"j{seed}")
    return World(fake, store, rng), targets, original


def assert_clean(world: World, operator_rate: str = OPERATOR_RATE) -> None:
    fake = world.fake
    assert world.violations == []
    assert fake.list_reassignments() == {}
    leftovers = {b: c for b, c in fake.broker_configs.items() if c and b != 2}
    assert leftovers == {}
    assert fake.broker_configs[2] == {LEADER_RATE: operator_rate}
    assert {t: c for t, c in fake.topic_configs.items() if c} == {}
    assert LOCK_KEY not in fake.markers


def finish_moves_and_verify(world: World, targets: list[PartitionTarget]) -> None:
    world.check_in_flight()
    world.fake.complete()
    verify(world.fake, VerifyRequest(targets=targets), store=world.store)


def run_drill(seed: int, tmp_path: Path) -> str:
    world, targets, original = build(seed, tmp_path)
    rng = world.rng
    paced = rng.random() < 0.7
    world.limit = 1 if paced else None
    pace = PaceLimits(1, None, rng.choice(["plan", "small-first", "large-first", "broker-balanced"])) if paced else None
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    extra = rng.choice(["none", "broker-down", "second-execute", "abort-live"])
    raced: list[str] = []

    def abort_while_running() -> None:
        """`kreassign abort` while the run lives: it asks the run to stop; the run cannot stop
        while abort waits here (one thread), so abort gives up having changed nothing."""
        before = ({tp: world.fake.replicas(tp) for tp in original}, world.fake.list_reassignments())
        journal = world.store.journals(world.fake.cluster_id, open_only=True)[0]
        try:
            abort_run(world.fake, journal, store=world.store, control=world.control(901), wait_s=3.0)
        except ExecutionLocked as exc:
            raced.append(str(exc))
        assert ({tp: world.fake.replicas(tp) for tp in original}, world.fake.list_reassignments()) == before

    def second_execute() -> None:
        """Another execute of an overlapping plan, started while the first one runs."""
        before = {tp: world.fake.replicas(tp) for tp in original}
        other = ExecuteRequest(targets=tuple(targets[: max(1, len(targets) // 2)]), additional=True,
                               leader_rate=5, follower_rate=5)
        try:
            run_execute(world.fake, other, store=world.store, control=world.control(900))
        except ExecutionLocked as exc:
            raced.append(str(exc))
        assert {tp: world.fake.replicas(tp) for tp in original} == before

    crash = world.killer(100, rng.randint(1, 12),
                         down_at=rng.randint(2, 8) if extra == "broker-down" and paced else None,
                         race_at=rng.randint(2, 8) if extra in ("second-execute", "abort-live") else None,
                         race=second_execute if extra == "second-execute" else abort_while_running)
    try:
        run_execute(world.fake, request, store=world.store, pace=pace, interval_s=5.0, control=world.control(100, crash))
        kind = "execute-completed"
    except Killed:
        world.killed(crash)
        kind = "execute-killed"
    except KreassignError as exc:
        assert extra == "abort-live" and "asked this run to stop" in str(exc), exc
        kind = "execute-stopped-by-abort"
    world.restart()
    if raced and extra == "abort-live":
        assert all("still holds the lock after 3s; nothing was cancelled" in r for r in raced), raced
        kind += "+abort-waited"
    elif raced:
        assert all("another run holds the execution lock" in r for r in raced), raced
        kind += "+second-execute-refused"
    elif extra == "broker-down" and paced:
        kind += "+broker-down"
    journals = world.store.journals(world.fake.cluster_id, open_only=True)
    end = "abort" if kind.startswith("execute-stopped") else rng.choice(["resume", "abort"])
    if journals and end == "resume":
        # resume may itself be killed once, then resumed again
        second = world.killer(101, rng.randint(1, 10))
        try:
            resume_run(world.fake, journals[0], store=world.store, control=world.control(101, second))
        except Killed:
            world.killed(second)
            kind += "+resume-killed"
            journals = world.store.journals(world.fake.cluster_id, open_only=True)
            if journals:
                resume_run(world.fake, journals[0], store=world.store, control=world.control(102))
        kind += "+resumed"
        if not paced:
            finish_moves_and_verify(world, targets)
        final = {tp: tuple(world.fake.replicas(tp)) for tp in original}
        for t in targets:
            assert sorted(final[t.tp]) == sorted(t.replicas), (seed, t)
    elif journals:
        abort_run(world.fake, journals[0], store=world.store, control=world.control(103))
        kind += "+aborted"
    elif not paced:
        finish_moves_and_verify(world, targets)
    for tp, replicas in original.items():
        assert len(world.fake.replicas(tp)) == len(replicas)
    assert_clean(world)
    return kind


def test_randomized_kill_drills(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kinds: dict[str, int] = {}
    for seed in range(DRILLS):
        kind = run_drill(seed, tmp_path)
        kinds[kind] = kinds.get(kind, 0) + 1
    assert sum(kinds.values()) == DRILLS
    with capsys.disabled():
        print(f"\n{DRILLS} fault drills (seeds 0-{DRILLS - 1}): "
              + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    assert sum(n for k, n in kinds.items() if k.startswith("execute-killed") and k.endswith("resumed")) > 0
    assert sum(n for k, n in kinds.items() if "second-execute-refused" in k) > 0
    assert sum(n for k, n in kinds.items() if "broker-down" in k) > 0
    assert sum(n for k, n in kinds.items() if "abort-waited" in k) > 0


# ---- the scenarios of the issue, one by one ---------------------------------------------------------------
def test_resume_after_kill_keeps_the_pacing_limit_and_the_throttles(tmp_path: Path) -> None:
    world, _, _ = build(0, tmp_path)
    fake = FakeCluster([1, 2, 3, 4, 5, 6])
    fake.add_topic("t", [[1, 2]] * 8)
    world.fake = fake
    fake.broker_configs[2][LEADER_RATE] = OPERATOR_RATE
    world.limit = 1
    targets = [PartitionTarget("t", p, (3 + p % 4, 1) if 3 + p % 4 != 1 else (6, 1)) for p in range(8)]
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    crash = world.killer(100, 7)  # after the second wave was submitted
    with pytest.raises(Killed):
        run_execute(fake, request, store=world.store, pace=PaceLimits(1, None, "plan"), interval_s=5.0,
                    control=world.control(100, crash))
    world.killed(crash)
    journal = world.store.journals(fake.cluster_id, open_only=True)[0]
    assert journal.options["paced"] == {"max_moves_per_broker": 1, "max_inflight_bytes": None, "order": "plan"}
    outcome = resume_run(fake, journal, store=world.store, control=world.control(101))
    assert outcome.took_over is not None and outcome.took_over.pid == 100  # type: ignore[union-attr]
    assert [t.tp for t in targets if fake.replicas(t.tp) != t.replicas] == []
    assert_clean(world)


def test_second_execute_is_refused_while_the_first_lives(tmp_path: Path) -> None:
    world, targets, _ = build(1, tmp_path)
    first = world.control(100).lock.lock(world.fake, world.store.root / "fake-cluster", command="execute",
                                         journal_id="fake-cluster/other").acquire()
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    with pytest.raises(ExecutionLocked, match=r"another run holds the execution lock .* pid 100"):
        run_execute(world.fake, request, store=world.store, control=world.control(101))
    assert world.fake.list_reassignments() == {}
    world.alive.discard(100)
    first.release()  # the local lock file is free again, as when the process died
    world.fake.markers[LOCK_KEY] = first_marker = world.fake.markers.get(LOCK_KEY, "")
    assert first_marker == ""  # released: nothing left
    run_execute(world.fake, request, store=world.store, control=world.control(101))


def test_dead_owner_of_another_plan_needs_force(tmp_path: Path) -> None:
    world, targets, _ = build(2, tmp_path)
    dead = world.control(100).lock.lock(world.fake, world.store.root / "fake-cluster", command="execute",
                                        journal_id="fake-cluster/other").acquire()
    marker = dict(world.fake.markers)
    dead._unlock_local()
    world.alive.discard(100)
    assert world.fake.markers == marker
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    with pytest.raises(ExecutionLocked, match="no longer running .*its process is gone.*--force"):
        run_execute(world.fake, request, store=world.store, control=world.control(101))
    outcome = run_execute(world.fake, request, store=world.store, control=world.control(101, force=True))
    assert outcome.took_over is not None and outcome.took_over.journal == "fake-cluster/other"


def test_other_host_owner_is_dead_only_once_its_lease_expired(tmp_path: Path) -> None:
    world, targets, _ = build(3, tmp_path)
    other = LockConfig(wall=lambda: 1_000_000.0 + world.now, sleep=lambda s: None, settle_s=0.0, host="elsewhere",
                       pid=7, lease_s=120.0)
    held = other.lock(world.fake, tmp_path / "other-host", command="execute", journal_id="fake-cluster/x").acquire()
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    with pytest.raises(ExecutionLocked, match="host elsewhere, pid 7.*lease runs 120s more"):
        run_execute(world.fake, request, store=world.store, control=world.control(101, force=True))
    world.now += 121
    outcome = run_execute(world.fake, request, store=world.store, control=world.control(101, force=True))
    assert outcome.took_over is not None and outcome.took_over.host == "elsewhere"
    with pytest.raises(Exception, match="lost the execution lock"):
        held.check()  # the stale owner stops at its next step


def test_abort_of_a_live_run_asks_it_to_stop_and_waits(tmp_path: Path) -> None:
    world, targets, _ = build(4, tmp_path)
    world.limit = 1
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    crash = world.killer(100, 3)
    with pytest.raises(Killed):
        run_execute(world.fake, request, store=world.store, pace=PaceLimits(1), interval_s=5.0,
                    control=world.control(100, crash))
    world.killed(crash)
    journal = world.store.journals(world.fake.cluster_id, open_only=True)[0]
    # A live owner of this journal: it stops at its next step when asked.
    owner = world.control(200).lock.lock(world.fake, world.store.root / "fake-cluster", command="execute",
                                         journal_id=f"fake-cluster/{journal.plan_hash}").acquire(force=True)
    stopped: list[str] = []

    def owner_step(seconds: float) -> None:
        try:
            owner.check()
        except StopRequested as exc:
            stopped.append(str(exc))
            world.alive.discard(200)
            owner.release()

    control = world.control(201)
    control = RunControl(lock=LockConfig(wall=control.lock.wall, sleep=owner_step, settle_s=0.0, host="drill-host",
                                         pid=201, alive=lambda p: p in world.alive),
                         clock=control.clock, sleep=control.sleep)
    asked = []
    outcome = abort_run(world.fake, journal, store=world.store, control=control, on_wait=asked.append)
    assert [o.pid for o in asked] == [200] and stopped and outcome.stopped is not None
    assert outcome.result.ok
    assert_clean(world)


def test_abort_fails_without_cancelling_when_the_owner_does_not_stop(tmp_path: Path) -> None:
    world, targets, _ = build(5, tmp_path)
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    run_execute(world.fake, request, store=world.store, control=world.control(100))
    journal = world.store.journals(world.fake.cluster_id, open_only=True)[0]
    owner = world.control(200).lock.lock(world.fake, world.store.root / "fake-cluster", command="execute",
                                         journal_id=f"fake-cluster/{journal.plan_hash}").acquire()
    moving = world.fake.list_reassignments()
    with pytest.raises(ExecutionLocked, match="still holds the lock after 5s; nothing was cancelled"):
        abort_run(world.fake, journal, store=world.store, control=world.control(201), wait_s=5.0)
    assert world.fake.list_reassignments() == moving
    owner.release()


def test_retargeting_a_move_another_run_started_is_refused(tmp_path: Path) -> None:
    world, _, _ = build(6, tmp_path)
    fake = world.fake
    tp = TopicPartition("t0", 0)
    now = fake.replicas(tp)
    other = tuple(b for b in (1, 2, 3, 4, 5) if b not in now)[:2]
    fake.alter_reassignments({tp: list(other)})
    mine = tuple(b for b in (5, 4, 3, 2, 1) if b not in other)[:2]
    request = ExecuteRequest(targets=(PartitionTarget("t0", 0, mine),), additional=True)
    with pytest.raises(RetargetRefused, match=r"being reassigned by another run: t0-0 \(moving to"):
        run_execute(fake, request, store=world.store, control=world.control(100))
    forced = ExecuteRequest(targets=request.targets, additional=True, retarget_in_flight=True)
    run_execute(fake, forced, store=world.store, control=world.control(100))
    assert fake.list_reassignments()[tp].target == mine


def test_a_stale_journal_writer_cannot_overwrite_a_newer_state(tmp_path: Path) -> None:
    store = JournalStore(tmp_path)
    journal = store.create(cluster_id="c", targets=[PartitionTarget("t", 0, (1, 2))], command="execute")
    stale = store.load(journal.path)
    journal.set_state("submitted")
    with pytest.raises(JournalConflict, match="changed by another process \\(version 2, this run last saw 1\\)"):
        stale.set_state("aborted")
    assert store.load(journal.path).state == "submitted"


def test_aborting_one_journal_keeps_the_throttles_another_runs_moves_need(tmp_path: Path) -> None:
    world, _, _ = build(7, tmp_path)
    fake = FakeCluster([1, 2, 3, 4])
    fake.add_topic("a", [[1, 2]]).add_topic("b", [[1, 2]])
    fake.broker_configs[2][LEADER_RATE] = OPERATOR_RATE
    world.fake = fake
    first = ExecuteRequest(targets=(PartitionTarget("a", 0, (3, 2)),), leader_rate=1000, follower_rate=1000)
    second = ExecuteRequest(targets=(PartitionTarget("b", 0, (3, 4)),), additional=True, leader_rate=2000,
                            follower_rate=2000)
    run_execute(fake, first, store=world.store, control=world.control(100))
    run_execute(fake, second, store=world.store, control=world.control(101))
    journal_a = next(j for j in world.store.journals(fake.cluster_id, open_only=True) if j.targets[0].topic == "a")
    outcome = abort_run(fake, journal_a, store=world.store, control=world.control(102))
    # b-0 still moves 1,2 -> 3,4: brokers 1-4 and topic b keep their throttles; topic a is cleared.
    assert (outcome.result.kept_brokers, outcome.result.kept_topics) == ((1, 2, 3), ())
    assert fake.topic_configs["a"] == {} and fake.topic_configs["b"][FOLLOWER_REPLICAS] == "0:3,0:4"
    assert fake.broker_configs[3][FOLLOWER_RATE] == "2000"
    fake.complete()
    verify(fake, VerifyRequest(targets=list(second.targets)), store=world.store)
    assert_clean(world)  # the operator's 777 on broker 2 came back last


def test_verify_keeps_and_cancel_refuses_while_a_run_holds_the_lock(tmp_path: Path) -> None:
    world, targets, _ = build(8, tmp_path)
    request = ExecuteRequest(targets=tuple(targets), leader_rate=1000, follower_rate=1000)
    run_execute(world.fake, request, store=world.store, control=world.control(100))
    world.fake.complete()  # nothing moves: a paced run between two waves looks like this
    held = world.control(200).lock.lock(world.fake, world.store.root / "fake-cluster", command="execute",
                                        journal_id="fake-cluster/x").acquire()
    result, owner = verify_run(world.fake, VerifyRequest(targets=tuple(targets)), store=world.store,
                               control=world.control(201))
    assert owner is not None and owner.pid == 200 and result.clear is None
    assert world.fake.broker_configs[1][FOLLOWER_RATE] == "1000"
    with pytest.raises(ExecutionLocked, match="pid 200.*would go on submitting after a cancel"):
        refuse_while_running(world.fake, "cancel", world.control(201))
    world.alive.discard(200)  # once its owner is gone, verify clears as before
    result, owner = verify_run(world.fake, VerifyRequest(targets=tuple(targets)), store=world.store,
                               control=world.control(201))
    assert owner is None and result.clear is not None
    held._unlock_local()
    world.fake.markers.clear()
    assert_clean(world)


def test_resume_goes_on_with_the_per_broker_rates_auto_throttle_chose(tmp_path: Path) -> None:
    from kreassign.execute.pacing import Pacer

    world, targets, _ = build(9, tmp_path)
    pacer = Pacer(world.fake, targets, PaceLimits(1), leader_rate=1000, follower_rate=1000, store=world.store)
    pacer.start()
    pacer.set_rates({3: (4000, 5000)})
    again = Pacer(world.fake, targets, PaceLimits(1), leader_rate=1000, follower_rate=1000, store=world.store)
    again.start()
    assert again.rate_for(3) == (4000, 5000) and again.rate_for(1) == (1000, 1000)


def test_auto_throttle_and_the_pacer_write_the_plans_journal_through_one_handle(tmp_path: Path) -> None:
    """watch --pace --auto-throttle: the throttle change is journaled in the plan's journal through
    the pacer's own handle, so the pacer's next write is not refused as a foreign change."""
    from kreassign.execute.live_throttle import ThrottleSetRequest, apply_throttle_change, plan_throttle_set
    from kreassign.execute.pacing import Pacer

    world, targets, _ = build(9, tmp_path)
    pacer = Pacer(world.fake, targets, PaceLimits(1), leader_rate=1000, follower_rate=1000, store=world.store)
    pacer.start()
    assert pacer.journal is not None
    change = plan_throttle_set(world.fake, ThrottleSetRequest(per_broker={3: (4000, 5000)}))
    result = apply_throttle_change(world.fake, change, store=world.store, command="auto-throttle",
                                   journal=pacer.journal)
    assert result.journal_path == pacer.journal.path
    pacer.set_rates({3: (4000, 5000)})
    reread = world.store.load(pacer.journal.path)
    assert reread.options["broker_rates"] and reread.last_status("auto-throttle: rates") == "done"