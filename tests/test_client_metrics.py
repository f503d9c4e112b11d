"""`kreassign client-metrics`: KIP-714 subscriptions as values, and list/set/delete against the
sandbox's CLIENT_METRICS resources over TCP (as kafka-client-metrics.sh manages them)."""
from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kreassign.cluster.client_metrics import Subscription, parse_match, set_ops
from kreassign.cluster.errors import InputError
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec
from test_throttle_cmd import Ran, invoke


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
def test_set_list_delete_on_the_sandbox(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    sb = sandbox_factory(brokers=1, racks=0, topics=[TopicSpec("t", 1, 1)])

    def run(*args: str) -> Ran:
        return invoke(None, "client-metrics", *args, "--bootstrap-server", sb.bootstrap)

    assert run("list").stdout == "No client-metrics subscriptions.\n"
    ran = run("set", "--name", "during-move", "--metrics", "org.apache.kafka.producer.node.request.latency",
              "--interval", "10s", "--match", "client_id=orders")
    assert ran.exit_code == 0, ran.output
    assert ran.stdout == ("Set client-metrics subscription during-move: interval.ms=10000, match=client_id=orders, "
                          "metrics=org.apache.kafka.producer.node.request.latency\n")
    assert run("list").stdout == ("during-move: org.apache.kafka.producer.node.request.latency every 10000 ms, "
                                  "from client_id=orders\n")
    assert json.loads(run("list", "--output", "json").stdout) == {"subscriptions": [
        {"name": "during-move", "metrics": ["org.apache.kafka.producer.node.request.latency"], "interval_ms": 10000,
         "match": {"client_id": "orders"}}]}
    bad = run("set", "--name", "during-move", "--interval", "2h")
    assert bad.exit_code != 0 and "between 100 ms and 3600000 ms" in bad.stderr
    assert run("delete", "--name", "during-move").stdout == "Deleted client-metrics subscription during-move.\n"
    assert run("list").stdout == "No client-metrics subscriptions.\n"
