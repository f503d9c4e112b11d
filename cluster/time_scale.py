"""The cluster's clock: a kreassign sandbox may run faster than the wall clock and says so.

Every duration and rate kreassign measures on a live cluster is in cluster seconds, so a sample
or a watch on an accelerated sandbox reads the same numbers as on Kafka, only sooner.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from kreassign.cluster.errors import ClusterError
from kreassign.cluster.port import ClusterPort

TIME_SCALE_KEY = "kreassign.sandbox.time.scale"
"""Read-only broker config of a kreassign sandbox: its seconds per wall second."""
_TIME_SCALE_PROBES = 3  # brokers asked before assuming real Kafka time


def read_time_scale(port: ClusterPort, broker_ids: Sequence[int]) -> float:
    """Cluster seconds per wall second: what the first answering broker reports as
    `kreassign.sandbox.time.scale`, else 1 (Kafka brokers, which run on the wall clock)."""
    for broker in broker_ids[:_TIME_SCALE_PROBES]:
        try:
            result = port.describe_broker_configs([broker], [TIME_SCALE_KEY])
        except ClusterError:
            return 1.0  # the loop's own reads report the problem properly
        if broker in result.errors:
            continue
        entry = result.configs.get(broker, {}).get(TIME_SCALE_KEY)
        try:
            scale = float(entry.value) if entry is not None and entry.value is not None else 1.0
        except ValueError:
            return 1.0
        return scale if math.isfinite(scale) and scale > 0 else 1.0
    return 1.0


def cluster_timing(clock: Callable[[], float], sleep: Callable[[float], None], scale: float
                   ) -> tuple[Callable[[], float], Callable[[float], None]]:
    """A clock and a sleeper in cluster seconds over wall-clock ones (`scale` cluster seconds
    per wall second)."""
    if scale == 1.0:
        return clock, sleep
    return (lambda: clock() * scale), (lambda seconds: sleep(seconds / scale))
