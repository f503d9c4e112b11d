"""Sizes, rates and durations as operators type and read them."""
from __future__ import annotations

import math

import pytest
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
    assert format_bytes(1536) == "1.5 KiB"
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
