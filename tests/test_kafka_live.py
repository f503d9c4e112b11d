"""Kafka-compatible --execute/--verify/--cancel/--list against the fake cluster: exact output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_cluster import FakeCluster, KafkaRunner, plan_file, timeout_error

from kreassign.cluster.model import TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import ApiError

CURRENT_HEADER = "Current partition replica assignment\n\n"
ROLLBACK = "\n\nSave this to use as the --reassignment-json-file option during rollback\n"
WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
           "the throttle is removed.\n")
TWO_SPACES = ("Cannot execute because there is an existing partition assignment.  Use --additional to "
              "override this and create a new partition assignment in addition to the existing one. The "
              "--additional flag can also be used to change the throttle by resubmitting the current "
              "reassignment.\n")
FOO0, FOO1 = TopicPartition("foo", 0), TopicPartition("foo", 1)


@pytest.fixture(autouse=True)
def journal_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "journal"
    monkeypatch.setenv("KREASSIGN_JOURNAL_DIR", str(directory))
    return directory


@pytest.fixture
def fake() -> FakeCluster:
    return FakeCluster([1, 2, 3, 4]).add_topic("foo", [[1, 2], [2, 3]]).add_topic("bar", [[3, 4]])


@pytest.fixture
def run(fake: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> KafkaRunner:
    return KafkaRunner(fake, monkeypatch)


def rollback_json(*entries: str) -> str:
    return '{"version":1,"partitions":[' + ",".join(entries) + "]}"


# ---- --execute -------------------------------------------------------------------------------
def test_rollback_json_names_log_dirs_and_any_where_the_broker_is_down(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.replica_dirs[TopicPartitionReplica("foo", 0, 2)] = "/data/b"
    fake.stop_broker(1)
    plan = plan_file(tmp_path, {"foo-0": [2, 3]})
    code, out, _ = run("--reassignment-json-file", plan, "--execute")
    assert code == 0
    assert out.startswith(CURRENT_HEADER + rollback_json(
        '{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","/data/b"]}') + ROLLBACK)


def test_execute_with_throttle_prints_kafka_text_and_sets_kafka_throttles(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "foo-1": [2, 3]})
    code, out, err = run("--reassignment-json-file", plan, "--execute", "--throttle", "1000")
    assert code == 0, out + err
    # each current replica's log dir, as Kafka 4.2+ prints the rollback JSON (KAFKA-19582)
    assert out == (CURRENT_HEADER + rollback_json(
        '{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["/data/a","/data/a"]}',
        '{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["/data/a","/data/a"]}') + ROLLBACK
        + WARNING + "The inter-broker throttle limit was set to 1000 B/s\n"
        + "Successfully started partition reassignments for foo-0,foo-1\n")
    assert err == ""
    assert fake.topic_configs["foo"] == {"leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
                                         "follower.replication.throttled.replicas": "0:3"}
    assert fake.topic_configs["bar"] == {}
    for broker in (1, 2, 3):
        assert fake.broker_configs[broker] == {"leader.replication.throttled.rate": "1000",
                                               "follower.replication.throttled.rate": "1000"}
    assert fake.broker_configs[4] == {}
    writes = [c for c in fake.calls if c in ("incremental_alter_configs", "alter_reassignments")]
    assert writes == ["incremental_alter_configs", "incremental_alter_configs", "alter_reassignments"]
    assert fake.list_reassignments()[FOO0].adding == (3,)


def test_execute_single_partition_without_throttle(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"bar-0": [4, 1]}), "--execute")
    assert code == 0
    assert out.endswith(ROLLBACK + "Successfully started partition reassignment for bar-0\n")
    assert "Warning" not in out
    assert all(not v for v in fake.broker_configs.values())
    assert fake.topic_configs["bar"] == {}


def test_execute_refuses_while_another_reassignment_runs(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_reassignments({TopicPartition("bar", 0): [3, 1]})
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute",
                       "--throttle", "10")
    assert (code, out) == (1, TWO_SPACES)
    assert fake.replicas(FOO0) == (1, 2)
    assert fake.topic_configs["foo"] == {}


def test_execute_additional_throttles_in_flight_moves_too(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_reassignments({TopicPartition("bar", 0): [3, 1]})
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute",
                       "--additional", "--throttle", "2000")
    assert code == 0, out
    assert fake.topic_configs["bar"] == {"leader.replication.throttled.replicas": "0:3,0:4",
                                         "follower.replication.throttled.replicas": "0:1"}
    assert set(b for b, c in fake.broker_configs.items() if c) == {1, 2, 3, 4}


def test_disallow_replication_factor_change_refuses_each_change_with_the_controllers_text(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    # bar-0 moves [3,4] -> [3,1]: headed for 2 replicas while 4 is still listed, so a target of 2
    # keeps its factor and one of 3 changes it (KIP-860 counts replicas + adding - removing)
    fake.alter_reassignments({TopicPartition("bar", 0): [3, 1]})
    plan = plan_file(tmp_path, {"foo-0": [1], "foo-1": [2, 4], "bar-0": [3, 1, 2]})
    code, out, err = run("--reassignment-json-file", plan, "--execute", "--additional", "--retarget-in-flight",
                         "--disallow-replication-factor-change")
    assert code == 1 and err == ""
    assert out.endswith(ROLLBACK + "Error reassigning partition(s):\n"
                        "bar-0: The replication factor is changed from 2 to 3\n"
                        "foo-0: The replication factor is changed from 2 to 1\n")
    assert fake.list_reassignments()[FOO1].replicas == (2, 4, 3)  # the other partition was submitted
    assert fake.list_reassignments()[TopicPartition("bar", 0)].replicas == (3, 1, 4)


def test_disallow_replication_factor_change_is_an_execute_option(run: KafkaRunner, tmp_path: Path) -> None:
    code, out, err = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 2]}), "--verify",
                         "--disallow-replication-factor-change")
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == 'Option "[disallow-replication-factor-change]" can\'t be used with action "[verify]"'


@pytest.mark.parametrize(("moves", "message"), [
    ({"foo-0": [1, 5]}, "Error: Unknown broker id 5\n"),
    ({"foo-0": [1, 6], "foo-1": [5, 2]}, "Error: Unknown broker id 5\n"),
    ({"quux-0": [1, 2]}, "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                         "Topic quux not found.\n"),
    ({"foo-10": [1, 2], "foo-2": [1, 2]}, "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                                          "Unable to find partition: foo-2, foo-10\n"),
])
def test_execute_bad_input_leaves_cluster_unchanged(run: KafkaRunner, fake: FakeCluster, tmp_path: Path,
                                                    journal_dir: Path, moves: dict[str, list[int]],
                                                    message: str) -> None:
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, moves), "--execute", "--throttle", "1")
    assert (code, out) == (1, message)
    assert "incremental_alter_configs" not in fake.calls and "alter_reassignments" not in fake.calls
    assert not journal_dir.exists()


def test_execute_stopped_target_broker_is_unknown(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.stop_broker(4)
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 4]}), "--execute")
    assert (code, out) == (1, "Error: Unknown broker id 4\n")


def test_execute_empty_plan(run: KafkaRunner, tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"version":1,"partitions":[]}')
    assert run("--reassignment-json-file", str(path), "--execute")[:2] == (
        1, "Error: Partition reassignment list cannot be empty\n")


def test_execute_submission_refused_rolls_back_throttles(run: KafkaRunner, fake: FakeCluster, tmp_path: Path,
                                                         journal_dir: Path) -> None:
    fake.broker_configs[1]["leader.replication.throttled.rate"] = "777"
    fake.reject[FOO0] = ApiError(39, "INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment "
                                 "includes broker 3, but no such broker is registered.")
    code, out, err = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute",
                         "--throttle", "1000")
    assert code == 1
    assert out.endswith(WARNING + "The inter-broker throttle limit was set to 1000 B/s\n"
                        "Error reassigning partition(s):\nfoo-0: The manual partition assignment includes "
                        "broker 3, but no such broker is registered.\n")
    assert "restored" in err
    assert fake.broker_configs[1] == {"leader.replication.throttled.rate": "777"}
    assert fake.broker_configs[2] == fake.broker_configs[3] == {}
    assert fake.topic_configs["foo"] == {}
    journal = json.loads(next(journal_dir.rglob("*.json")).read_text())
    assert journal["state"] == "rolled-back"


def test_execute_timeout_during_submission_rolls_back(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.fail_next("alter_reassignments", timeout_error())
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute",
                       "--throttle", "1000")
    assert code == 1
    last = out.splitlines()[-1]
    assert last.startswith("Error: submitting the reassignment failed: alter partition reassignments timed out")
    assert "Nothing was submitted. The throttles just set were restored" in last
    assert all(not v for v in fake.broker_configs.values()) and fake.topic_configs["foo"] == {}


def test_execute_timeout_while_setting_throttles_restores_what_was_set(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.topic_configs["foo"]["leader.replication.throttled.replicas"] = "*"
    original = fake.incremental_alter_configs
    calls = []

    def second_call_times_out(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == 2:
            raise timeout_error("incremental alter configs")
        return original(*args, **kwargs)  # type: ignore[arg-type]

    fake.incremental_alter_configs = second_call_times_out  # type: ignore[method-assign]
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute",
                       "--throttle", "1000")
    assert code == 1
    assert "setting throttles failed" in out and "nothing was submitted" in out
    assert fake.topic_configs["foo"] == {"leader.replication.throttled.replicas": "*"}
    assert fake.replicas(FOO0) == (1, 2)


def test_execute_authorization_failure_on_a_broker_rolls_back(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.refuse_configs[3] = ApiError(31, "CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed.")
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute",
                       "--throttle", "1000")
    assert code == 1
    assert out.splitlines()[-1] == (
        "Error: setting throttles failed: the cluster refused the throttle change (broker 3: Cluster "
        "authorization failed.). The throttles set so far were restored and nothing was submitted.")
    assert all(not v for v in fake.broker_configs.values()) and fake.topic_configs["foo"] == {}
    assert "alter_reassignments" not in fake.calls


def test_authentication_failure_changes_nothing(fake: FakeCluster, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    from contextlib import contextmanager

    from kreassign.cli import kafka_live
    from kreassign.cluster.errors import ClusterError

    run = KafkaRunner(fake, monkeypatch)

    @contextmanager
    def refuse(*args: object, **kwargs: object) -> object:
        raise ClusterError("SASL authentication failed for user alice: check sasl.jaas.config")
        yield

    monkeypatch.setattr(kafka_live, "open_port", refuse)
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3]}), "--execute")
    assert (code, out) == (1, "Error: SASL authentication failed for user alice: check sasl.jaas.config\n")
    assert fake.calls == []


def test_execute_skips_a_source_broker_that_is_down(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.stop_broker(4)
    code, out, err = run("--reassignment-json-file", plan_file(tmp_path, {"bar-0": [3, 1]}), "--execute",
                         "--throttle", "500")
    assert code == 0
    assert out.endswith("The inter-broker throttle limit was set to 500 B/s\n"
                        "Successfully started partition reassignment for bar-0\n")
    assert "broker 4 did not answer" in err
    assert fake.broker_configs[4] == {}
    assert fake.broker_configs[1]["leader.replication.throttled.rate"] == "500"


def test_execute_holds_back_a_move_whose_leader_missed_its_throttle(run: KafkaRunner, fake: FakeCluster,
                                                                    tmp_path: Path) -> None:
    fake.partitions[TopicPartition("bar", 0)].leader = 4
    fake.unreachable.add(4)
    code, out, err = run("--reassignment-json-file", plan_file(tmp_path, {"bar-0": [3, 1], "foo-0": [1, 3]}),
                         "--execute", "--throttle", "500")
    assert code == 1
    assert ("The inter-broker throttle limit was set to 500 B/s\n"
            "Successfully started partition reassignment for foo-0\n"
            "Held back 1 partition(s) whose leader or new replica is on broker(s) 4, which did not take the "
            "throttle: bar-0. They would copy unthrottled; run `kreassign resume --journal ") in out
    assert "broker 4 did not answer" in err
    assert set(fake.list_reassignments()) == {TopicPartition("foo", 0)}


def test_execute_log_dirs_and_their_throttle(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 2]}, log_dirs={"foo-0": ["/data/b", "any"]})
    code, out, _ = run("--reassignment-json-file", plan, "--execute", "--replica-alter-log-dirs-throttle", "300")
    assert code == 0, out
    assert out.endswith(WARNING + "The replica-alter-dir throttle limit was set to 300 B/s\n"
                        "Successfully started partition reassignment for foo-0\n"
                        "Successfully started moving log directory to /data/b for replica foo-0 with broker 1 \n")
    assert fake.broker_configs[1] == {"replica.alter.log.dirs.io.max.bytes.per.second": "300"}
    assert fake.future_dirs == {next(iter(fake.future_dirs)): "/data/b"}


def test_execute_log_dir_move_that_cannot_start_times_out(run: KafkaRunner, tmp_path: Path) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3]}, log_dirs={"foo-0": ["any", "/data/b"]})
    code, out, _ = run("--reassignment-json-file", plan, "--execute", "--timeout", "0")
    assert code == 1
    assert out.endswith("Successfully started partition reassignment for foo-0\n"
                        "Timed out before log directory move could be started for: foo-0-3\n")


# ---- --verify --------------------------------------------------------------------------------
def test_verify_reports_each_state(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_reassignments({FOO0: [1, 3]})
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "foo-1": [3, 4], "bar-0": [3, 4], "quux-0": [1, 2],
                                "foo-2": [1, 2]})
    code, out, _ = run("--reassignment-json-file", plan, "--verify")
    assert code == 0
    assert out == ("Status of partition reassignment:\n"
                   "Reassignment of partition bar-0 is completed.\n"
                   "Reassignment of partition foo-0 is still in progress.\n"
                   "There is no active reassignment of partition foo-1, but replica set is 2,3 rather than 3,4.\n"
                   "There is no active reassignment of partition foo-2, but replica set is  rather than 1,2.\n"
                   "There is no active reassignment of partition quux-0, but replica set is  rather than 1,2.\n"
                   "\n")


def test_verify_clears_throttles_and_restores_the_operators_rate(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.broker_configs[2]["leader.replication.throttled.rate"] = "9999"
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "bar-0": [3, 1]})
    assert run("--reassignment-json-file", plan, "--execute", "--throttle", "1000")[0] == 0
    code, out, _ = run("--reassignment-json-file", plan, "--verify")
    assert out.splitlines()[1:3] == ["Reassignment of partition bar-0 is still in progress.",
                                     "Reassignment of partition foo-0 is still in progress."]
    assert "Clearing" not in out and fake.broker_configs[2]["leader.replication.throttled.rate"] == "1000"
    fake.complete()
    code, out, err = run("--reassignment-json-file", plan, "--verify")
    assert code == 0
    assert out == ("Status of partition reassignment:\n"
                   "Reassignment of partition bar-0 is completed.\n"
                   "Reassignment of partition foo-0 is completed.\n"
                   "\n"
                   "Clearing broker-level throttles on brokers 1,2,3,4\n"
                   "Clearing topic-level throttles on topics bar,foo\n")
    assert fake.broker_configs[2] == {"leader.replication.throttled.rate": "9999"}
    assert fake.broker_configs[1] == fake.broker_configs[3] == {}
    assert fake.topic_configs == {"foo": {}, "bar": {}}
    assert err == ("Restored the throttle set before this reassignment on broker 2: "
                   "leader.replication.throttled.rate=9999\n")


def test_verify_waits_for_unrelated_reassignments_and_honours_preserve(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_reassignments({TopicPartition("bar", 0): [4, 1]})
    plan = plan_file(tmp_path, {"foo-0": [1, 2]})
    assert "Clearing" not in run("--reassignment-json-file", plan, "--verify")[1]
    fake.complete()
    assert "Clearing" not in run("--reassignment-json-file", plan, "--verify", "--preserve-throttles")[1]
    assert "Clearing broker-level throttles on brokers 1,2,3,4\nClearing topic-level throttles on topic foo\n" \
        in run("--reassignment-json-file", plan, "--verify")[1]


def test_verify_singular_clearing_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeCluster([1]).add_topic("foo", [[1]])
    fake.broker_configs[1]["follower.replication.throttled.rate"] = "5"
    code, out, _ = KafkaRunner(fake, monkeypatch)("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1]}),
                                                  "--verify")
    assert out.endswith("\nClearing broker-level throttles on broker 1\nClearing topic-level throttles on topic foo\n")
    assert fake.broker_configs[1] == {}  # no journal: deleted, as Kafka does


def test_verify_log_dir_states(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_replica_log_dirs({_tpr("foo", 0, 1): "/data/b"})
    fake.replica_dirs[_tpr("foo", 1, 3)] = "/data/b"
    plan = plan_file(tmp_path, {"foo-0": [1, 2], "foo-1": [2, 3], "bar-0": [3, 4]},
                     log_dirs={"foo-0": ["/data/b", "/data/b"], "foo-1": ["any", "/data/b"],
                               "bar-0": ["any", "/data/x"]})
    fake.partitions[TopicPartition("bar", 0)].replicas = [3, 4]
    del fake.replica_dirs[_tpr("bar", 0, 4)]
    code, out, _ = run("--reassignment-json-file", plan, "--verify")
    assert out.splitlines()[4:] == [
        "Reassignment of replica foo-0-1 is still in progress.",
        "Partition foo-0 on broker 2 is not being moved from log dir /data/a to /data/b.",
        "Reassignment of replica foo-1-3 completed successfully.",
        "Partition bar-0 cannot be found in any live log directory on broker 4.",
    ]
    assert "Clearing" not in out  # a log-dir move is still running


@pytest.mark.parametrize(("state", "line"), [
    ("missing-replica", "Partition foo-0 cannot be found in any live log directory on broker 2."),
    ("missing-log-dir", "Partition foo-0 is not found in any live log dir on broker 2. There is likely an "
                        "offline log directory on the broker."),
    ("in-progress", "Reassignment of replica foo-0-2 is still in progress."),
    ("moving-elsewhere", "Partition foo-0 on broker 2 is being moved to log dir /c instead of /b."),
    ("not-moving", "Partition foo-0 on broker 2 is not being moved from log dir /a to /b."),
    ("completed", "Reassignment of replica foo-0-2 completed successfully."),
])
def test_every_log_dir_line(state: str, line: str) -> None:
    from kreassign.cli.kafka_live import render_verify
    from kreassign.execute.logdir_moves import LogDirStatus
    from kreassign.execute.verify import VerifyResult

    status = LogDirStatus(_tpr("foo", 0, 2), state, "/b", "/a", "/c")  # type: ignore[arg-type]
    assert render_verify(VerifyResult((), (status,))) == f"Status of partition reassignment:\n{line}\n"


def test_verify_with_broker_down_warns_and_keeps_journal_open(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path, journal_dir: Path) -> None:
    plan = plan_file(tmp_path, {"bar-0": [3, 1]})
    run("--reassignment-json-file", plan, "--execute", "--throttle", "100")
    fake.complete()
    fake.unreachable.add(4)
    code, out, err = run("--reassignment-json-file", plan, "--verify")
    assert code == 1
    assert out.endswith("Clearing broker-level throttles on brokers 1,2,3,4\nClearing topic-level throttles on topic bar\n")
    assert "broker 4 did not answer" in err and "still set" in err
    assert fake.broker_configs[4]["leader.replication.throttled.rate"] == "100"
    journal = json.loads(next(journal_dir.rglob("*.json")).read_text())
    assert journal["state"] == "clearing" and journal["pending"]["brokers"] == {
        "4": {"follower.replication.throttled.rate": None, "leader.replication.throttled.rate": None,
              "replica.alter.log.dirs.io.max.bytes.per.second": None}}


# ---- --cancel --------------------------------------------------------------------------------
def test_cancel_cancels_pure_additions_fixing_kafkas_predicate(
        run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 2, 3]})
    run("--reassignment-json-file", plan, "--execute", "--throttle", "100")
    assert fake.list_reassignments()[FOO0].removing == ()
    code, out, _ = run("--reassignment-json-file", plan, "--cancel")
    assert code == 0
    assert out == ("Successfully cancelled partition reassignment for: foo-0\n"
                   "None of the specified partition moves are active.\n"
                   "Clearing broker-level throttles on brokers 1,2,3,4\n"
                   "Clearing topic-level throttles on topic foo\n")
    assert fake.replicas(FOO0) == (1, 2)
    assert all(not v for v in fake.broker_configs.values()) and fake.topic_configs["foo"] == {}


def test_cancel_plural_and_nothing_active(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "foo-1": [3, 4], "bar-0": [3, 4]})
    fake.alter_reassignments({FOO0: [1, 3], FOO1: [3, 4]})
    out = run("--reassignment-json-file", plan, "--cancel", "--preserve-throttles")[1]
    assert out == ("Successfully cancelled partition reassignments for: foo-0,foo-1\n"
                   "None of the specified partition moves are active.\n")
    assert run("--reassignment-json-file", plan, "--cancel", "--preserve-throttles")[1] == (
        "None of the specified partition reassignments are active.\n"
        "None of the specified partition moves are active.\n")


def test_cancel_errors_are_terse(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_reassignments({FOO0: [1, 3], FOO1: [3, 4]})
    fake.reject[FOO1] = ApiError(-1, "UNKNOWN_SERVER_ERROR", "Unable to revert partition assignment for "
                                 "foo:1 because it would require an unclean leader election.")
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3], "foo-1": [3, 4]}), "--cancel")
    assert (code, out) == (1, "Error cancelling partition reassignment for:\nfoo-1: Unable to revert partition "
                              "assignment for foo:1 because it would require an unclean leader election.\n")


def test_cancel_errors_plural(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_reassignments({FOO0: [1, 3], FOO1: [3, 4]})
    fake.reject[FOO0] = fake.reject[FOO1] = ApiError(-1, "UNKNOWN_SERVER_ERROR", "boom")
    code, out, _ = run("--reassignment-json-file", plan_file(tmp_path, {"foo-0": [1, 3], "foo-1": [3, 4]}), "--cancel")
    assert (code, out) == (1, "Error cancelling partition reassignments for:\nfoo-0: boom\nfoo-1: boom\n")


def test_cancel_moves_active_log_dir_moves_back(run: KafkaRunner, fake: FakeCluster, tmp_path: Path) -> None:
    fake.alter_replica_log_dirs({_tpr("foo", 0, 1): "/data/b"})
    plan = plan_file(tmp_path, {"foo-0": [1, 2]}, log_dirs={"foo-0": ["/data/b", "any"]})
    out = run("--reassignment-json-file", plan, "--cancel", "--preserve-throttles")[1]
    assert out == ("None of the specified partition reassignments are active.\n"
                   "Successfully started moving log directory to /data/a for replica foo-0 with broker 1 \n")
    assert fake.future_dirs == {}


# ---- --list ----------------------------------------------------------------------------------
def test_list_formats(run: KafkaRunner, fake: FakeCluster) -> None:
    assert run("--list") == (0, "No partition reassignments found.\n", "")
    fake.alter_reassignments({FOO0: [1, 3], FOO1: [2, 3, 4], TopicPartition("bar", 0): [4]})
    assert run("--list")[1] == ("Current partition reassignments:\n"
                                "bar-0: replicas: 4,3. removing: 3.\n"
                                "foo-0: replicas: 1,3,2. adding: 3. removing: 2.\n"
                                "foo-1: replicas: 2,3,4. adding: 4.\n")


def _tpr(topic: str, partition: int, broker: int) -> object:
    from kreassign.cluster.model import TopicPartitionReplica

    return TopicPartitionReplica(topic, partition, broker)
