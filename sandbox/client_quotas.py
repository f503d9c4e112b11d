"""KIP-13 client quotas: the quota configs (per user, client-id, both, or their defaults), Kafka's
windowed byte rates and the throttle time a client over its quota gets.

Semantics follow Apache Kafka (broker-semantics.md §1): `ClientQuotaControlManager` validates
AlterClientQuotas, `ClientQuotasImage.describe` filters DescribeClientQuotas, and
`ClientQuotaManager.DefaultQuotaCallback` picks the most specific entity with a quota for the
quota's key (eight levels, user+client-id first, `clients/<default>` last). The entity that
matched decides which clients share one rate: a user-level quota is shared by all the user's
client ids, a client-id-level quota is per client id. Rates are Kafka's `Rate` over a
`SampledStat` of `quota.window.num` (11) samples of `quota.window.size.seconds` (1 s); the value
is recorded first, then compared with the bound, and the throttle is
`round((rate - bound) / bound * window)` with the same window the rate used (no cap).
All times are sandbox milliseconds, so throttles run on the sandbox clock.

Enforced: producer_byte_rate and consumer_byte_rate. Accepted, validated and described like
Kafka's but not enforced: request_percentage (KIP-124), controller_mutation_rate (KIP-599) and
the ip entity's connection_creation_rate (KIP-612). The consumer fetch is not capped at
`(quota.window.num - 1) x window x consumer_byte_rate` bytes as Kafka caps it.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.errors import InputError
from kreassign.cluster.units import parse_rate
from kreassign.sandbox.errors import QuotaRequestError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
# QuotaConfig.userAndClientQuotaConfigs / ipConfigs: key -> integral?
USER_CLIENT_KEYS: dict[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                                     "request_percentage": False, "controller_mutation_rate": False}
IP_KEYS: dict[str, bool] = {"connection_creation_rate": True}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, "str | None"], ...]
"""Entity type -> name (None is the type's default), as sorted pairs so it can key a dict."""


@dataclass(frozen=True)
class WindowConfig:
    """Kafka's quota.window.num and quota.window.size.seconds (in ms)."""

    samples: int = 11
    window_ms: int = 1000


@dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


@dataclass
class Rate:
    """Kafka's `Rate(WindowedSum)`: a ring of samples+1 windows summed over an elapsed window of
    at least samples-1 full windows (so a new client is not over its quota after one burst)."""

    config: WindowConfig = field(default_factory=WindowConfig)
    samples: list[_Sample] = field(default_factory=list)
    current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self.samples:
            self.samples.append(_Sample(now_ms, now_ms))
        sample = self.samples[self.current]
        if now_ms - sample.start_ms >= self.config.window_ms:
            self.current = (self.current + 1) % (self.config.samples + 1)
            if self.current >= len(self.samples):
                sample = _Sample(now_ms, now_ms)
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.config.samples * self.config.window_ms
        for s in self.samples:
            if now_ms - s.last_event_ms >= expire:
                s.reset(now_ms)

    def window_ms(self, now_ms: int) -> int:
        """`Rate.windowSize`: elapsed time since the oldest kept sample, padded to samples-1 windows."""
        self._purge(now_ms)
        if not self.samples:
            self.samples.append(_Sample(now_ms, now_ms))
        elapsed = now_ms - min(s.start_ms for s in self.samples)
        full = elapsed // self.config.window_ms
        if full < self.config.samples - 1:
            elapsed += (self.config.samples - 1 - full) * self.config.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self.samples)
        return total / (self.window_ms(now_ms) / 1000.0)


@dataclass
class Avg:
    """Kafka's `Avg` over the quota windows: the mean of the values recorded in the last
    `samples` windows (0 when none, where Kafka's JMX shows NaN)."""

    config: WindowConfig = field(default_factory=WindowConfig)
    events: list[tuple[int, float]] = field(default_factory=list)

    def record(self, value: float, now_ms: int) -> None:
        self.events.append((now_ms, value))
        self._purge(now_ms)

    def _purge(self, now_ms: int) -> None:
        horizon = now_ms - self.config.samples * self.config.window_ms
        self.events = [(t, v) for t, v in self.events if t > horizon]

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(v for _, v in self.events) / len(self.events) if self.events else 0.0


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """`QuotaUtils.throttleTime`: how long to stay silent to bring `rate` down to `bound`
    (Java's Math.round: halves round up)."""
    return int(math.floor((rate - bound) / bound * window_ms + 0.5))


def entity_of(entries: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(entries, key=lambda e: e[0]))


def _check_entity(entries: Sequence[tuple[str, str | None]]) -> dict[str, bool]:
    """The config keys (key -> integral) the entity accepts; raises QuotaRequestError as Kafka does."""
    if not entries:
        raise QuotaRequestError("Invalid empty client quota entity")
    seen: set[str] = set()
    for kind, name in entries:
        if kind in seen:
            raise QuotaRequestError(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise QuotaRequestError(f"Empty {kind} not supported")
        seen.add(kind)
    if IP in seen:
        if len(seen) > 1:
            raise QuotaRequestError("Invalid quota entity combination, IP entity should"
                                    "not be combined with User or ClientId")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _check_value(keys: Mapping[str, bool], key: str, value: float) -> None:
    if key not in keys:
        raise QuotaRequestError(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaRequestError(f"Quota {key} must be greater than 0")
    if keys[key] and abs(math.fmod(value, 1.0)) > 1e-6:
        raise QuotaRequestError(f"{key} cannot be a fractional value.")


class QuotaConfigs:
    """The client quota entities and their configs, as the controller keeps them."""

    def __init__(self) -> None:
        self.entities: dict[Entity, dict[str, float]] = {}

    def alter(self, entries: Sequence[tuple[str, str | None]], ops: Sequence[tuple[str, float | None]],
              *, validate_only: bool = False) -> None:
        """Set (value) or remove (None) each key of one entity, all or nothing.

        Raises:
            QuotaRequestError: Kafka's INVALID_REQUEST cases, with its messages.
        """
        keys = _check_entity(entries)
        changes: dict[str, float | None] = {}
        for key, value in ops:
            if key in changes:
                raise QuotaRequestError(f"Duplicate quota key {key} not updating quota for this entity")
            changes[key] = value
        for key, value in changes.items():
            if value is not None:
                _check_value(keys, key, value)
        if validate_only:
            return
        entity = entity_of(entries)
        current = self.entities.setdefault(entity, {})
        for key, value in changes.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = float(value)
        if not current:
            del self.entities[entity]

    def describe(self, components: Sequence[tuple[str, int, str | None]], *, strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching a DescribeClientQuotas filter of (type, match type, match).

        Raises:
            QuotaRequestError: a malformed filter (unsupported=True for an unknown entity type).
        """
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for kind, match_type, match in components:
            if not kind:
                raise QuotaRequestError("Invalid empty entity type.")
            if kind in exact or kind in typed:
                raise QuotaRequestError(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (USER, CLIENT_ID, IP):
                raise QuotaRequestError(f"Unsupported entity type {kind}", unsupported=True)
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaRequestError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaRequestError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaRequestError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                typed.add(kind)
            else:
                raise QuotaRequestError(f"Unknown match type {match_type}")
        kinds = set(exact) | typed
        if IP in kinds and kinds & {USER, CLIENT_ID}:
            raise QuotaRequestError("Invalid entity filter component combination. IP filter component should "
                                    "not be used with user or clientId filter component.")
        out = []
        for entity, values in self.entities.items():
            names = dict(entity)
            if strict and len(names) != len(kinds):
                continue
            if all(k in names and names[k] == v for k, v in exact.items()) and all(k in names for k in typed):
                out.append((entity, dict(values)))
        return out

    def match(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        """(metric tags (user, client-id) that say which rate the client shares, quota bound or None):
        the most specific of Kafka's eight entity levels that sets `key`."""
        def bound(*entries: tuple[str, str | None]) -> float | None:
            return self.entities.get(entity_of(entries), {}).get(key)

        levels: list[tuple[tuple[str, str], float | None]] = [
            ((user, client_id), bound((USER, user), (CLIENT_ID, client_id))),
            ((user, client_id), bound((USER, user), (CLIENT_ID, None))),
            ((user, ""), bound((USER, user),)),
            ((user, client_id), bound((USER, None), (CLIENT_ID, client_id))),
            ((user, client_id), bound((USER, None), (CLIENT_ID, None))),
            ((user, ""), bound((USER, None),)),
            (("", client_id), bound((CLIENT_ID, client_id),)),
            (("", client_id), bound((CLIENT_ID, None),)),
        ]
        for tags, value in levels:
            if value is not None:
                return tags, value
        return ("", client_id), None

    def enabled(self, key: str) -> bool:
        return any(key in values for values in self.entities.values())

    def to_json(self) -> list[dict[str, Any]]:
        return [{"entity": [[k, n] for k, n in entity], "values": values} for entity, values in self.entities.items()]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> QuotaConfigs:
        out = cls()
        for item in data:
            out.entities[entity_of((str(k), n) for k, n in item["entity"])] = {
                str(k): float(v) for k, v in item["values"].items()}
        return out


def parse_default_quota(text: str) -> tuple[str, int]:
    """`producer_byte_rate=1MB/s` -> ("producer_byte_rate", 1000000), for `sandbox start --client-quota`.

    Raises:
        InputError: not KEY=RATE, an unknown key, or a rate below 1 byte/s.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or key not in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE):
        raise InputError(f"'{text}' is not a client quota: use producer_byte_rate=RATE or consumer_byte_rate=RATE, "
                         "e.g. producer_byte_rate=1MB/s")
    rate = parse_rate(value)
    if rate < 1:
        raise InputError(f"'{text}': a client quota must be at least 1 byte/s")
    return key, rate


class ClientQuotaManager:
    """One broker's produce and fetch `ClientQuotaManager`s over the cluster's `QuotaConfigs` (a
    `ClientQuotaHook`). Each request's bytes are recorded, then checked; a fetch over its quota
    un-records them, because the broker answers it without data. Quotas are per broker, as in
    Kafka: a client writing to three leaders may move three times its quota in all."""

    def __init__(self, configs: QuotaConfigs | None = None, window: WindowConfig | None = None) -> None:
        self.configs = configs if configs is not None else QuotaConfigs()
        self.window = window if window is not None else WindowConfig()
        self.rates: dict[tuple[str, str, str], Rate] = {}
        # the `throttle-time` sensors (Avg of the throttles given, recorded as KafkaApis throttles)
        self.throttles: dict[tuple[str, str, str], Avg] = {}

    def _record(self, key: str, client_id: str, user: str, nbytes: float, now: float) -> tuple[int, Rate | None]:
        if not self.configs.enabled(key):
            return 0, None
        tags, bound = self.configs.match(key, user, client_id)
        rate = self.rates.setdefault((key, *tags), Rate(self.window))
        now_ms = int(round(now * 1000.0))
        rate.record(nbytes, now_ms)
        if bound is None:
            return 0, rate
        value = rate.measure(now_ms)
        if value <= bound:
            return 0, rate
        throttle = throttle_time_ms(value, bound, rate.window_ms(now_ms))
        if throttle > 0:
            self.throttles.setdefault((key, *tags), Avg(self.window)).record(throttle, now_ms)
        return throttle, rate

    def produce_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
        return self._record(PRODUCER_BYTE_RATE, client_id, user, nbytes, now)[0]

    def fetch_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
        throttle, rate = self._record(CONSUMER_BYTE_RATE, client_id, user, nbytes, now)
        if throttle > 0 and rate is not None:
            rate.record(-nbytes, int(round(now * 1000.0)))
        return throttle


class ClientQuotas:
    """The cluster's quota configs and each broker's quota manager."""

    def __init__(self, configs: QuotaConfigs | None = None, window: WindowConfig | None = None) -> None:
        self.configs = configs if configs is not None else QuotaConfigs()
        self.window = window if window is not None else WindowConfig()
        self.brokers: dict[int, ClientQuotaManager] = {}

    def set_default(self, key: str, rate: float) -> None:
        """`sandbox start --client-quota`: the `<default>` client-id quota (Kafka's level 8)."""
        self.configs.alter([(CLIENT_ID, None)], [(key, float(rate))])

    def for_broker(self, broker_id: int) -> ClientQuotaManager:
        manager = self.brokers.get(broker_id)
        if manager is None:
            manager = self.brokers[broker_id] = ClientQuotaManager(self.configs, self.window)
        return manager
