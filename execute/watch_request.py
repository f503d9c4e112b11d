"""What a watch is asked to do (`WatchRequest`): which moves, how often, when to stop, and what
to do along the way (pace, auto-throttle, client measures)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kreassign.cluster.broker_metrics import MetricNames
from kreassign.cluster.client_latency import LatencySample
from kreassign.cluster.metrics_source import MetricsEndpoints
from kreassign.cluster.model import PartitionTarget
from kreassign.execute.auto_throttle import AutoThrottlePolicy
from kreassign.execute.clear import CLEAR_RETRY_S
from kreassign.execute.pacing import PaceLimits

Capacities = Mapping[int, tuple[float | None, float | None]]


@dataclass(frozen=True)
class WatchRequest:
    """What to watch and what to do along the way.

    `targets` None watches every reassignment in flight; with targets, only those partitions
    (and, with `pace`, they are submitted in waves by the loop itself).
    """

    targets: tuple[PartitionTarget, ...] | None = None
    interval_s: float = 10.0
    timeout_s: float | None = None
    keep_throttles: bool = False
    fail_on_stall: bool = False
    stall_after_s: float | None = None
    """default: three intervals, at least 30 s"""
    pace: PaceLimits | None = None
    leader_rate: int | None = None
    follower_rate: int | None = None
    additional: bool = False
    retarget_in_flight: bool = False
    auto: AutoThrottlePolicy | None = None
    capacities: Capacities | None = None
    network_capacity: tuple[float, float] | None = None
    """(in, out) for every broker whose capacity is not in `capacities`"""
    dry_run: bool = False
    clear_retry_s: float = CLEAR_RETRY_S
    """at the end, how long a broker that does not answer is retried to restore its throttles"""
    time_scale: float | None = None
    """cluster seconds per wall second; None reads it from the cluster (see `read_time_scale`)"""
    sample_s: float = 0.0
    """before the first poll, measure the watched partitions' write rates over this many cluster
    seconds, so the model's first ETA counts their writes (0: learn them from the polls)"""
    metrics: MetricsEndpoints | None = None
    """brokers' Prometheus endpoints, read at every poll for what clients see"""
    metric_names: MetricNames = field(default_factory=MetricNames)
    canary: Callable[[], Sequence[LatencySample]] | None = None
    """one canary measurement (a record to every broker's canary partition, read back); taken
    before the first poll for the baseline and at every poll after"""

    @property
    def throttled(self) -> bool:
        """Whether the run sets replication throttles (a rate given, or the auto-throttle)."""
        return self.leader_rate is not None or self.follower_rate is not None or self.auto is not None

    @property
    def stall_window_s(self) -> float:
        return self.stall_after_s if self.stall_after_s is not None else max(3 * self.interval_s, 30.0)

    def capacity(self, broker: int) -> tuple[float | None, float | None]:
        if self.capacities and broker in self.capacities:
            return self.capacities[broker]
        return self.network_capacity if self.network_capacity is not None else (None, None)
