"""The header of a snapshot file: everything except the partitions, read field by field.

Split from `kreassign.cluster.snapshot`, which reads the partitions as columns; every message
names the file and the field, as `fail` writes it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NoReturn

from kreassign.cluster.errors import JAVA_LONG_MAX, InputError
from kreassign.cluster.model import Broker, Reassignment, ThrottleConfigs, TopicPartition, WriteRates

FORMAT_NAME = "kreassign-snapshot"
FORMAT_VERSION = 2
"""2 added `write_rates`; version 1 files read as before (rates given, or unknown when all 0)."""
INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Header:
    cluster_id: str | None
    captured_at: str | None
    brokers: tuple[Broker, ...]
    reassignments: tuple[tuple[TopicPartition, Reassignment], ...]
    throttles: ThrottleConfigs
    write_rates: WriteRates | None = None


def fail(source: str, where: str, what: str) -> NoReturn:
    raise InputError(f"{source}: {where} {what}")


def show(value: Any) -> str:
    """A short rendering of a bad value for a message."""
    if isinstance(value, (list, dict)) and len(value) > 8:
        return f"a {'list' if isinstance(value, list) else 'JSON object'} of {len(value)} items"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def is_int(value: Any) -> bool:
    return type(value) is int and _INT64_MIN <= value <= _INT64_MAX


def _int_field(value: Any, source: str, where: str, *, low: int, high: int, what: str) -> int:
    if not is_int(value) or not low <= value <= high:
        fail(source, where, f"must be {what}, got {show(value)}")
    return int(value)


def _opt_str(value: Any, source: str, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        fail(source, where, f"must be a string or null, got {show(value)}")
    return value


def _opt_rate(value: Any, source: str, where: str) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or (type(value) is int and value > JAVA_LONG_MAX) or (
            not math.isfinite(value) or value < 0):
        fail(source, where, f"must be a number of bytes per second (>= 0) or null, got {show(value)}")
    return float(value)


def parse_header(doc: Any, source: str) -> Header:
    if not isinstance(doc, dict):
        raise InputError(f"{source} is not a kreassign snapshot: expected a JSON object, "
                         f"got {show(doc)}")
    if doc.get("format") != FORMAT_NAME:
        raise InputError(f"{source} is not a kreassign snapshot: its \"format\" field should be "
                         f"\"{FORMAT_NAME}\", got {show(doc.get('format'))}")
    version = doc.get("version")
    if type(version) is not int or version < 1:
        fail(source, "version", f"must be a positive integer, got {show(version)}")
    if version > FORMAT_VERSION:
        raise InputError(f"{source}: snapshot format version {version} is newer than this kreassign "
                         f"understands ({FORMAT_VERSION}); upgrade kreassign")
    return Header(
        cluster_id=_opt_str(doc.get("cluster_id"), source, "cluster_id"),
        captured_at=parse_time(doc.get("captured_at"), source),
        brokers=_parse_brokers(doc.get("brokers"), source),
        reassignments=_parse_reassignments(doc.get("reassignments", []), source),
        throttles=_parse_throttles(doc.get("throttles", {}), source),
        write_rates=_parse_write_rates(doc.get("write_rates"), source),
    )


def _parse_write_rates(value: Any, source: str) -> WriteRates | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("source") not in ("measured", "given"):
        fail(source, "write_rates", "must be null or an object whose \"source\" is \"measured\" or "
              f"\"given\", got {show(value)}")
    window = value.get("window_s")
    if window is not None and (type(window) not in (int, float) or not math.isfinite(window) or window <= 0):
        fail(source, "write_rates.window_s", f"must be a positive number of seconds or null, got {show(window)}")
    method = _opt_str(value.get("method"), source, "write_rates.method")
    note = _opt_str(value.get("note"), source, "write_rates.note")
    measured = value.get("measured_at")
    return WriteRates(source=value["source"], window_s=None if window is None else float(window),
                      method=method, measured_at=None if measured is None else parse_time(measured, source),
                      note=note)


def parse_time(value: Any, source: str) -> str | None:
    """ISO-8601 with a zone, normalised to UTC (`2024-05-01T12:00:00Z`)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        fail(source, "captured_at", "must be an ISO-8601 time with a zone, e.g. "
              f"\"2024-05-01T12:00:00Z\", got {show(value)}")
    moment = moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds"
                            ).replace("+00:00", "Z")


BROKER_KEYS = ("id", "rack", "host", "port", "network_in_bps", "network_out_bps", "disk_bytes")


def _parse_brokers(value: Any, source: str) -> tuple[Broker, ...]:
    if not isinstance(value, list):
        fail(source, "brokers", f"must be a list of broker objects, got {show(value)}")
    brokers: dict[int, Broker] = {}
    for i, item in enumerate(value):
        where = f"brokers[{i}]"
        if not isinstance(item, dict):
            fail(source, where, f"must be an object like {{\"id\": 1, \"rack\": \"a\"}}, got {show(item)}")
        if "id" not in item:
            fail(source, where, "has no \"id\"")
        broker_id = _int_field(item["id"], source, f"{where}.id", low=0, high=INT32_MAX,
                               what="a broker id (0 or more)")
        if broker_id in brokers:
            fail(source, f"{where}.id", f"{broker_id} is listed more than once")
        port = item.get("port")
        brokers[broker_id] = Broker(
            id=broker_id,
            rack=_opt_str(item.get("rack"), source, f"{where}.rack"),
            host=_opt_str(item.get("host"), source, f"{where}.host"),
            port=None if port is None else _int_field(port, source, f"{where}.port", low=1,
                                                        high=65535, what="a TCP port or null"),
            network_in_bps=_opt_rate(item.get("network_in_bps"), source, f"{where}.network_in_bps"),
            network_out_bps=_opt_rate(item.get("network_out_bps"), source, f"{where}.network_out_bps"),
            disk_bytes=None if item.get("disk_bytes") is None else _int_field(
                item["disk_bytes"], source, f"{where}.disk_bytes", low=0, high=_INT64_MAX,
                what="a number of bytes (0 or more) or null"),
        )
    return tuple(brokers.values())


def _id_list(value: Any, source: str, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(is_int(v) and 0 <= v <= INT32_MAX for v in value):
        fail(source, where, f"must be a list of broker ids, got {show(value)}")
    return tuple(value)


def _copied(value: Any, source: str, where: str) -> tuple[tuple[int, int], ...]:
    """[{"broker": id, "bytes": n}, ...]: how much each adding replica's log held."""
    if not isinstance(value, list):
        fail(source, where, f"must be a list of {{\"broker\": id, \"bytes\": n}} objects, got {show(value)}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != {"broker", "bytes"}:
            fail(source, f"{where}[{i}]", f"must be an object with broker and bytes, got {show(item)}")
        out.append((_int_field(item["broker"], source, f"{where}[{i}].broker", low=0, high=INT32_MAX,
                               what="a broker id"),
                    _int_field(item["bytes"], source, f"{where}[{i}].bytes", low=0, high=JAVA_LONG_MAX,
                               what="a size in bytes")))
    return tuple(out)


def _parse_reassignments(value: Any, source: str) -> tuple[tuple[TopicPartition, Reassignment], ...]:
    if not isinstance(value, list):
        fail(source, "reassignments", f"must be a list of reassignment objects, got {show(value)}")
    seen: set[TopicPartition] = set()
    result = []
    for i, item in enumerate(value):
        where = f"reassignments[{i}]"
        if not isinstance(item, dict):
            fail(source, where, f"must be an object with topic, partition, replicas, adding and "
                  f"removing, got {show(item)}")
        for key in ("topic", "partition", "replicas"):
            if key not in item:
                fail(source, where, f"has no \"{key}\"")
        topic = item["topic"]
        if not isinstance(topic, str) or not topic:
            fail(source, f"{where}.topic", f"must be a topic name, got {show(topic)}")
        partition = _int_field(item["partition"], source, f"{where}.partition", low=0,
                               high=INT32_MAX, what="a partition number (0 or more)")
        tp = TopicPartition(topic, partition)
        move = Reassignment(
            replicas=_id_list(item["replicas"], source, f"{where}.replicas"),
            adding=_id_list(item.get("adding", []), source, f"{where}.adding"),
            removing=_id_list(item.get("removing", []), source, f"{where}.removing"),
            copied=_copied(item.get("copied", []), source, f"{where}.copied"),
        )
        for key in ("adding", "removing"):
            stray = sorted(set(getattr(move, key)) - set(move.replicas))
            if stray:
                fail(source, f"{where} ({tp})", f"{key} names broker {stray[0]}, which is not in its "
                      f"replicas {list(move.replicas)}")
        stray = sorted({b for b, _ in move.copied} - set(move.adding))
        if stray:
            fail(source, f"{where} ({tp})", f"copied names broker {stray[0]}, which is not in its adding "
                  f"replicas {list(move.adding)}")
        both = sorted(set(move.adding) & set(move.removing))
        if both:
            fail(source, f"{where} ({tp})", f"broker {both[0]} is both adding and removing")
        if tp in seen:
            fail(source, f"{where} ({tp})", "is listed more than once")
        seen.add(tp)
        result.append((tp, move))
    return tuple(result)


def _parse_throttles(value: Any, source: str) -> ThrottleConfigs:
    if not isinstance(value, dict) or not set(value) <= {"broker", "topic"}:
        fail(source, "throttles", "must be an object like {\"broker\": {\"1\": {...}}, "
              f"\"topic\": {{\"foo\": {{...}}}}}}, got {show(value)}")
    broker: dict[int, dict[str, str]] = {}
    topic: dict[str, dict[str, str]] = {}
    for level, target in (("broker", broker), ("topic", topic)):
        entries = value.get(level, {})
        if not isinstance(entries, dict):
            fail(source, f"throttles.{level}", f"must be an object, got {show(entries)}")
        for name, configs in entries.items():
            where = f"throttles.{level}[{show(name)}]"
            if not isinstance(name, str) or not name:
                fail(source, where, f"must be keyed by {level} names")
            if level == "broker" and not (name.isascii() and name.isdigit()):
                fail(source, where, "must be keyed by a broker id such as \"1\"")
            if not isinstance(configs, dict) or not all(
                    isinstance(v, str) or is_int(v) for v in configs.values()):
                fail(source, where, "must map config names to string values, got "
                      f"{show(configs)}")
            key: Any = int(name) if level == "broker" else name
            target[key] = {k: str(v) for k, v in configs.items()}
    return ThrottleConfigs(broker=broker, topic=topic)
