"""`kreassign sandbox load`: the interval arithmetic, and real kafka-python clients against a sandbox."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest
from cli_helpers import KREASSIGN, Kreassign
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.load import LoadStats, TopicLoad, nearest_rank, parse_topic_load
from kreassign.sandbox.topics import TopicSpec


def test_topic_loads_parse_rates() -> None:
    assert parse_topic_load("orders:200kB/s") == TopicLoad("orders", 200_000.0)
    assert parse_topic_load("a:b:1MB/s") == TopicLoad("a:b", 1_000_000.0)
    for bad in ("orders", ":1MB/s", "orders:0"):
        with pytest.raises(InputError):
            parse_topic_load(bad)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200), st.floats(0.01, 1.0))
def test_nearest_rank_is_a_member_with_enough_values_at_or_below(values: list[float], q: float) -> None:
    ordered = sorted(values)
    v = nearest_rank(ordered, q)
    assert v in ordered
    assert sum(x <= v for x in ordered) >= q * len(ordered) - 1e-9


def test_an_interval_reports_its_own_acks_and_starts_afresh() -> None:
    stats = LoadStats()
    stats.sent = 4
    for ms in (10.0, 20.0, 30.0, 400.0):
        stats.acked(ms)
    stats.failure()
    sample = stats.take(2.0, 5.0, 0.0, 7)
    assert (sample.sent, sample.acked, sample.failed, sample.lag) == (4, 4, 1, 7)
    assert (sample.p50_ms, sample.p99_ms, sample.max_ms, sample.produce_throttle_ms) == (20.0, 400.0, 400.0, 5.0)
    empty = stats.take(4.0, 0.0, 0.0, 0)
    assert (empty.sent, empty.acked, empty.p99_ms) == (0, 0, 0.0)


@pytest.mark.e2e
def test_sandbox_load_runs_real_clients_and_prints_latency_and_lag(sandbox_factory: Any, kreassign: Kreassign) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("orders", 3, 3, 1_000_000, 100.0)],
                         clock=ScaledClock(10.0))
    result = kreassign.run("sandbox", "load", "--bootstrap-server", sb.bootstrap, "--topic", "orders:50kB/s",
                           "--message-size", "500", "--duration", "3s", "--interval", "1s")
    assert result.code == 0, result.err
    lines = [line for line in result.out.splitlines() if re.match(r"\s+\d+\.\ds", line)]
    assert len(lines) >= 3
    numbers = [dict(re.findall(r"(sent|acked|failed|consumed|lag)\s+(\d+)", line)) for line in lines]
    assert sum(int(n["acked"]) for n in numbers) >= 200  # 100 messages/s for 3 s, nearly all acknowledged
    assert all(n["failed"] == "0" for n in numbers)
    p99 = [float(x) for x in re.findall(r"p99\s+([\d.]+) ms", result.out)]
    assert max(p99) > 0
    with sb.locked() as engine:
        assert sum(v for (_, topic), v in engine.traffic.bytes_in.items() if topic == "orders") >= 200 * 500


@pytest.mark.e2e
def test_sandbox_load_ends_with_one_line_when_the_cluster_goes_away(sandbox_factory: Any) -> None:
    """Its broker stopped mid-run: the load ends with one line naming the cluster, exit status 5,
    and no traceback (kafka-python's producer raises on close while records wait)."""
    import subprocess
    import sys
    import time

    sb = sandbox_factory(brokers=1, racks=0, topics=[TopicSpec("orders", 1, 1, 0, 0.0)], clock=ScaledClock(1.0))
    bootstrap = sb.bootstrap
    proc = KREASSIGN.start("sandbox", "load", "--bootstrap-server", bootstrap, "--topic", "orders:20kB/s",
                           "--duration", "120s", "--interval", "1s", "--request-timeout", "3s")
    try:
        deadline = time.monotonic() + 60
        while sb.engine.log_end.sum() == 0:  # the first records have landed
            assert time.monotonic() < deadline and proc.poll() is None, "no record reached the sandbox"
            time.sleep(0.1)
        sb.stop_broker(1)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 5, err
    assert err.strip().startswith(f"Error: the cluster at {bootstrap} stopped answering: no write was "
                                  "acknowledged for ")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err


@pytest.mark.e2e
def test_sandbox_load_json_prints_one_document_per_interval(sandbox_factory: Any, kreassign: Kreassign) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("orders", 3, 3, 1_000_000, 100.0)],
                         clock=ScaledClock(10.0))
    result = kreassign.run("sandbox", "load", "--bootstrap-server", sb.bootstrap, "--topic", "orders:50kB/s",
                           "--message-size", "500", "--duration", "2s", "--interval", "1s", "--output", "json")
    assert result.code == 0, result.err
    samples = [json.loads(line) for line in result.out.splitlines()]
    assert len(samples) >= 2
    assert all(set(s) == {"at", "sent", "acked", "failed", "p50_ms", "p99_ms", "max_ms", "produce_throttle_ms",
                          "fetch_throttle_ms", "consumed", "lag"} for s in samples)
    assert sum(s["acked"] for s in samples) >= 100 and all(s["failed"] == 0 for s in samples)


@pytest.mark.e2e
def test_sandbox_load_names_a_topic_the_cluster_lacks(sandbox_factory: Any, kreassign: Kreassign) -> None:
    """The clients learn every topic before the consumer joins its group (see
    `LoadGenerator._learn_topics`); one the cluster lacks ends the load before it starts."""
    sb = sandbox_factory(brokers=1, racks=0, topics=[TopicSpec("orders", 1, 1, 0, 0.0)], clock=ScaledClock(1.0))
    result = kreassign.run("sandbox", "load", "--bootstrap-server", sb.bootstrap, "--topic", "orders:1kB/s",
                           "--topic", "nowhere:1kB/s", "--duration", "5s", "--request-timeout", "2s")
    assert result.code == 1, result.out + result.err
    assert result.err.startswith(f"Error: topic 'nowhere' not found on {sb.bootstrap} (")
    assert "create it first" in result.err and "Traceback" not in result.out + result.err
    assert result.out == ""
