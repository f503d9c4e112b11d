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
from kreassign.sandbox.kafka_profiles import DEFAULT_PROFILE, KafkaProfile

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

# LogConfig entries a topic describes: name -> (type, default, the broker config it falls back to).
# DescribeConfigs lists that broker config's values as the entry's synonyms; Kafka shows none for
# retention.ms and segment.ms (their broker synonyms have no default) and the throttled-replica lists.
TOPIC_CONFIGS: dict[str, tuple[ConfigType, str, str | None]] = {
    "cleanup.policy": (ConfigType.LIST, "delete", "log.cleanup.policy"),
    "compression.type": (ConfigType.STRING, "producer", "compression.type"),
    "delete.retention.ms": (ConfigType.LONG, "86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": (ConfigType.LONG, "60000", "log.segment.delete.delay.ms"),
    FOLLOWER_REPLICAS: (ConfigType.LIST, "", None),
    LEADER_REPLICAS: (ConfigType.LIST, "", None),
    "max.message.bytes": (ConfigType.INT, "1048588", "message.max.bytes"),
    "message.timestamp.type": (ConfigType.STRING, "CreateTime", "log.message.timestamp.type"),
    "min.insync.replicas": (ConfigType.INT, "1", "min.insync.replicas"),
    "retention.bytes": (ConfigType.LONG, "-1", "log.retention.bytes"),
    "retention.ms": (ConfigType.LONG, "604800000", None),
    "segment.bytes": (ConfigType.INT, "1073741824", "log.segment.bytes"),
    "segment.ms": (ConfigType.LONG, "604800000", None),
    "unclean.leader.election.enable": (ConfigType.BOOLEAN, "false", "unclean.leader.election.enable"),
}


@dataclass(frozen=True)
class BrokerConfig:
    """A KafkaConfig key the emulated brokers describe."""

    type: ConfigType
    default: str | None
    """Kafka's default (None: no default)"""
    dynamic: bool = False
    """DynamicBrokerConfig may change it at run time (DescribeConfigs: read_only false)"""


# Broker configs every broker describes. Their values come from the emulated broker's
# server.properties (`Engine.static_broker_configs`), else Kafka's default.
BROKER_CONFIGS: dict[str, BrokerConfig] = {
    "auto.leader.rebalance.enable": BrokerConfig(ConfigType.BOOLEAN, "true"),
    "broker.id": BrokerConfig(ConfigType.INT, "-1"),
    "broker.rack": BrokerConfig(ConfigType.STRING, None),
    "log.dirs": BrokerConfig(ConfigType.LIST, None),
    "log.retention.hours": BrokerConfig(ConfigType.INT, "168"),
    "message.max.bytes": BrokerConfig(ConfigType.INT, "1048588", dynamic=True),
    "min.insync.replicas": BrokerConfig(ConfigType.INT, "1", dynamic=True),
    "node.id": BrokerConfig(ConfigType.INT, None),
    "num.io.threads": BrokerConfig(ConfigType.INT, "8", dynamic=True),
    "num.network.threads": BrokerConfig(ConfigType.INT, "3", dynamic=True),
    NUM_REPLICA_FETCHERS: BrokerConfig(ConfigType.INT, "1", dynamic=True),
    "process.roles": BrokerConfig(ConfigType.LIST, None),
    "replica.fetch.max.bytes": BrokerConfig(ConfigType.INT, "1048576"),
    "replica.fetch.response.max.bytes": BrokerConfig(ConfigType.INT, "10485760"),
    "replica.lag.time.max.ms": BrokerConfig(ConfigType.LONG, "30000"),
    "replication.quota.window.num": BrokerConfig(ConfigType.INT, "11"),
    "replication.quota.window.size.seconds": BrokerConfig(ConfigType.INT, "1"),
    "unclean.leader.election.enable": BrokerConfig(ConfigType.BOOLEAN, "false", dynamic=True),
    TIME_SCALE_KEY: BrokerConfig(ConfigType.DOUBLE, None),
}
# Kafka 3.9 still had defaults for the two settings 4.0 made mandatory, and called log.dirs a STRING.
_BROKER_CONFIGS_3_9 = {"node.id": BrokerConfig(ConfigType.INT, "-1"),
                       "process.roles": BrokerConfig(ConfigType.LIST, ""),
                       "log.dirs": BrokerConfig(ConfigType.STRING, None)}


def broker_config(name: str, kafka: KafkaProfile = DEFAULT_PROFILE) -> BrokerConfig | None:
    """The KafkaConfig key `name` as the imitated release knows it (None: not a key the emulator models)."""
    if kafka.broker_id_defaults and name in _BROKER_CONFIGS_3_9:
        return _BROKER_CONFIGS_3_9[name]
    return BROKER_CONFIGS.get(name)


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
    sensitive: bool = False

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


def _invalid_value(name: str, value: str, why: str, kind: ConfigType | None = None) -> str:
    """ConfigException's text; a LIST value is shown as Java prints the parsed list ([a, b])."""
    shown = f"[{', '.join(parse_list(value))}]" if kind == ConfigType.LIST else value
    return f"Invalid value {shown} for configuration {name}: {why}"


def check_value(name: str, value: str, kind: ConfigType) -> str | None:
    """Kafka's ConfigDef parse and validators; returns the error message or None."""
    text = value.strip()
    if name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        items = parse_list(text)
        if not (all(_THROTTLED_ITEM.match(i) for i in items) or "".join(items) == "*"):
            return _invalid_value(name, value, f"{name} must be the literal '*' or a list of replicas in the "
                                  "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                                  ConfigType.LIST)
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
    kafka: KafkaProfile = field(default=DEFAULT_PROFILE, compare=False)
    """the imitated release (read-only flags and message texts that changed between releases)"""

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
    def _broker_layers(self, broker_id: int | None, static: Mapping[str, str], name: str,
                       default: str | None) -> list[tuple[str, str | None, ConfigSource]]:
        """The values of a broker config from the most to the least specific: the broker's own
        dynamic value, the cluster default, server.properties, Kafka's default."""
        layers: list[tuple[str, str | None, ConfigSource]] = []
        own = self.broker.get(broker_id, {}) if broker_id is not None else {}
        if name in own:
            layers.append((name, own[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in self.broker_default:
            layers.append((name, self.broker_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in static:
            layers.append((name, static[name], ConfigSource.STATIC_BROKER_CONFIG))
        if default is not None:
            layers.append((name, default, ConfigSource.DEFAULT_CONFIG))
        return layers

    def describe_topic(self, topic: str, keys: Sequence[str] | None, broker_id: int | None = None
                       ) -> list[ConfigEntry]:
        """A topic's configs as `broker_id` describes them: the topic's override, else the broker
        config it falls back to, whose values are the synonyms."""
        overrides = self.topic.get(topic, {})
        out = []
        for name, (kind, default, synonym) in TOPIC_CONFIGS.items():
            if keys is not None and name not in keys:
                continue
            layers: list[tuple[str, str | None, ConfigSource]] = []
            if name in overrides:
                layers.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            if synonym is not None:
                layers += self._broker_layers(broker_id, {}, synonym, default)
            value, source = (layers[0][1], layers[0][2]) if layers else (default, ConfigSource.DEFAULT_CONFIG)
            out.append(ConfigEntry(name, value, False, source, kind, tuple(layers)))
        return out

    def describe_broker(self, broker_id: int | None, static: Mapping[str, str],
                        keys: Sequence[str] | None) -> list[ConfigEntry]:
        """A broker's configs (`broker_id` None: the cluster default resource, which lists only
        the dynamic defaults). The throttle rates appear only once set. A key Kafka does not know
        is reported as sensitive, its value hidden (DynamicBrokerConfig cannot tell what it is)."""
        own = self.broker.get(broker_id, {}) if broker_id is not None else {}
        if broker_id is None:
            names = sorted(self.broker_default)
        else:
            names = sorted(set(BROKER_CONFIGS) | set(static) | set(own) | set(self.broker_default))
        out = []
        for name in names:
            if keys is not None and name not in keys:
                continue
            known = broker_config(name, self.kafka)
            layers = self._broker_layers(broker_id, static if broker_id is not None else {}, name,
                                         known.default if known is not None and broker_id is not None else None)
            if known is None and name not in QUOTA_KEYS:
                hidden = tuple((n, None, src) for n, _, src in layers)
                out.append(ConfigEntry(name, None, True, layers[0][2], ConfigType.UNKNOWN, hidden, sensitive=True))
                continue
            value, source = (layers[0][1], layers[0][2]) if layers else (None, ConfigSource.DEFAULT_CONFIG)
            out.append(ConfigEntry(name, value, not self._dynamic(name), source, _broker_type(name, self.kafka),
                                   tuple(layers)))
        return out

    def _dynamic(self, name: str) -> bool:
        if name in QUOTA_KEYS:
            return not self.kafka.throttle_rates_read_only
        known = broker_config(name, self.kafka)
        return known is not None and known.dynamic

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

    def incremental_alter_broker(self, broker_id: int | None, ops: Iterable[tuple[str, int, str | None]],
                                 validate_only: bool) -> Result:
        """Alter one broker's dynamic configs (`broker_id` None = the cluster default)."""
        target = self.broker_default if broker_id is None else self.broker.get(broker_id, {})
        current = dict(target)
        for name, op, value in ops:
            kind = _broker_type(name, self.kafka)
            known = broker_config(name, self.kafka) is not None
            if op in (AlterOp.APPEND, AlterOp.SUBTRACT) and not (known and kind == ConfigType.LIST):
                if not known:
                    if not self.kafka.unknown_list_op_error:
                        return codes.UNKNOWN_SERVER_ERROR, None
                    return codes.INVALID_CONFIG, f"Unknown config name: {name}"
                return codes.INVALID_CONFIG, f"Can't {AlterOp(op).name} to key {name} because its type is not LIST."
            err = _apply_op(current, name, op, value, kind)
            if err is not None:
                return err
        return self._commit_broker(broker_id, current, validate_only)

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

    def alter_broker(self, broker_id: int | None, entries: Iterable[tuple[str, str | None]],
                     validate_only: bool) -> Result:
        new = {}
        for name, value in entries:
            if value is None:
                return codes.INVALID_REQUEST, f"Null value not supported for : {name}"
            new[name] = value
        return self._commit_broker(broker_id, new, validate_only)

    def _commit_broker(self, broker_id: int | None, new: dict[str, str], validate_only: bool) -> Result:
        frozen = sorted(k for k in new if broker_config(k, self.kafka) is not None and not self._dynamic(k))
        if frozen:
            keys = f"[{', '.join(frozen)}]" if self.kafka.java_messages else f"Set({', '.join(frozen)})"
            return codes.INVALID_REQUEST, f"Cannot update these configs dynamically: {keys}"
        for name, value in new.items():
            msg = check_value(name, value, _broker_type(name, self.kafka))
            if msg:
                return codes.INVALID_REQUEST, msg
        if not validate_only:
            rendered = {k: _render(k, v, _broker_type(k, self.kafka)) for k, v in new.items()}
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


def _broker_type(name: str, kafka: KafkaProfile = DEFAULT_PROFILE) -> ConfigType:
    if name in QUOTA_KEYS:
        return ConfigType.LONG
    known = broker_config(name, kafka)
    return known.type if known is not None else ConfigType.STRING


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
