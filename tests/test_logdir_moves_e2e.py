"""Log-dir moves (AlterReplicaLogDirs between a broker's dirs, KIP-113) through the Kafka-style
front door, on both engines (`live`): Kafka's ReassignPartitionsCommandTest testLogDirReassignment
and testAlterLogDirReassignmentThrottle, --cancel of a log-dir move, a replica added by a
reassignment straight into a given dir, and a throttled move on every Kafka release of the matrix.

What the real brokers showed (3.9.2 and 4.4.0), and the emulator now does: a move's copy thread
reads whole batches, at most replica.fetch.max.bytes (1 MiB) a fetch; the first fetch of an idle
broker is not throttled, and under a 1 B/s `replica.alter.log.dirs.io.max.bytes.per.second` the
next one waits until the quota's 11 one-second windows forget it; the replicas swap at the fetch
after the future one caught up. So a move holds while more than one fetch is left to copy.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Kreassign, Run

from kreassign.cluster.model import TopicPartition, TopicPartitionReplica
from kreassign.cluster.port import ReplicaLogDir

from live import batch_bytes, wait_until, write_batches

pytestmark = pytest.mark.e2e

LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
VALUE = 100_000
BATCHES = 32
FETCH_BATCHES = 10
"""batches of VALUE bytes one fetch takes: 10 x 100,072 B fit in replica.fetch.max.bytes (1 MiB), 11 do not"""
ROLLBACK = "\n\nSave this to use as the --reassignment-json-file option during rollback\n"
WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
           "the throttle is removed.\n")


@pytest.fixture
def kafka_style(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kreassign: Kreassign) -> Callable[..., Callable[...,
                Run]]:
    """The Kafka-style front door in process, with the test's own journal dir."""
    monkeypatch.setenv("KREASSIGN_JOURNAL_DIR", str(tmp_path / "journal"))

    def on(bootstrap: str) -> Callable[..., Run]:
        return lambda *argv: kreassign.run("--bootstrap-server", bootstrap, *argv)

    return on


def replica(port: Any, topic: str, broker: int) -> ReplicaLogDir:
    report = port.log_dir_sizes([broker], partitions=[TopicPartition(topic, 0)])
    return report.replicas[TopicPartitionReplica(topic, 0, broker)]


def other_dir(port: Any, broker: int, current: str) -> str:
    return next(d.path for d in port.log_dir_sizes([broker]).dirs[broker] if d.path != current)


def log_dir_rate(port: Any, broker: int) -> str | None:
    entry = port.describe_broker_configs([broker], [LOG_DIR_RATE]).configs[broker].get(LOG_DIR_RATE)
    return None if entry is None else entry.value


def plan(tmp_path: Path, topic: str, replicas: list[int], log_dirs: list[str]) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": log_dirs}]}))
    return str(path)


def current_json(topic: str, replicas: list[int], log_dirs: list[str]) -> str:
    """The rollback JSON: each replica's current log dir (Kafka 4.2+, KAFKA-19582)."""
    dirs = ",".join(f'"{d}"' for d in log_dirs)
    return ('{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[%s],"log_dirs":[%s]}]}'
            % (topic, ",".join(map(str, replicas)), dirs))


def verified(topic: str, replica_state: str) -> str:
    """--verify's answer for a plan of one partition, done, with one log-dir move that no longer
    runs: the states, then the throttles cleared."""
    return (f"Status of partition reassignment:\nReassignment of partition {topic}-0 is completed.\n{replica_state}\n"
            "Clearing broker-level throttles on brokers 1,2,3,4,5\n"
            f"Clearing topic-level throttles on topic {topic}\n")


def test_e2e_log_dir_reassignment(live: Any, kafka_style: Callable[..., Callable[..., Run]], tmp_path: Path,
                                  kreassign: Kreassign) -> None:
    """testLogDirReassignment: broker 1's replica moves to another of its dirs under a 1 B/s
    log-dir throttle: --verify shows the move active, DescribeLogDirs the future replica (whole
    fetches of whole batches) beside the current one; removing the throttle completes it."""
    run = kafka_style(live.bootstrap)
    topic = live.topic(assignment={0: [1, 2, 3]})
    live.produce_batches(topic, 0, BATCHES, VALUE)
    size = BATCHES * batch_bytes(VALUE)
    with live.admin() as port:
        before = replica(port, topic, 1)
        assert (before.size_bytes, before.future_dir) == (size, None)
        target = other_dir(port, 1, before.log_dir)
        current_dirs = [str(replica(port, topic, b).log_dir) for b in (1, 2, 3)]
    moves = plan(tmp_path, topic, [1, 2, 3], [target, "any", "any"])

    started = run("--reassignment-json-file", moves, "--execute", "--replica-alter-log-dirs-throttle", "1")
    assert started.code == 0, started.out + started.err
    assert started.out == ("Current partition replica assignment\n\n" + current_json(topic, [1, 2, 3], current_dirs) + ROLLBACK
                           + WARNING + "The replica-alter-dir throttle limit was set to 1 B/s\n"
                           f"Successfully started partition reassignment for {topic}-0\n"
                           f"Successfully started moving log directory to {target} for replica {topic}-0 with "
                           "broker 1 \n")
    verify = run("--reassignment-json-file", moves, "--verify")
    assert (verify.code, verify.out) == (0, f"Status of partition reassignment:\nReassignment of partition {topic}-0 "
                                            f"is completed.\nReassignment of replica {topic}-0-1 is still in "
                                            "progress.\n")
    with live.admin() as port:  # only the broker whose replica moves gets the log-dir throttle
        assert [log_dir_rate(port, b) for b in live.brokers] == ["1", None, None, None, None]
    report = kreassign.run("verify", "--bootstrap-server", live.bootstrap, "--reassignment-json-file", moves,
                           "--exit-status", "--output", "json")
    assert report.code == 3, report.out + report.err
    assert json.loads(report.out)["log_dirs"] == [{"replica": f"{topic}-0-1", "state": "in-progress", "target": target,
                                                   "current": before.log_dir, "future": target}]
    with live.admin() as port:
        live.wait_until(lambda: (replica(port, topic, 1).future_size_bytes or 0) > 0,
                        what="the first fetch of the move", step_s=1.0)
        moving = replica(port, topic, 1)
        assert (moving.log_dir, moving.size_bytes, moving.future_dir) == (before.log_dir, size, target)
        fetched = moving.future_size_bytes or 0
        assert fetched % (FETCH_BATCHES * batch_bytes(VALUE)) == 0 and fetched < size
        assert moving.future_offset_lag == BATCHES - fetched // batch_bytes(VALUE)

        assert port.incremental_alter_configs({1: {LOG_DIR_RATE: None}}).ok
        live.wait_until(lambda: replica(port, topic, 1).future_dir is None, what="the move completing", step_s=1.0)
        done = replica(port, topic, 1)
        assert (done.log_dir, done.size_bytes, done.offset_lag) == (target, size, 0)
    verify = run("--reassignment-json-file", moves, "--verify")
    completed = f"Reassignment of replica {topic}-0-1 completed successfully."
    assert (verify.code, verify.out) == (0, verified(topic, completed))


def test_e2e_alter_log_dir_reassignment_throttle(live: Any, kafka_style: Callable[..., Callable[..., Run]],
                                                 tmp_path: Path) -> None:
    """testAlterLogDirReassignmentThrottle: the move starts at 1 B/s; `--execute --additional`
    with 3,000,000 B/s raises the throttle and the move completes; --verify then clears it."""
    run = kafka_style(live.bootstrap)
    topic = live.topic(assignment={0: [2, 3, 4]})
    live.produce_batches(topic, 0, FETCH_BATCHES + 2, VALUE)
    with live.admin() as port:
        target = other_dir(port, 2, replica(port, topic, 2).log_dir)
    moves = plan(tmp_path, topic, [2, 3, 4], [target, "any", "any"])
    assert run("--reassignment-json-file", moves, "--execute", "--replica-alter-log-dirs-throttle", "1").code == 0
    with live.admin() as port:
        assert log_dir_rate(port, 2) == "1"
    raised = run("--reassignment-json-file", moves, "--execute", "--additional",
                 "--replica-alter-log-dirs-throttle", "3000000")
    assert raised.code == 0, raised.out + raised.err
    assert raised.out.endswith(WARNING + "The replica-alter-dir throttle limit was set to 3000000 B/s\n"
                               f"Successfully started partition reassignment for {topic}-0\n"
                               f"Successfully started moving log directory to {target} for replica {topic}-0 with "
                               "broker 2 \n")
    with live.admin() as port:
        assert log_dir_rate(port, 2) == "3000000"
        live.wait_until(lambda: replica(port, topic, 2).future_dir is None, what="the move completing", step_s=1.0)
        assert replica(port, topic, 2).log_dir == target
    verify = run("--reassignment-json-file", moves, "--verify")
    assert verify.out == verified(topic, f"Reassignment of replica {topic}-0-2 completed successfully.")
    with live.admin() as port:  # removed by --verify; applied by the broker a moment later
        live.wait_until(lambda: log_dir_rate(port, 2) is None, what="broker 2 to apply the rate's removal")


def test_e2e_cancel_moves_a_replica_back(live: Any, kafka_style: Callable[..., Callable[..., Run]],
                                         tmp_path: Path) -> None:
    """--cancel asks for each active log-dir move's current dir, which drops the future replica."""
    run = kafka_style(live.bootstrap)
    topic = live.topic(assignment={0: [4, 5, 1]})
    live.produce_batches(topic, 0, BATCHES, VALUE)
    with live.admin() as port:
        current = replica(port, topic, 4).log_dir
        target = other_dir(port, 4, current)
    moves = plan(tmp_path, topic, [4, 5, 1], [target, "any", "any"])
    assert run("--reassignment-json-file", moves, "--execute", "--replica-alter-log-dirs-throttle", "1").code == 0
    cancelled = run("--reassignment-json-file", moves, "--cancel")
    assert (cancelled.code, cancelled.out) == (0, "None of the specified partition reassignments are active.\n"
                                                  f"Successfully started moving log directory to {current} for "
                                                  f"replica {topic}-0 with broker 4 \n"
                                                  "Clearing broker-level throttles on brokers 1,2,3,4,5\n"
                                                  f"Clearing topic-level throttles on topic {topic}\n")
    with live.admin() as port:
        live.wait_until(lambda: replica(port, topic, 4).future_dir is None,
                        what="the future replica dropped", step_s=1.0)
        assert replica(port, topic, 4).log_dir == current
        live.wait_until(lambda: log_dir_rate(port, 4) is None, what="broker 4 to apply the rate's removal")
    verify = run("--reassignment-json-file", moves, "--verify")
    assert verify.out == verified(topic, f"Partition {topic}-0 on broker 4 is not being moved from log dir {current} "
                                         f"to {target}.")


def test_e2e_a_replica_added_with_a_log_dir_ends_in_it(live: Any, kafka_style: Callable[..., Callable[..., Run]],
                                                       tmp_path: Path) -> None:
    """A reassignment that adds broker 5 with an explicit dir: the tool retries the dir move
    until the replica exists (or the broker remembers the dir and creates it there), and --verify
    reports both the partition and the replica done."""
    run = kafka_style(live.bootstrap)
    topic = live.topic(assignment={0: [1, 2, 3]})
    live.produce_batches(topic, 0, 3, VALUE)
    with live.admin() as port:
        target = port.log_dir_sizes([5]).dirs[5][-1].path
    moves = plan(tmp_path, topic, [1, 2, 5], ["any", "any", target])
    started = run("--reassignment-json-file", moves, "--execute")
    assert started.code == 0, started.out + started.err
    assert started.out.endswith(ROLLBACK + f"Successfully started partition reassignment for {topic}-0\n"
                                f"Successfully started moving log directory to {target} for replica {topic}-0 with "
                                "broker 5 \n")
    live.finish_moves()
    with live.admin() as port:
        live.wait_until(lambda: replica(port, topic, 5).future_dir is None,
                        what="the replica settling in its dir", step_s=1.0)
        landed = replica(port, topic, 5)
        assert (landed.log_dir, landed.size_bytes) == (target, 3 * batch_bytes(VALUE))
    verify = run("--reassignment-json-file", moves, "--verify")
    completed = f"Reassignment of replica {topic}-0-5 completed successfully."
    assert (verify.code, verify.out) == (0, verified(topic, completed))


def test_e2e_log_dir_move_on_every_kafka_release(kafka_matrix: Any, kafka_style: Callable[..., Callable[..., Run]],
                                                 tmp_path: Path) -> None:
    """Kafka 3.9 and 4.x report a future replica the same way (DescribeLogDirs `is_future_key`
    in the target dir, beside the current replica) and take the log-dir throttle the same way."""
    from kreassign.cluster.admin import open_admin

    run = kafka_style(kafka_matrix.bootstrap)
    topic = f"matrix-{uuid.uuid4().hex[:8]}"
    with open_admin(kafka_matrix.bootstrap, timeout_s=30.0) as port:
        assert port.create_topic(topic, {0: [3, 4, 5]}) is None
        try:
            write_batches(kafka_matrix.bootstrap, topic, 0, BATCHES, VALUE, acks="all")
            current = replica(port, topic, 3).log_dir
            target = other_dir(port, 3, current)
            moves = plan(tmp_path, topic, [3, 4, 5], [target, "any", "any"])
            assert run("--reassignment-json-file", moves, "--execute", "--replica-alter-log-dirs-throttle",
                       "1").code == 0
            moving = replica(port, topic, 3)
            assert (moving.log_dir, moving.future_dir) == (current, target)
            assert run("--reassignment-json-file", moves, "--verify").out.endswith(
                f"Reassignment of replica {topic}-0-3 is still in progress.\n")
            assert run("--reassignment-json-file", moves, "--execute", "--additional",
                       "--replica-alter-log-dirs-throttle", "3000000").code == 0
            assert log_dir_rate(port, 3) == "3000000"
            wait_until(lambda: replica(port, topic, 3).future_dir is None,
                       f"the move completing on Kafka {kafka_matrix.dist.version}")
            done = run("--reassignment-json-file", moves, "--verify")
            assert done.out == verified(topic, f"Reassignment of replica {topic}-0-3 completed successfully.")
            assert replica(port, topic, 3).log_dir == target
            # --verify removed the rate; broker 3 answers DescribeConfigs from what it has applied,
            # a moment later on a loaded machine (a CI run read the old rate back)
            wait_until(lambda: log_dir_rate(port, 3) is None, "broker 3 to apply the rate's removal")
        finally:
            port.delete_topic(topic)
