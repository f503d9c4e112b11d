"""Dynamic topic and broker configs with Kafka's describe, alter and validation rules.

Pure logic: the engine owns one `ConfigStore` and passes in what it knows (topic existence, the
receiving broker). Results are `(error_code, message)` pairs in Kafka's words (broker-semantics
§6.4), so the protocol layer only copies them into responses.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kreassign.sandbox import codes
from kreassign.sandbox.codes import AlterOp, ConfigSource, ConfigType

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
QUOTA_KEYS = (LEADER_RATE, FOLLOWER_RATE, ALTER_LOG_DIRS_RATE)
NUM_REPLICA_FETCHERS = "num.replica.fetchers"
TIME_SCALE_KEY = "kreassign.sandbox.time.scale"
"""Not a Kafka config: sandbox seconds per wall second, so that clients measuring rates against
their own clock can convert (`kreassign watch` reads it; real brokers never report it)."""

# LogConfig entries a topic describes (name -> type, default).
TOPIC_CONFIGS: dict[str, tuple[ConfigType, str]] = {
    "cleanup.policy": (ConfigType.LIST, "delete"),
    "compression.type": (ConfigType.STRING, "producer"),
    "delete.retention.ms": (ConfigType.LONG, "86400000"),
    "file.delete.delay.ms": (ConfigType.LONG, "60000"),
    FOLLOWER_REPLICAS: (ConfigType.LIST, ""),
    LEADER_REPLICAS: (ConfigType.LIST, ""),
    "max.message.bytes": (ConfigType.INT, "1048588"),
    "message.timestamp.type": (ConfigType.STRING, "CreateTime"),
    "min.insync.replicas": (ConfigType.INT, "1"),
    "retention.bytes": (ConfigType.LONG, "-1"),
    "retention.ms": (ConfigType.LONG, "604800000"),
    "segment.bytes": (ConfigType.INT, "1073741824"),
    "segment.ms": (ConfigType.LONG, "604800000"),
    "unclean.leader.election.enable": (ConfigType.BOOLEAN, "false"),
}

# Broker configs every broker reports (name -> type, value); the engine fills in the fields.
BROKER_STATIC: dict[str, tuple[ConfigType, str]] = {
    "auto.leader.rebalance.enable": (ConfigType.BOOLEAN, "true"),
    "broker.id": (ConfigType.INT, "{id}"),
    "log.dirs": (ConfigType.STRING, "{dir}"),
    "log.retention.hours": (ConfigType.INT, "168"),
    "message.max.bytes": (ConfigType.INT, "1048588"),
    "min.insync.replicas": (ConfigType.INT, "1"),
    "node.id": (ConfigType.INT, "{id}"),
    "num.io.threads": (ConfigType.INT, "8"),
    "num.network.threads": (ConfigType.INT, "3"),
    NUM_REPLICA_FETCHERS: (ConfigType.INT, "{fetchers}"),
    "process.roles": (ConfigType.LIST, "broker,controller"),
    "replica.fetch.max.bytes": (ConfigType.INT, "{fetch_max}"),
    "replica.fetch.response.max.bytes": (ConfigType.INT, "{response_max}"),
    "replica.lag.time.max.ms": (ConfigType.LONG, "30000"),
    "replication.quota.window.num": (ConfigType.INT, "11"),
    "replication.quota.window.size.seconds": (ConfigType.INT, "1"),
    "unclean.leader.election.enable": (ConfigType.BOOLEAN, "false"),
    TIME_SCALE_KEY: (ConfigType.DOUBLE, "{scale}"),
}
# Keys of BROKER_STATIC that DynamicBrokerConfig lets you change at run time.
BROKER_DYNAMIC = frozenset({
    "message.max.bytes", "min.insync.replicas", "num.io.threads", "num.network.threads",
    NUM_REPLICA_FETCHERS, "unclean.leader.election.enable", "log.retention.hours",
})

_THROTTLED_ITEM = re.compile(r"^([0-9]+:[0-9]+)?$")
_SPLIT = re.compile(r"\s*,\s*")

Result = tuple[int, str | None]
OK: Result = (codes.NONE, None)


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs result."""

    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    type: ConfigType
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True)
class ThrottledReplicas:
    """A parsed throttled-replicas list: everything (`*`) or a set of (partition, broker)."""

    everything: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    def covers(self, partition: int, broker: int) -> bool:
        return self.everything or (partition, broker) in self.pairs


def parse_list(value: str) -> list[str]:
    """Kafka's LIST parsing: trim, split on commas with surrounding whitespace; "" is empty."""
    trimmed = value.strip()
    return [] if not trimmed else _SPLIT.split(trimmed)


def parse_throttled(value: str | None) -> ThrottledReplicas:
    items = parse_list(value or "")
    if "".join(items) == "*":
        return ThrottledReplicas(everything=True)
    pairs = set()
    for item in items:
        if item:
            p, b = item.split(":")
            pairs.add((int(p), int(b)))
    return ThrottledReplicas(pairs=frozenset(pairs))


def _invalid_value(name: str, value: str, why: str) -> str:
    return f"Invalid value {value} for configuration {name}: {why}"


def check_value(name: str, value: str, kind: ConfigType) -> str | None:
    """Kafka's ConfigDef parse and validators; returns the error message or None."""
    text = value.strip()
    if name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        items = parse_list(text)
        if not (all(_THROTTLED_ITEM.match(i) for i in items) or "".join(items) == "*"):
            return _invalid_value(name, value, f"{name} must be the literal '*' or a list of replicas in the "
                                  "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
        return None
    if kind in (ConfigType.INT, ConfigType.LONG):
        try:
            number = int(text)
        except ValueError:
            return _invalid_value(name, value, f"Not a number of type {kind.name}")
        if name in QUOTA_KEYS and number < 0:
            return _invalid_value(name, value, "Value must be at least 0")
    if kind == ConfigType.BOOLEAN and text.lower() not in ("true", "false"):
        return _invalid_value(name, value, "Expected value to be either true or false")
    return None


def _render(name: str, value: str, kind: ConfigType) -> str:
    return ",".join(parse_list(value)) if kind == ConfigType.LIST else value.strip()


@dataclass
class ConfigStore:
    """Dynamic configs: per topic, per broker and the cluster-wide broker default ("")."""

    topic: dict[str, dict[str, str]] = field(default_factory=dict)
    broker: dict[int, dict[str, str]] = field(default_factory=dict)
    broker_default: dict[str, str] = field(default_factory=dict)

    # ---- effective values the engine reads ----------------------------------------
    def rate(self, broker_id: int, key: str) -> float:
        """A broker's effective replication rate in bytes/s (infinite when unset, like Long.MAX_VALUE)."""
        value = self.broker.get(broker_id, {}).get(key, self.broker_default.get(key))
        return float("inf") if value is None else float(int(value))

    def dynamic(self, broker_id: int, key: str) -> str | None:
        """A broker's dynamic value of `key` (its own, else the cluster default), None if unset."""
        return self.broker.get(broker_id, {}).get(key, self.broker_default.get(key))

    def throttled(self, topic: str, key: str) -> ThrottledReplicas:
        return parse_throttled(self.topic.get(topic, {}).get(key))

    # ---- describe -------------------------------------------------------------------
    def describe_topic(self, topic: str, keys: Sequence[str] | None) -> list[ConfigEntry]:
        overrides = self.topic.get(topic, {})
        out = []
        for name, (kind, default) in TOPIC_CONFIGS.items():
            if keys is not None and name not in keys:
                continue
            layers = []
            if name in overrides:
                layers.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            layers.append((name, default, ConfigSource.DEFAULT_CONFIG))
            out.append(ConfigEntry(name, layers[0][1], False, layers[0][2], kind, tuple(layers)))
        return out

    def describe_broker(self, broker_id: int, static: Mapping[str, str], keys: Sequence[str] | None) -> list[ConfigEntry]:
        """Every static entry plus the dynamic ones; quota keys appear only once set."""
        own = self.broker.get(broker_id, {})
        names = sorted(set(static) | set(own) | set(self.broker_default))
        out = []
        for name in names:
            if keys is not None and name not in keys:
                continue
            layers: list[tuple[str, str | None, ConfigSource]] = []
            if name in own:
                layers.append((name, own[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
            if name in self.broker_default:
                layers.append((name, self.broker_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
            if name in static:
                layers.append((name, static[name], ConfigSource.STATIC_BROKER_CONFIG))
            kind = _broker_type(name)
            out.append(ConfigEntry(name, layers[0][1], _read_only(name), layers[0][2], kind, tuple(layers)))
        return out

    def describe_broker_default(self, keys: Sequence[str] | None) -> list[ConfigEntry]:
        out = []
        for name, value in sorted(self.broker_default.items()):
            if keys is None or name in keys:
                src = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                out.append(ConfigEntry(name, value, _read_only(name), src, _broker_type(name),
                                       ((name, value, src),)))
        return out

    # ---- alter ------------------------------------------------------------------------
    def incremental_alter_topic(self, topic: str, ops: Iterable[tuple[str, int, str | None]],
                                validate_only: bool) -> Result:
        """Apply SET/DELETE/APPEND/SUBTRACT atomically to one topic (the topic must exist)."""
        current = dict(self.topic.get(topic, {}))
        for name, op, value in ops:
            if name not in TOPIC_CONFIGS:
                return codes.INVALID_CONFIG, f"Unknown topic config name: {name}"
            kind = TOPIC_CONFIGS[name][0]
            err = _apply_op(current, name, op, value, kind)
            if err is not None:
                return err
        for name, value in current.items():
            msg = check_value(name, value, TOPIC_CONFIGS[name][0])
            if msg:
                return codes.INVALID_CONFIG, msg
        if not validate_only:
            self.topic[topic] = {k: _render(k, v, TOPIC_CONFIGS[k][0]) for k, v in current.items()}
        return OK

    def incremental_alter_broker(self, broker_id: int | None, static_keys: Iterable[str],
                                 ops: Iterable[tuple[str, int, str | None]], validate_only: bool) -> Result:
        """Alter one broker's dynamic configs (`broker_id` None = the cluster default)."""
        static = set(static_keys)
        target = self.broker_default if broker_id is None else self.broker.get(broker_id, {})
        current = dict(target)
        for name, op, value in ops:
            known_list = _broker_type(name) == ConfigType.LIST and (name in static)
            if op in (AlterOp.APPEND, AlterOp.SUBTRACT) and not known_list:
                if name not in static:
                    return codes.INVALID_CONFIG, f"Unknown config name: {name}"
                return codes.INVALID_CONFIG, f"Can't {AlterOp(op).name} to key {name} because its type is not LIST."
            err = _apply_op(current, name, op, value, _broker_type(name))
            if err is not None:
                return err
        return self._commit_broker(broker_id, static, current, validate_only)

    def alter_topic(self, topic: str, entries: Iterable[tuple[str, str | None]], validate_only: bool) -> Result:
        """Legacy AlterConfigs: the given entries replace every override of the topic."""
        new = {}
        for name, value in entries:
            if name not in TOPIC_CONFIGS:
                return codes.INVALID_CONFIG, f"Unknown topic config name: {name}"
            if value is None:
                return codes.INVALID_REQUEST, f"Null value not supported for : {name}"
            msg = check_value(name, value, TOPIC_CONFIGS[name][0])
            if msg:
                return codes.INVALID_CONFIG, msg
            new[name] = _render(name, value, TOPIC_CONFIGS[name][0])
        if not validate_only:
            self.topic[topic] = new
        return OK

    def alter_broker(self, broker_id: int | None, static_keys: Iterable[str],
                     entries: Iterable[tuple[str, str | None]], validate_only: bool) -> Result:
        new = {}
        for name, value in entries:
            if value is None:
                return codes.INVALID_REQUEST, f"Null value not supported for : {name}"
            new[name] = value
        return self._commit_broker(broker_id, set(static_keys), new, validate_only)

    def _commit_broker(self, broker_id: int | None, static: set[str], new: dict[str, str],
                       validate_only: bool) -> Result:
        frozen = sorted(k for k in new if k in static and k not in BROKER_DYNAMIC)
        if frozen:
            return codes.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(frozen)})"
        for name, value in new.items():
            msg = check_value(name, value, _broker_type(name))
            if msg:
                return codes.INVALID_REQUEST, msg
        if not validate_only:
            rendered = {k: _render(k, v, _broker_type(k)) for k, v in new.items()}
            if broker_id is None:
                self.broker_default = rendered
            elif rendered:
                self.broker[broker_id] = rendered
            else:
                self.broker.pop(broker_id, None)
        return OK

    def to_json(self) -> dict[str, object]:
        return {"topic": self.topic, "broker": {str(k): v for k, v in self.broker.items()},
                "broker_default": self.broker_default}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ConfigStore:
        broker = data.get("broker", {})
        assert isinstance(broker, dict)
        return cls(topic={k: dict(v) for k, v in dict(data.get("topic", {})).items()},  # type: ignore[call-overload]
                   broker={int(k): dict(v) for k, v in broker.items()},
                   broker_default=dict(data.get("broker_default", {})))  # type: ignore[call-overload]


def _read_only(name: str) -> bool:
    """DescribeConfigs' read_only of a broker key: false for the keys a broker takes at run time,
    the replication quota rates among them (Kafka 4.4 reports them so; the quota rates appear
    only once set)."""
    return name not in BROKER_DYNAMIC and name not in QUOTA_KEYS


def _broker_type(name: str) -> ConfigType:
    if name in QUOTA_KEYS:
        return ConfigType.LONG
    return BROKER_STATIC.get(name, (ConfigType.STRING, ""))[0]


def _apply_op(current: dict[str, str], name: str, op: int, value: str | None, kind: ConfigType) -> Result | None:
    if op not in (AlterOp.SET, AlterOp.DELETE, AlterOp.APPEND, AlterOp.SUBTRACT):
        return codes.INVALID_REQUEST, f"Unknown operation type {op}"
    if op != AlterOp.DELETE and value is None:
        return codes.INVALID_REQUEST, f"Null value not supported for : {name}"
    if op == AlterOp.SET:
        current[name] = value  # type: ignore[assignment]
    elif op == AlterOp.DELETE:
        current.pop(name, None)
    else:
        if kind != ConfigType.LIST:
            return codes.INVALID_CONFIG, f"Can't {AlterOp(op).name} to key {name} because its type is not LIST."
        items = parse_list(current.get(name, TOPIC_CONFIGS.get(name, (kind, ""))[1]))
        for item in (value or "").split(","):
            if op == AlterOp.APPEND and item not in items:
                items.append(item)
            elif op == AlterOp.SUBTRACT and item in items:
                items.remove(item)
        current[name] = ",".join(items)
    return None
