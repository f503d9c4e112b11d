"""Run safety on the in-memory cluster: a clear that cannot reach a broker retries it within the
run and never reports a restore it did not do; an abort racing moves that finish meanwhile
(NO_REASSIGNMENT_IN_PROGRESS) succeeds and restores; a failing abort step says what it left and
the command that finishes the job. The same faults on both real engines are in
tests/test_run_drills_e2e.py."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from fake_cluster import FakeCluster, timeout_error
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.cluster.port import ApiError
from kreassign.execute.clear import clear_retrying, clear_throttles
from kreassign.execute.executor import ExecuteRequest
from kreassign.execute.journal import Journal, JournalStore
from kreassign.execute.lock import LockConfig
from kreassign.execute.pacing import PaceLimits
from kreassign.execute.run import RunControl, abort_run, run_execute
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE

pytestmark = pytest.mark.drill

OPERATOR = "777"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.hooks: list[tuple[int, object]] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for at, hook in list(self.hooks):
            if len(self.sleeps) == at:
                hook()  # type: ignore[operator]


def control(clock: Clock) -> RunControl:
    lock = LockConfig(wall=lambda: 1_000_000.0 + clock.now, sleep=lambda s: None, settle_s=0.0, host="h", pid=1,
                      alive=lambda p: True)
    return RunControl(lock=lock, clock=lambda: clock.now, sleep=clock.sleep)


def cluster() -> FakeCluster:
    fake = FakeCluster([1, 2, 3, 4])
    fake.add_topic("t", [[1, 2], [2, 3]])
    fake.broker_configs[3][LEADER_RATE] = OPERATOR  # the operator's own rate on the broker that restarts
    return fake


def executed(fake: FakeCluster, tmp_path: Path, clock: Clock) -> JournalStore:
    store = JournalStore(tmp_path)
    request = ExecuteRequest(targets=(PartitionTarget("t", 0, (3, 4)), PartitionTarget("t", 1, (4, 1))),
                             leader_rate=1000, follower_rate=1000)
    run_execute(fake, request, store=store, control=control(clock))
    return store


def down_at_the_clear(tmp_path: Path) -> tuple[FakeCluster, Clock, JournalStore, Journal]:
    """A run whose moves are done, broker 3 (with the operator's rate) down when it clears."""
    fake, clock = cluster(), Clock()
    store = executed(fake, tmp_path, clock)
    fake.complete()
    fake.stop_broker(3)
    return fake, clock, store, store.journals(fake.cluster_id, open_only=True)[0]


def test_a_broker_down_at_the_clear_is_retried_and_restored_exactly_once_back(tmp_path: Path) -> None:
    fake, clock, store, journal = down_at_the_clear(tmp_path)
    clock.hooks.append((2, lambda: fake.start_broker(3)))  # back after the second retry wait
    waited: list[tuple[int, ...]] = []
    result = clear_retrying(fake, [1, 2, 3, 4], ["t"], journal=journal, clock=lambda: clock.now, sleep=clock.sleep,
                            interval_s=5.0, on_wait=lambda brokers, left: waited.append(brokers))
    assert result.complete and result.retried == (3,) and waited == [(3,), (3,)]
    assert result.restored_brokers == {3: {LEADER_RATE: OPERATOR}}
    assert fake.broker_configs == {1: {}, 2: {}, 3: {LEADER_RATE: OPERATOR}, 4: {}}
    assert fake.topic_configs["t"] == {}
    assert store.load(journal.path).state == "finished"


def test_a_broker_that_stays_down_is_pending_and_never_reported_restored(tmp_path: Path) -> None:
    fake, clock, store, journal = down_at_the_clear(tmp_path)
    result = clear_retrying(fake, [1, 2, 3, 4], ["t"], journal=journal, clock=lambda: clock.now, sleep=clock.sleep,
                            retry_s=30.0, interval_s=10.0)
    assert sorted(result.skipped) == [3] and result.restored_brokers == {} and result.retried == ()
    assert result.cleared_brokers == (1, 2, 4) and result.as_dict()["pending_brokers"] == [3]
    assert sum(clock.sleeps) == 30.0  # the stated bound, in waits of the interval
    assert fake.broker_configs[3] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}  # kreassign's rates stay
    saved = store.load(journal.path)
    assert saved.state == "clearing" and set(saved.pending_brokers) == {3}
    # once it is back, the clear the journal holds restores it exactly
    fake.start_broker(3)
    last = next(s for s in reversed(saved.steps) if s.step == "clear-throttles" and s.status == "intent")
    again = clear_throttles(fake, last.detail["brokers"], last.detail["topics"], journal=saved)
    assert again.complete and fake.broker_configs[3] == {LEADER_RATE: OPERATOR}
    assert store.load(journal.path).state == "finished"


class FinishingMeanwhile(FakeCluster):
    """Moves that finish between abort's read of the reassignments and its cancel."""

    finish_on_cancel: set[TopicPartition] = set()

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None],
                            ) -> dict[TopicPartition, ApiError | None]:
        if all(v is None for v in targets.values()) and self.finish_on_cancel:
            self.complete(*sorted(self.finish_on_cancel & set(targets)))
        return super().alter_reassignments(targets)


def test_abort_racing_moves_that_finish_treats_them_as_done_and_restores(tmp_path: Path) -> None:
    fake, clock = FinishingMeanwhile([1, 2, 3, 4]), Clock()
    fake.add_topic("t", [[1, 2], [2, 3]])
    fake.broker_configs[3][LEADER_RATE] = OPERATOR
    store = executed(fake, tmp_path, clock)
    fake.finish_on_cancel = {TopicPartition("t", 0)}
    journal = store.journals(fake.cluster_id, open_only=True)[0]
    outcome = abort_run(fake, journal, store=store, control=control(clock))
    result = outcome.result
    assert result.ok and result.left is None and result.cancel_errors == {}
    # t-0 finished before the cancel reached it: it stays at its target, listed with the plan back
    assert result.rollback == {TopicPartition("t", 0): (1, 2)}
    assert result.cancelled == (TopicPartition("t", 1),)  # not t-0: nothing of it was cancelled
    assert fake.replicas(TopicPartition("t", 0)) == (3, 4) and sorted(fake.replicas(TopicPartition("t", 1))) == [2, 3]
    assert fake.broker_configs == {1: {}, 2: {}, 3: {LEADER_RATE: OPERATOR}, 4: {}}
    assert fake.topic_configs["t"] == {} and fake.list_reassignments() == {}
    saved = store.load(journal.path)
    assert saved.state == "aborted"
    cancel = next(s for s in saved.steps if s.step == "cancel-reassignments" and s.status == "done")
    assert cancel.detail["finished_meanwhile"] == ["t-0"] and cancel.detail["errors"] == {}


def test_an_abort_whose_cancel_fails_says_what_it_left_and_what_finishes_it(tmp_path: Path) -> None:
    from fake_cluster import _error

    fake, clock = cluster(), Clock()
    store = executed(fake, tmp_path, clock)
    fake.reject[TopicPartition("t", 1)] = _error(7, "REQUEST_TIMED_OUT", "timed out")
    journal = store.journals(fake.cluster_id, open_only=True)[0]
    result = abort_run(fake, journal, store=store, control=control(clock)).result
    assert not result.ok and list(result.cancel_errors) == [TopicPartition("t", 1)]
    assert result.left == (f"1 move(s) still run (t-1); the throttles stay on brokers 1,2,3,4 and topics t, and the "
                           f"journal stays open: run `kreassign abort --journal {journal.path}` again")
    assert fake.topic_configs["t"][FOLLOWER_REPLICAS]  # the move still copying keeps its throttle
    del fake.reject[TopicPartition("t", 1)]
    again = abort_run(fake, store.load(journal.path), store=store, control=control(clock)).result
    assert again.ok and fake.broker_configs[3] == {LEADER_RATE: OPERATOR} and fake.topic_configs["t"] == {}


class LandsLate(FakeCluster):
    """The controller takes a submission but its answer never comes (the request times out)."""

    time_out_next = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.starts: list[TopicPartition] = []

    hold_next = 0
    held: dict[TopicPartition, Sequence[int] | None] = {}

    def land(self) -> None:
        """The held submission reaches the controller now."""
        if self.held:
            super().alter_reassignments(self.held)
            self.held = {}

    def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None],
                            ) -> dict[TopicPartition, ApiError | None]:
        self.starts += [tp for tp, v in targets.items() if v is not None]
        if self.hold_next:
            self.hold_next -= 1
            self.held = dict(targets)
            raise timeout_error()
        result = super().alter_reassignments(targets)
        if self.time_out_next and any(v is not None for v in targets.values()):
            self.time_out_next -= 1
            raise timeout_error()
        return result


def paced_world(fake: FakeCluster, tmp_path: Path) -> tuple[JournalStore, ExecuteRequest]:
    fake.add_topic("t", [[1, 2], [2, 3], [3, 4]])
    fake.broker_configs[3][LEADER_RATE] = OPERATOR
    request = ExecuteRequest(targets=(PartitionTarget("t", 0, (3, 4)), PartitionTarget("t", 1, (4, 1)),
                                      PartitionTarget("t", 2, (1, 2))), leader_rate=1000, follower_rate=1000)
    return JournalStore(tmp_path), request


def test_a_paced_submit_that_times_out_and_lands_later_is_adopted_not_resubmitted(tmp_path: Path) -> None:
    fake, clock = LandsLate([1, 2, 3, 4]), Clock()
    store, request = paced_world(fake, tmp_path)
    fake.time_out_next = 1  # wave 1 (t-0 and t-2) is taken, but its answer times out
    for n in range(1, 40):
        clock.hooks.append((n, fake.complete))
    outcome = run_execute(fake, request, store=store, pace=PaceLimits(1), interval_s=1.0, control=control(clock))
    assert outcome.watched is not None and int(outcome.watched.status) == 0
    assert sorted(fake.starts) == sorted(t.tp for t in request.targets)  # each partition submitted exactly once
    journal = store.journals(fake.cluster_id)[0]
    failed = next(s for s in journal.steps if s.step == "wave 1: submit" and s.status == "failed"
                  and "accepted" in s.detail)
    assert failed.detail["accepted"] == 2 and failed.detail["waiting"] == []
    assert journal.state == "finished" and fake.broker_configs[3] == {LEADER_RATE: OPERATOR}
    assert {tp: fake.replicas(tp) for tp in journal.target_of()} == journal.target_of()


def test_a_paced_submit_failing_again_and_again_stops_saying_what_it_left(tmp_path: Path) -> None:
    from kreassign.execute.errors import ExecuteFailed

    fake, clock = FakeCluster([1, 2, 3, 4]), Clock()
    store, request = paced_world(fake, tmp_path)
    for _ in range(3):
        fake.fail_next("alter_reassignments", timeout_error())
    with pytest.raises(ExecuteFailed) as failed:
        run_execute(fake, request, store=store, pace=PaceLimits(1), interval_s=1.0, control=control(clock))
    journal = store.journals(fake.cluster_id, open_only=True)[0]
    assert str(failed.value) == (
        "submitting wave 3 failed 3 times in a row (the last: " + str(timeout_error()) + "); 0 partition(s) of the "
        "plan were accepted, 3 wait. The throttles stay and the journal stays open: once the controller answers, run "
        f"`kreassign resume --journal {journal.path}` (it finds what landed late), or "
        f"`kreassign abort --journal {journal.path}` to undo")
    assert fake.list_reassignments() == {} and journal.state == "running"


def test_a_paced_submit_that_lands_after_the_run_asked_is_found_at_the_next_poll(tmp_path: Path) -> None:
    fake, clock = LandsLate([1, 2, 3, 4]), Clock()
    store, request = paced_world(fake, tmp_path)
    fake.hold_next = 1  # wave 1 times out with nothing taken yet; it lands during the next wait
    clock.hooks.append((1, fake.land))
    for n in range(2, 40):
        clock.hooks.append((n, fake.complete))
    outcome = run_execute(fake, request, store=store, pace=PaceLimits(1), interval_s=1.0, control=control(clock))
    assert outcome.watched is not None and int(outcome.watched.status) == 0
    assert sorted(fake.starts) == sorted(t.tp for t in request.targets)  # never submitted twice
    journal = store.journals(fake.cluster_id)[0]
    landed = next(s for s in journal.steps if s.step == "submission landed late")
    assert landed.detail["partitions"] == ["t-0", "t-2"]
    assert journal.state == "finished" and fake.broker_configs[3] == {LEADER_RATE: OPERATOR}
    assert {tp: fake.replicas(tp) for tp in journal.target_of()} == journal.target_of()


def test_a_paced_run_stopped_by_a_cluster_error_says_what_it_left_and_what_finishes_it(tmp_path: Path) -> None:
    """A controller that stops answering after the first wave (on both engines with a hung
    controller: tests/test_run_drills_e2e.py): the error, then what the run left and the commands."""
    from kreassign.cluster.errors import ClusterUnreachable, ExitStatus
    from kreassign.execute.errors import RunStopped

    fake, clock = FakeCluster([1, 2, 3, 4]), Clock()
    store, request = paced_world(fake, tmp_path)
    silent = ClusterUnreachable("Could not list partition reassignments: no answer from the cluster within 3s.")
    clock.hooks.append((1, lambda: [fake.fail_next("list_reassignments", silent) for _ in range(9)]))
    with pytest.raises(RunStopped) as stopped:
        run_execute(fake, request, store=store, pace=PaceLimits(1), interval_s=1.0, control=control(clock))
    journal = store.journals(fake.cluster_id, open_only=True)[0]
    assert stopped.value.exit_code == ExitStatus.CLUSTER_UNREACHABLE
    assert str(stopped.value) == (
        "Could not list partition reassignments: no answer from the cluster within 3s. The run stopped and left 2 "
        "partition(s) submitted (moving or done; its throttles stay on their brokers) and 1 not submitted yet, in "
        f"the journal {journal.path}: finish it with `kreassign resume --journal {journal.path}` once the cluster "
        f"answers, or undo it with `kreassign abort --journal {journal.path}`.")
