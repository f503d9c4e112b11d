"""Sizes, rates and durations as operators type and read them."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_helpers import Kreassign
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.cluster.units import (
    format_bytes,
    format_duration,
    format_rate,
    parse_bytes,
    parse_duration,
    parse_rate,
    parse_throttle,
)


@pytest.mark.parametrize(("text", "value"), [
    ("50000000", 50_000_000), ("50MB/s", 50_000_000), ("50MiB/s", 50 * 1024**2), ("50 mb/s", 50_000_000),
    ("1.5GB", 1_500_000_000), ("10k", 10_000), ("0", 0), ("7B/s", 7), (str(2**63 - 1), 2**63 - 1),
])
def test_parse_rate(text: str, value: int) -> None:
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", ["", "fast", "-5MB/s", "5XB/s", "MB/s", "5 MB / s"])
def test_parse_rate_rejects_with_a_hint(text: str) -> None:
    with pytest.raises(InputError, match="is not a rate: use bytes per second or a unit such as 50MB/s"):
        parse_rate(text)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0), ("1h30m", 5400.0), ("250ms", 0.25), ("1d", 86400.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1h30", "m5", "2w"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(InputError, match="is not a duration"):
        parse_duration(text)


def test_formatting() -> None:
    assert format_bytes(1536) == "1.5 kB" and format_bytes(1536, "binary") == "1.5 KiB"
    assert format_bytes(0) == "0 B"
    assert format_rate(50_000_000) == "50.0 MB/s"
    assert format_rate(math.inf) == "unlimited"
    assert format_duration(math.inf) == "never"
    assert format_duration(5.04) == "5.0s"
    assert format_duration(250) == "4m10s"
    assert format_duration(7500) == "2h05m"
    assert format_duration(3 * 86400 + 7200) == "3d02h"


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_plain_numbers_round_trip(value: int) -> None:
    assert parse_rate(str(value)) == value
    assert parse_bytes(str(value)) == value


def test_a_throttle_of_zero_is_refused() -> None:
    with pytest.raises(InputError) as err:
        parse_throttle("0MB/s")
    assert str(err.value) == ("a throttle of '0MB/s' would stop replication: give a positive rate, or remove the "
                              "throttle with `kreassign throttle clear`")
    assert parse_throttle("1") == 1


@pytest.mark.parametrize("text, message", [
    ("50Mb/s", "'50Mb' is ambiguous: a lower-case b means bits; write 50MB for bytes (or 50MiB for binary units)"),
    (str(2**63), f"'{2**63}' is too large: Kafka accepts at most {2**63 - 1} bytes"),
    ("9" * 400, "'" + "9" * 80 + "... (400 characters)' is too large: Kafka accepts at most 9223372036854775807 bytes"),
    ("x" * 200, "'" + "x" * 80 + "... (200 characters)' is not a rate: use bytes per second or a unit such as "
                "50MB/s, 100MiB/s"),
])
def test_rates_out_of_kafkas_range_or_ambiguous_are_refused(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_rate(text)
    assert str(err.value) == message


def test_one_plan_reads_the_same_size_in_every_command_under_each_units(tmp_path: Path, kreassign: Kreassign) -> None:
    """plan, estimate, throttle suggest and a balance command print the plan's bytes through one formatter: 11.0 GB
    (decimal, the default) or 10.2 GiB (binary); the issue saw 10.1 GiB in plan and estimate
    beside 11.0 GB in watch and execute for one plan. JSON stays in bytes."""
    from kreassign.cluster.kafka_json import format_reassignment
    from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, PartitionTarget
    from kreassign.cluster.snapshot import write_snapshot

    state = ClusterState.from_partitions([Broker(i) for i in (1, 2, 3)],
                                         [PartitionInfo("t", 0, (1, 2), leader=1, isr=(1, 2), size_bytes=11 * 10**9)])
    snapshot, plan = tmp_path / "cluster.json", tmp_path / "plan.json"
    write_snapshot(state, snapshot)
    plan.write_text(format_reassignment([PartitionTarget("t", 0, (3, 2))]))
    common = ("--snapshot", str(snapshot), "-f", str(plan))
    commands = [("plan", *common, "--throttle", "50MB/s"), ("estimate", *common, "--throttle", "50MB/s"),
                ("throttle", "suggest", *common, "--max-impact", "50%", "--network-capacity", "100MB/s"),
                ("decommission", "--snapshot", str(snapshot), "--brokers", "1")]
    for units, size, rate in (("decimal", "11.0 GB", "50.0 MB/s"), ("binary", "10.2 GiB", "47.7 MiB/s")):
        for args in commands:
            flags = () if units == "decimal" else ("--units", units)
            run = kreassign.run(*args, *flags, columns=200)
            assert run.exit_code == 0, run.output
            assert size in run.stdout, (args, units, run.stdout)
            other = "GiB" if units == "decimal" else " GB"
            assert other not in run.stdout and ("MiB" if units == "decimal" else " MB") not in run.stdout
        assert rate in kreassign.run("estimate", *common, "--throttle", "50MB/s", *flags, columns=200).stdout
    doc = kreassign.run("estimate", *common, "--throttle", "50MB/s", "--units", "binary", "-o", "json").stdout
    assert '"bytes": 11000000000' in doc
