"""`kreassign client-metrics`: KIP-714 subscriptions as values, and list/set/delete of CLIENT_METRICS
resources over TCP (as kafka-client-metrics.sh manages them) on both engines and on every Kafka
release of the matrix."""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from cli_helpers import Kreassign, Ran
from kreassign.cluster.client_metrics import Subscription, parse_match, set_ops
from kreassign.cluster.errors import InputError
from live import wait_until


def test_values_and_validation() -> None:
    assert parse_match("client_id=orders, client_software_name=apache-kafka-java") == (
        ("client_id", "orders"), ("client_software_name", "apache-kafka-java"))
    with pytest.raises(InputError, match="'host' is not a client selector"):
        parse_match("host=a")
    assert set_ops("a.b, c", 1000, None) == {"metrics": "a.b,c", "interval.ms": "1000"}
    with pytest.raises(InputError, match="between 100 ms and 3600000 ms"):
        set_ops(None, 50, None)
    with pytest.raises(InputError, match="nothing to set"):
        set_ops(None, None, None)
    assert Subscription.from_configs("s", {"metrics": "x,y", "interval.ms": "500", "match": "client_id=p"}).to_dict() \
        == {"name": "s", "metrics": ["x", "y"], "interval_ms": 500, "match": {"client_id": "p"}}


@pytest.mark.e2e
def test_set_list_delete(live: Any, kreassign: Kreassign) -> None:
    """The CLI against both engines. A broker answers DescribeConfigs from its own copy of the
    metadata, which follows the controller's a moment later: `list` is polled until it shows
    what `set` changed (at once on the emulator)."""
    def run(*args: str) -> Ran:
        return kreassign.run("client-metrics", *args, "--bootstrap-server", live.bootstrap, columns=160)

    def shows(*args: str, expected: str) -> Callable[[], bool]:
        return lambda: run("list", *args).stdout == expected

    assert run("list").stdout == "No client-metrics subscriptions.\n"
    ran = run("set", "--name", "during-move", "--metrics", "org.apache.kafka.producer.node.request.latency",
              "--interval", "10s", "--match", "client_id=orders")
    assert ran.exit_code == 0, ran.output
    assert ran.stdout == ("Set client-metrics subscription during-move: interval.ms=10000, match=client_id=orders, "
                          "metrics=org.apache.kafka.producer.node.request.latency\n")
    live.wait_until(shows(expected="during-move: org.apache.kafka.producer.node.request.latency every 10000 ms, "
                              "from client_id=orders\n"), what="the subscription listed", step_s=1.0)
    assert json.loads(run("list", "--output", "json").stdout) == {"subscriptions": [
        {"name": "during-move", "metrics": ["org.apache.kafka.producer.node.request.latency"], "interval_ms": 10000,
         "match": {"client_id": "orders"}}]}
    assert run("set", "--name", "during-move", "--metrics", "*").exit_code == 0  # only the keys given change
    live.wait_until(shows("--name", "during-move", expected="during-move: * every 10000 ms, from client_id=orders\n"),
                    what="the metrics changed", step_s=1.0)
    bad = run("set", "--name", "during-move", "--interval", "2h")
    assert bad.exit_code != 0 and "between 100 ms and 3600000 ms" in bad.stderr
    refused = run("set", "--name", "odd", "--match", "client_id=[")  # the broker checks the regular expression
    assert (refused.exit_code, refused.stderr) == (
        1, "Error: Could not set client-metrics subscription odd: Illegal client matching pattern: client_id=[\n")
    assert run("delete", "--name", "during-move").stdout == "Deleted client-metrics subscription during-move.\n"
    live.wait_until(shows(expected="No client-metrics subscriptions.\n"), what="the subscription gone", step_s=1.0)
    assert run("delete", "--name", "never-was").stdout == "Deleted client-metrics subscription never-was.\n"


@pytest.mark.e2e
def test_set_and_delete_in_json(sandbox: Any, kreassign: Kreassign) -> None:
    """What `set` and `delete` print with --output json (the tool's own document: the same on
    either engine, so the emulator alone)."""
    def run(*args: str) -> Ran:
        return kreassign.run("client-metrics", *args, "--bootstrap-server", sandbox.bootstrap, "--output", "json",
                             columns=160)

    ran = run("set", "--name", "during-move", "--metrics", "org.apache.kafka.producer", "--interval", "10s")
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout) == {"name": "during-move", "set": {"interval.ms": "10000",
                                                                     "metrics": "org.apache.kafka.producer"}}
    ran = run("delete", "--name", "during-move")
    assert (ran.exit_code, json.loads(ran.stdout)) == (0, {"name": "during-move", "deleted": True})


# (configs set, then: the broker's (code, name, message) or None, and what a describe then shows)
KIP_714_CHECKS: list[tuple[dict[str, str], tuple[int, str, str] | None, dict[str, str]]] = [
    ({"interval.ms": "50"}, (42, "INVALID_REQUEST", "Invalid value 50 for interval.ms, interval must be between 100 "
                                                    "and 3600000 (1 hour)"), {}),
    ({"interval.ms": "abc"}, (40, "INVALID_CONFIG", "Invalid value abc for configuration interval.ms: Not a number of "
                                                    "type INT"), {}),
    ({"foo": "1"}, (42, "INVALID_REQUEST", "Unknown client metrics configuration: foo"), {}),
    ({"match": "client_id=a=b"}, (40, "INVALID_CONFIG", "Illegal client matching pattern: client_id=a=b"), {}),
    ({"match": "host=a"}, (40, "INVALID_CONFIG", "Illegal client matching pattern: host=a"), {}),
    ({"match": "client_id=["}, (40, "INVALID_CONFIG", "Illegal client matching pattern: client_id=["), {}),
    ({"match": "client_id="}, (40, "INVALID_CONFIG", "Illegal client matching pattern: client_id="), {}),
    ({"metrics": "a,,b"}, (40, "INVALID_CONFIG", "Configuration 'metrics' values must not be empty."), {}),
    ({"metrics": " a , b ,a", "interval.ms": " 500 "}, None, {"metrics": "a,b", "interval.ms": "500"}),
    ({"match": " client_id = x ,client_id=y"}, None, {"match": "client_id = x,client_id=y"}),
    ({"metrics": ""}, None, {"metrics": ""}),
]


@pytest.mark.e2e
def test_the_brokers_checks_and_stored_values(live: Any) -> None:
    """IncrementalAlterConfigs on CLIENT_METRICS resources as a Kafka 4.4 broker answers it (the
    reference the emulator follows): refusals with their codes and messages, and values stored
    trimmed, list items without duplicates."""
    with live.admin() as port:
        for i, (ops, refusal, stored) in enumerate(KIP_714_CHECKS):
            error = port.alter_client_metrics(f"check-{i}", ops)
            assert (None if error is None else (error.code, error.name, error.message)) == refusal, ops

            def described(name: str = f"check-{i}") -> dict[str, str | None]:
                return {k: e.value for k, e in port.describe_client_metrics([name])[name].items()}

            live.wait_until(lambda: described() == stored, what=f"{ops} stored as {stored}", step_s=1.0)


@pytest.mark.e2e
def test_set_list_delete_on_every_kafka_release(kafka_matrix: Any, kreassign: Kreassign) -> None:
    """Kafka 3.9 lists subscriptions with ListClientMetricsResources (API 74 v0), 4.x with its
    successor ListConfigResources: the same commands, the same answers."""
    def run(*args: str) -> Ran:
        return kreassign.run("client-metrics", *args, "--bootstrap-server", kafka_matrix.bootstrap, columns=160)

    name = f"matrix-{uuid.uuid4().hex[:8]}"
    line = f"{name}: org.apache.kafka.consumer.node.request.latency every 5000 ms, from client_software_name=x\n"
    try:
        assert run("set", "--name", name, "--metrics", "org.apache.kafka.consumer.node.request.latency",
                   "--interval", "5s", "--match", "client_software_name=x").exit_code == 0
        wait_until(lambda: line in run("list").stdout, f"{name} listed on Kafka {kafka_matrix.dist.version}")
        assert run("list", "--name", name).stdout == line
    finally:
        assert run("delete", "--name", name).exit_code == 0
    wait_until(lambda: name not in run("list").stdout, f"{name} deleted on Kafka {kafka_matrix.dist.version}")

