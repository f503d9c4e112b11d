"""Saved state survives a restart; the CLI's daemon path starts, reports and stops cleanly."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from cli_helpers import Kreassign
from kreassign.sandbox.clock import ManualClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec, parse_topic_spec


def start_move(bootstrap: str) -> dict[TopicPartition, list[int]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b),
                                            {"follower.replication.throttled.rate": "1000"}) for b in (1, 2, 3)],
                            incremental=True, raise_on_unknown=False)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "a",
                                            {"follower.replication.throttled.replicas": "*"})],
                            incremental=True, raise_on_unknown=False)
        (t,) = admin.describe_topics(["a"])
        replicas = t["partitions"][0]["replica_nodes"]
        target = [b for b in (1, 2, 3) if b not in replicas] + replicas[:1]
        admin.alter_partition_reassignments({TopicPartition("a", 0): target})
        return admin.list_partition_reassignments()
    finally:
        admin.close()


def test_state_dir_restores_topics_configs_sizes_and_moves(tmp_path: Path) -> None:
    specs = [TopicSpec("a", 4, 2, 50_000_000, 1000.0)]
    with SandboxCluster(3, 3, specs, clock=ManualClock(), seed=5, state_dir=tmp_path) as sb:
        moves = start_move(sb.bootstrap)
        sb.advance(10)
        with sb.locked() as engine:
            before = engine.to_json()
    restored = SandboxCluster(3, 3, [], clock=ManualClock(), state_dir=tmp_path)
    with restored:
        with restored.locked() as engine:
            assert engine.to_json() == before
        admin = KafkaAdminClient(bootstrap_servers=restored.bootstrap, request_timeout_ms=5000)
        try:
            assert admin.list_partition_reassignments() == moves
        finally:
            admin.close()
    fresh = SandboxCluster(3, 3, specs, clock=ManualClock(), state_dir=tmp_path, fresh=True)
    assert fresh.summary()["reassigning"] == 0


def test_damaged_state_is_reported(tmp_path: Path) -> None:
    from kreassign.cluster.errors import InputError

    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(InputError, match="start with --fresh"):
        SandboxCluster(state_dir=tmp_path)


@pytest.mark.parametrize("spec,message", [
    ("orders", "is not a topic spec"), ("orders:x:3", "must be integers"), ("o rders:1:1", "not a valid topic name"),
    ("orders:0:1", "at least 1"), ("orders:1:1:lots", "is not a size"),
])
def test_bad_topic_specs(spec: str, message: str) -> None:
    from kreassign.cluster.errors import InputError

    with pytest.raises(InputError, match=message):
        parse_topic_spec(spec)


def test_topic_spec_with_size_and_rate() -> None:
    assert parse_topic_spec("orders:12:3:200MB:1MB/s") == TopicSpec("orders", 12, 3, 200_000_000, 1_000_000.0)


@pytest.mark.e2e
def test_daemon_start_status_stop_and_restart_keeps_the_move(tmp_path: Path, kreassign: Kreassign) -> None:
    state = str(tmp_path / "sb")
    args = ["sandbox", "start", "--daemon", "--state-dir", state, "--brokers", "3", "--racks", "0",
            "--topics", "a:2:2,b:1:1", "--speed", "1", "--kafka-version", "3.9.2"]
    code, out, err = kreassign.run(*args)
    assert code == 0 and "Sandbox running in the background" in err
    bootstrap = out.strip()
    try:
        code, out, _ = kreassign.run("sandbox", "status", "--state-dir", state, "-o", "json")
        status: dict[str, Any] = json.loads(out)
        assert code == 0 and status["running"] and status["bootstrap"] == bootstrap
        assert {k: v for k, v in status["extra"].items() if k != "clock"} == {"kafka_version": "3.9.2"}
        assert "engine:    emulator (imitates Kafka 3.9.2)\n" in kreassign.run("sandbox", "status", "--state-dir",
                                                                               state)[1]
        code, _, err = kreassign.run(*args)
        assert code == 1 and "already running" in err
        moves = start_move(bootstrap)
    finally:
        code, _, err = kreassign.run("sandbox", "stop", "--state-dir", state)
    assert code == 0 and "Stopped the sandbox" in err
    code, _, err = kreassign.run("sandbox", "status", "--state-dir", state)
    assert code == 1 and "No sandbox is running" in err
    code, out, _ = kreassign.run(*args)
    try:
        admin = KafkaAdminClient(bootstrap_servers=out.strip(), request_timeout_ms=5000)
        try:
            assert admin.list_partition_reassignments() == moves
        finally:
            admin.close()
    finally:
        kreassign.run("sandbox", "stop", "--state-dir", state)


def test_stop_without_a_sandbox_says_so(tmp_path: Path, kreassign: Kreassign) -> None:
    code, out, err = kreassign.run("sandbox", "stop", "--state-dir", str(tmp_path))
    assert (code, out) == (0, "") and "No sandbox is running" in err


@pytest.mark.parametrize("args, error", [
    (["--kafka-version", "2.8.0"], "Error: the emulator imitates Kafka 4.4.0, 3.9.2, not 2.8.0: pick one of those, or "
                                   "run --engine kafka --kafka-version 2.8.0 for real brokers\n"),
    (["--kafka-home", "/opt/kafka"], "Error: --kafka-home needs --engine kafka\n")])
def test_cli_refuses_what_the_emulator_cannot_imitate(args: list[str], error: str, tmp_path: Path,
                                                      kreassign: Kreassign) -> None:
    code, out, err = kreassign.run("sandbox", "start", *args, "--state-dir", str(tmp_path))
    assert (code, out, err) == (1, "", error)


def test_cli_rejects_a_bad_topic_spec(tmp_path: Path, kreassign: Kreassign) -> None:
    code, out, err = kreassign.run("sandbox", "start", "--topics", "orders:12", "--state-dir", str(tmp_path))
    assert code == 1 and out == "" and "is not a topic spec" in err


@pytest.mark.e2e
def test_daemon_start_and_stop_in_json(tmp_path: Path, kreassign: Kreassign) -> None:
    state = str(tmp_path / "sb")
    code, out, _ = kreassign.run("sandbox", "start", "--daemon", "--state-dir", state, "--brokers", "2", "--racks",
                                 "0", "--topics", "a:1:1", "--output", "json")
    try:
        started = json.loads(out)
        assert code == 0 and started["running"] and started["state_dir"] == state
        assert sorted(started["ports"]) == ["1", "2"]
        assert started["bootstrap"] == ",".join(f"127.0.0.1:{started['ports'][b]}" for b in ("1", "2"))
    finally:
        code, out, _ = kreassign.run("sandbox", "stop", "--state-dir", state, "-o", "json")
    assert code == 0 and json.loads(out) == {"stopped": True, "state_dir": state, "pid": started["pid"]}
    code, out, _ = kreassign.run("sandbox", "stop", "--state-dir", state, "-o", "json")
    assert code == 0 and json.loads(out) == {"stopped": False, "state_dir": state}
