"""The scenarios Kafka's tool and kreassign run side by side (side_by_side.py), read from Kafka's
ReassignPartitionsCommandTest and ReassignPartitionsCommandArgsTest (tools/src/test/java/org/
apache/kafka/tools/reassign/), their brokers 0..4 being 1..5 here, plus operator mistakes.

Where Kafka's test keeps a move in flight with a 1 B/s throttle it writes a few hundred 10 kB
records. A throttled fetch still takes up to replica.fetch.max.bytes (1 MiB) per partition before
the quota closes, and the quota forgets it only after its 11 one-second windows, so a partition
of HOLD records (more than two such fetches) stays in flight for 20 s or more: long enough for
the steps that must see it moving, whichever tool runs them.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from side_by_side import Known, Run

HOLD = 260
"""records (of 10 kB) that keep a move at 1 B/s in flight for at least two quota windows"""


def unthrottled_move(r: Run) -> None:
    """testReassignment and testHighWaterMarkAfterPartitionReassignment: an unthrottled move; no
    throttle appears, --verify reports it done, and the end offset is kept."""
    r.topics()
    r.produce("foo", 0, 100)
    plan = r.plan({("foo", 0): [1, 2, 4], ("bar", 0): [4, 3, 1]})
    r.tool("--verify before the move", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.tool("--execute", *r.bootstrap, "--execute", "--reassignment-json-file", plan)
    r.throttles("throttles after --execute")
    r.wait_moves_done()
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.throttles("throttles after --verify")
    r.end_offsets("end offset after the move", [("foo", 0)])
    r.assignment()


def generate_then_verify(r: Run) -> None:
    """testGenerateAssignmentWithBootstrapServer: --generate (given a reassignment file, which has
    no "topics": two empty plans), a real --generate, then --verify of a move never started."""
    r.topics()
    r.produce("foo", 0, 100)
    plan = r.plan({("foo", 0): [4, 2, 3]})
    topics = r.file("topics.json", json.dumps({"topics": [{"topic": "foo"}, {"topic": "baz"}], "version": 1}))
    r.tool("--generate with a reassignment file", *r.bootstrap, "--generate", "--topics-to-move-json-file", plan,
           "--broker-list", "2,3,4")
    r.tool("--generate", *r.bootstrap, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "2,3,4")
    r.tool("--generate --disable-rack-aware", *r.bootstrap, "--generate", "--topics-to-move-json-file", topics,
           "--broker-list", "1,2,3,4,5", "--disable-rack-aware")
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.assignment()


def _held_move(r: Run, moves: dict[tuple[str, int], list[int]]) -> str:
    """The topics, HOLD records in each moving partition, and `--execute --throttle 1`: moves
    that stay in flight for the steps that follow."""
    r.topics()
    for topic, partition in moves:
        r.produce(topic, partition, HOLD)
    plan = r.plan(moves)
    r.tool("--execute --throttle 1", *r.bootstrap, "--execute", "--reassignment-json-file", plan, "--throttle", "1")
    r.throttles("throttles at 1 B/s")
    return plan


def alter_throttle(r: Run) -> None:
    """testAlterReassignmentThrottle: start at 1 B/s, then --additional at 300 kB/s finishes it,
    and --verify clears the throttles."""
    plan = _held_move(r, {("foo", 0): [1, 4, 3], ("baz", 2): [4, 3, 2]})
    r.tool("--list while moving", *r.bootstrap, "--list")
    r.tool("--execute --additional --throttle 300000", *r.bootstrap, "--execute", "--additional",
           "--reassignment-json-file", plan, "--throttle", "300000")
    r.throttles("throttles at 300 kB/s")
    r.wait_moves_done()
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.throttles("throttles after --verify")
    r.assignment()


def preserve_throttles(r: Run) -> None:
    """testThrottledReassignment: --verify --preserve-throttles keeps the throttles of a finished
    move, a plain --verify clears them."""
    r.topics()
    r.produce("foo", 0, 50)
    r.produce("baz", 2, 60)
    plan = r.plan({("foo", 0): [1, 4, 3], ("baz", 2): [4, 3, 2]})
    r.tool("--verify before the move", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.tool("--execute --throttle 300000", *r.bootstrap, "--execute", "--reassignment-json-file", plan,
           "--throttle", "300000")
    r.throttles("throttles after --execute")
    r.wait_moves_done()
    r.tool("--verify --preserve-throttles", *r.bootstrap, "--verify", "--preserve-throttles",
           "--reassignment-json-file", plan)
    r.throttles("throttles after --verify --preserve-throttles")
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.throttles("throttles after --verify")
    r.assignment()


def produce_and_consume(r: Run) -> None:
    """testProduceAndConsumeWithReassignmentInProgress: clients work while a 300 B/s move runs;
    the test then lifts the throttle by hand and --verify finds the move done."""
    r.topics()
    r.produce("baz", 2, 60)
    plan = r.plan({("baz", 2): [4, 3, 2]})
    r.tool("--execute --throttle 300", *r.bootstrap, "--execute", "--reassignment-json-file", plan, "--throttle", "300")
    r.produce("baz", 2, 100)
    r.note("records consumed during the move (at least 100)", r.consume("baz", 2, 100) >= 100)
    # removeReplicationThrottleForPartitions: the topic's lists deleted, Integer.MAX_VALUE rates
    r.set_configs(brokers={b: {"leader.replication.throttled.rate": "2147483647",
                               "follower.replication.throttled.rate": "2147483647"} for b in (1, 2, 3, 4)},
                  topics={"baz": {"leader.replication.throttled.replicas": None,
                                  "follower.replication.throttled.replicas": None}})
    r.wait_moves_done()
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.throttles("throttles after --verify")
    r.end_offsets("end offset", [("baz", 2)])
    r.assignment()


def _cancellation(r: Run, via: list[str]) -> None:
    plan = _held_move(r, {("foo", 0): [1, 2, 4], ("baz", 1): [1, 3, 4]})
    r.tool("--verify --preserve-throttles while moving", *r.bootstrap, "--verify", "--preserve-throttles",
           "--reassignment-json-file", plan)
    r.tool("--execute again without --additional", *r.bootstrap, "--execute", "--reassignment-json-file", plan)
    r.tool("--list while moving", *via, "--list")
    r.tool("--cancel --preserve-throttles", *via, "--cancel", "--preserve-throttles", "--reassignment-json-file", plan)
    r.throttles("throttles after --cancel --preserve-throttles")
    r.assignment("replica assignment after --cancel")
    r.tool("--cancel again", *via, "--cancel", "--reassignment-json-file", plan)
    r.throttles("throttles after the second --cancel")
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.tool("--list", *via, "--list")


def cancellation(r: Run) -> None:
    """testCancellationWithBootstrapServer: a 1 B/s move cancelled with --preserve-throttles
    (throttles kept), cancelled again (nothing to cancel, throttles cleared)."""
    _cancellation(r, r.bootstrap)


def cancellation_via_controller(r: Run) -> None:
    """testCancellationWithBootstrapController: the same, --list and --cancel through the
    controller (--bootstrap-controller, Kafka 4.0+)."""
    _cancellation(r, r.controller)


def _cancel_in_isr(r: Run, target: list[int]) -> None:
    r.topics()
    r.produce("foo", 0, HOLD)
    # setReplicationThrottleForPartitions: broker 5 (the test's 4) at 1 B/s for foo-0
    r.set_configs(brokers={5: {"leader.replication.throttled.rate": "1", "follower.replication.throttled.rate": "1"}},
                  topics={"foo": {"leader.replication.throttled.replicas": "0:5",
                                  "follower.replication.throttled.replicas": "0:5"}})
    plan = r.plan({("foo", 0): target})
    r.tool("--execute", *r.bootstrap, "--execute", "--reassignment-json-file", plan)
    r.wait_isr("foo", 0, {1, 2, 3, 4})
    r.assignment("replica assignment with broker 4 in the ISR")
    r.tool("--cancel --preserve-throttles", *r.bootstrap, "--cancel", "--preserve-throttles",
           "--reassignment-json-file", plan)
    r.assignment("replica assignment after --cancel")
    r.throttles("throttles after --cancel --preserve-throttles")


def cancel_adding_and_removing_in_isr(r: Run) -> None:
    """testCancellationWithAddingAndRemovingReplicaInIsr: foo-0 to [1,4,5] with broker 5
    throttled, so only 4 joins the ISR; --cancel removes both."""
    _cancel_in_isr(r, [1, 4, 5])


def cancel_adding_in_isr(r: Run) -> None:
    """testCancellationWithAddingReplicaInIsr: foo-0 to [1,2,3,4,5] (adding only; Kafka 3.7-4.0
    did not cancel these, apache/kafka#20003)."""
    _cancel_in_isr(r, [1, 2, 3, 4, 5])


def _log_dir_plan(r: Run) -> str:
    r.topics()
    r.produce("foo", 0, HOLD)
    _, target = r.log_dirs("foo", 0, 1)
    return r.plan({("foo", 0): [1, 2, 3]}, log_dirs={("foo", 0, 1): target})


def _wait_log_dir(r: Run, *, moving: bool) -> None:
    from side_by_side import wait_for

    names = {v: k for k, v in r.names.items()}

    def there() -> bool:
        current, future = r.log_dir_state("foo", 0, 1)
        if moving:
            return future == names["<target-dir>"]
        return current == names["<target-dir>"] and future is None

    wait_for(there, "foo-0's future replica on broker 1" if moving else "foo-0's log-dir move to finish")


def log_dir_move(r: Run) -> None:
    """testLogDirReassignment: a move between broker 1's log dirs at 1 B/s is in progress; with
    the throttle removed by hand it completes."""
    plan = _log_dir_plan(r)
    r.tool("--execute --replica-alter-log-dirs-throttle 1", *r.bootstrap, "--execute", "--reassignment-json-file",
           plan, "--replica-alter-log-dirs-throttle", "1")
    r.throttles("throttles after --execute")
    _wait_log_dir(r, moving=True)
    r.tool("--verify --preserve-throttles while moving", *r.bootstrap, "--verify", "--preserve-throttles",
           "--reassignment-json-file", plan)
    r.set_configs(brokers={1: {"replica.alter.log.dirs.io.max.bytes.per.second": None}})
    _wait_log_dir(r, moving=False)
    r.tool("--verify --preserve-throttles", *r.bootstrap, "--verify", "--preserve-throttles",
           "--reassignment-json-file", plan)
    r.tool("--verify", *r.bootstrap, "--verify", "--reassignment-json-file", plan)
    r.throttles("throttles after --verify")


def alter_log_dir_throttle(r: Run) -> None:
    """testAlterLogDirReassignmentThrottle: the log-dir move's throttle raised with --additional
    completes it."""
    plan = _log_dir_plan(r)
    r.tool("--execute --replica-alter-log-dirs-throttle 1", *r.bootstrap, "--execute", "--reassignment-json-file",
           plan, "--replica-alter-log-dirs-throttle", "1")
    r.throttles("throttles at 1 B/s")
    r.tool("--execute --additional --replica-alter-log-dirs-throttle 3000000", *r.bootstrap, "--execute",
           "--additional", "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle", "3000000")
    r.throttles("throttles at 3 MB/s")
    _wait_log_dir(r, moving=False)
    r.tool("--verify --preserve-throttles", *r.bootstrap, "--verify", "--preserve-throttles",
           "--reassignment-json-file", plan)
    r.throttles("throttles after --verify --preserve-throttles")


def disallow_rf_change(r: Run) -> None:
    """testDisallowReplicationFactorChange (Kafka 4.1+): every replication-factor change refused."""
    r.topics()
    plan = r.plan({("foo", 0): [1, 2], ("foo", 1): [1, 2, 3, 4], ("bar", 0): [4]})
    r.tool("--execute --disallow-replication-factor-change", *r.bootstrap, "--execute", "--reassignment-json-file",
           plan, "--disallow-replication-factor-change")
    r.assignment()
    r.throttles("throttles")


def _json(r: Run, name: str, text: str) -> str:
    return r.file(name, text)


def operator_mistakes(r: Run) -> None:
    """What an operator gets wrong, from ReassignPartitionsCommandArgsTest and the reference's
    list of the tool's checks; none of them may change the cluster."""
    r.topics()
    good = r.plan({("foo", 0): [1, 2, 4]}, name="good.json")
    topics = _json(r, "topics.json", json.dumps({"topics": [{"topic": "foo"}], "version": 1}))
    execute = [*r.bootstrap, "--execute", "--reassignment-json-file"]
    verify = [*r.bootstrap, "--verify", "--reassignment-json-file"]
    bad = {
        "unknown topic": '{"version":1,"partitions":[{"topic":"nosuch","partition":0,"replicas":[1,2,3]}]}',
        "unknown partition": '{"version":1,"partitions":[{"topic":"foo","partition":10,"replicas":[1,2,3]}]}',
        "unknown broker": '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,9]}]}',
        "negative broker": '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[-1,2,3]}]}',
        "malformed JSON": '{"version":1,"partitions":[{"topic":"foo",partition:0}]}',
        "truncated JSON": '{"version":1,"partitions":[',
        "empty file": "",
        "not an object": "[1,2]",
        "version 2": '{"version":2,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3]}]}',
        "no partitions": '{"version":1}',
        "empty partitions": '{"version":1,"partitions":[]}',
        "partition as a string": '{"version":1,"partitions":[{"topic":"foo","partition":"0","replicas":[1,2,3]}]}',
        "no replicas": '{"version":1,"partitions":[{"topic":"foo","partition":0}]}',
        "empty replicas": '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[]}]}',
        "log_dirs of another length": ('{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3],'
                                       '"log_dirs":["any"]}]}'),
        "duplicate partitions": ('{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,4]},'
                                 '{"topic":"foo","partition":0,"replicas":[1,2,5]}]}'),
        "duplicate replicas": '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,2]}]}',
    }
    for i, (what, text) in enumerate(bad.items()):
        r.tool(f"--execute: {what}", *execute, _json(r, f"bad-{i}.json", text))
    r.tool("--execute: no such file", *execute, str(r.workdir / "missing.json"))
    r.tool("--verify: unknown topic", *verify, _json(r, "v-topic.json",
                                                      '{"version":1,"partitions":[{"topic":"nosuch","partition":0,'
                                                      '"replicas":[1,2,3]}]}'))
    r.tool("--verify: partition number = partition count", *verify, _json(r, "v-count.json",
           '{"version":1,"partitions":[{"topic":"foo","partition":2,"replicas":[1,2,3]}]}'))
    r.tool("--cancel: nothing in flight", *r.bootstrap, "--cancel", "--reassignment-json-file", good)
    r.tool("--list: nothing in flight", *r.bootstrap, "--list")
    # the command line (ReassignPartitionsCommandArgsTest)
    r.tool("no arguments")
    r.tool("--help", "--help")
    r.tool("--version", "--version")
    r.tool("no action", *r.bootstrap, "--reassignment-json-file", good)
    r.tool("two actions", *r.bootstrap, "--execute", "--verify", "--reassignment-json-file", good)
    r.tool("no bootstrap", "--execute", "--reassignment-json-file", good)
    r.tool("both bootstraps", *r.bootstrap, *r.controller, "--list")
    r.tool("--bootstrap-controller with --execute", *r.controller, "--execute", "--reassignment-json-file", good)
    r.tool("--bootstrap-server without a value", "--execute", "--bootstrap-server", "--reassignment-json-file", good)
    r.tool("--execute without a file", *r.bootstrap, "--execute")
    r.tool("--generate without --broker-list", *r.bootstrap, "--generate", "--topics-to-move-json-file", topics)
    r.tool("--throttle with --generate", *r.bootstrap, "--generate", "--topics-to-move-json-file", topics,
           "--broker-list", "1,2", "--throttle", "100")
    r.tool("a blank argument", " ")
    r.tool("--execute with --topics-to-move-json-file", *execute, good, "--topics-to-move-json-file", topics)
    r.tool("--execute with --broker-list", *execute, good, "--broker-list", "1,2")
    r.tool("--generate with --reassignment-json-file", *r.bootstrap, "--generate", "--topics-to-move-json-file",
           topics, "--broker-list", "1,2,3", "--reassignment-json-file", good)
    r.tool("--verify with --broker-list", *verify, good, "--broker-list", "1,2")
    r.tool("--verify with --topics-to-move-json-file", *verify, good, "--topics-to-move-json-file", topics)
    r.tool("--cancel without a file", *r.bootstrap, "--cancel")
    r.tool("--list with a file", *r.bootstrap, "--list", "--reassignment-json-file", good)
    r.tool("--bootstrap-controller with --generate", *r.controller, "--generate", "--topics-to-move-json-file",
           topics, "--broker-list", "1,2,3")
    r.tool("--bootstrap-controller with --verify", *r.controller, "--verify", "--reassignment-json-file", good)
    r.tool("--preserve-throttles with --execute", *execute, good, "--preserve-throttles")
    r.tool("--additional with --verify", *verify, good, "--additional")
    r.tool("abbreviated option", *r.bootstrap, "--exec", "--reassignment-json-file", good)
    r.tool("--throttle not a number", *execute, good, "--throttle", "fast")
    r.tool("--timeout not a number", *execute, good, "--timeout", "soon")
    r.tool("--command-config missing", *execute, good, "--command-config", str(r.workdir / "missing.properties"))
    r.tool("--generate: broker list with a space", *r.bootstrap, "--generate", "--topics-to-move-json-file", topics,
           "--broker-list", "1, 2")
    r.tool("--generate: duplicate brokers", *r.bootstrap, "--generate", "--topics-to-move-json-file", topics,
           "--broker-list", "1,2,2")
    r.tool("--generate: duplicate topics", *r.bootstrap, "--generate", "--topics-to-move-json-file",
           _json(r, "dup-topics.json", '{"topics":[{"topic":"foo"},{"topic":"foo"}],"version":1}'), "--broker-list",
           "1,2,3")
    r.tool("--generate: unknown topic", *r.bootstrap, "--generate", "--topics-to-move-json-file",
           _json(r, "no-topic.json", '{"topics":[{"topic":"nosuch"}],"version":1}'), "--broker-list", "1,2,3")
    r.tool("--generate: replication factor above the broker count", *r.bootstrap, "--generate",
           "--topics-to-move-json-file", topics, "--broker-list", "1,2")
    _mistakes_json(r)
    r.throttles("throttles before --throttle 0")
    # last, as it changes the cluster: Kafka's tool sets a rate of 0 (replication stops); kreassign refuses
    r.tool("--execute --throttle 0", *execute, good, "--throttle", "0")
    r.throttles("throttles after --throttle 0")
    r.assignment()


JSON_CASES: dict[str, str] = {
    # Jackson's syntax errors and their locations, then the decoder's (DecodeJson) messages
    "unquoted field name": "{invalid_json",
    "trailing comma in an object": '{"a":1,}',
    "trailing comma in an array": "[1,]",
    "no colon": '{"a" 1}',
    "no comma between fields": '{"a":1\n "b":2}',
    "no comma between values": "[1 2]",
    "bad literal": '{"a":tru}',
    "NaN": '{"a":NaN}',
    "leading zero": '{"a":01}',
    "minus without digits": '{"a":-x}',
    "decimal point without digits": '{"a":1.}',
    "unterminated string": '{"a":"x',
    "bad escape": '{"a":"\\q"}',
    "tab in a string": '{"a":"\t"}',
    "unclosed object": '{"partitions":[\n  {"topic":"a"',
    "unclosed array": '{"partitions":[',
    "single quotes": "{'version':1}",
    "comment": '{"version":1 /* one */}',
    "blank": "  \n ",
    # Jackson stops after the first document: both tools run it (foo-0 stays on its replicas)
    "trailing text": '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3]}]} extra',
    "two documents": '{"version":1}{"version":2}',
    "version as a string": '{"version":"1","partitions":[]}',
    "partition 1.0": '{"partitions":[{"topic":"foo","partition":1.0,"replicas":[1]}]}',
    "partition 1e3": '{"partitions":[{"topic":"foo","partition":1e3,"replicas":[1]}]}',
    "partition out of int range": '{"partitions":[{"topic":"foo","partition":2147483648,"replicas":[1]}]}',
    "replicas as a string": '{"partitions":[{"topic":"foo","partition":0,"replicas":"1,2"}]}',
    "topic as a number": '{"partitions":[{"topic":7,"partition":0,"replicas":[1]}]}',
    "log_dirs null": '{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":null}]}',
    "log_dirs of numbers": '{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":[1]}]}',
    "partitions an object": '{"partitions":{"topic":"foo"}}',
}


def _mistakes_json(r: Run) -> None:
    for i, (what, text) in enumerate(JSON_CASES.items()):
        r.tool(f"--execute: {what}", *r.bootstrap, "--execute", "--reassignment-json-file",
               _json(r, f"json-{i}.json", text))


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Run], None]
    since: tuple[int, int] = (3, 9)
    """the first Kafka release whose tool has what the scenario exercises"""
    matrix: bool = False
    """run on every release of the matrix in the suite (what differs between releases), not only
    on the release the live tests judge against"""

    @property
    def doc(self) -> str:
        return (self.run.__doc__ or "").strip().split("\n\n")[0]

    def runs_on(self, version: str) -> bool:
        major, minor = (int(p) for p in version.split(".")[:2])
        return (major, minor) >= self.since


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("unthrottled move", unthrottled_move),
    Scenario("--generate then --verify", generate_then_verify),
    Scenario("throttle 1 B/s then --additional 300 kB/s", alter_throttle),
    Scenario("--preserve-throttles", preserve_throttles),
    Scenario("produce and consume during a move", produce_and_consume),
    Scenario("cancellation", cancellation),
    Scenario("cancellation through the controller", cancellation_via_controller, since=(4, 0)),
    Scenario("cancel, adding and removing replica in the ISR", cancel_adding_and_removing_in_isr),
    Scenario("cancel, adding replica in the ISR", cancel_adding_in_isr, matrix=True),
    Scenario("log-dir move", log_dir_move),
    Scenario("log-dir move throttle raised", alter_log_dir_throttle),
    Scenario("--disallow-replication-factor-change", disallow_rf_change, since=(4, 1)),
    Scenario("operator mistakes", operator_mistakes, matrix=True),
)


# ---- what kreassign does differently, on purpose ------------------------------------------------
REASONS: dict[str, str] = {
    # key -> the bold lead of its entry in docs/kafka-differences.md (DIFFERENCES FROM KAFKA'S TOOL in
    # `man kreassign`), which says why
    "stack-trace": "Errors without stack traces.",  # set aside by the comparison itself (side_by_side.fields)
    "own-help": "`kreassign` alone, `--help` and `--version` describe kreassign.",
    "unknown-option": "An unknown option is a usage error.",
    "bootstrap-value": "`--bootstrap-server` needs a value.",
    "bootstrap-controller": "`--bootstrap-controller` is refused.",
    "command-config": "A missing `--command-config` file is named as such.",
    "throttle-zero": "`--throttle 0` is refused.",
    "no-newline": '`--cancel` ends "None of the specified partition moves are active." with a newline.',
    "partition-count": "`--verify` treats a partition number equal to the partition count as a missing partition.",
    "deleted-topic": "A topic deleted since the move does not fail `--verify` or `--cancel`.",
    "add-only-cancel": "`--cancel` cancels reassignments that only add replicas.",
    "kafka-3.9-log-dirs": 'Kafka 3.9 prints "any" for every current log dir.',
    "kafka-3.9-options": "Kafka 3.9's tool has no `--bootstrap-controller` and no `--disallow-replication-factor-change`.",
    "kafka-3.9-messages": "Kafka 3.9's own messages.",
    "kafka-3.9-jackson": "Kafka 3.9's JSON syntax errors.",
}

_LOG_DIRS = re.compile(r'"log_dirs":\[((?:"(?:[^"\\]|\\.)*",?)*)\]')
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def any_log_dirs(text: Any) -> Any:
    """kreassign's output as Kafka before 4.2 prints it: "any" for every log dir of the current
    assignment (KAFKA-19582 added the real ones)."""
    if not isinstance(text, str):
        return text
    return _LOG_DIRS.sub(lambda m: '"log_dirs":[' + ",".join(['"any"'] * len(_QUOTED.findall(m.group(1)))) + "]",
                         text)


def _rules(reason: str, steps: dict[str, tuple[str, ...]]) -> list[Known]:
    return [Known(reason, step, fields) for step, fields in steps.items()]


_STDOUT, _EXIT_OUT = ("stdout",), ("stdout", "exit")

KNOWN: dict[str, list[Known]] = {
    "cancellation": _rules("no-newline", {"--cancel --preserve-throttles": _STDOUT, "--cancel again": _STDOUT}),
    "cancellation through the controller": _rules("bootstrap-controller", {
        "--list while moving": _EXIT_OUT, "--cancel --preserve-throttles": _EXIT_OUT,
        "replica assignment after --cancel": ("state",), "--cancel again": _EXIT_OUT,
        "throttles after the second --cancel": ("state",), "--verify": _STDOUT, "--list": _EXIT_OUT}),
    "cancel, adding and removing replica in the ISR": _rules("no-newline", {"--cancel --preserve-throttles": _STDOUT}),
    "cancel, adding replica in the ISR": _rules("no-newline", {"--cancel --preserve-throttles": _STDOUT}),
    "operator mistakes": [
        *_rules("partition-count", {"--verify: partition number = partition count": _EXIT_OUT}),
        *_rules("deleted-topic", {"--verify: unknown topic": _EXIT_OUT}),
        *_rules("no-newline", {"--cancel: nothing in flight": _STDOUT}),
        *_rules("own-help", {"no arguments": ("error line", "exit"), "--help": ("stdout", "error line", "exit"),
                             "--version": _STDOUT}),
        *_rules("unknown-option", {"abbreviated option": ("error line",)}),
        *_rules("command-config", {"--command-config missing": _STDOUT}),
        *_rules("throttle-zero", {"--execute --throttle 0": _EXIT_OUT, "throttles after --throttle 0": ("state",),
                                  "replica assignment": ("state",)}),
        *_rules("bootstrap-value", {"--bootstrap-server without a value": ("stdout", "error line")}),
    ],
}

KNOWN_3_9: dict[str, list[Known]] = {
    # Kafka 3.9's tool (kreassign prints Kafka 4.4's text against every release)
    "cancel, adding replica in the ISR": _rules("add-only-cancel", {
        "--cancel --preserve-throttles": _STDOUT, "replica assignment after --cancel": ("state",)}),
    "operator mistakes": [
        *_rules("bootstrap-value", {"--bootstrap-server without a value": ("error line",)}),
        *_rules("kafka-3.9-messages", {"no bootstrap": ("error line",),
                                       "--generate: replication factor above the broker count": _STDOUT}),
        *_rules("kafka-3.9-options", {"both bootstraps": ("error line",),
                                      "--bootstrap-controller with --execute": ("error line",),
                                      "--bootstrap-controller with --generate": ("error line",),
                                      "--bootstrap-controller with --verify": ("error line",)}),
        *_rules("kafka-3.9-jackson", {f"--execute: {what}": _STDOUT for what in (
            "malformed JSON", "unquoted field name", "trailing comma in an object", "trailing comma in an array",
            "no colon", "no comma between fields", "no comma between values", "bad literal",
            "minus without digits", "decimal point without digits", "bad escape", "tab in a string",
            "single quotes", "comment")}),
    ],
}


def known_differences(version: str, scenario: str) -> list[Known]:
    """The differences kreassign makes on purpose in `scenario` against Kafka `version`'s tool."""
    found = next((s for s in SCENARIOS if s.name == scenario), None)
    rules: list[Known] = []
    old = version.startswith("3.")
    if old:
        rules.append(Known("kafka-3.9-log-dirs", fields=("stdout",), expect=any_log_dirs))
        rules += KNOWN_3_9.get(scenario, [])
    if found is not None and not found.runs_on(version):
        return rules + [Known("kafka-3.9-options")]
    overridden = {(k.step, f) for k in rules for f in k.fields}
    rules += [k for k in KNOWN.get(scenario, []) if not (old and any((k.step, f) in overridden for f in k.fields))]
    return rules
