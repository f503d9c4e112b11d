"""The canary against the sandbox's real Produce/Fetch: kafka-python's producer (acks=all) and
consumer on a topic the tool creates with a partition led by each broker. The sandbox runs on a
scaled clock (its followers must fetch for acks=all to complete), so the numbers are checked for
what they must be, not for values."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kreassign.cluster.canary import canary_assignment
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec
from test_throttle_cmd import invoke

pytestmark = pytest.mark.e2e


def test_canary_assignment_puts_a_leader_on_every_broker() -> None:
    assert canary_assignment([3, 1, 2]) == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert canary_assignment([5], replication_factor=3) == {0: (5,)}


def test_canary_measures_every_broker_and_reports_impact_against_a_baseline(
        sandbox_factory: Callable[..., SandboxCluster], tmp_path: Path) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 1, 1)], clock=ScaledClock(1.0))
    ran = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "5", "--interval", "0",
                 "--output", "json")
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    assert doc["topic"] == "__kreassign_canary"
    brokers = {b["broker"]: b for b in doc["brokers"]}
    assert set(brokers) == {1, 2, 3}
    for b in brokers.values():
        assert b["requests"] == 5 and b["timeouts"] == 0
        assert 0 < b["p50_ms"] <= b["p99_ms"] and b["end_to_end_p99_ms"] is not None
    baseline = tmp_path / "baseline.json"
    baseline.write_text(ran.stdout, encoding="utf-8")
    again = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "3", "--interval", "0",
                   "--baseline", str(baseline), "--output", "json")
    assert again.exit_code == 0, again.output
    later = json.loads(again.stdout)
    assert {i["broker"] for i in later["impact"]} == {1, 2, 3} and later["worst_impact"] is not None
    text = invoke(None, "canary", "--bootstrap-server", sb.bootstrap, "--rounds", "2", "--interval", "0")
    assert text.stdout.startswith("Canary on __kreassign_canary (times in cluster ms):\n  broker 1: 2 produce(s), ")
