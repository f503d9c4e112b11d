"""`kreassign execute|verify|cancel|list|resume|abort` against the fake cluster."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_helpers import Kreassign, Ran
from fake_cluster import FakeCluster, plan_file

from kreassign.cli import runtime
from kreassign.cli.runtime import Runtime
from kreassign.cluster.model import TopicPartition
from kreassign.execute.journal import JournalStore

FOO0, BAR0 = TopicPartition("foo", 0), TopicPartition("bar", 0)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeCluster:
    cluster = FakeCluster([1, 2, 3, 4]).add_topic("foo", [[1, 2], [2, 3]]).add_topic("bar", [[3, 4]])
    seen: list[str | None] = []

    @contextmanager
    def fake_port(bootstrap: str | None, command_config: str | None, timeout_s: float | None) -> Iterator[FakeCluster]:
        seen.append(bootstrap)
        yield cluster

    monkeypatch.setattr(runtime, "open_port", fake_port)
    monkeypatch.setenv("KREASSIGN_BOOTSTRAP_SERVER", "127.0.0.1:9092")
    monkeypatch.setenv("KREASSIGN_JOURNAL_DIR", str(tmp_path / "journal"))
    cluster.bootstraps = seen  # type: ignore[attr-defined]
    return cluster


def test_execute_prints_a_short_summary_and_names_the_journal(fake: FakeCluster, tmp_path: Path,
                                                              kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    code, out, err = kreassign.run("execute", "-f", plan, "--throttle", "50MB/s")
    assert code == 0, err
    assert err.startswith("Journal: " + str(tmp_path / "journal" / "fake-cluster"))
    journal = err.split("Journal: ")[1].strip()
    assert out == ("Started 1 partition reassignment(s): 1 move data, 1 new replica(s).\n"
                   "Throttle: leader 50.0 MB/s, follower 50.0 MB/s on broker(s) 1,2,3; it stays until "
                   "`kreassign verify` or `kreassign watch` sees the moves done.\n"
                   f"Follow it: kreassign watch -f {plan}\n"
                   f"Undo it: kreassign abort --journal {journal}\n")
    assert "Successfully started" not in out and "rollback" not in out  # Kafka's text is the front door's
    assert fake.bootstraps == ["127.0.0.1:9092"]  # type: ignore[attr-defined]


def test_execute_separate_leader_and_follower_rates(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    code, out, _ = kreassign.run("execute", "-f", plan, "--leader-rate", "100", "--follower-rate", "200")
    assert code == 0
    assert "Throttle: leader 100 B/s, follower 200 B/s on broker(s) 1,2,3;" in out
    assert fake.broker_configs[1] == {"leader.replication.throttled.rate": "100",
                                      "follower.replication.throttled.rate": "200"}


def test_execute_dry_run_changes_nothing(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    code, out, _ = kreassign.run("execute", "-f", plan, "--throttle", "1000", "--dry-run")
    assert code == 0
    assert out.endswith("Would set leader.replication.throttled.replicas='0:1,0:2' on topic foo\n"
                        "Would set follower.replication.throttled.replicas='0:3' on topic foo\n"
                        "Would set leader.replication.throttled.rate=1000 on broker 1\n"
                        "Would set follower.replication.throttled.rate=1000 on broker 1\n"
                        "Would set leader.replication.throttled.rate=1000 on broker 2\n"
                        "Would set follower.replication.throttled.rate=1000 on broker 2\n"
                        "Would set leader.replication.throttled.rate=1000 on broker 3\n"
                        "Would set follower.replication.throttled.rate=1000 on broker 3\n"
                        "Would submit 1 partition reassignment: foo-0\n")
    code, out, _ = kreassign.run("execute", "-f", plan, "--throttle", "1000", "--dry-run", "-o", "json")
    assert json.loads(out)["dry_run"] is True
    assert "incremental_alter_configs" not in fake.calls and "alter_reassignments" not in fake.calls
    assert not (tmp_path / "journal").exists()


def test_execute_json_and_kafka_errors(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    code, out, _ = kreassign.run("execute", "-f", plan_file(tmp_path, {"foo-0": [1, 3]}), "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["submitted"] == ["foo-0"] and data["errors"] == {}
    assert set(data) == {"plan", "journal", "submitted", "errors", "skipped_brokers", "rolled_back", "held_back",
                         "unconfirmed_brokers", "log_dir_moves_started", "log_dir_moves_timed_out"}
    code, out, err = kreassign.run("execute", "-f", plan_file(tmp_path, {"foo-1": [1, 5]}, name="b.json"),
                                   "--additional")
    assert (code, out, err) == (1, "", "Error: Unknown broker id 5\n")


def test_verify_exit_status_while_moving(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    kreassign.run("execute", "-f", plan, "--throttle", "1000")
    code, out, _ = kreassign.run("verify", "-f", plan, "--exit-status")
    assert code == 3 and "Reassignment of partition foo-0 is still in progress." in out
    assert kreassign.run("verify", "-f", plan)[0] == 0
    fake.complete()
    code, out, _ = kreassign.run("verify", "-f", plan, "--exit-status", "--dry-run")
    # only the brokers the run throttled (1,2 send, 3 receives): kreassign's verify leaves broker 4 alone
    assert code == 0 and "Would clear broker-level throttles on brokers 1,2,3\n" in out
    assert fake.broker_configs[1]  # dry run: still set
    code, out, _ = kreassign.run("verify", "-f", plan, "-o", "json")
    data = json.loads(out)
    assert data["in_progress"] is False and data["throttles_cleared"]["complete"] is True
    assert all(not v for v in fake.broker_configs.values())


def test_cancel_list_and_json(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 2, 3]})
    kreassign.run("execute", "-f", plan, "--throttle", "1000")
    code, out, err = kreassign.run("list")
    assert out == "Current partition reassignments:\nfoo-0: replicas: 1,2,3. adding: 3.\n"
    assert "Open journal:" in err
    listed = json.loads(kreassign.run("list", "-o", "json")[1])
    assert listed["reassignments"][0]["target"] == [1, 2, 3] and len(listed["open_journals"]) == 1
    code, out, _ = kreassign.run("cancel", "-f", plan, "--dry-run")
    assert out.startswith("Would cancel: foo-0\nWould move back: nothing\n") and fake.list_reassignments()
    code, out, _ = kreassign.run("cancel", "-f", plan, "-o", "json")
    assert json.loads(out)["cancelled"] == ["foo-0"] and not fake.list_reassignments()
    assert json.loads(kreassign.run("list", "-o", "json")[1]) == {"reassignments": [], "open_journals": [],
                                                                "execution_lock": None}


def test_resume_and_abort_find_the_journal(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    code, _, err = kreassign.run("resume")
    assert code == 1 and "no open journals for cluster fake-cluster" in err
    first = plan_file(tmp_path, {"foo-0": [1, 3]})
    second = plan_file(tmp_path, {"bar-0": [3, 1]}, name="second.json")
    fake.fail_next("alter_reassignments", KeyboardInterrupt())
    code, _, err = kreassign.run("execute", "-f", first, "--throttle", "1000")
    assert code == 130 and "kreassign resume --journal" in err
    code, out, _ = kreassign.run("resume", "--dry-run")
    assert code == 1  # something remains
    assert out == ("Would submit 1 partition(s) that are neither moving to nor at their target: foo-0\n"
                   "Would then restore the throttles recorded before the run\n")
    code, out, _ = kreassign.run("resume")
    assert code == 0 and "Successfully started partition reassignment for foo-0\n" in out
    kreassign.run("execute", "-f", second, "--additional")
    code, _, err = kreassign.run("abort")
    assert code == 1 and "2 open journals" in err
    fake.complete(FOO0)
    code, out, _ = kreassign.run("abort", "-f", first)
    assert code == 0
    assert out == ("Cancelled partition reassignments for: none\n"
                   "Restoring broker-level throttles on brokers 1,2,3\n"
                   "Restoring topic-level throttles on topic foo\n"
                   "These partitions are not back on their replicas before the run; to move them back, execute:\n"
                   '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}\n')
    assert all(not v for v in fake.broker_configs.values())
    code, _, err = kreassign.run("abort", "-f", first)
    assert code == 1 and "nothing to abort: the run was aborted" in err


def test_missing_bootstrap_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   kreassign: Kreassign) -> None:
    monkeypatch.delenv("KREASSIGN_BOOTSTRAP_SERVER", raising=False)
    code, _, err = kreassign.run("list")
    assert code == 1 and "no cluster given: use --bootstrap-server" in err

POLL_OPERATIONS_DOCUMENTED = 13
"""docs/journal.md, "How long a command waits": operations of one poll of a paced run"""
POLL_OPERATIONS_NEW_BROKERS = 16
"""the same, for a poll whose wave throttles a broker new to the run (its rate set, then read back)"""


class Steps:
    """Sandbox-free time for the watch loop: each sleep advances the clock, records the moves in
    flight and completes them, as if they had copied."""

    def __init__(self, fake: FakeCluster) -> None:
        self.fake, self.now = fake, 0.0
        self.in_flight: list[set[TopicPartition]] = []

    def sleep(self, seconds: float) -> None:
        self.in_flight.append(set(self.fake.list_reassignments()))
        self.now += seconds
        self.fake.complete()

    def runtime(self) -> Runtime:
        return Runtime(clock=lambda: self.now, sleep=self.sleep)


def events(ran: Ran) -> list[dict[str, object]]:
    return [json.loads(line) for line in ran.stdout.splitlines()]


def test_paced_execute_submits_in_waves_then_restores_throttles(fake: FakeCluster, tmp_path: Path,
                                                                kreassign: Kreassign) -> None:
    fake.add_topic("baz", [[1, 2]])
    fake.broker_configs[2]["leader.replication.throttled.rate"] = "777"  # the operator's own
    # foo-0 and baz-0 both send from broker 1 (bar-0: 3 sends, 1 receives). One move per broker
    # each way: baz-0 waits for foo-0.
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "baz-0": [1, 4], "bar-0": [3, 1]})
    steps = Steps(fake)
    ran = kreassign.run("execute", "-f", plan, "--throttle", "1000", "--max-moves-per-broker", "1", "--interval",
                        "5s", "--journal-dir", str(tmp_path / "j"), "-o", "json", runtime=steps.runtime(),
                        connect=fake, columns=160)
    assert ran.exit_code == 0, ran.output
    seen = events(ran)
    waves = [e["partitions"] for e in seen if e["event"] == "wave"]
    assert waves == [["bar-0", "foo-0"], ["baz-0"]]
    assert steps.in_flight[0] == {FOO0, BAR0} and steps.now == 10.0  # three polls 5 s apart
    assert seen[-1]["event"] == "complete" and seen[-1]["mismatched"] == []
    assert fake.replicas(FOO0) == (1, 3) and fake.replicas(BAR0) == (3, 1)
    assert fake.broker_configs == {1: {}, 2: {"leader.replication.throttled.rate": "777"}, 3: {}, 4: {}}
    (journal,) = JournalStore(tmp_path / "j").journals(fake.cluster_id)
    assert journal.state == "finished" and ran.stderr == f"Journal: {journal.path}\n"
    assert journal.options["paced"]["max_moves_per_broker"] == 1


def test_a_standing_throttle_set_before_a_run_is_restored_at_its_end(fake: FakeCluster, tmp_path: Path,
                                                                     kreassign: Kreassign) -> None:
    """The operator's `throttle set` while nothing moved (a standing throttle, journaled) is the
    value a later run restores, and a watch in between leaves it (found on Kafka 4.4.0: the run
    read the standing journal's own "before" and deleted the operator's 7 MB/s at its end)."""
    journals = str(tmp_path / "j")
    assert kreassign.run("throttle", "set", "--brokers", "2", "--leader-rate", "777", "--journal-dir", journals,
                         connect=fake, columns=160).exit_code == 0
    assert kreassign.run("watch", "--journal-dir", journals, runtime=Steps(fake).runtime(), connect=fake,
                         columns=160).exit_code == 0
    assert fake.broker_configs[2] == {"leader.replication.throttled.rate": "777"}
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "bar-0": [3, 1]})
    ran = kreassign.run("execute", "-f", plan, "--throttle", "1000", "--max-moves-per-broker", "1", "--interval",
                        "5s", "--journal-dir", journals, "-o", "json", runtime=Steps(fake).runtime(), connect=fake,
                        columns=160)
    assert ran.exit_code == 0, ran.output
    assert fake.broker_configs == {1: {}, 2: {"leader.replication.throttled.rate": "777"}, 3: {}, 4: {}}
    (standing,) = JournalStore(tmp_path / "j").journals(fake.cluster_id, open_only=True)
    assert standing.command == "throttle set"  # `throttle clear` ends it

def paced_polls(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign, moves: dict[str, list[int]]) -> list[list[str]]:
    """A paced execute of `moves` (one move per broker, every sleep completes what moves): the
    port calls of each poll between two sleeps."""
    plan = plan_file(tmp_path, moves)
    marks: list[int] = []
    steps = Steps(fake)
    advance = steps.sleep

    def sleep(seconds: float) -> None:
        marks.append(len(fake.calls))
        advance(seconds)

    steps.sleep = sleep  # type: ignore[method-assign]
    ran = kreassign.run("execute", "-f", plan, "--throttle", "1000", "--max-moves-per-broker", "1", "--interval",
                        "5s", "--journal-dir", str(tmp_path / "j"), "-o", "json", runtime=steps.runtime(),
                        connect=fake, columns=160)
    assert ran.exit_code == 0, ran.output
    return [fake.calls[a:b] for a, b in zip(marks, marks[1:])]


def test_a_paced_poll_makes_a_bounded_number_of_cluster_operations(fake: FakeCluster, tmp_path: Path,
                                                                   kreassign: Kreassign) -> None:
    """The bound docs/journal.md states ("How long a command waits"): a poll of a paced run makes
    13 cluster operations when it submits a wave (fewer otherwise), each ending within its timeout."""
    fake.add_topic("baz", [[1, 2]])
    polls = paced_polls(fake, tmp_path, kreassign, {"foo-0": [1, 3], "baz-0": [1, 4], "bar-0": [3, 1]})
    per_poll = [len(poll) for poll in polls]
    assert per_poll == [13]  # the poll between the two sleeps submits the second wave
    assert max(per_poll) <= POLL_OPERATIONS_DOCUMENTED


def test_a_poll_whose_wave_throttles_a_new_broker_reads_its_rate_back_once(fake: FakeCluster, tmp_path: Path,
                                                                           kreassign: Kreassign) -> None:
    fake.add_topic("baz", [[1, 2]])
    # the second wave throttles broker 4
    (poll,) = paced_polls(fake, tmp_path, kreassign, {"foo-0": [1, 3], "baz-0": [1, 4]})
    assert len(poll) == POLL_OPERATIONS_NEW_BROKERS
    documented = " ".join((Path(__file__).parent.parent / "docs" / "journal.md").read_text().split())
    assert (f"makes {POLL_OPERATIONS_DOCUMENTED} operations when it submits a wave (fewer when it only watches), "
            f"{POLL_OPERATIONS_NEW_BROKERS} when the wave throttles a broker new to the run") in documented
    rates_set = poll.index("incremental_alter_configs", poll.index("incremental_alter_configs") + 1)
    assert [c for c in poll[rates_set:poll.index("alter_reassignments")] if c != "read_markers"] == [
        "incremental_alter_configs", "describe_broker_configs"]  # set, read back once, then submitted


def test_paced_execute_text_dry_run_and_refusals(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3], "foo-1": [2, 4]})
    ran = kreassign.run("execute", "-f", plan, "--order", "large-first", "--dry-run", "--journal-dir",
                        str(tmp_path / "j"), runtime=Steps(fake).runtime(), connect=fake, columns=160)
    assert (ran.exit_code, ran.stderr) == (0, "")
    assert ran.stdout == "Would submit 2 partition(s) in waves; the first wave: foo-0,foo-1. Nothing was changed.\n"
    assert fake.list_reassignments() == {} and not (tmp_path / "j").exists()
    with_dirs = plan_file(tmp_path, {"foo-0": [1, 3]}, name="dirs.json", log_dirs={"foo-0": ["any", "/data/b"]})
    ran = kreassign.run("execute", "-f", with_dirs, "--max-inflight-bytes", "1MB", connect=fake, columns=160)
    assert ran.exit_code == 1 and "paced execute moves replicas between brokers only" in ran.stderr
    ran = kreassign.run("execute", "-f", plan, "--order", "plan", "--log-dir-throttle", "1MB/s", connect=fake,
                        columns=160)
    assert ran.exit_code == 2 and "drop --log-dir-throttle" in ran.stderr
    ran = kreassign.run("execute", "-f", plan, "--interval", "5s", connect=fake, columns=160)
    assert ran.exit_code == 2 and "--interval sets the polls of a paced execute" in ran.stderr
    assert fake.list_reassignments() == {}


def test_verify_watch_follows_the_plan_to_the_end(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    plan = plan_file(tmp_path, {"foo-0": [1, 3]})
    journals = str(tmp_path / "j")
    assert kreassign.run("execute", "-f", plan, "--throttle", "1000", "--journal-dir", journals, connect=fake,
                         columns=160).exit_code == 0
    steps = Steps(fake)
    ran = kreassign.run("verify", "-f", plan, "--watch", "--interval", "30s", "--preserve-throttles",
                        "--journal-dir", journals, "-o", "json", runtime=steps.runtime(), connect=fake,
                        columns=160)
    assert ran.exit_code == 0, ran.output
    seen = events(ran)
    assert [e["event"] for e in seen] == ["progress", "progress", "complete"] and steps.now == 30.0
    assert seen[-1]["throttles_kept"] == "--keep-throttles was given" and fake.broker_configs[1]
    ran = kreassign.run("verify", "-f", plan, "--watch", "--journal-dir", journals, runtime=Steps(fake).runtime(),
                        connect=fake, columns=160)
    assert ran.exit_code == 0, ran.output
    assert ran.stdout.endswith("All moves finished after 0.0s (0 B copied).\n"  # done already: just the clear
                               "Cleared broker-level throttles on broker(s) 1,2,3,4\n"
                               "Cleared topic-level throttles on topic(s) foo\n")
    assert all(not v for v in fake.broker_configs.values()) and fake.topic_configs["foo"] == {}
    assert JournalStore(journals).journals(fake.cluster_id)[0].state == "finished"
    ran = kreassign.run("verify", "-f", plan, "--interval", "5s", connect=fake, columns=160)
    assert ran.exit_code == 2 and "--interval goes with --watch" in ran.stderr
