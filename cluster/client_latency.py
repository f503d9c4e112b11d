"""What clients experience, as numbers: per-broker latency percentiles from individual requests
(a canary's produce acks=all round trips, end-to-end delays, KIP-13 throttle times, KIP-19
timeouts), and the impact of a move as a ratio to a baseline measured before it. Pure."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kreassign.cluster.errors import InputError

CANARY_ROUNDS = 20
"""records the canary sends to every partition, by default (here, not in `canary`, so that the
command line can show the defaults without loading the clients)"""
CANARY_INTERVAL_S = 0.5
"""cluster seconds between the canary's rounds, by default"""


@dataclass(frozen=True)
class LatencySample:
    """One canary request to the partition `broker` leads; `produce_ms` None: it timed out."""

    broker: int
    produce_ms: float | None
    end_to_end_ms: float | None = None
    throttle_ms: float = 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 1]) of the values; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


@dataclass(frozen=True)
class BrokerLatency:
    """One broker's requests over a window."""

    broker: int
    requests: int
    timeouts: int
    p50_ms: float | None
    p99_ms: float | None
    end_to_end_p99_ms: float | None
    throttle_max_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "requests": self.requests, "timeouts": self.timeouts, "p50_ms": self.p50_ms,
                "p99_ms": self.p99_ms, "end_to_end_p99_ms": self.end_to_end_p99_ms,
                "throttle_max_ms": self.throttle_max_ms}


def read_canary(text: str, name: str) -> tuple[BrokerLatency, ...]:
    """The brokers of a `kreassign canary -o json` document (a baseline), from its text.

    Raises:
        InputError: the text is not such a document.
    """
    try:
        doc = json.loads(text)
        return tuple(BrokerLatency(int(b["broker"]), int(b["requests"]), int(b["timeouts"]), b.get("p50_ms"),
                                   b.get("p99_ms"), b.get("end_to_end_p99_ms"), float(b.get("throttle_max_ms", 0)))
                     for b in doc["brokers"])
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{name} is not the JSON of `kreassign canary -o json`") from None


def summarize(samples: Iterable[LatencySample]) -> dict[int, BrokerLatency]:
    """Per broker: request count, timeouts, produce p50/p99, end-to-end p99, largest throttle."""
    by: dict[int, list[LatencySample]] = {}
    for s in samples:
        by.setdefault(s.broker, []).append(s)
    out = {}
    for b, items in sorted(by.items()):
        done = [s.produce_ms for s in items if s.produce_ms is not None]
        e2e = [s.end_to_end_ms for s in items if s.end_to_end_ms is not None]
        out[b] = BrokerLatency(b, len(items), len(items) - len(done), percentile(done, 0.5), percentile(done, 0.99),
                               percentile(e2e, 0.99), max((s.throttle_ms for s in items), default=0.0))
    return out


@dataclass(frozen=True)
class Impact:
    """How much worse a broker's clients fare than at the baseline: p99 now / p99 before - 1
    (0.2 = 20% slower), and whether they were throttled or timed out, which counts as over any
    bound."""

    broker: int
    p99_increase: float | None
    throttled: bool
    timeouts: int

    @property
    def over_everything(self) -> bool:
        return self.throttled or self.timeouts > 0

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "p99_increase": self.p99_increase, "throttled": self.throttled,
                "timeouts": self.timeouts}


def impact(baseline: Iterable[BrokerLatency], now: Mapping[int, BrokerLatency]) -> dict[int, Impact]:
    """Per broker with a baseline p99 and a p99 now, the impact."""
    before = {b.broker: b.p99_ms for b in baseline if b.p99_ms}
    out = {}
    for b, lat in sorted(now.items()):
        base = before.get(b)
        rise = None if base is None or base <= 0 or lat.p99_ms is None else lat.p99_ms / base - 1.0
        out[b] = Impact(b, rise, lat.throttle_max_ms > 0, lat.timeouts)
    return out


def idle_round_trip_ms(baseline: Iterable[BrokerLatency]) -> float | None:
    """The idle acks=all round trip a canary baseline shows: the median of the brokers' produce
    p50 (a produce waits for one follower fetch cycle), for the simulator's client model."""
    values = sorted(b.p50_ms for b in baseline if b.p50_ms is not None and b.p50_ms > 0)
    return percentile(values, 0.5)


def worst(impacts: Mapping[int, Impact]) -> float | None:
    """The largest impact over the brokers (inf when clients were throttled or timed out); None
    when nothing is measured."""
    values = [math.inf if i.over_everything else i.p99_increase for i in impacts.values()
              if i.over_everything or i.p99_increase is not None]
    return max(values) if values else None  # type: ignore[type-var]
