"""Measured write rates: the pure arithmetic of two readings; a sample of records written between
the readings on both engines (`live`), whose growth is the batches as a broker stores them; and a
sample of the emulator's synthetic writes, whose true rates only its engine knows."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli_helpers import Kreassign
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.capture import snapshot_state
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.errors import InputError
from kreassign.cluster.model import TopicPartition
from kreassign.cluster.write_sample import OFFSETS_MISSING, Reading, rates_between, sampled_rates
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec

from live import batch_bytes, write_batches

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


def test_rates_from_size_growth() -> None:
    first = Reading(10.0, {A: 1000, B: 500}, None)
    second = Reading(40.0, {A: 4000, B: 500}, None)
    assert rates_between(first, second) == {A: 100.0, B: 0.0}


def test_shrunk_size_is_rebuilt_from_offsets() -> None:
    # retention dropped a segment: 300 records were written, the log holds 2000 B for 1000 records
    first = Reading(0.0, {A: 5000}, {A: 700})
    second = Reading(10.0, {A: 2000}, {A: 1000})
    assert rates_between(first, second) == {A: 60.0}  # 300 records x 2 B / 10 s
    # the log now starts at offset 800: its 2000 B hold 200 records of 10 B
    second = Reading(10.0, {A: 2000}, {A: 1000}, {A: 800})
    assert rates_between(first, second) == {A: 300.0}  # 300 records x 10 B / 10 s


def test_partition_missing_from_a_reading_gets_no_rate_and_zero_window_is_refused() -> None:
    assert rates_between(Reading(0.0, {A: 1}, None), Reading(1.0, {B: 5}, None)) == {}
    with pytest.raises(InputError, match="different times"):
        rates_between(Reading(1.0, {}, None), Reading(1.0, {}, None))


def test_sampled_rates_say_how() -> None:
    rates, how = sampled_rates(Reading(0.0, {A: 0}, {A: 0}), Reading(30.0, {A: 300}, {A: 3}), (None, None),
                               "2026-01-01T00:00:00Z")
    assert rates == {A: 10.0}
    assert (how.source, how.window_s, how.method, how.note) == ("measured", 30.0, "offsets+sizes", None)
    _, how = sampled_rates(Reading(0.0, {}, None), Reading(5.0, {}, None), (OFFSETS_MISSING, None), None)
    assert (how.method, how.note) == ("sizes", OFFSETS_MISSING)


@given(st.floats(1.0, 1e4), st.lists(st.integers(0, 10**9), min_size=1, max_size=5))
def test_constant_writes_are_recovered_exactly(window: float, sizes: list[int]) -> None:
    tps = [TopicPartition("t", i) for i in range(len(sizes))]
    first = Reading(0.0, dict(zip(tps, sizes)), None)
    second = Reading(window, {tp: s + 1000 * (i + 1) for i, (tp, s) in enumerate(zip(tps, sizes))}, None)
    rates = rates_between(first, second)
    assert rates == pytest.approx({tp: 1000 * (i + 1) / window for i, tp in enumerate(tps)}, rel=1e-12)


class Writer:
    """A clock and a sleeper for a sample: the window passes on the clock while the sleeper
    writes `count` records of `value` bytes, one batch each, into partition 0 of `topic`."""

    def __init__(self, bootstrap: str, topic: str, count: int, value: int) -> None:
        self.bootstrap, self.topic, self.count, self.value = bootstrap, topic, count, value
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        write_batches(self.bootstrap, self.topic, 0, self.count, self.value)
        self.now += seconds


@pytest.mark.e2e
def test_sample_measures_the_records_written_between_its_readings(live: Any) -> None:
    """The growth of the leader's log between the readings is the batches as stored (the 61-byte
    batch header and the record framing count, index files do not), the same on both engines;
    log end offsets count the records; a partition nobody wrote measures 0."""
    topic = live.topic(partitions=2)
    live.produce_batches(topic, 0, 3, 1000)
    writer = Writer(live.bootstrap, topic, 7, 1000)
    notes: list[str] = []
    with live.admin() as port:
        state = snapshot_state(port, warn=notes.append, sample_s=30.0, clock=writer.clock, sleep=writer.sleep)
        mine = {p.partition: (p.size_bytes, p.produce_bps) for p in state.iter_partitions() if p.topic == topic}
        assert mine == {0: (10 * batch_bytes(1000), 7 * batch_bytes(1000) / 30.0), 1: (0, 0.0)}
        assert notes == [] and state.write_rates is not None
        assert (state.write_rates.window_s, state.write_rates.method) == (30.0, "offsets+sizes")
        # ListOffsets LATEST answers the high watermark, which follows once the followers fetch
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        live.wait_until(lambda: port.log_end_offsets(tps) == dict(zip(tps, (10, 0))),
                        what="the high watermark at 10", step_s=1.0)


@pytest.mark.e2e
def test_snapshot_command_samples_the_records_written_and_records_the_window(live: Any, tmp_path: Path,
                                                                             kreassign: Kreassign) -> None:
    from kreassign.cli.runtime import Runtime
    topic = live.topic(partitions=1)
    writer = Writer(live.bootstrap, topic, 4, 100)
    out = tmp_path / "s.json"
    ran = kreassign.run("snapshot", "--bootstrap-server", live.bootstrap, "--sample", "20s", "-f", str(out),
                        runtime=Runtime(clock=writer.clock, sleep=writer.sleep), columns=160)
    assert ran.exit_code == 0, ran.output
    assert "Write rates: measured over 20s from log end offsets and sizes." in ran.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["version"] == 2 and doc["write_rates"]["window_s"] == 20.0
    assert [(p["size_bytes"], p["produce_bps"]) for p in doc["partitions"] if p["topic"] == topic] == [
        (4 * batch_bytes(100), 4 * batch_bytes(100) / 20.0)]


@pytest.mark.e2e
def test_sample_of_the_sandbox_matches_its_write_rates(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    """Emulator only: its synthetic background writes (no records) have true rates its engine
    knows, which a real cluster has no equivalent of."""
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("w", 4, 2, 10_000_000, 200_000.0)])
    notes: list[str] = []
    config = build_client_config({}, bootstrap_server=sb.bootstrap)
    with KafkaAdmin.connect(dataclasses.replace(config, timeouts=AdminTimeouts(
            request_timeout_s=5.0, api_timeout_s=10.0, connect_timeout_s=1.0))) as admin:
        state = snapshot_state(admin, warn=notes.append, sample_s=30.0, clock=lambda: sb.now, sleep=sb.advance)
    truth = {(p.topic, p.index): float(sb.engine.produce_bps[p.row]) for p in sb.engine.rows}
    measured = {(p.topic, p.partition): p.produce_bps for p in state.iter_partitions()}
    assert measured == pytest.approx(truth, rel=1e-3)
    assert min(truth.values()) > 0
    assert state.write_rates is not None and state.write_rates.window_s == pytest.approx(30.0)
    if state.write_rates.method == "sizes":
        assert notes == [OFFSETS_MISSING] and state.write_rates.note == OFFSETS_MISSING
    else:
        assert notes == [] and state.write_rates.method == "offsets+sizes"


@pytest.mark.e2e
def test_snapshot_command_samples_the_emulators_writes(sandbox_factory: Callable[..., SandboxCluster],
                                                       tmp_path: Path, kreassign: Kreassign) -> None:
    """Emulator only, as the one above; and `--sample 0` says the rates are unknown."""
    from kreassign.cli.runtime import Runtime
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("w", 2, 2, 10_000_000, 100_000.0)])
    out = tmp_path / "s.json"
    ran = kreassign.run("snapshot", "--bootstrap-server", sb.bootstrap, "--sample", "20s", "-f", str(out),
                        runtime=Runtime(clock=lambda: sb.now, sleep=sb.advance), columns=160)
    assert ran.exit_code == 0, ran.output
    assert "Write rates: measured over 20s from log end offsets and sizes." in ran.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["version"] == 2 and doc["write_rates"]["window_s"] == pytest.approx(20.0)
    truth = {p.index: float(sb.engine.produce_bps[p.row]) for p in sb.engine.rows}
    assert {p["partition"]: p["produce_bps"] for p in doc["partitions"]} == pytest.approx(truth, rel=1e-3)
    skipped = kreassign.run("snapshot", "--bootstrap-server", sb.bootstrap, "--sample", "0", "-f", str(out),
                            columns=160)
    assert "Write rates unknown, taken as 0" in skipped.stderr
