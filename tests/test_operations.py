"""The operations library against the fake cluster: journaling, interruptions, resume, abort."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_cluster import FakeCluster

from kreassign.cluster.errors import ClusterError, ExitStatus, JournalError
from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica
from kreassign.execute.journal import Journal, JournalStore, journaled
from kreassign.execute.operations import (
    CancelRequest,
    ExecuteRequest,
    VerifyRequest,
    abort,
    apply_execute,
    cancel,
    prepare_execute,
    resume,
    verify,
)
from kreassign.execute.executor import journal_for_plan
from kreassign.execute.watch import watch_plan

FOO0, FOO1, BAR0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)
LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
WRITES = ("incremental_alter_configs", "alter_reassignments", "alter_replica_log_dirs")


class Killed(BaseException):
    """Stands in for kill -9: no handler runs, the journal keeps whatever was written last."""


@pytest.fixture
def fake() -> FakeCluster:
    return FakeCluster([1, 2, 3, 4]).add_topic("foo", [[1, 2], [2, 3]]).add_topic("bar", [[3, 4]])


@pytest.fixture
def store(tmp_path: Path) -> JournalStore:
    return JournalStore(tmp_path / "journal")


def request(*targets: tuple[TopicPartition, tuple[int, ...]], rate: int | None = 1000,
            **options: Any) -> ExecuteRequest:
    return ExecuteRequest(targets=tuple(PartitionTarget(tp.topic, tp.partition, r) for tp, r in targets),
                          leader_rate=rate, follower_rate=rate, **options)


def execute(fake: FakeCluster, store: JournalStore, req: ExecuteRequest) -> Journal:
    apply_execute(fake, prepare_execute(fake, req), store=store)
    return only_journal(store)


def only_journal(store: JournalStore) -> Journal:
    (journal,) = store.journals("fake-cluster")
    return journal


def after_call(fake: FakeCluster, method: str, error: BaseException) -> None:
    """Let the next call of `method` take effect, then fail (the reply is lost)."""
    original: Callable[..., Any] = getattr(fake, method)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        setattr(fake, method, original)
        original(*args, **kwargs)
        raise error

    setattr(fake, method, wrapper)


def test_prepare_changes_nothing_and_reports_the_plan(fake: FakeCluster) -> None:
    fake.broker_configs[3][LEADER] = "42"
    plan = prepare_execute(fake, request((FOO0, (1, 3)), log_dir_timeout_s=1.0))
    assert not set(fake.calls) & set(WRITES)
    assert plan.current == {FOO0: (1, 2)}
    assert plan.previous.brokers[3] == {LEADER: "42", FOLLOWER: None,
                                        "replica.alter.log.dirs.io.max.bytes.per.second": None}
    data = plan.as_dict()
    assert data["throttles"]["brokers"] == {b: {LEADER: "1000", FOLLOWER: "1000"} for b in ("1", "2", "3")}
    assert data["partitions"] == [{"topic": "foo", "partition": 0, "current": [1, 2], "target": [1, 3],
                                   "log_dirs": ["any", "any"]}]


def test_every_step_is_journaled_before_and_after(fake: FakeCluster, store: JournalStore) -> None:
    journal = execute(fake, store, request((FOO0, (1, 3))))
    assert [(s.step, s.status) for s in journal.steps] == [
        ("record-previous", "done"),
        ("set-topic-throttles", "intent"), ("set-topic-throttles", "done"),
        ("set-broker-throttles", "intent"), ("set-broker-throttles", "done"),
        ("confirm-broker-throttles", "done"),
        ("submit-reassignments", "intent"), ("submit-reassignments", "done"),
    ]
    assert {k: v for k, v in journal.steps[5].detail.items() if k != "waited_s"} == {
        "brokers": [1, 2, 3], "unconfirmed": [], "wait_s": 10.0}  # the fake applies at once: one read
    assert journal.state == "submitted" and journal.submitted == [FOO0]
    assert journal.original == {FOO0: (1, 2)} and journal.applied_brokers == [1, 2, 3]


def test_ctrl_c_during_submission_then_resume(fake: FakeCluster, store: JournalStore) -> None:
    fake.fail_next("alter_reassignments", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        execute(fake, store, request((FOO0, (1, 3)), (BAR0, (3, 1))))
    journal = only_journal(store)
    assert journal.state == "running" and journal.last_status("submit-reassignments") == "failed"
    assert fake.list_reassignments() == {} and fake.broker_configs[1][LEADER] == "1000"
    result = resume(fake, journal)
    assert result.submitted == (BAR0, FOO0) and result.state_after == "submitted"
    assert set(fake.list_reassignments()) == {FOO0, BAR0}
    assert store.load(journal.path).done("submit-reassignments")


def test_kill_after_the_controller_accepted_does_not_resubmit(fake: FakeCluster, store: JournalStore) -> None:
    after_call(fake, "alter_reassignments", Killed())
    with pytest.raises(Killed):
        execute(fake, store, request((FOO0, (1, 3))))
    journal = only_journal(store)
    assert journal.last_status("submit-reassignments") == "intent"
    fake.calls.clear()
    result = resume(fake, journal)
    assert result.submitted == () and "alter_reassignments" not in fake.calls  # nothing left to submit
    assert journal.submitted == [FOO0] and journal.state == "submitted"


def test_kill_while_setting_broker_throttles_then_resume_and_abort(fake: FakeCluster, store: JournalStore) -> None:
    fake.broker_configs[2][FOLLOWER] = "31337"
    calls = {"n": 0}
    original = fake.incremental_alter_configs

    def die_on_second(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise Killed()
        return original(*args, **kwargs)

    fake.incremental_alter_configs = die_on_second  # type: ignore[method-assign]
    with pytest.raises(Killed):
        execute(fake, store, request((FOO0, (1, 3))))
    fake.incremental_alter_configs = original  # type: ignore[method-assign]
    journal = only_journal(store)
    assert journal.last_status("set-broker-throttles") == "intent"
    result = resume(fake, journal)
    assert result.brokers == (1, 2, 3) and result.submitted == (FOO0,)
    assert fake.broker_configs[2] == {LEADER: "1000", FOLLOWER: "1000"}
    outcome = abort(fake, store.load(journal.path))
    assert outcome.cancelled == (FOO0,) and outcome.ok
    assert fake.replicas(FOO0) == (1, 2)
    assert fake.broker_configs[2] == {FOLLOWER: "31337"}
    assert fake.broker_configs[1] == fake.broker_configs[3] == {} and fake.topic_configs["foo"] == {}
    assert store.load(journal.path).state == "aborted"
    with pytest.raises(JournalError, match="nothing to resume: the run was aborted"):
        resume(fake, store.load(journal.path))


def test_abort_leaves_retargeted_and_finished_partitions_alone(fake: FakeCluster, store: JournalStore) -> None:
    journal = execute(fake, store, request((FOO0, (1, 3)), (FOO1, (3, 4)), (BAR0, (4, 1))))
    fake.complete(BAR0)
    fake.alter_reassignments({FOO1: [2, 4]})  # someone re-targeted it since
    outcome = abort(fake, journal)
    assert outcome.cancelled == (FOO0,)
    assert fake.list_reassignments()[FOO1].target == (2, 4)
    assert outcome.rollback == {BAR0: (3, 4)}
    assert outcome.as_dict()["completed_before_abort"] == {"bar-0": [3, 4]}


def test_abort_refuses_a_journal_of_another_cluster(fake: FakeCluster, store: JournalStore) -> None:
    journal = execute(fake, store, request((FOO0, (1, 3))))
    other = FakeCluster([1, 2, 3], cluster_id="another").add_topic("foo", [[1, 2]])
    with pytest.raises(JournalError, match="belongs to cluster fake-cluster"):
        abort(other, journal)
    assert other.list_reassignments() == {}


def test_down_broker_is_skipped_then_resume_sets_its_throttle(fake: FakeCluster, store: JournalStore) -> None:
    fake.unreachable.add(4)  # registered, but does not answer
    plan = prepare_execute(fake, request((BAR0, (3, 1))))
    assert plan.warnings and "broker 4 did not answer" in plan.warnings[0]
    result = apply_execute(fake, plan, store=store)
    assert set(result.skipped_brokers) == {4} and result.submitted == (BAR0,)
    journal = only_journal(store)
    assert journal.pending_brokers == {4: {LEADER: "1000", FOLLOWER: "1000"}}
    fake.start_broker(4)
    resumed = resume(fake, journal)
    assert resumed.brokers == (4,) and not resumed.skipped
    assert fake.broker_configs[4] == {LEADER: "1000", FOLLOWER: "1000"}
    assert store.load(journal.path).pending_brokers == {}


def test_a_move_from_a_leader_that_missed_its_throttle_is_held_back_until_resume_sets_it(
        fake: FakeCluster, store: JournalStore) -> None:
    fake.partitions[BAR0].leader = 4  # bar-0 copies from broker 4, which is registered but does not answer
    fake.unreachable.add(4)
    result = apply_execute(fake, prepare_execute(fake, request((BAR0, (3, 1)), (FOO0, (1, 3)))), store=store)
    assert (result.submitted, result.held_back, set(result.skipped_brokers)) == ((FOO0,), (BAR0,), {4})
    assert not result.ok and set(fake.list_reassignments()) == {FOO0}  # nothing copies unthrottled from 4
    journal = only_journal(store)
    assert not journal.done("submit-reassignments") and journal.steps[-1].detail["held_back"] == ["bar-0"]

    still_down = resume(fake, journal)  # broker 4 still silent: bar-0 keeps waiting
    assert (still_down.held_back, still_down.submitted, set(still_down.skipped)) == ((BAR0,), (), {4})
    assert set(fake.list_reassignments()) == {FOO0}

    fake.start_broker(4)
    resumed = resume(fake, store.load(journal.path))
    assert (resumed.brokers, resumed.submitted, resumed.held_back) == ((4,), (BAR0,), ())
    assert fake.broker_configs[4] == {LEADER: "1000", FOLLOWER: "1000"}
    assert fake.list_reassignments()[BAR0].target == (3, 1)
    assert store.load(journal.path).done("submit-reassignments")


def test_a_move_onto_a_broker_that_missed_its_throttle_is_held_back(fake: FakeCluster, store: JournalStore) -> None:
    fake.unreachable.add(4)
    result = apply_execute(fake, prepare_execute(fake, request((FOO1, (2, 4)), (FOO0, (1, 3)))), store=store)
    assert (result.submitted, result.held_back) == ((FOO0,), (FOO1,))
    assert result.as_dict()["held_back"] == ["foo-1"]


def test_when_every_move_is_held_back_the_throttles_set_stay_for_resume(fake: FakeCluster, store: JournalStore) -> None:
    fake.unreachable.add(4)
    result = apply_execute(fake, prepare_execute(fake, request((FOO1, (2, 4)))), store=store)
    assert (result.submitted, result.held_back, result.rolled_back) == ((), (FOO1,), False)
    assert fake.list_reassignments() == {} and fake.broker_configs[2] == {LEADER: "1000", FOLLOWER: "1000"}
    fake.start_broker(4)
    resumed = resume(fake, only_journal(store))
    assert resumed.submitted == (FOO1,) and fake.broker_configs[4] == {LEADER: "1000", FOLLOWER: "1000"}


def test_resume_finishes_an_interrupted_clear(fake: FakeCluster, store: JournalStore) -> None:
    execute(fake, store, request((BAR0, (3, 1))))
    fake.complete()
    fake.unreachable.add(4)
    result = verify(fake, VerifyRequest((PartitionTarget("bar", 0, (3, 1)),)), store=store)
    assert result.clear is not None and set(result.clear.skipped) == {4}
    assert only_journal(store).state == "clearing"
    fake.start_broker(4)
    resumed = resume(fake, only_journal(store))
    assert resumed.clear is not None and resumed.clear.complete and resumed.state_after == "finished"
    assert all(not v for v in fake.broker_configs.values())


def test_a_second_plan_inherits_the_values_found_by_the_first(fake: FakeCluster, store: JournalStore) -> None:
    fake.broker_configs[1][LEADER] = "5"
    apply_execute(fake, prepare_execute(fake, request((FOO0, (1, 3)))), store=store)
    apply_execute(fake, prepare_execute(fake, request((BAR0, (3, 1)), rate=2000, additional=True)), store=store)
    second = next(j for j in store.journals("fake-cluster") if j.target_of() == {BAR0: (3, 1)})
    assert second.previous_brokers[1][LEADER] == "5"  # not the first plan's 1000
    assert second.previous_brokers[2][LEADER] is None


def test_rerun_with_additional_keeps_the_first_previous_values(fake: FakeCluster, store: JournalStore) -> None:
    fake.broker_configs[1][LEADER] = "5"
    execute(fake, store, request((FOO0, (1, 3))))
    execute(fake, store, request((FOO0, (1, 3)), rate=3000, additional=True))
    journal = only_journal(store)
    assert journal.previous_brokers[1][LEADER] == "5" and fake.broker_configs[1][LEADER] == "3000"
    fake.complete()
    verify(fake, VerifyRequest((PartitionTarget("foo", 0, (1, 3)),)), store=store)
    assert fake.broker_configs[1] == {LEADER: "5"}


def test_dry_runs_change_nothing(fake: FakeCluster, store: JournalStore) -> None:
    fake.broker_configs[1][LEADER] = "7"
    fake.alter_reassignments({FOO0: [1, 3]})
    fake.calls.clear()
    targets = (PartitionTarget("foo", 0, (1, 3)),)
    result = cancel(fake, CancelRequest(targets, dry_run=True), store=store)
    assert result.cancelled == (FOO0,) and result.clear is not None and result.clear.dry_run
    fake.complete()
    checked = verify(fake, VerifyRequest(targets, dry_run=True), store=store)
    assert checked.clear is not None and checked.clear.brokers == (1, 2, 3, 4)
    assert not set(fake.calls) & set(WRITES) and fake.broker_configs[1] == {LEADER: "7"}


def test_log_dir_moves_wait_for_the_replica_then_start(fake: FakeCluster, store: JournalStore) -> None:
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds
        if len(sleeps) == 3:
            fake.complete(FOO0)  # the new replica appears on broker 3

    req = ExecuteRequest(targets=(PartitionTarget("foo", 0, (1, 3), ("any", "/data/b")),),
                         log_dir_timeout_s=10.0)
    result = apply_execute(fake, prepare_execute(fake, req), store=store, clock=lambda: now[0], sleep=sleep)
    assert sleeps == [0.1, 0.1, 0.1]
    assert result.log_dir_moves.started == ((TopicPartitionReplica("foo", 0, 3), "/data/b"),)
    assert only_journal(store).done("start-log-dir-moves")


def test_journal_for_plan_reuses_the_plans_open_journal(fake: FakeCluster, store: JournalStore) -> None:
    fake.broker_configs[1][LEADER] = "5"
    plan = prepare_execute(fake, request((FOO0, (1, 3))))
    first = journal_for_plan(store, plan, command="execute", options={"run": 1}, planned=plan.throttles)
    first.set_state("submitted")
    fake.broker_configs[1][LEADER] = "1000"  # now our own rate
    plan = prepare_execute(fake, request((FOO0, (1, 3)), rate=3000, additional=True))
    kept = journal_for_plan(store, plan, command="execute again", options={"run": 2}, reopen_as=None)
    assert kept.path == first.path and kept.state == "submitted"  # reopen_as=None keeps the state
    assert kept.previous_brokers[1][LEADER] == "5"  # the value found before the first run
    assert kept.planned_brokers[1][LEADER] == "1000" and kept.options == {"run": 2}
    again = journal_for_plan(store, plan, command="execute", options={}, planned=plan.throttles)
    assert again.state == "running" and again.planned_brokers[1][LEADER] == "3000"
    assert [(s.step, s.detail.get("reused")) for s in again.steps if s.step == "record-previous"] == [
        ("record-previous", None), ("record-previous", True), ("record-previous", True)]
    assert store.load(again.path).previous_brokers[1][LEADER] == "5"  # persisted


def test_journal_for_plan_inherits_from_other_open_runs_and_lists_unknown_brokers(
        fake: FakeCluster, store: JournalStore) -> None:
    fake.broker_configs[2][FOLLOWER] = "9"
    execute(fake, store, request((FOO0, (1, 3))))  # sets 1000 on brokers 1, 2, 3
    fake.unreachable.add(4)  # registered, but does not answer
    plan = prepare_execute(fake, request((FOO1, (2, 1)), additional=True))
    second = journal_for_plan(store, plan, command="execute", options={})
    assert second.previous_brokers[2][FOLLOWER] == "9" and second.previous_brokers[1][LEADER] is None
    assert second.unreadable_brokers == [4] and second.planned_brokers == {}
    second.remember_previous({4: {LEADER: "8"}, 1: {LEADER: "1000"}}, {})
    assert second.unreadable_brokers == [] and second.previous_brokers[4] == {LEADER: "8"}
    assert second.previous_brokers[1][LEADER] is None  # the first value found stays


def test_journaled_records_intent_and_failure_and_passes_the_error_on(store: JournalStore) -> None:
    journal = store.create(cluster_id="c", targets=[PartitionTarget("foo", 0, (1, 3))], command="test")
    with journaled(journal, "works", partitions=1):
        pass
    with pytest.raises(ClusterError, match="refused"), journaled(journal, "breaks"):
        raise ClusterError("refused")
    with pytest.raises(KeyboardInterrupt), journaled(journal, "interrupted"):
        raise KeyboardInterrupt
    with pytest.raises(ValueError), journaled(journal, "bug"):
        raise ValueError("a bug is not a failed step")
    assert [(s.step, s.status, dict(s.detail)) for s in store.load(journal.path).steps] == [
        ("works", "intent", {"partitions": 1}),
        ("breaks", "intent", {}), ("breaks", "failed", {"error": "refused"}),
        ("interrupted", "intent", {}), ("interrupted", "failed", {"error": "KeyboardInterrupt"}),
        ("bug", "intent", {})]
    with journaled(None, "no journal"):
        pass


def test_a_finished_move_is_read_until_the_brokers_metadata_has_caught_up(fake: FakeCluster, store: JournalStore) -> None:
    """Found on Kafka 4.4: a broker learns a completed or cancelled reassignment 30-60 ms after the
    controller stops listing it, and Metadata read at once still gives the move's list (target,
    then the replicas leaving) in 14 reads of 16. verify, abort and the watch loop read again."""
    execute(fake, store, request((FOO0, (1, 3)), (BAR0, (3, 1))))
    fake.metadata_lag = 2
    fake.complete(FOO0)
    slept: list[float] = []
    result = verify(fake, VerifyRequest(targets=(PartitionTarget("foo", 0, (1, 3)),)), store=store, sleep=slept.append)
    assert [(s.tp, s.state, s.current) for s in result.partitions] == [(FOO0, "completed", (1, 3))]
    assert slept == [0.1, 0.1]
    outcome = abort(fake, only_journal(store), sleep=slept.append)  # bar-0's cancel lags as well
    assert outcome.cancelled == (BAR0,) and outcome.rollback == {FOO0: (1, 2)}
    assert fake.replicas(BAR0) == (3, 4)


def test_a_target_that_starts_the_replica_list_is_reported_after_the_wait(fake: FakeCluster) -> None:
    slept: list[float] = []
    result = verify(fake, VerifyRequest(targets=(PartitionTarget("foo", 0, (1,)),)), sleep=slept.append)
    assert [(s.state, s.current) for s in result.partitions] == [("mismatch", (1, 2))]
    assert sum(slept) == pytest.approx(5.0)


def test_the_watch_loop_ends_complete_while_the_metadata_lags(fake: FakeCluster, store: JournalStore) -> None:
    execute(fake, store, request((FOO0, (1, 3))))
    fake.metadata_lag = 5
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        fake.complete()

    result = watch_plan(fake, [PartitionTarget("foo", 0, (1, 3))], store=store, clock=lambda: now[0], sleep=sleep,
                        interval_s=5.0)
    assert result.status == ExitStatus.OK and fake.replicas(FOO0) == (1, 3)
