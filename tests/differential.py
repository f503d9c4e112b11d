"""The machinery of the differential test (tests/test_emulator_vs_kafka.py): the same raw request
to a real broker and to the emulator, both answers normalised, every difference either explained
by an allow-list entry or reported.

`normalise` removes what differs between any two clusters by nature, never what a broker decides:
the throttle time, ports, disk sizes, random ids (cluster, topic) and the controller id (a random
live broker on KRaft: checked to be one, then blanked), log-dir paths (their last component is
kept), and the order of keyed lists (configs, topics, partitions, brokers...), which follows
Kafka's hash maps. A keyed list becomes a mapping, so a difference reads
`.topics[name=t].partitions[partition_index=0].isr_nodes`; synonyms keep their order (it is their
precedence).
"""
from __future__ import annotations

import fnmatch
import re
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kreassign.sandbox.rawclient import read_frame, roundtrip

ABSENT = "<absent>"
DROPPED = frozenset({"throttle_time_ms", "port", "total_bytes", "usable_bytes", "documentation"})
LIST_KEYS = ("api_key", "name", "topic", "topic_name", "partition_index", "partition_id", "node_id", "broker_id",
             "log_dir")
ZERO_UUID = str(uuid.UUID(int=0))


@dataclass(frozen=True)
class Allowed:
    """A difference that cannot or need not be closed, and why."""

    scenario: str
    """fnmatch pattern over scenario names"""
    path: str
    """regular expression the whole path of the difference must match"""
    why: str
    releases: tuple[str, ...] = ()
    """the Kafka releases it applies to (empty: all)"""
    emulator_absent: bool = False
    """only where the emulator has no such item (a config or API it does not model)"""

    def explains(self, release: str, scenario: str, path: str, emulator: Any) -> bool:
        return ((not self.releases or release in self.releases) and fnmatch.fnmatchcase(scenario, self.scenario)
                and re.fullmatch(self.path, path) is not None and (not self.emulator_absent or emulator == ABSENT))


def _item_key(item: Mapping[str, Any]) -> str | None:
    if "resource_type" in item and "resource_name" in item:
        return f"resource={item['resource_type']}/{item['resource_name']}"
    for key in LIST_KEYS:
        if key in item:
            return f"{key}={item[key]}"
    return None


def normalise(value: Any, live: Iterable[int], parent: str = "") -> Any:
    """`value` (a response's `to_dict()`) with what differs between any two clusters removed."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in DROPPED:
                continue
            if key == "cluster_id" and item:
                item = "<cluster>"
            elif key == "topic_id":
                item = "<id>" if item and str(item) != ZERO_UUID else None
            elif key == "controller_id" and isinstance(item, int) and item >= 0:
                item = "<a live broker>" if item in set(live) else item
            elif key == "log_dir" and isinstance(item, str):
                item = item.rstrip("/").rsplit("/", 1)[-1]
            out[key] = normalise(item, live, key)
        return out
    if isinstance(value, list):
        items = [normalise(item, live, parent) for item in value]
        if parent != "synonyms" and items and all(isinstance(i, dict) for i in items):
            keys = [_item_key(i) for i in items]
            if None not in keys and len(set(keys)) == len(keys):
                return {f"[{k}]": i for k, i in zip(keys, items)}
        return items
    return value


def differences(real: Any, emulator: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, Kafka's value, the emulator's value) wherever the two normalised answers differ."""
    if isinstance(real, dict) and isinstance(emulator, dict):
        out = []
        for key in sorted(set(real) | set(emulator), key=str):
            sub = path + (key if key.startswith("[") else f".{key}")
            out += differences(real.get(key, ABSENT), emulator.get(key, ABSENT), sub)
        return out
    if real != emulator:
        return [(path, real, emulator)]
    return []


@dataclass
class Judge:
    """Collects the differences of one test on one release."""

    release: str
    allowed: tuple[Allowed, ...]
    unexplained: list[str] = field(default_factory=list)
    used: set[Allowed] = field(default_factory=set)
    scenarios: list[str] = field(default_factory=list)

    def compare(self, scenario: str, real: Any, emulator: Any, live: tuple[Iterable[int], Iterable[int]]) -> None:
        self.scenarios.append(scenario)
        for path, theirs, ours in differences(normalise(real, live[0]), normalise(emulator, live[1])):
            entry = next((a for a in self.allowed if a.explains(self.release, scenario, path, ours)), None)
            if entry is None:
                self.unexplained.append(f"{scenario}: {path}: Kafka {theirs!r}, emulator {ours!r}")
            else:
                self.used.add(entry)

    def verdict(self) -> None:
        """Fail on an unexplained difference, or on an entry for a scenario that ran but that no
        longer matches anything (the emulator or Kafka changed: look again)."""
        stale = [a for a in self.allowed if a not in self.used
                 and (not a.releases or self.release in a.releases)
                 and any(fnmatch.fnmatchcase(s, a.scenario) for s in self.scenarios)]
        lines = [f"differences from Kafka {self.release} that ALLOWED does not explain:", *self.unexplained] \
            if self.unexplained else []
        if stale:
            lines += [f"ALLOWED entries that matched nothing on Kafka {self.release}:",
                      *(f"{a.scenario}: {a.path} ({a.why})" for a in stale)]
        assert not lines, "\n".join(lines)


def ask(port: int, request: Any, version: int) -> dict[str, Any]:
    """One raw request to one broker, its response as a dict."""
    answer: dict[str, Any] = roundtrip(port, request, version).to_dict()
    return answer


def outcome(port: int, api_key: int, version: int, body: bytes = b"\x00\x00\x00\x00") -> str:
    """How a broker meets a request at a version: `closed` (Kafka drops a connection for a
    version it does not serve) or `answered`."""
    client = b"kreassign-tests"
    header = struct.pack(">hhih", api_key, version, 11, len(client)) + client
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        try:
            read_frame(sock)
        except (ConnectionError, OSError):
            return "closed"
    return "answered"


def api_versions_v99(port: int) -> dict[str, Any]:
    """ApiVersions at a version no broker knows (KIP-511: answered at v0 with error 35)."""
    from kafka.protocol.metadata import ApiVersionsResponse

    client = b"kreassign-tests"
    header = struct.pack(">hhih", 18, 99, 42, len(client)) + client + b"\x00\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        payload = read_frame(sock)
    answer: dict[str, Any] = ApiVersionsResponse.decode(payload, version=0, header=True).to_dict()
    return answer


def until(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Wait (real time, on real Kafka) until `condition` holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.1)
