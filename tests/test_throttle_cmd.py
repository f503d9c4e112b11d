"""`throttle show|set|clear`: rates and lists on running moves, journaled, restored on clear."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Kreassign
from fake_cluster import FakeCluster
from kreassign.cli.runtime import Runtime
from kreassign.cluster.model import TopicPartition
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kreassign.execute.journal import JournalStore
from kreassign.execute.live_throttle import (
    StillMoving,
    ThrottleSetRequest,
    apply_throttle_change,
    clear_all_throttles,
    plan_throttle_set,
    read_throttle_view,
)


@pytest.fixture
def fake() -> FakeCluster:
    cluster = FakeCluster((1, 2, 3, 4))
    cluster.add_topic("t", [[1, 2], [2, 3]]).add_topic("u", [[3, 4]])
    cluster.alter_reassignments({TopicPartition("t", 0): [1, 3]})  # 1 leads; 3 is added, 2 removed
    cluster.broker_configs[1][LEADER_RATE] = "999"  # set by the operator before we came
    return cluster


def test_set_on_running_move_rates_and_lists(fake: FakeCluster, tmp_path: Path) -> None:
    store = JournalStore(tmp_path)
    change = plan_throttle_set(fake, ThrottleSetRequest(leader_rate=10_000_000, follower_rate=20_000_000))
    assert sorted(change.broker_ops) == [1, 2, 3]  # sources 1,2 and destination 3
    assert change.topic_ops == {"t": {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}}
    result = apply_throttle_change(fake, change, store=store)
    assert fake.broker_configs[1] == {LEADER_RATE: "10000000", FOLLOWER_RATE: "20000000"}
    assert fake.topic_configs["t"] == {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}
    (journal,) = store.journals(fake.cluster_id, open_only=True)
    assert result.journal_path == journal.path
    assert journal.previous_brokers[1][LEADER_RATE] == "999"
    assert journal.previous_brokers[3] == {LEADER_RATE: None, FOLLOWER_RATE: None,
                                           "replica.alter.log.dirs.io.max.bytes.per.second": None}
    view = read_throttle_view(fake)
    assert [(b.broker, b.leader_rate, b.involved) for b in view.brokers] == [
        (1, 10_000_000, True), (2, 10_000_000, True), (3, 10_000_000, True), (4, None, False)]
    assert view.leader_throttled(TopicPartition("t", 0), 1) and view.follower_throttled(TopicPartition("t", 0), 3)


def test_second_set_keeps_the_first_previous_values(fake: FakeCluster, tmp_path: Path) -> None:
    store = JournalStore(tmp_path)
    for rate in (5_000_000, 7_000_000):
        apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=rate)), store=store)
    (journal,) = store.journals(fake.cluster_id, open_only=True)
    assert journal.previous_brokers[1][LEADER_RATE] == "999"
    assert fake.broker_configs[1][LEADER_RATE] == "7000000"


def test_clear_restores_what_was_there(fake: FakeCluster, tmp_path: Path) -> None:
    store = JournalStore(tmp_path)
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=5, follower_rate=6)),
                          store=store)
    with pytest.raises(StillMoving, match="still running"):
        clear_all_throttles(fake, store=store)
    fake.complete()
    result = clear_all_throttles(fake, store=store)
    assert fake.broker_configs == {1: {LEADER_RATE: "999"}, 2: {}, 3: {}, 4: {}}
    assert fake.topic_configs["t"] == {}
    assert result.complete and result.clears[0].restored_brokers == {1: {LEADER_RATE: "999"}}
    assert store.journals(fake.cluster_id, open_only=True) == []


def test_clear_without_journal_deletes_like_kafka(fake: FakeCluster) -> None:
    fake.complete()
    fake.topic_configs["u"][LEADER_REPLICAS] = "*"
    result = clear_all_throttles(fake, store=None)
    assert fake.broker_configs[1] == {} and fake.topic_configs["u"] == {}
    assert result.clears[0].brokers == (1, 2, 3, 4) and result.clears[0].topics == ("u",)


def test_clear_some_restores_and_keeps_the_journal_open(fake: FakeCluster, tmp_path: Path) -> None:
    store = JournalStore(tmp_path)
    apply_throttle_change(fake, plan_throttle_set(fake, ThrottleSetRequest(leader_rate=5)), store=store)
    result = clear_all_throttles(fake, store=store, brokers=[1], force=True)
    assert fake.broker_configs[1] == {LEADER_RATE: "999"} and fake.broker_configs[2] == {LEADER_RATE: "5"}
    assert result.clears[0].brokers == (1,)
    assert len(store.journals(fake.cluster_id, open_only=True)) == 1


def test_set_needs_a_rate_and_known_brokers(fake: FakeCluster) -> None:
    from kreassign.cluster.errors import InputError

    with pytest.raises(InputError, match="--throttle, --leader-rate or --follower-rate"):
        plan_throttle_set(fake, ThrottleSetRequest())
    with pytest.raises(InputError, match="broker 9 is not a live broker"):
        plan_throttle_set(fake, ThrottleSetRequest(leader_rate=1, brokers=(9,)))
    fake.complete()
    with pytest.raises(InputError, match="--brokers"):
        plan_throttle_set(fake, ThrottleSetRequest(leader_rate=1))


# ---- CLI -------------------------------------------------------------------------------------
def test_cli_set_dry_run_changes_nothing(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    result = kreassign.run("throttle", "set", "--throttle", "50MB/s", "--dry-run", "--journal-dir", str(tmp_path),
                           connect=fake, columns=160)
    assert result.exit_code == 0, result.output
    assert "Would set on broker 1: follower.replication.throttled.rate=50000000 (was unset), " \
           "leader.replication.throttled.rate=50000000 (was 999)" in result.output
    assert fake.broker_configs[1] == {LEADER_RATE: "999"} and not list(tmp_path.iterdir())


def test_cli_set_rate_is_the_deprecated_name_of_throttle(fake: FakeCluster, tmp_path: Path,
                                                         kreassign: Kreassign) -> None:
    old = kreassign.run("throttle", "set", "--rate", "50MB/s", "--dry-run", "--journal-dir", str(tmp_path),
                        connect=fake, columns=160)
    new = kreassign.run("throttle", "set", "--throttle", "50MB/s", "--dry-run", "--journal-dir", str(tmp_path),
                        connect=fake, columns=160)
    assert old.exit_code == new.exit_code == 0
    assert old.stdout == new.stdout
    assert old.stderr == ("Note: kreassign throttle set --rate is deprecated: use --throttle (same meaning); "
                          "--rate will be removed in the next release\n")
    assert new.stderr == ""
    both = kreassign.run("throttle", "set", "--rate", "1MB/s", "--throttle", "2MB/s", "--dry-run", connect=fake,
                         columns=160)
    assert both.exit_code == 2
    assert "--rate is the old name of --throttle: give one of them" in both.stderr
    assert "Deprecated: the old name of --throttle" in kreassign.run("throttle", "set", "--help", columns=160).stdout


def test_cli_set_then_show_json_then_clear(fake: FakeCluster, tmp_path: Path, kreassign: Kreassign) -> None:
    journal = ["--journal-dir", str(tmp_path)]
    result = kreassign.run("throttle", "set", "--leader-rate", "1MB/s", "--follower-rate", "2MB/s", "--brokers",
                           "1,3", *journal, connect=fake, columns=160)
    assert result.exit_code == 0, result.output
    assert "Journaled in" in result.output
    assert fake.broker_configs[3] == {LEADER_RATE: "1000000", FOLLOWER_RATE: "2000000"}
    assert fake.broker_configs[2] == {}
    shown = kreassign.run("throttle", "show", "--output", "json", connect=fake, columns=160)
    data = json.loads(shown.stdout)
    assert data["brokers"][0] == {"broker": 1, "leader_rate": 1000000, "follower_rate": 2000000,
                                  "log_dir_rate": None, "involved": True,
                                  "sources": {FOLLOWER_RATE: "DYNAMIC_BROKER_CONFIG",
                                              LEADER_RATE: "DYNAMIC_BROKER_CONFIG"}}
    assert data["topics"] == [{"topic": "t", "leader_replicas": "0:1,0:2", "follower_replicas": "0:3"}]
    refused = kreassign.run("throttle", "clear", *journal, connect=fake, columns=160)
    assert refused.exit_code == 1 and "add --force" in refused.stderr
    fake.complete()
    cleared = kreassign.run("throttle", "clear", *journal, connect=fake, columns=160)
    assert cleared.exit_code == 0, cleared.output
    assert "restored on broker 1: leader.replication.throttled.rate=999" in cleared.output
    assert fake.broker_configs[1] == {LEADER_RATE: "999"} and fake.broker_configs[3] == {}


def test_cli_show_text(fake: FakeCluster, kreassign: Kreassign) -> None:
    result = kreassign.run("throttle", "show", "--brokers", "1", connect=fake, columns=160)
    assert result.exit_code == 0
    assert "Broker throttle rates" in result.output and "999 B/s (999)" in result.output
    assert "1 reassignment(s) in flight." in result.output


@pytest.mark.e2e
def test_suggest_without_capacities_says_so_before_sampling_writes(sandbox: Any, tmp_path: Path,
                                                                   kreassign: Kreassign) -> None:
    """Live brokers do not report their network capacity: without --network-capacity or a canary
    baseline the answer is known before the 10 s write sample, so none is taken."""
    p = next(row for row in sandbox.engine.rows if row.topic == "orders")
    spare = next(b for b in sorted(sandbox.engine.brokers) if b not in p.replicas)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": p.index, "replicas": [*p.replicas[:-1], spare]}]}))
    sleeps: list[float] = []
    ran = kreassign.run("throttle", "suggest", "-f", str(plan), "--bootstrap-server", sandbox.bootstrap,
                        "--max-impact", "20%", runtime=Runtime(clock=lambda: sandbox.now, sleep=sleeps.append),
                        columns=160)
    assert ran.exit_code == 1 and sleeps == []
    involved = ",".join(map(str, sorted({p.leader, spare})))
    assert ran.stderr.strip() == (f"Error: the network capacity of broker(s) {involved} is unknown: "
                                  "give --network-capacity 125MB/s, or a snapshot with network_in_bps/network_out_bps")


def test_the_rates_changed_through_a_run_follow_units() -> None:
    """Issue 30, item 5: `throttle set --units binary` on a run in flight says its rates in MiB/s."""
    from types import SimpleNamespace

    from kreassign.cli.throttle_cmd import run_rates_lines

    through = SimpleNamespace(owner=SimpleNamespace(describe=lambda: "`kreassign execute` (pid 1)"),
                              answer=SimpleNamespace(leader_rate=12_000_000, follower_rate=None, brokers=None,
                                                     applied=(1, 2), pending=()), journal_path="j.json")
    assert run_rates_lines(through)[0] == ("Changed the rates of the running `kreassign execute` (pid 1) through it: "
                                           "leader 12.0 MB/s on every broker of its plan.")
    assert run_rates_lines(through, "binary")[0] == ("Changed the rates of the running `kreassign execute` (pid 1) "
                                                     "through it: leader 11.4 MiB/s on every broker of its plan.")
