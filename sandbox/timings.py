"""Per-request timing the sandbox keeps, in Kafka's RequestMetrics parts (broker-semantics Part B
§4.4): queue, local, remote (time parked in a purgatory) and throttle.

Queue and local time are the server's own processing, in wall milliseconds. Remote and throttle
time are waits on the sandbox clock, in sandbox milliseconds, so a test on a manual clock gets
exact values. A fetch's latency thus splits into its wait part (remote) and its local part,
KIP-736's distinction; fetches are named `FetchConsumer` or `FetchFollower` as Kafka does.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestTiming:
    request: str       # Produce, FetchConsumer, FetchFollower, ListOffsets, ... or the API key
    api_version: int
    client_id: str
    broker_id: int
    queue_ms: float
    local_ms: float
    remote_ms: float
    throttle_ms: float
    at: float = 0.0  # sandbox time the response was ready


class RequestTimings:
    """The last `keep` timings, plus per-request-name counts and sums."""

    def __init__(self, keep: int = 10_000) -> None:
        self.recent: deque[RequestTiming] = deque(maxlen=keep)
        self.count: dict[str, int] = {}
        self.total_ms: dict[str, dict[str, float]] = {}

    def add(self, t: RequestTiming) -> None:
        self.recent.append(t)
        self.count[t.request] = self.count.get(t.request, 0) + 1
        sums = self.total_ms.setdefault(t.request, {"queue": 0.0, "local": 0.0, "remote": 0.0, "throttle": 0.0})
        sums["queue"] += t.queue_ms
        sums["local"] += t.local_ms
        sums["remote"] += t.remote_ms
        sums["throttle"] += t.throttle_ms

    def of(self, request: str) -> list[RequestTiming]:
        return [t for t in self.recent if t.request == request]
