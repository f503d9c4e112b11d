"""What a rebalance does to clients, from per-broker traffic over time (pure numpy, no I/O).

Inputs are (brokers, samples) arrays on a uniform time grid: sample k covers [k*dt, (k+1)*dt).
The broker mechanics follow reference/broker-semantics.md Part B:

- Headroom: the share of a broker's network capacity (each direction) left once client traffic,
  the replication that keeps in-sync followers current, and catch-up copying are counted.
- Client quotas (KIP-13): a byte-rate quota per client, 11 samples of 1 s; the throttle time a
  response carries is `round((O - T) / T * W)` with the observed rate O recorded before the
  check and W the padded window (10 s to 11 s). Byte quotas have no cap. The rate a client
  can reach is what the network leaves it, so catch-up traffic can lower throttle times while
  raising latency.
- Produce latency (acks=all): the leader answers once every in-sync follower has fetched past
  the batch, so the produce RemoteTime is about one follower fetch cycle (the breakdown KIP-736
  asked to expose). A follower that is catching up shares its fetcher thread with catch-up
  partitions, so a response carries catch-up data (`replica.fetch.max.bytes` per partition, at
  most `replica.fetch.response.max.bytes`) ahead of the in-sync bytes, on the leader's outbound
  and the follower's inbound link. A batch that just missed a response waits for it to cross,
  then crosses in the next one behind its catch-up: two responses' transfer at the tail (p99),
  1.5 at the median. Catch-up is elastic (a follower asks for more only once a response arrived),
  so those responses are all it adds, as often as the link is busy copying; inelastic traffic
  (clients, in-sync replication) stretches the cycle as 1 / (1 - utilisation). Calibrated against
  the canary on real Kafka 4.4.0 with 20 MB/s replication links (bench/bench_client_impact.py).
- Request timeouts (KIP-19): where client demand exceeds what a broker has left, requests queue;
  those that wait longer than `request.timeout.ms` (30 s) time out, are retried, and add load.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

QUOTA_SAMPLES = 11
QUOTA_WINDOW_S = 1.0
# A steady sender's oldest retained sample started between 10 s and 11 s ago: take the middle.
STEADY_ELAPSED_S = (QUOTA_SAMPLES - 0.5) * QUOTA_WINDOW_S
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
REQUEST_TIMEOUT_MS = 30_000.0
RESPONSES_AHEAD_P99 = 2.0
"""catch-up responses an acks=all batch waits behind at the tail: the one in flight when it
arrived (sent without it), then the one that carries it (real Kafka 4.4.0: produce p50 1.5
responses above the idle round, p99 2; bench/results/bench_client_impact.jsonl)"""
_SATURATED = 1e-3


@dataclass(frozen=True)
class ClientModel:
    """The clients assumed on every broker, and the thresholds that count as harm."""

    headroom_target: float = 0.2
    """share of capacity, each direction, operators want left for clients"""
    produce_quota_bps: float | None = None
    """KIP-13 producer byte-rate quota per client (None: no quota)"""
    fetch_quota_bps: float | None = None
    """KIP-13 consumer byte-rate quota per client (None: no quota)"""
    clients_per_broker: int = 10
    """the broker's client traffic is spread evenly over this many clients"""
    request_bytes: int = 256 * 1024
    """average produce request size, to turn queued bytes into requests"""
    request_timeout_ms: float = REQUEST_TIMEOUT_MS
    fetch_rtt_ms: float = 1.0
    """a follower fetch round trip on an idle link (`simulate --client-baseline`: the canary's)"""
    fetch_response_max_bytes: int = REPLICA_FETCH_RESPONSE_MAX_BYTES
    """catch-up bytes one response carries ahead of the in-sync ones: the default is
    `replica.fetch.response.max.bytes`, what many moves per fetcher session fill; one move per
    session carries `replica.fetch.max.bytes` (1 MiB)"""

    def __post_init__(self) -> None:
        from kreassign.cluster.errors import InputError

        if not 0.0 <= self.headroom_target < 1.0:
            raise InputError("the headroom target is a share of capacity from 0% to 99%")
        if self.clients_per_broker < 1 or self.request_bytes < 1:
            raise InputError("clients per broker and the request size must be at least 1")
        for quota in (self.produce_quota_bps, self.fetch_quota_bps):
            if quota is not None and quota <= 0:
                raise InputError("client quotas must be positive byte rates")


@dataclass(frozen=True)
class BrokerTraffic:
    """Per-broker traffic on the grid; capacities and client demand are (brokers, 1) or full."""

    capacity_in: np.ndarray
    capacity_out: np.ndarray
    client_in: np.ndarray
    """what producers want to send to the broker's leaders"""
    client_out: np.ndarray
    """what consumers want to read from the broker's leaders"""
    replication_in: np.ndarray
    """in-sync follower traffic plus catch-up copying into the broker"""
    replication_out: np.ndarray
    catchup_in: np.ndarray
    """the catch-up part of replication_in (bytes/s of moves into the broker)"""
    catchup_out: np.ndarray
    """the catch-up part of replication_out (bytes/s of moves out of the broker)"""


@dataclass(frozen=True)
class ClientImpact:
    """Per broker and sample, and the scenario totals the summary shows."""

    headroom: np.ndarray
    throttle_ms: np.ndarray
    produce_remote_ms: np.ndarray
    request_delay_ms: np.ndarray
    max_throttle_ms: float
    minutes_below_target: float
    brokers_at_risk: int
    brokers_saturated: int
    max_produce_remote_ms: float
    timed_out_requests: float


def quota_window_s(elapsed_s: np.ndarray | float, samples: int = QUOTA_SAMPLES,
                   window_s: float = QUOTA_WINDOW_S) -> np.ndarray:
    """Rate.windowSize: the elapsed time, padded to `samples - 1` full windows while shorter."""
    elapsed = np.asarray(elapsed_s, dtype=np.float64)
    full = np.floor(elapsed / window_s)
    return elapsed + np.maximum(0.0, (samples - 1) - full) * window_s


def throttle_time_ms(observed_bps: np.ndarray | float, quota_bps: float,
                     window_s: np.ndarray | float) -> np.ndarray:
    """QuotaUtils.throttleTime: `round((O - T) / T * W)` in ms, 0 within quota, no cap."""
    observed = np.asarray(observed_bps, dtype=np.float64)
    over = (observed - quota_bps) / quota_bps * np.asarray(window_s, dtype=np.float64) * 1000.0
    return np.where(observed > quota_bps, np.round(over), 0.0)


def sustained_throttle_ms(rate_bps: np.ndarray, quota_bps: float | None) -> np.ndarray:
    """The throttle time a client sending steadily at `rate_bps` receives on a violating response."""
    rate = np.asarray(rate_bps, dtype=np.float64)
    if quota_bps is None:
        return np.zeros_like(rate)
    return throttle_time_ms(rate, quota_bps, quota_window_s(STEADY_ELAPSED_S))


def headroom_share(capacity: np.ndarray, used: np.ndarray) -> np.ndarray:
    """(capacity - used) / capacity; negative when the link is oversubscribed, 1 when the
    capacity is unknown (infinite)."""
    capacity = np.asarray(capacity, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        share = (capacity - used) / capacity
    return np.where(np.isinf(capacity), 1.0, share)


def queue_delay_ms(demand: np.ndarray, available: np.ndarray, dt_s: float) -> np.ndarray:
    """Delay of a client queue fed at `demand` and served at `available`, sample by sample.

    The backlog grows by what does not fit and drains by what is spare; the delay is the
    backlog over the service rate (infinite while the broker has nothing left for clients).
    """
    demand = np.broadcast_to(np.asarray(demand, dtype=np.float64), np.shape(available))
    available = np.maximum(np.asarray(available, dtype=np.float64), 0.0)
    backlog = np.zeros(demand.shape[0])
    delay = np.empty(demand.shape)
    for k in range(demand.shape[1]):
        backlog = np.maximum(0.0, backlog + (demand[:, k] - available[:, k]) * dt_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            delay[:, k] = np.where(backlog > 0, backlog / available[:, k] * 1000.0, 0.0)
    return delay


def follower_fetch_ms(model: ClientModel, capacity: np.ndarray, used: np.ndarray,
                      catchup: np.ndarray) -> np.ndarray:
    """One follower fetch cycle over a link (either direction), which bounds the produce
    RemoteTime of acks=all across it.

    The in-sync bytes wait behind RESPONSES_AHEAD_P99 responses of catch-up data at link speed,
    weighted by the share of the link catch-up uses (a throttled move leaves most responses empty); the rest of
    the link's traffic stretches the cycle as 1 / (1 - its utilisation), and the cycle is cut
    at the request timeout, when the leader's DelayedProduce expires with REQUEST_TIMED_OUT.
    """
    capacity = np.asarray(capacity, dtype=np.float64)
    catchup = np.asarray(catchup, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.nan_to_num(np.clip(catchup / capacity, 0.0, 1.0))
        transfer_ms = np.nan_to_num(RESPONSES_AHEAD_P99 * model.fetch_response_max_bytes * share / capacity * 1000.0)
        other = np.nan_to_num(np.clip((used - catchup) / capacity, 0.0, 1.0))
    idle = np.maximum(1.0 - other, _SATURATED)
    cycle = (model.fetch_rtt_ms + transfer_ms) / idle
    return np.where(other >= 1.0, model.request_timeout_ms, np.minimum(cycle, model.request_timeout_ms))


def assess(model: ClientModel, traffic: BrokerTraffic, dt_s: float, *, counted: int | None = None) -> ClientImpact:
    """Headroom, quota throttling, produce latency risk and request timeouts for one scenario.

    The per-sample arrays cover every sample; the totals only the first `counted` (all by
    default), so samples past the end of what the model predicts add nothing.
    """
    shape = np.broadcast_shapes(traffic.replication_in.shape, traffic.client_in.shape)
    used_in = traffic.client_in + traffic.replication_in
    used_out = traffic.client_out + traffic.replication_out
    headroom = np.broadcast_to(np.minimum(headroom_share(traffic.capacity_in, used_in),
                                          headroom_share(traffic.capacity_out, used_out)), shape)
    left_in = traffic.capacity_in - traffic.replication_in
    left_out = traffic.capacity_out - traffic.replication_out
    reached_in = np.clip(np.broadcast_to(traffic.client_in, shape), 0.0, np.maximum(left_in, 0.0))
    reached_out = np.clip(np.broadcast_to(traffic.client_out, shape), 0.0, np.maximum(left_out, 0.0))
    clients = float(model.clients_per_broker)
    throttle = np.maximum(sustained_throttle_ms(reached_in / clients, model.produce_quota_bps),
                          sustained_throttle_ms(reached_out / clients, model.fetch_quota_bps))
    delay = queue_delay_ms(np.broadcast_to(traffic.client_in, shape),
                           np.broadcast_to(left_in, shape), dt_s)
    # the broker's fetches as a follower, and its own sends as the leader of acks=all writes
    remote = np.maximum(follower_fetch_ms(model, traffic.capacity_in, used_in, traffic.catchup_in),
                        follower_fetch_ms(model, traffic.capacity_out, used_out, traffic.catchup_out))
    remote = np.broadcast_to(remote, shape)
    requests_per_s = np.broadcast_to(traffic.client_in, shape) / model.request_bytes
    k = shape[1] if counted is None else max(0, min(counted, shape[1]))
    timed_out = float(np.sum(requests_per_s[:, :k][delay[:, :k] > model.request_timeout_ms]) * dt_s)
    below = headroom[:, :k] < model.headroom_target
    return ClientImpact(
        headroom=headroom, throttle_ms=throttle, produce_remote_ms=remote,
        request_delay_ms=delay,
        max_throttle_ms=float(throttle[:, :k].max(initial=0.0)),
        minutes_below_target=float(np.count_nonzero(below.any(axis=0)) * dt_s / 60.0),
        brokers_at_risk=int(np.count_nonzero(below.any(axis=1))),
        brokers_saturated=int(np.count_nonzero((headroom[:, :k] <= 0.0).any(axis=1))),
        max_produce_remote_ms=float(remote[:, :k].max(initial=0.0)),
        timed_out_requests=timed_out,
    )
