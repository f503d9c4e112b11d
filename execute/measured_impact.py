"""Client impact measured during a move, for `throttle suggest`: a canary run now, against its
baseline from before the move, and the throttles in force while it ran."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from kreassign.cluster.canary import run_canary
from kreassign.cluster.client_config import ClientConfig
from kreassign.cluster.client_latency import BrokerLatency, impact
from kreassign.cluster.port import ClusterPort
from kreassign.execute.live_throttle import read_throttle_view
from kreassign.predict.suggest import MeasuredImpact


def measure_impact(port: ClusterPort, config: ClientConfig, baseline: Sequence[BrokerLatency], *,
                   topic: str | None = None, warn: Callable[[str], None] = lambda line: None,
                   sleep: Callable[[float], None] = time.sleep) -> MeasuredImpact:
    """Run the canary as `kreassign canary` does (`topic`, or one the tool creates and removes)
    and set its produce p99 per broker against `baseline`; the rates are the throttles read just
    before it ran.

    Raises:
        ClusterError: the canary could not run.
    """
    view = read_throttle_view(port)
    report = run_canary(port, config, topic=topic, sleep=sleep)
    for note in report.notes:
        warn(note)
    return MeasuredImpact("canary", impact(baseline, report.brokers),
                          {b.broker: (b.leader_rate, b.follower_rate) for b in view.brokers})
