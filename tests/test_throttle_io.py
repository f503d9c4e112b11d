"""Throttles confirmed before moves start: a broker applies a config change a moment after the
controller accepted it, so `execute`, each paced wave and `throttle set` read the brokers' rates
back (DescribeConfigs) before going on, for a bounded wait (`throttle_io.confirm_broker_configs`)."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Kreassign
from fake_cluster import FakeCluster, ManualClock, plan_file

from kreassign.cli.kafka_live import print_execute_event
from kreassign.cli.runtime import Runtime
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.execute.executor import ExecuteEvent, ExecuteRequest, apply_execute, prepare_execute
from kreassign.execute.journal import Journal, JournalStore
from kreassign.execute.pacing import PaceLimits, Pacer, Wave
from kreassign.execute.throttle_io import (
    CONFIRM_POLL_S,
    CONFIRM_WAIT_S,
    ApplyOutcome,
    Confirm,
    confirm_broker_configs,
)
from kreassign.throttle.configs import FOLLOWER_RATE, LEADER_RATE

FOO0 = TopicPartition("foo", 0)
NEVER = 10**9
"""a lag no wait outlasts: the broker never applies the change"""
POLLS = int(CONFIRM_WAIT_S / CONFIRM_POLL_S) + 1


def confirming(clock: ManualClock) -> Confirm:
    return Confirm(clock, clock.sleep)


@pytest.fixture
def fake() -> FakeCluster:
    return FakeCluster([1, 2, 3, 4]).add_topic("foo", [[1, 2], [2, 3]])


def after_last_alter(fake: FakeCluster) -> list[str]:
    """The reads of broker configs and the submissions after the last config change (the
    execution lock's reads between them left out)."""
    last = max(i for i, call in enumerate(fake.calls) if call == "incremental_alter_configs")
    return [c for c in fake.calls[last + 1:] if c in ("describe_broker_configs", "alter_reassignments")]


def only_journal(store: JournalStore) -> Journal:
    (journal,) = store.journals("fake-cluster")
    return journal


def test_execute_submits_once_every_broker_reads_its_rates_back(fake: FakeCluster, tmp_path: Path) -> None:
    fake.config_lag = {2: 3}  # broker 2 shows its old configs to 3 reads after the change
    clock = ManualClock()
    store = JournalStore(tmp_path)
    request = ExecuteRequest(targets=(PartitionTarget("foo", 0, (1, 3)),), leader_rate=1000, follower_rate=2000)
    result = apply_execute(fake, prepare_execute(fake, request), store=store, clock=clock, sleep=clock.sleep)
    assert after_last_alter(fake) == ["describe_broker_configs"] * 4 + ["alter_reassignments"]
    assert clock.sleeps == [CONFIRM_POLL_S] * 3
    assert result.submitted == (FOO0,) and result.unconfirmed_brokers == ()
    (confirm,) = [s for s in only_journal(store).steps if s.step == "confirm-broker-throttles"]
    assert confirm.status == "done"
    assert confirm.detail == {"brokers": [1, 2, 3], "unconfirmed": [], "wait_s": CONFIRM_WAIT_S,
                              "waited_s": 3 * CONFIRM_POLL_S}


def test_a_broker_that_never_applies_is_named_once_and_the_run_goes_on(
        fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    fake.config_lag = {3: NEVER}
    clock = ManualClock()
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    code, out, err = kreassign.run("execute", "-f", plan, "--throttle", "1000", "--journal-dir", str(tmp_path / "j"),
                                   runtime=Runtime(clock=clock, sleep=clock.sleep), connect=fake)
    assert code == 0, err
    warning = ("Warning: broker 3 had not applied the new throttle after 10s; its first copies may run faster "
               "than the throttle.\n")
    assert (out + err).count("had not applied") == 1 and warning in out
    assert after_last_alter(fake) == ["describe_broker_configs"] * POLLS + ["alter_reassignments"]
    assert sum(clock.sleeps) == CONFIRM_WAIT_S  # bounded: it waited its budget, not one poll more
    assert fake.list_reassignments()[FOO0].target == (1, 3)
    journal = only_journal(JournalStore(tmp_path / "j"))
    (confirm,) = [s for s in journal.steps if s.step == "confirm-broker-throttles"]
    assert confirm.detail["unconfirmed"] == [3] and journal.state == "submitted"


def test_the_json_result_names_the_unconfirmed_brokers(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    fake.config_lag = {1: NEVER, 2: NEVER}
    clock = ManualClock()
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    code, out, _ = kreassign.run("execute", "-f", plan, "--throttle", "1000", "-o", "json", "--journal-dir",
                                 str(tmp_path / "j"), runtime=Runtime(clock=clock, sleep=clock.sleep), connect=fake)
    assert code == 0 and json.loads(out)["unconfirmed_brokers"] == [1, 2]


def test_the_kafka_front_door_says_so_on_stderr(fake: FakeCluster) -> None:
    plan = prepare_execute(fake, ExecuteRequest(targets=(PartitionTarget("foo", 0, (1, 3)),), leader_rate=1000,
                                                follower_rate=1000))
    out, err = io.StringIO(), io.StringIO()
    print_execute_event(ExecuteEvent("throttles-unconfirmed", ApplyOutcome(brokers=(1, 2, 3), unconfirmed=(2, 3))),
                        plan, out, err)
    assert out.getvalue() == ""
    assert err.getvalue() == ("Warning: brokers 2,3 had not applied the new throttle after 10s; their first copies "
                              "may run faster than the throttle.\n")


def test_a_broker_that_stops_answering_is_not_waited_for(fake: FakeCluster) -> None:
    """A broker that does not answer is reported (skipped, pending) where it matters, not here."""
    fake.config_lag = {2: NEVER}
    fake.incremental_alter_configs({1: {LEADER_RATE: "5"}, 2: {LEADER_RATE: "5"}})
    fake.stop_broker(2)
    clock = ManualClock()
    assert confirm_broker_configs(fake, {1: {LEADER_RATE: "5"}, 2: {LEADER_RATE: "5"}}, confirming(clock)) == ()
    assert after_last_alter(fake) == ["describe_broker_configs"] and clock.sleeps == []


def test_a_delete_is_confirmed_when_the_key_reads_back_unset(fake: FakeCluster) -> None:
    fake.broker_configs[1] = {LEADER_RATE: "5", FOLLOWER_RATE: "7"}
    fake.config_lag = {1: 2}
    fake.incremental_alter_configs({1: {LEADER_RATE: None, FOLLOWER_RATE: "0007"}})
    clock = ManualClock()
    # unset, and a number the broker prints its own way, both read back as applied after the lag
    assert confirm_broker_configs(fake, {1: {LEADER_RATE: None, FOLLOWER_RATE: "0007"}}, confirming(clock)) == ()
    assert clock.sleeps == [CONFIRM_POLL_S] * 2


def test_a_failed_read_ends_the_wait_without_failing(fake: FakeCluster) -> None:
    from kreassign.cluster.errors import ClusterUnreachable

    fake.config_lag = {1: NEVER}
    fake.incremental_alter_configs({1: {LEADER_RATE: "5"}})
    fake.fail_next("describe_broker_configs", ClusterUnreachable("no answer"))
    assert confirm_broker_configs(fake, {1: {LEADER_RATE: "5"}}, confirming(ManualClock())) == (1,)


def test_a_paced_wave_submits_after_its_brokers_confirmed(fake: FakeCluster, tmp_path: Path) -> None:
    fake.config_lag = {3: 2}
    clock = ManualClock()
    targets = [PartitionTarget("foo", 0, (1, 3))]
    pacer = Pacer(fake, targets, PaceLimits(max_moves_per_broker=1), leader_rate=5000, follower_rate=5000,
                  store=JournalStore(tmp_path), confirm=confirming(clock))
    pacer.start()
    wave = pacer.step(fake.list_reassignments(), {p.tp: p for p in fake.describe_topics()})
    assert isinstance(wave, Wave) and wave.partitions == (FOO0,) and wave.unconfirmed_brokers == ()
    assert after_last_alter(fake) == ["describe_broker_configs"] * 3 + ["alter_reassignments"]
    assert pacer.journal is not None
    (confirm,) = [s for s in pacer.journal.steps if s.step == "wave 1: confirm broker throttles"]
    assert confirm.detail["brokers"] == [1, 2, 3] and confirm.detail["unconfirmed"] == []


def test_a_paced_wave_names_a_broker_that_never_applied(fake: FakeCluster, tmp_path: Path) -> None:
    fake.config_lag = {3: NEVER}
    clock = ManualClock()
    pacer = Pacer(fake, [PartitionTarget("foo", 0, (1, 3))], PaceLimits(max_moves_per_broker=1), leader_rate=5000,
                  store=JournalStore(tmp_path), confirm=confirming(clock))
    pacer.start()
    wave = pacer.step(fake.list_reassignments(), {p.tp: p for p in fake.describe_topics()})
    assert isinstance(wave, Wave) and wave.partitions == (FOO0,) and wave.unconfirmed_brokers == (3,)
    assert wave.to_dict()["unconfirmed_brokers"] == [3]


def running(fake: FakeCluster) -> FakeCluster:
    fake.alter_reassignments({FOO0: [1, 3]})
    return fake


def test_throttle_set_returns_once_the_brokers_applied_it(fake: FakeCluster, kreassign: Kreassign,
                                                          tmp_path: Path) -> None:
    running(fake).config_lag = {1: 2, 3: 4}
    clock = ManualClock()
    rt = Runtime(clock=clock, sleep=clock.sleep)
    code, out, err = kreassign.run("throttle", "set", "--throttle", "7000", "--journal-dir", str(tmp_path),
                                   runtime=rt, connect=fake)
    assert code == 0, err
    assert after_last_alter(fake) == ["describe_broker_configs"] * 5 and clock.sleeps == [CONFIRM_POLL_S] * 4
    assert "had not applied" not in out + err
    code, out, _ = kreassign.run("throttle", "show", "-o", "json", runtime=rt, connect=fake)
    shown: dict[str, Any] = json.loads(out)
    assert [(b["broker"], b["leader_rate"]) for b in shown["brokers"]] == [(1, 7000), (2, 7000), (3, 7000), (4, None)]


def test_throttle_set_names_a_broker_that_never_applied(fake: FakeCluster, kreassign: Kreassign,
                                                        tmp_path: Path) -> None:
    running(fake).config_lag = {2: NEVER}
    clock = ManualClock()
    code, out, err = kreassign.run("throttle", "set", "--throttle", "7000", "--journal-dir", str(tmp_path),
                                   runtime=Runtime(clock=clock, sleep=clock.sleep), connect=fake)
    assert code == 0, err
    assert out.count("had not applied") == 1
    assert ("Warning: broker 2 had not applied the new throttle after 10s; its copies may run at the old rate for "
            "a moment, and `throttle show` may read the old value until it does.\n") in out
    (journal,) = JournalStore(tmp_path).journals(fake.cluster_id, open_only=True)
    (confirm,) = [s for s in journal.steps if s.step == "throttle set: confirm"]
    assert confirm.detail["unconfirmed"] == [2]


def test_a_clear_waits_until_the_brokers_read_the_old_rates_no_more(fake: FakeCluster) -> None:
    """`verify`, `cancel`, `throttle clear` and a run's end: a `throttle show` right after must
    not read the run's rate back from a broker that has not applied the clear yet."""
    from kreassign.execute.clear import clear_throttles

    for b in (1, 2):
        fake.broker_configs[b].update({LEADER_RATE: "1000", FOLLOWER_RATE: "1000"})
    fake.config_lag = {2: 3}
    clock = ManualClock()
    cleared = clear_throttles(fake, [1, 2], [], confirm=confirming(clock))
    assert cleared.unconfirmed == () and clock.sleeps == [CONFIRM_POLL_S] * 3
    fake.broker_configs[2].update({LEADER_RATE: "1000"})
    fake.config_lag = {2: NEVER}
    late = clear_throttles(fake, [2], [], confirm=confirming(clock))
    assert late.unconfirmed == (2,) and late.as_dict()["unconfirmed_brokers"] == [2]


def test_a_broker_still_showing_the_run_rate_after_the_wait_is_one_warning_line(fake: FakeCluster) -> None:
    from kreassign.cli.kafka_live import clear_warnings
    from kreassign.execute.clear import clear_throttles

    fake.broker_configs[3].update({LEADER_RATE: "1000"})
    fake.config_lag = {3: NEVER}
    clock = ManualClock()
    cleared = clear_throttles(fake, [3], [], confirm=confirming(clock))
    assert sum(clock.sleeps) == CONFIRM_WAIT_S
    assert clear_warnings(cleared) == [
        "Warning: broker 3 had not applied the clear after 10s; its old rate may still be read back, and enforced, "
        "for a moment longer."]
