"""Parsing and formatting of byte sizes, rates and durations given by people."""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal

from kreassign.cluster.errors import JAVA_LONG_MAX, InputError, UnitError, clip

_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3,
    "ti": 1024**4, "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_bytes(text: str) -> int:
    """Parse `1073741824`, `50MB`, `1.5GiB` into bytes (decimal and binary units).

    Bounded to Kafka's LONG; a lower-case `b` after an upper-case prefix (`Mb`, `Gb`) is how
    bits are written, so it is refused with a hint rather than read as bytes.
    """
    match = _SIZE.match(str(text))
    unit = match.group(2) if match else ""
    if match and unit.endswith("b") and unit[:-1] != unit[:-1].lower() and unit.lower() in _UNITS:
        number = match.group(1)
        raise UnitError(f"'{clip(text)}' is ambiguous: a lower-case b means bits; write {number}{unit[:-1].upper()}B "
                         f"for bytes (or {number}{unit[:-1].upper()}iB for binary units)")
    if not match or unit.lower() not in _UNITS:
        raise InputError(
            f"'{clip(text)}' is not a size: use a number of bytes or a unit such as 500MB, 20GiB"
        )
    value = int(Decimal(match.group(1)) * _UNITS[unit.lower()])
    if value > JAVA_LONG_MAX:
        raise UnitError(f"'{clip(text)}' is too large: Kafka accepts at most {JAVA_LONG_MAX} bytes")
    return value


def parse_rate(text: str) -> int:
    """Parse a rate in bytes per second: `50000000`, `50MB/s`, `50MiB/s`, `50MB`."""
    raw = str(text).strip()
    body = raw[:-2] if raw.lower().endswith("/s") else raw
    try:
        return parse_bytes(body)
    except UnitError:
        raise
    except InputError:
        raise InputError(
            f"'{clip(text)}' is not a rate: use bytes per second or a unit such as 50MB/s, 100MiB/s"
        ) from None


def parse_throttle(text: str) -> int:
    """A replication throttle: a rate that must be positive (0 would stop replication; a
    throttle is removed by clearing it, not by setting 0)."""
    value = parse_rate(text)
    if value <= 0:
        raise InputError(f"a throttle of '{clip(text)}' would stop replication: give a positive rate, or remove "
                         "the throttle with `kreassign throttle clear`")
    return value


def parse_duration(text: str) -> float:
    """Parse `90`, `90s`, `15m`, `2h`, `1h30m` into seconds."""
    raw = str(text).strip().lower()
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 0:
            raise InputError(f"'{clip(text)}' is not a duration: use a positive number of seconds")
        return value
    pos, total = 0, 0.0
    for match in _DURATION.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or not raw:
        raise InputError(f"'{clip(text)}' is not a duration: use seconds or units such as 90s, 15m, 2h, 1h30m")
    return total


Units = Literal["decimal", "binary"]
"""How sizes and rates are shown: decimal (kB, MB: Kafka's configs count bytes and bytes/s this
way, and `50MB/s` typed to a throttle is 50,000,000) or binary (KiB, MiB: how disks are often
reported). Every command that prints a size or a rate takes `--units` (decimal by default) and
formats both through `format_bytes`/`format_rate` here, so one plan's size reads the same in
plan, estimate, execute, watch, simulate and throttle suggest."""
DEFAULT_UNITS: Units = "decimal"
_STEPS = {"decimal": (1000, ("B", "kB", "MB", "GB", "TB", "PB")),
          "binary": (1024, ("B", "KiB", "MiB", "GiB", "TiB", "PiB"))}


def byte_unit(value: float, units: Units = DEFAULT_UNITS) -> tuple[str, float]:
    """The unit `format_bytes` shows `value` in, and its size in bytes: 4.1e13 -> ('TB', 1e12)
    (binary: ('TiB', 1024**4)). Plot axes take theirs from here, so an axis and a table agree."""
    step, names = _STEPS[units]
    value, size = abs(value), 1
    for name in names[:-1]:
        if value < step:
            return name, float(size)
        value /= step
        size *= step
    return names[-1], float(size)


def _scaled(value: float, units: Units, suffix: str) -> str:
    name, size = byte_unit(value, units)
    sign = "-" if value < 0 else ""
    value = abs(value)
    return f"{sign}{value:.0f} {name}{suffix}" if name == "B" else f"{sign}{value / size:.1f} {name}{suffix}"


def format_bytes(value: float, units: Units = DEFAULT_UNITS) -> str:
    """Render bytes: 1536 -> '1.5 kB' (decimal, the default) or '1.5 KiB' (binary)."""
    if value is None or math.isnan(value):
        return "-"
    return _scaled(value, units, "")


def format_rate(value: float, units: Units = DEFAULT_UNITS) -> str:
    """Render a rate in bytes/s, by default with decimal units as operators type them:
    5e7 -> '50.0 MB/s' (binary: '47.7 MiB/s')."""
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return "unlimited"
    return _scaled(value, units, "/s")


def format_duration(seconds: float) -> str:
    """Render seconds as '2h05m', '4m10s', '12s', or 'never' for infinity."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if math.isinf(seconds):
        return "never"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


_TIME_OF_DAY = re.compile(r"^([01]?[0-9]|2[0-3]):([0-5][0-9])$")


def parse_deadline(text: str, now: datetime) -> float:
    """Seconds from `now` to a deadline given as a duration (`2h`), a time of day (`06:00`, the
    next one) or an ISO date-time.

    Raises:
        InputError: the text is none of these, or names a moment in the past.
    """
    match = _TIME_OF_DAY.match(text.strip())
    if match:
        at = now.replace(hour=int(match.group(1)), minute=int(match.group(2)), second=0, microsecond=0)
        if at <= now:
            at += timedelta(days=1)
        return (at - now).total_seconds()
    try:
        return parse_duration(text)
    except InputError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"'{text}' is not a deadline: use a duration (2h), a time of day (06:00) "
                         "or a date-time (2025-06-01T06:00)") from None
    if moment.tzinfo is None and now.tzinfo is not None:
        moment = moment.replace(tzinfo=now.tzinfo)
    seconds = (moment - now).total_seconds()
    if seconds <= 0:
        raise InputError(f"the deadline {text} has already passed")
    return seconds
