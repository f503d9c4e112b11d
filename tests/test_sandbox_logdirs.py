"""Log-dir moves paced by `replica.alter.log.dirs.io.max.bytes.per.second` (KIP-113), and Kafka's
ReassignPartitionsIntegrationTest.testLogDirReassignment sequence run with the real CLI and clients."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from kreassign.sandbox import codes
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.configs import ALTER_LOG_DIRS_RATE
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.logdir_moves import LogDirMoves
from kreassign.sandbox.topics import TopicSpec

DIRS = ("/var/lib/kafka/data-0", "/var/lib/kafka/data-1")


def two_dirs_engine() -> Engine:
    eng = Engine({1: None, 2: None}, seed=1, log_dirs_per_broker=2)
    eng.create_topic("t", assignments={0: [1, 2], 1: [1, 2]}, sizes=[10_000, 30_000])
    return eng


def dirs_of(eng: Engine, broker: int) -> dict[str, list[tuple[str, int, int]]]:
    return {d: [(r.topic, r.partition, r.size) for r in rs] for d, rs in eng.describe_log_dirs(broker, None).items()}


def test_a_move_copies_at_the_configured_rate_and_stays_active_until_done() -> None:
    eng = two_dirs_engine()
    moves = LogDirMoves(eng)
    moves.advance(0.0)
    eng.configs.alter_broker(1, [(ALTER_LOG_DIRS_RATE, "1000")], validate_only=False)
    assert moves.start(1, DIRS[1], "t", 0) == codes.NONE
    assert moves.start(1, DIRS[1], "t", 1) == codes.NONE
    moves.advance(10.0)   # 10 kB shared by two moves
    f0, f1 = moves.future(1, "t", 0), moves.future(1, "t", 1)
    assert f0 is not None and f1 is not None and (f0.copied, f1.copied) == (5000.0, 5000.0)
    assert dirs_of(eng, 1)[DIRS[0]] == [("t", 0, 10_000), ("t", 1, 30_000)]  # still in the old dir
    moves.advance(20.0)   # t-0 needs 5 kB of its 5 kB share and completes; t-1 gets 5 kB more
    assert moves.future(1, "t", 0) is None
    assert dirs_of(eng, 1) == {DIRS[0]: [("t", 1, 30_000)], DIRS[1]: [("t", 0, 10_000)]}
    f1 = moves.future(1, "t", 1)
    assert f1 is not None and f1.copied == 10_000.0
    moves.advance(30.0)   # alone now, it gets the whole 10 kB
    assert f1.copied == 20_000.0
    assert eng.configs.alter_broker(1, [], validate_only=False) == (codes.NONE, None)  # legacy: replaces all
    moves.advance(30.1)   # unthrottled: done at the next step
    assert moves.moves == {}
    assert dirs_of(eng, 1)[DIRS[1]] == [("t", 0, 10_000), ("t", 1, 30_000)]


def test_log_dir_move_errors_and_moving_back() -> None:
    eng = two_dirs_engine()
    eng.create_topic("u", assignments={0: [2]})
    moves = LogDirMoves(eng)
    assert moves.start(1, "/nowhere", "t", 0) == codes.LOG_DIR_NOT_FOUND
    assert moves.start(1, DIRS[1], "u", 0) == codes.REPLICA_NOT_AVAILABLE
    assert moves.start(1, DIRS[1], "ghost", 0) == codes.UNKNOWN_TOPIC_OR_PARTITION  # as Kafka 3.9.2 and 4.4.0
    assert moves.start(1, DIRS[1], "t", 0) == codes.NONE
    assert moves.start(1, DIRS[0], "t", 0) == codes.NONE  # back to where it is: the future goes away
    assert moves.moves == {}


@pytest.mark.e2e
def test_kafka_log_dir_reassignment_sequence(sandbox_factory: Callable[..., Any], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """testLogDirReassignment: 700 messages into foo-0, move broker 1's replica to its other dir
    with a 1 B/s log-dir throttle: --verify shows the move active and the throttle set; remove
    the throttle: the move completes and DescribeLogDirs shows the replica in the target dir."""
    from kafka import KafkaProducer

    monkeypatch.setenv("KREASSIGN_JOURNAL_DIR", str(tmp_path / "journal"))
    sb = sandbox_factory(brokers=4, racks=0, topics=[TopicSpec("foo", 2, 3, 0, 0.0)], clock=ScaledClock(1.0),
                         log_dirs=2)
    with sb.locked() as eng:
        replicas = list(eng.partition("foo", 0).replicas)
    target_broker = replicas[0]
    producer = KafkaProducer(bootstrap_servers=sb.bootstrap, acks="all", linger_ms=5)
    for _ in range(700):
        producer.send("foo", value=b"\0" * 1000, partition=0)
    producer.flush(30)
    producer.close()

    admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap, request_timeout_ms=5000)
    try:
        current_dir = replica_dirs(admin, target_broker)[("foo", 0, False)]
        target_dir = next(d for d in DIRS if d != current_dir)
        log_dirs = [target_dir if b == target_broker else "any" for b in replicas]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "foo", "partition": 0, "replicas": replicas, "log_dirs": log_dirs}]}))

        started = cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--execute",
                      "--replica-alter-log-dirs-throttle", "1")
        assert started.returncode == 0, started.stdout + started.stderr
        assert started.stdout.endswith(
            "The replica-alter-dir throttle limit was set to 1 B/s\n"
            "Successfully started partition reassignment for foo-0\n"
            f"Successfully started moving log directory to {target_dir} for replica foo-0 with broker "
            f"{target_broker} \n")

        verify = cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--verify")
        assert verify.stdout == ("Status of partition reassignment:\n"
                                 "Reassignment of partition foo-0 is completed.\n"
                                 f"Reassignment of replica foo-0-{target_broker} is still in progress.\n")
        assert broker_value(admin, target_broker, ALTER_LOG_DIRS_RATE) == "1"
        dirs = replica_dirs(admin, target_broker)
        assert dirs[("foo", 0, False)] == current_dir and dirs[("foo", 0, True)] == target_dir

        assert admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(target_broker),
                                                   {ALTER_LOG_DIRS_RATE: (AlterConfigOp.DELETE, None)})],
                                   incremental=True, raise_on_unknown=False) == {"broker": {str(target_broker): "OK"}}
        sb.advance(1.0)  # one more step of the copy, now unthrottled
        done = cli(sb.bootstrap, tmp_path, "--reassignment-json-file", str(plan), "--verify")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"Reassignment of replica foo-0-{target_broker} completed successfully." in done.stdout
        assert replica_dirs(admin, target_broker) == {("foo", 0, False): target_dir, ("foo", 1, False): current_dir}
    finally:
        admin.close()


def cli(bootstrap: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "client.properties"
    config.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n")
    return subprocess.run([sys.executable, "-m", "kreassign.cli.main", "--bootstrap-server", bootstrap,
                           "--command-config", str(config), *argv], capture_output=True, text=True, timeout=120,
                          check=False)


def replica_dirs(admin: Any, broker: int) -> dict[tuple[str, int, bool], str]:
    (entry,) = admin.describe_log_dirs(brokers=[broker])
    return {(t["name"], p["partition_index"], p["is_future_key"]): d["log_dir"]
            for d in entry["log_dirs"] for t in d["topics"] for p in t["partitions"]
            if not t["name"].startswith("__")}  # the execution lock's group made __consumer_offsets


def broker_value(admin: Any, broker: int, key: str) -> str | None:
    entries = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker))],
                                     config_filter="all")["broker"][str(broker)]
    return entries[key]["value"] if key in entries else None


def test_sandbox_start_takes_log_dirs() -> None:
    from kreassign.sandbox.daemon import SandboxOptions

    cluster = SandboxOptions(brokers=2, racks=0, topics=("t:1:1",), log_dirs=3).build(None)
    try:
        assert cluster.engine.brokers[1].log_dirs == ("/var/lib/kafka/data-0", "/var/lib/kafka/data-1",
                                                      "/var/lib/kafka/data-2")
    finally:
        cluster.stop()
