"""`kreassign execute|verify|cancel|list|resume|abort` and `throttle show|set|clear`: the real CLI
in a subprocess, over TCP, against both engines (`live`: the emulator and real Kafka brokers),
with exact outputs and the configs each leaves on the cluster.

A move of HOLD_BYTES under a HOLD_RATE throttle stays in flight until a test raises the throttle.
Each test sets throttles of its own first (the operator's), which must be exactly as before at
the end.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kreassign.cluster.model import TopicPartition

from live import HOLD_BYTES, HOLD_RATE, RUN_RATE, LiveCli, rates, replicas, set_cluster_defaults, write_plan

pytestmark = pytest.mark.e2e

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_LIST, FOLLOWER_LIST = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
OPERATORS = {1: {LEADER: "999"}, 5: {FOLLOWER: "12345"}}
"""throttles an operator set before the tests' runs: broker 1 takes part in the moves, broker 5 does not"""


@pytest.fixture
def cli(live: Any, tmp_path: Path) -> LiveCli:
    return LiveCli(live, tmp_path)


@pytest.fixture
def held(live: Any, tmp_path: Path) -> Callable[[], tuple[str, str]]:
    """A topic whose partition 0 (on brokers 1,2,3) holds HOLD_BYTES, the operator's own throttles,
    and a plan moving that partition's third replica to broker 4. Returns (topic, plan file)."""
    def make() -> tuple[str, str]:
        topic = live.topic(assignment={0: [1, 2, 3], 1: [2, 3, 4]})
        live.produce(topic, 0, HOLD_BYTES)
        with live.admin() as admin:
            assert admin.incremental_alter_configs(OPERATORS).ok
        return topic, write_plan(tmp_path, {TopicPartition(topic, 0): [1, 2, 4]})

    return make


def topic_lists(live: Any, topic: str) -> dict[str, str]:
    with live.admin() as admin:
        entries = admin.describe_topic_configs([topic], [LEADER_LIST, FOLLOWER_LIST]).configs[topic]
    return {k: e.value for k, e in entries.items() if e.value}


def journal_of(ran: Any) -> str:
    (line,) = [l for l in ran.stderr.splitlines() if l.startswith("Journal: ")]
    return line.removeprefix("Journal: ")


def test_e2e_execute_list_verify_cancel(live: Any, cli: LiveCli, held: Callable[[], tuple[str, str]]) -> None:
    topic, plan = held()
    started = cli.run("execute", "-f", plan, "--throttle", str(HOLD_RATE))
    assert started.returncode == 0, started.stdout + started.stderr
    journal = journal_of(started)
    assert started.stdout == (
        "Started 1 partition reassignment(s): 1 move data, 1 new replica(s).\n"
        "Throttle: leader 1 B/s, follower 1 B/s on broker(s) 1,2,3,4; it stays until `kreassign verify` or "
        "`kreassign watch` sees the moves done.\n"
        f"Follow it: kreassign watch -f {plan}\n"
        f"Undo it: kreassign abort --journal {journal}\n")
    assert rates(live) == {1: {LEADER: "1", FOLLOWER: "1"}, 2: {LEADER: "1", FOLLOWER: "1"},
                           3: {LEADER: "1", FOLLOWER: "1"}, 4: {LEADER: "1", FOLLOWER: "1"}, 5: {FOLLOWER: "12345"}}
    assert topic_lists(live, topic) == {LEADER_LIST: "0:1,0:2,0:3", FOLLOWER_LIST: "0:4"}

    listed = cli.run("list")
    assert listed.stdout == f"Current partition reassignments:\n{topic}-0: replicas: 1,2,4,3. adding: 4. removing: 3.\n"
    assert listed.stderr.startswith(f"Open journal: {journal} (submitted, 1 partitions, since ")
    data = json.loads(cli.run("list", "-o", "json").stdout)
    assert data["reassignments"] == [{"topic": topic, "partition": 0, "replicas": [1, 2, 4, 3], "adding": [4],
                                      "removing": [3], "target": [1, 2, 4]}]
    assert [j["path"] for j in data["open_journals"]] == [journal] and data["execution_lock"] is None

    verified = cli.run("verify", "-f", plan, "--exit-status")
    assert (verified.returncode, verified.stdout) == (
        3, f"Status of partition reassignment:\nReassignment of partition {topic}-0 is still in progress.\n\n")

    cancelled = cli.run("cancel", "-f", plan)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    # kreassign's cancel restores what its run set (brokers 1-4) and leaves broker 5's own rate alone
    assert cancelled.stdout == (f"Successfully cancelled partition reassignment for: {topic}-0\n"
                                "None of the specified partition moves are active.\n"
                                "Clearing broker-level throttles on brokers 1,2,3,4\n"
                                f"Clearing topic-level throttles on topic {topic}\n")
    assert rates(live) == {1: {LEADER: "999"}, 2: {}, 3: {}, 4: {}, 5: {FOLLOWER: "12345"}}
    assert topic_lists(live, topic) == {}
    assert replicas(live, topic) == (1, 2, 3)
    assert cli.run("list").stdout == "No partition reassignments found.\n"
    assert json.loads(cli.run("list", "-o", "json").stdout) == {"reassignments": [], "open_journals": [],
                                                                "execution_lock": None}


def test_e2e_abort_restores_and_resume_finishes(live: Any, cli: LiveCli, held: Callable[[], tuple[str, str]],
                                                tmp_path: Path) -> None:
    topic, plan = held()
    assert cli.run("execute", "-f", plan, "--throttle", str(HOLD_RATE)).returncode == 0
    preview = cli.run("abort", "-f", plan, "--dry-run")
    assert preview.stdout.startswith(f"Would cancel partition reassignments for: {topic}-0\n")
    aborted = cli.run("abort", "-f", plan)
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert aborted.stdout == (f"Cancelled partition reassignments for: {topic}-0\n"
                              "Restoring broker-level throttles on brokers 1,2,3,4\n"
                              f"Restoring topic-level throttles on topic {topic}\n")
    assert rates(live) == {1: {LEADER: "999"}, 2: {}, 3: {}, 4: {}, 5: {FOLLOWER: "12345"}}
    assert topic_lists(live, topic) == {} and replicas(live, topic) == (1, 2, 3)
    again = cli.run("abort", "-f", plan)
    assert again.returncode == 1 and "nothing to abort: the run was aborted" in again.stderr

    # The same plan again, unthrottled this time; then resume of a journal with nothing missing.
    other = write_plan(tmp_path, {TopicPartition(topic, 1): [2, 3, 5]}, name="other.json")
    ran = cli.run("execute", "-f", other)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    live.finish_moves()
    resumed = cli.run("resume", "-f", other)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout == (f"Resumed {journal_of(ran)} (submitted -> submitted).\n"
                              "Nothing was missing; run `kreassign verify` to follow the moves.\n")
    done = cli.run("verify", "-f", other)
    # an unthrottled run set no throttle: kreassign's verify clears none (the operator's stay)
    assert done.stdout == f"Status of partition reassignment:\nReassignment of partition {topic}-1 is completed.\n\n"
    assert cli.run("resume", "-f", other).stderr.startswith("Error: nothing to resume: the run finished")
    assert replicas(live, topic, 1) == (2, 3, 5)
    assert rates(live) == {1: {LEADER: "999"}, 2: {}, 3: {}, 4: {}, 5: {FOLLOWER: "12345"}}


def test_e2e_throttle_show_set_clear(live: Any, cli: LiveCli, held: Callable[[], tuple[str, str]]) -> None:
    topic, plan = held()
    assert cli.run("execute", "-f", plan, "--throttle", str(HOLD_RATE)).returncode == 0
    shown = cli.run("throttle", "show", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    dynamic = "DYNAMIC_BROKER_CONFIG"
    moving = {"leader_rate": 1, "follower_rate": 1, "log_dir_rate": None,
              "sources": {FOLLOWER: dynamic, LEADER: dynamic}, "involved": True}
    view = json.loads(shown.stdout)
    assert view["brokers"] == [{"broker": b, **moving} for b in (1, 2, 3, 4)] + [
        {"broker": 5, "leader_rate": None, "follower_rate": 12345, "log_dir_rate": None,
         "sources": {FOLLOWER: dynamic}, "involved": False}]
    assert view["topics"] == [{"topic": topic, "leader_replicas": "0:1,0:2,0:3", "follower_replicas": "0:4"}]

    changed = cli.run("throttle", "set", "--leader-rate", "2MB/s", "--follower-rate", "3MB/s")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    lines = changed.stdout.splitlines()
    assert lines[:5] == [f"Set on broker {b}: {FOLLOWER}=3000000 (was 1), {LEADER}=2000000 (was 1)" for b in (1, 2, 3, 4)] + [
        f"Set on topic {topic}: {FOLLOWER_LIST}=0:4, {LEADER_LIST}=0:1,0:2,0:3"]
    assert lines[5].startswith("Journaled in ") and len(lines) == 6
    assert rates(live)[4] == {LEADER: "2000000", FOLLOWER: "3000000"}

    refused = cli.run("throttle", "clear")
    assert refused.returncode == 1 and "add --force" in refused.stderr
    assert rates(live)[4] == {LEADER: "2000000", FOLLOWER: "3000000"}

    # named brokers: on a loaded machine the move may have finished at 3 MB/s already
    assert cli.run("throttle", "set", "--throttle", str(RUN_RATE), "--brokers", "1,2,3,4").returncode == 0
    live.finish_moves()
    cleared = cli.run("throttle", "clear")
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    assert cleared.stdout == ("Cleared broker-level throttles on broker(s) 1,2,3,4,5\n"
                              f"Cleared topic-level throttles on topic(s) {topic}\n"
                              f"  restored on broker 1: {LEADER}=999\n"
                              f"  restored on broker 5: {FOLLOWER}=12345\n")
    assert rates(live) == {1: {LEADER: "999"}, 2: {}, 3: {}, 4: {}, 5: {FOLLOWER: "12345"}}
    assert topic_lists(live, topic) == {} and replicas(live, topic) == (1, 2, 4)
    text = cli.run("throttle", "show", "--brokers", "1,5")
    assert "Broker throttle rates" in text.stdout and "999 B/s" in text.stdout and "12.3 kB/s" in text.stdout


def test_e2e_throttle_show_names_where_each_rate_comes_from(live: Any, cli: LiveCli, tmp_path: Path) -> None:
    """A cluster-wide default (`--entity-default`) shows through on every broker without its own
    value; a run sets per-broker values over it and, done, deletes them so that it shows again."""
    topic = live.topic(assignment={0: [1, 2, 3]})
    live.produce(topic, 0, 100_000)
    with live.admin() as admin:
        assert admin.incremental_alter_configs(OPERATORS).ok
    set_cluster_defaults(live, {LEADER: "5000000"})
    dynamic, default = "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"

    def shown() -> dict[int, tuple[int | None, int | None, dict[str, str]]]:
        ran = cli.run("throttle", "show", "-o", "json")
        assert ran.returncode == 0, ran.stderr
        return {b["broker"]: (b["leader_rate"], b["follower_rate"], b["sources"]) for b in json.loads(ran.stdout)["brokers"]}

    before = {1: (999, None, {LEADER: dynamic}), 2: (5000000, None, {LEADER: default}),
              3: (5000000, None, {LEADER: default}), 4: (5000000, None, {LEADER: default}),
              5: (5000000, 12345, {FOLLOWER: dynamic, LEADER: default})}
    assert shown() == before
    plan = write_plan(tmp_path, {TopicPartition(topic, 0): [1, 2, 4]})
    assert cli.run("execute", "-f", plan, "--throttle", "7000000").returncode == 0
    assert shown() == {**{b: (7000000, 7000000, {FOLLOWER: dynamic, LEADER: dynamic}) for b in (1, 2, 3, 4)},
                       5: before[5]}
    live.finish_moves()
    done = cli.run("verify", "-f", plan)
    assert done.returncode == 0 and f"Reassignment of partition {topic}-0 is completed." in done.stdout
    assert shown() == before
