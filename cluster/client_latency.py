"""What clients experience, as numbers: per-broker latency percentiles from individual requests
(a canary's produce acks=all round trips, end-to-end delays, KIP-13 throttle times, KIP-19
timeouts), and the impact of a move as a ratio to a baseline measured before it. Pure.

A p99 from a few dozen requests is noise (the largest of 20 samples swings by a factor of
several between two idle runs), so every p99 comes with its distribution-free confidence
interval (order statistics, exact binomial), and a rise counts as impact only when the requests
measured now exceed the baseline's p99 more often than chance allows (`exceeds_baseline`)."""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.errors import InputError

CONFIDENCE = 0.95
"""of every latency interval reported"""
IMPACT_ALPHA = 0.01
"""the chance, per broker and measurement, that an unchanged cluster is reported as impacted"""
P99_BOUNDED_AT = 368
"""the fewest requests whose order statistics bound a p99 from above at CONFIDENCE (the largest of
n samples is below the true p99 with probability 0.99**n: n >= 368 makes that <= 2.5%)"""
TAIL_Q = 0.9
"""the baseline's tail, by its empirical p90: a rise counts when more requests now exceed it than
the baseline's own sample makes likely (a tail any slowdown of the slowest tenth moves, measured
well by a few dozen requests)"""
CANARY_ROUNDS = 100
"""records the canary sends to every partition, by default: a p90 known well enough to judge an
impact by, in seconds (--rounds 368 or more bound the p99 on both sides; here, not in `canary`,
so that the command line can show the defaults without loading the clients)"""
CANARY_INTERVAL_S = 0.02
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


def _binomial_cdf(n: int, p: float) -> list[float]:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, p), by the pmf's recurrence in log space (no
    overflow for thousands of samples)."""
    if p <= 0.0 or p >= 1.0:
        return [1.0 if (p <= 0.0 or k == n) else 0.0 for k in range(n + 1)]
    log_pmf = n * math.log1p(-p)
    step = math.log(p) - math.log1p(-p)
    out, total = [], 0.0
    for k in range(n + 1):
        total += math.exp(log_pmf)
        out.append(min(total, 1.0))
        if k < n:  # pmf(k + 1) / pmf(k) = (n - k) / (k + 1) * p / (1 - p)
            log_pmf += math.log(n - k) - math.log(k + 1) + step
    return out


def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (lo, hi) of the order statistics X(lo) <= X(hi) of n samples that hold the
    distribution's q-quantile between them with probability >= `confidence`, whatever the
    distribution: the count of samples below the quantile is Binomial(n, q), and each tail is
    given at most half of the rest. None where n samples cannot bound that side."""
    if n <= 0:
        return None, None
    tail = (1.0 - confidence) / 2.0
    cdf = _binomial_cdf(n, q)
    # P(X(lo) > quantile) = P(B <= lo - 1): the largest lo with that <= tail
    lo = max((k + 1 for k in range(n) if cdf[k] <= tail), default=None)
    # P(X(hi) < quantile) = P(B >= hi) = 1 - P(B <= hi - 1): the smallest hi with that <= tail
    hi = next((k + 1 for k in range(n) if 1.0 - cdf[k] <= tail), None)
    return lo, hi


def quantile_interval(values: Sequence[float], q: float, confidence: float = CONFIDENCE
                      ) -> tuple[float | None, float | None]:
    """The `confidence` interval of the q-quantile the values were drawn from: (low, high), None
    where too few values bound that side (low None: 0 is all that is known)."""
    ordered = sorted(values)
    lo, hi = quantile_ranks(len(ordered), q, confidence)
    return (None if lo is None else ordered[lo - 1], None if hi is None else ordered[hi - 1])


def exceeds_baseline(values: Sequence[float], threshold: float, baseline_count: int, q: float = TAIL_Q,
                     alpha: float = IMPACT_ALPHA) -> bool:
    """Whether more of `values` exceed `threshold`, the empirical q-quantile (rank ceil(q n)) of
    a baseline of `baseline_count` requests, than an unchanged distribution gives with
    probability `alpha`. Distribution-free and exact: under no change, the count above the k-th
    of n baseline values among m new ones is Beta-Binomial(m, n - k + 1, k)."""
    m = len(values)
    above = sum(1 for v in values if v > threshold)
    if m == 0 or baseline_count <= 0 or above == 0:
        return False
    k = max(math.ceil(q * baseline_count), 1)
    return _beta_binomial_tail(m, baseline_count - k + 1, k, above) < alpha


def _beta_binomial_tail(m: int, a: int, b: int, at_least: int) -> float:
    """P(M >= at_least) for M ~ Beta-Binomial(m, a, b)."""
    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    base = log_beta(a, b)
    return min(sum(math.exp(math.lgamma(m + 1) - math.lgamma(j + 1) - math.lgamma(m - j + 1)
                            + log_beta(j + a, m - j + b) - base) for j in range(at_least, m + 1)), 1.0)


@dataclass(frozen=True)
class BrokerLatency:
    """One broker's requests over a window. `p99_low_ms`/`p99_high_ms`: the CONFIDENCE interval
    of the produce p99 (None: too few requests bound that side)."""

    broker: int
    requests: int
    timeouts: int
    p50_ms: float | None
    p99_ms: float | None
    end_to_end_p99_ms: float | None
    throttle_max_ms: float
    p99_low_ms: float | None = None
    p99_high_ms: float | None = None
    tail_ms: float | None = None
    """the TAIL_Q empirical quantile of the acknowledged requests (the impact test's threshold)"""
    produce_ms: tuple[float, ...] = field(default=(), repr=False, compare=False)
    """the acknowledged requests' latencies (for the impact test; not written to JSON)"""

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "requests": self.requests, "timeouts": self.timeouts, "p50_ms": self.p50_ms,
                "p99_ms": self.p99_ms, "p99_interval_ms": [self.p99_low_ms, self.p99_high_ms],
                "tail_ms": self.tail_ms,
                "end_to_end_p99_ms": self.end_to_end_p99_ms, "throttle_max_ms": self.throttle_max_ms}


def read_canary(text: str, name: str) -> tuple[BrokerLatency, ...]:
    """The brokers of a `kreassign canary -o json` document (a baseline), from its text. A
    document without p99 intervals (written before they were) bounds nothing.

    Raises:
        InputError: the text is not such a document.
    """
    try:
        doc = json.loads(text)
        out = []
        for b in doc["brokers"]:
            low, high = b.get("p99_interval_ms") or (None, None)
            out.append(BrokerLatency(int(b["broker"]), int(b["requests"]), int(b["timeouts"]), b.get("p50_ms"),
                                     b.get("p99_ms"), b.get("end_to_end_p99_ms"), float(b.get("throttle_max_ms", 0)),
                                     None if low is None else float(low), None if high is None else float(high),
                                     None if b.get("tail_ms") is None else float(b["tail_ms"])))
        return tuple(out)
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{name} is not the JSON of `kreassign canary -o json`") from None


def summarize(samples: Iterable[LatencySample]) -> dict[int, BrokerLatency]:
    """Per broker: request count, timeouts, produce p50/p99 (with the p99's interval), end-to-end
    p99, largest throttle."""
    by: dict[int, list[LatencySample]] = {}
    for s in samples:
        by.setdefault(s.broker, []).append(s)
    out = {}
    for b, items in sorted(by.items()):
        done = sorted(s.produce_ms for s in items if s.produce_ms is not None)
        e2e = [s.end_to_end_ms for s in items if s.end_to_end_ms is not None]
        low, high = quantile_interval(done, 0.99)
        out[b] = BrokerLatency(b, len(items), len(items) - len(done), percentile(done, 0.5), percentile(done, 0.99),
                               percentile(e2e, 0.99), max((s.throttle_ms for s in items), default=0.0),
                               low, high, percentile(done, TAIL_Q), tuple(done))
    return out


@dataclass(frozen=True)
class Impact:
    """How much worse a broker's clients fare than at the baseline.

    `p99_increase`: p99 now / p99 before - 1 (0.2 = 20% slower) when the requests measured now
    exceed the baseline's p99 bound more often than chance allows; 0.0 when the difference is
    within the noise of the two samples (`measured_increase` keeps the raw ratio); None when
    there is nothing to compare. Throttled requests or timeouts count as over any bound."""

    broker: int
    p99_increase: float | None
    throttled: bool
    timeouts: int
    measured_increase: float | None = None
    within_noise: bool = False

    @property
    def over_everything(self) -> bool:
        return self.throttled or self.timeouts > 0

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "p99_increase": self.p99_increase, "measured_increase": self.measured_increase,
                "within_noise": self.within_noise, "throttled": self.throttled, "timeouts": self.timeouts}


def impact(baseline: Iterable[BrokerLatency], now: Mapping[int, BrokerLatency]) -> dict[int, Impact]:
    """Per broker with a baseline p99 and a p99 now, the impact: the rise counts when more of the
    requests now lie above the baseline's tail (its p90) than chance allows (`exceeds_baseline`).
    A baseline without its tail (a document written before it was) tells nothing from noise:
    the raw ratio is reported as it is."""
    before = {b.broker: b for b in baseline if b.p99_ms}
    out = {}
    for b, lat in sorted(now.items()):
        base = before.get(b)
        if base is None or base.p99_ms is None or base.p99_ms <= 0 or lat.p99_ms is None:
            out[b] = Impact(b, None, lat.throttle_max_ms > 0, lat.timeouts)
            continue
        rise = lat.p99_ms / base.p99_ms - 1.0
        if base.tail_ms is None or not lat.produce_ms:
            out[b] = Impact(b, rise, lat.throttle_max_ms > 0, lat.timeouts, rise)
            continue
        if not exceeds_baseline(lat.produce_ms, base.tail_ms, base.requests - base.timeouts):
            out[b] = Impact(b, 0.0, lat.throttle_max_ms > 0, lat.timeouts, rise, True)
            continue
        # the tail moved up: its size is the p99's rise, or the p90's where one slow baseline
        # request made the p99's ratio understate it
        tail = lat.tail_ms / base.tail_ms - 1.0 if lat.tail_ms is not None and base.tail_ms > 0 else rise
        out[b] = Impact(b, max(rise, tail, 0.0), lat.throttle_max_ms > 0, lat.timeouts, rise)
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


def steering_impact(impacts: Mapping[int, Impact], bound: float | None) -> float | None:
    """The impact an impact-bounded throttle steers by: the worst rise that is more than noise; a
    rise within the noise counts up to `bound` at most, so it may hold a throttle where its raw
    figure is high but never lowers one (only evidence does), and a throttle goes up only when
    even the raw figures leave room."""
    found = worst(impacts)
    noisy = [i.measured_increase for i in impacts.values() if i.within_noise and i.measured_increase is not None]
    if noisy and bound is not None:
        held = min(max(max(noisy), 0.0), bound)
        found = held if found is None else max(found, held)
    return found


CANARY_POLL_ROUNDS = 10
"""records `watch --canary` sends to every partition at each poll"""
WATCH_BASELINE_REQUESTS = 40
"""requests per broker `watch` measures before its first poll: a few seconds, and a tail the
impact test can lean on (a p99 bounded on both sides would take P99_BOUNDED_AT)"""
BASELINE_MAX_MEASUREMENTS = 60
"""measurements a baseline may take to gather its requests per broker"""


def measure_baseline(measure: Callable[[], Iterable[LatencySample]], *, want: int = WATCH_BASELINE_REQUESTS,
                     max_measurements: int = BASELINE_MAX_MEASUREMENTS) -> dict[int, BrokerLatency]:
    """Repeat a canary measurement until every broker has `want` acknowledged requests, or
    `max_measurements` were taken; summarized per broker."""
    samples: list[LatencySample] = []
    for _ in range(max_measurements):
        samples.extend(measure())
        acked: dict[int, int] = {}
        for s in samples:
            acked[s.broker] = acked.get(s.broker, 0) + (s.produce_ms is not None)
        if acked and min(acked.values()) >= want:
            break
    return summarize(samples)
