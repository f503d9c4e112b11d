"""KIP-714 client-metrics subscriptions (config resource type CLIENT_METRICS): named resources
with `metrics` (name prefixes), `interval.ms` and `match`, validated as Kafka's
ClientMetricsConfigs of Kafka 4.4 does (codes, messages and the stored form of each value, as a 4.4.0
broker answers them), for DescribeConfigs, IncrementalAlterConfigs and ListConfigResources.
Only the configs: `telemetry.py` serves the subscriptions to clients."""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kreassign.sandbox import codes
from kreassign.sandbox.codes import AlterOp, ConfigSource, ConfigType
from kreassign.sandbox.configs import ConfigEntry, Result

METRICS, INTERVAL, MATCH = "metrics", "interval.ms", "match"
DEFAULTS = {METRICS: "", INTERVAL: "300000", MATCH: ""}
TYPES = {METRICS: ConfigType.LIST, INTERVAL: ConfigType.INT, MATCH: ConfigType.LIST}
MATCH_KEYS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
              "client_source_address", "client_source_port")
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000


@dataclass
class ClientMetricsStore:
    """Subscriptions by name; a subscription whose every key is deleted no longer exists."""

    subscriptions: dict[str, dict[str, str]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.subscriptions)

    def describe(self, name: str, keys: Sequence[str] | None) -> list[ConfigEntry]:
        own = self.subscriptions.get(name, {})
        return [ConfigEntry(k, own.get(k, DEFAULTS[k]), False,
                            ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG if k in own else ConfigSource.DEFAULT_CONFIG,
                            TYPES[k])
                for k in sorted(DEFAULTS) if keys is None or k in keys]

    def alter(self, name: str, ops: Iterable[tuple[str, int, str | None]], validate_only: bool) -> Result:
        if not name:
            return codes.INVALID_REQUEST, "Subscription name can't be empty"
        current = dict(self.subscriptions.get(name, {}))
        for key, op, value in ops:
            if key not in DEFAULTS:
                return codes.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            if op == AlterOp.SET and value is not None:
                current[key] = value
            elif op == AlterOp.DELETE:
                current.pop(key, None)
            else:
                return codes.INVALID_REQUEST, f"Unsupported operation {op} for {key}"
        stored = {}
        for key in sorted(current):
            value, problem = _parse(key, current[key])
            if problem:
                return problem
            stored[key] = value
        problem = _check(stored)
        if problem:
            return problem
        if not validate_only:
            if stored:
                self.subscriptions[name] = stored
            else:
                self.subscriptions.pop(name, None)
        return codes.NONE, None


def _parse(key: str, value: str) -> tuple[str, Result | None]:
    """A value as Kafka 4.x stores it (ConfigDef's parse): an int trimmed, a list's items trimmed
    with duplicates dropped; an empty list item is refused."""
    if TYPES[key] == ConfigType.INT:
        try:
            return str(int(value.strip())), None
        except ValueError:
            return value, (codes.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: "
                                                 "Not a number of type INT")
    if not value.strip():
        return "", None
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        return value, (codes.INVALID_CONFIG, f"Configuration '{key}' values must not be empty.")
    return ",".join(dict.fromkeys(items)), None


def _check(configs: dict[str, str]) -> Result | None:
    """ClientMetricsConfigs.validate of Kafka 4.4: the interval's range, then every match pattern
    (KEY=REGEX with a known key)."""
    if INTERVAL in configs:
        interval = int(configs[INTERVAL])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            return codes.INVALID_REQUEST, (f"Invalid value {interval} for interval.ms, interval must be between "
                                           f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    for pattern in filter(None, configs.get(MATCH, "").split(",")):
        parts = pattern.split("=")
        while parts and not parts[-1]:
            parts.pop()  # Java's String.split drops trailing empty strings
        legal = len(parts) == 2 and parts[0].strip() in MATCH_KEYS
        if legal:
            try:
                re.compile(parts[1].strip())
            except re.error:
                legal = False
        if not legal:
            return codes.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
    return None
