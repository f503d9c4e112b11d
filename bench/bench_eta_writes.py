"""ETA accuracy with writes running: `estimate` from a live sample vs the measured completion.

On a sandbox whose partitions take writes (its load generator), the write rates are sampled
(`snapshot_state(sample_s=...)`, as `estimate --bootstrap-server` does), the plan is estimated
at a throttle, then executed under that throttle and stepped in sandbox time until it
completes. Synthetic plans on a 5-broker sandbox with one RF 2 topic at 20 MB/s: leader-bound
(every move copies from one leader) and follower-bound (every move lands on one broker); and a
realistic one, kafka-generate: Kafka's `--generate` (kreassign's implementation, seed 1) for
topic `orders` onto brokers 1-4 of the default demo sandbox (6 brokers, 3 racks, RF 3 topics
with writes), at 5 MB/s on both sides and on one side only. Every follower session there also
carries written in-sync partitions, which sets how soon a throttled follower asks again
(`FetchLimits.follower_share`). A last figure is the leader-bound plan estimated with the write
rates unknown (taken as 0), the tool's behaviour before sampling. All times are sandbox
seconds; the issue's bar is 5% for every shape.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.common import record

if TYPE_CHECKING:
    from kreassign.cluster.model import ClusterState, PartitionTarget

MB = 1_000_000
THROTTLE = 20 * MB
SIZE = 1200 * MB
WRITE_BPS = 2_000_000.0
SAMPLE_S = 60.0
STEP_S = 1.0
TICK_S = 0.01
"""one fetch round: a coarser tick lets a whole tick of fetches through before the quota is checked"""


GENERATE_THROTTLE = 5 * MB
GENERATE_SIDES = {"kafka-generate": (True, True), "kafka-generate-leader": (True, False),
                  "kafka-generate-follower": (False, True)}
"""the kafka-generate plan under (leader, follower) throttles"""


@dataclass(frozen=True)
class Trial:
    plan: str
    estimated_s: float
    estimated_without_rates_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return self.estimated_s / self.measured_s - 1

    @property
    def error_without_rates(self) -> float:
        return self.estimated_without_rates_s / self.measured_s - 1


def run_trial(kind: str, *, seed: int = 3, throttle: int = THROTTLE) -> Trial:
    """Sample, estimate and execute one plan on a fresh sandbox; times in sandbox seconds (the
    kafka-generate plans use the default demo sandbox, seed 0, at GENERATE_THROTTLE)."""
    import dataclasses

    import numpy as np

    from kreassign.cluster.admin import KafkaAdmin
    from kreassign.cluster.capture import snapshot_state
    from kreassign.cluster.client_config import AdminTimeouts, build_client_config
    from kreassign.cluster.model import ClusterState
    from kreassign.execute.operations import ExecuteRequest, apply_execute, prepare_execute
    from kreassign.sandbox.clock import ManualClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import TopicSpec
    from kreassign.predict.estimate import RateRequest, estimate_plan

    leader_on, follower_on = GENERATE_SIDES.get(kind, (True, True))
    if kind in GENERATE_SIDES:
        throttle = GENERATE_THROTTLE
        sb = SandboxCluster(6, 3, None, clock=ManualClock(), seed=0, tick=TICK_S).start()
    else:
        sb = SandboxCluster(5, 0, [TopicSpec("w", 8, 2, SIZE, WRITE_BPS, 0.5)], clock=ManualClock(), seed=seed,
                           tick=TICK_S).start()
    try:
        config = build_client_config({}, bootstrap_server=sb.bootstrap)
        admin = KafkaAdmin.connect(dataclasses.replace(config, timeouts=AdminTimeouts(
            request_timeout_s=10.0, api_timeout_s=20.0, connect_timeout_s=2.0)))
        with admin:
            state = snapshot_state(admin, sample_s=SAMPLE_S, clock=lambda: sb.now, sleep=sb.advance, warn=lambda _: None)
            targets = plan_for(state, kind)
            blind = ClusterState.from_arrays(
                brokers=state.brokers, topic=[state.topic_of(r) for r in range(len(state))],
                partition=state.partition, replica_offsets=state.replica_offsets, replica_ids=state.replica_ids,
                leader=state.leader, isr_offsets=state.isr_offsets, isr_ids=state.isr_ids,
                size_bytes=state.size_bytes, produce_bps=np.zeros(len(state)))
            rates = RateRequest(leader_rate=float(throttle) if leader_on else math.inf,
                                follower_rate=float(throttle) if follower_on else math.inf)
            estimated = estimate_plan(state, targets, rates=rates).eta_s
            blind_eta = estimate_plan(blind, targets, rates=rates).eta_s
            request = ExecuteRequest(targets=tuple(targets), leader_rate=throttle if leader_on else None,
                                     follower_rate=throttle if follower_on else None)
            start = sb.now
            apply_execute(admin, prepare_execute(admin, request))
            while admin.list_reassignments():
                sb.advance(STEP_S)
                if sb.now - start > 100 * max(estimated, 1.0):
                    raise RuntimeError(f"{kind}: no completion after {sb.now - start:.0f}s")
            measured = sb.now - start
        return Trial(kind, estimated, blind_eta, measured)
    finally:
        sb.stop()


def plan_for(state: ClusterState, kind: str) -> list[PartitionTarget]:
    """leader-bound: the partitions led by the busiest leader each send a replica to a different
    broker; follower-bound: partitions with different leaders all send one to the same broker."""
    from kreassign.cluster.model import PartitionTarget
    from kreassign.planner.generate import generate_assignment

    if kind in GENERATE_SIDES:
        return generate_assignment(state, ["orders"], [1, 2, 3, 4], seed=1).proposed_targets()
    parts = list(state.iter_partitions())
    ids = state.broker_ids
    if kind == "leader-bound":
        leader = max(ids, key=lambda b: sum(p.leader == b for p in parts))
        mine = [p for p in parts if p.leader == leader]
        out = []
        for p in mine:
            free = [b for b in ids if b not in p.replicas and b not in {t.replicas[-1] for t in out}]
            if free:
                out.append(PartitionTarget(p.topic, p.partition, (p.replicas[0], free[0]) if p.replicas[0] == leader
                                           else (free[0], leader)))
        return out
    dest = ids[-1]
    chosen = {}
    for p in parts:
        if dest not in p.replicas and p.leader not in chosen:
            chosen[p.leader] = p
    out = []
    for p in chosen.values():
        follower = next(b for b in p.replicas if b != p.leader)
        out.append(PartitionTarget(p.topic, p.partition, tuple(dest if b == follower else b for b in p.replicas)))
    return out


def main() -> None:
    lead, follow = run_trial("leader-bound"), run_trial("follower-bound")
    generated = [run_trial(kind) for kind in GENERATE_SIDES]

    def figures(trial: Trial) -> dict[str, float]:
        return {"estimated_s": round(trial.estimated_s, 1), "measured_s": round(trial.measured_s, 1),
                "error": round(trial.error, 4)}

    shapes = [lead, follow, *generated]
    record("bench_eta_writes", throttle_bps=THROTTLE, generate_throttle_bps=GENERATE_THROTTLE, sample_s=SAMPLE_S,
           step_s=STEP_S, load=[round(x, 2) for x in os.getloadavg()],
           **{t.plan.replace("-", "_"): figures(t) for t in shapes},
           leader_bound_rates_unknown={"estimated_s": round(lead.estimated_without_rates_s, 1),
                                       "measured_s": round(lead.measured_s, 1), "error": round(lead.error_without_rates, 4)},
           errors=[round(t.error, 4) for t in shapes] + [round(lead.error_without_rates, 4)])
    if max(abs(t.error) for t in shapes) > 0.05:
        sys.exit("an estimate missed the measured completion by more than 5%")


if __name__ == "__main__":
    main()
