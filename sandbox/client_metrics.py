"""KIP-714 client-metrics subscriptions (config resource type CLIENT_METRICS): named resources
with `metrics` (name prefixes), `interval.ms` and `match`, validated as Kafka's
ClientMetricsConfigs does, for DescribeConfigs, IncrementalAlterConfigs and ListConfigResources.
Only the configs: the sandbox does not serve the telemetry APIs (71, 72)."""
from __future__ import annotations

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
                for k in (METRICS, INTERVAL, MATCH) if keys is None or k in keys]

    def alter(self, name: str, ops: Iterable[tuple[str, int, str | None]], validate_only: bool) -> Result:
        if not name:
            return codes.INVALID_REQUEST, "Subscription name can't be empty"
        current = dict(self.subscriptions.get(name, {}))
        for key, op, value in ops:
            if key not in DEFAULTS:
                return codes.INVALID_CONFIG, f"Unknown client metrics configuration: {key}"
            if op == AlterOp.SET and value is not None:
                current[key] = value
            elif op == AlterOp.DELETE:
                current.pop(key, None)
            else:
                return codes.INVALID_REQUEST, f"Unsupported operation {op} for {key}"
        problem = _check(current)
        if problem:
            return codes.INVALID_CONFIG, problem
        if not validate_only:
            if current:
                self.subscriptions[name] = current
            else:
                self.subscriptions.pop(name, None)
        return codes.NONE, None


def _check(configs: dict[str, str]) -> str | None:
    if INTERVAL in configs:
        try:
            interval = int(configs[INTERVAL])
        except ValueError:
            return f"Invalid value {configs[INTERVAL]} for configuration {INTERVAL}: Not a number of type INT"
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            return (f"Invalid value {interval} for interval.ms, interval must be between "
                    f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    for pattern in filter(None, (p.strip() for p in configs.get(MATCH, "").split(","))):
        key, sep, value = pattern.partition("=")
        if not sep or not value:
            return f"Illegal client matching pattern: {pattern}"
        if key.strip() not in MATCH_KEYS:
            return f"Invalid match key: {key.strip()}"
    return None
