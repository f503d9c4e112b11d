"""Fault rules for tests: inject an error code, hold responses, or drop the connection."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

from kreassign.sandbox.wire import APIS

Kind = Literal["error", "delay", "drop"]


def api_key(api: int | str | None) -> int | None:
    """Accept an API key or a name such as "Metadata" or "ListPartitionReassignments"."""
    if api is None or isinstance(api, int):
        return api
    for key, (req, _) in APIS.items():
        if req.__name__ in (api, api + "Request"):
            return key
    raise ValueError(f"unknown API name {api!r}; use one of {sorted(r.__name__[:-7] for r, _ in APIS.values())}")


@dataclass
class Rule:
    kind: Kind
    api: int | None = None
    broker: int | None = None
    remaining: int | None = None
    code: int = 0
    message: str | None = None
    seconds: float | None = None
    per_item: bool = False

    def matches(self, kind: Kind, api: int, broker: int) -> bool:
        return (self.kind == kind and self.api in (None, api) and self.broker in (None, broker)
                and (self.remaining is None or self.remaining > 0))


class Faults:
    """Thread-safe rule list; `take` returns the first matching rule and uses up one of its count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []

    def add(self, rule: Rule) -> None:
        with self._lock:
            self._rules.append(rule)

    def clear(self, kind: Kind | None = None) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if kind is not None and r.kind != kind]

    def take(self, kind: Kind, api: int, broker: int) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(kind, api, broker):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule
        return None
