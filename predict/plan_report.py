"""What a reassignment would do: moves, bytes per broker, leader changes, and the throttles
execution would set. Pure: one function from (state, plan, rates) to a serialisable report."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kreassign.cluster.model import ClusterState, PartitionTarget, TopicPartitionReplica, WriteRates
from kreassign.cluster.units import Units, format_duration, format_rate
from kreassign.cluster.write_sample import rates_to_dict
from kreassign.planner.diff import PlanDiff, diff_plan
from kreassign.throttle.configs import ThrottlePlan, compute_move_map, throttle_plan
from kreassign.predict.estimate import RateRequest, StalledMove, estimate_moves

_MAX_WARNED = 5


@dataclass(frozen=True)
class BrokerLoad:
    """One broker's part in a plan."""

    broker: int
    rack: str | None
    bytes_in: int
    bytes_out: int
    replicas_before: int
    replicas_after: int
    leaders_before: int
    leaders_after: int


@dataclass(frozen=True)
class PlanReport:
    """A plan against a cluster: the diff, the per-broker view, throttles, and warnings."""

    diff: PlanDiff
    throttles: ThrottlePlan
    brokers: tuple[BrokerLoad, ...]
    warnings: tuple[str, ...]
    eta_s: float | None = None
    """with a throttle given: the model's ETA at that throttle (inf: some move never finishes)"""
    stalled: tuple[StalledMove, ...] = ()
    write_rates: WriteRates | None = None

    def to_dict(self) -> dict[str, Any]:
        """A stable JSON-ready form (the `--output json` schema of `kreassign plan`)."""
        return {
            "totals": self.diff.totals(),
            "brokers": [vars(b) for b in self.brokers],
            "partitions": [
                {"topic": c.tp.topic, "partition": c.tp.partition, "current": list(c.current),
                 "target": list(c.target), "adding": list(c.adding), "removing": list(c.removing),
                 "leader_before": c.leader_before, "preferred_leader_after": c.preferred_leader_after,
                 "reorder_only": c.reorder_only}
                for c in self.diff.partition_changes
            ],
            "throttles": {
                "topics": self.throttles.topic_configs,
                "brokers": {str(b): v for b, v in self.throttles.broker_rates.items()},
            },
            "warnings": list(self.warnings),
            "eta_s": None if self.eta_s is None or self.eta_s == float("inf") else round(self.eta_s, 3),
            "stalled": [s.to_dict() for s in self.stalled],
            "write_rates": rates_to_dict(self.write_rates),
        }


def build_plan_report(
    state: ClusterState,
    entries: Iterable[PartitionTarget],
    *,
    rate: int | None = None,
    leader_rate: int | None = None,
    follower_rate: int | None = None,
    replica_log_dirs: Mapping[TopicPartitionReplica, str] | None = None,
    units: Units = "decimal",
) -> PlanReport:
    """Compare a plan with the cluster and work out the throttles Kafka's rules would set.

    Raises:
        InputError: the plan names partitions the cluster does not have, or is malformed.
    """
    targets = list(entries)
    diff = diff_plan(state, targets)
    move_map = compute_move_map(diff.current_assignment(), [(t.tp, t.replicas) for t in targets],
                                state.reassignments)
    throttles = throttle_plan(move_map, rate=rate, leader_rate=leader_rate,
                              follower_rate=follower_rate,
                              replica_log_dirs=list(replica_log_dirs or {}))
    brokers = sorted(set(diff.replicas_before) | set(diff.replicas_after))
    racks = state.racks()
    loads = tuple(
        BrokerLoad(broker=b, rack=racks.get(b), bytes_in=diff.bytes_in_per_broker.get(b, 0),
                   bytes_out=diff.bytes_out_per_broker.get(b, 0),
                   replicas_before=diff.replicas_before.get(b, 0),
                   replicas_after=diff.replicas_after.get(b, 0),
                   leaders_before=diff.leaders_before.get(b, 0),
                   leaders_after=diff.leaders_after.get(b, 0))
        for b in brokers
    )
    eta, stalled, fix = None, (), ""
    if rate is not None or leader_rate is not None or follower_rate is not None:
        pending = state.with_copies_pending()  # copies under way still have the rest of their bytes to do
        moves = diff.moves if pending is state else diff_plan(pending, targets).moves
        estimate = estimate_moves(pending, moves, rates=RateRequest(
            throttle=rate, leader_rate=leader_rate, follower_rate=follower_rate))
        eta, stalled = estimate.eta_s, estimate.stalled
        if estimate.fix_rate is not None and estimate.fix_eta_s is not None:
            fix = (f"--throttle {estimate.fix_rate} ({format_rate(estimate.fix_rate, units)}) lets every move finish "
                   f"(ETA {format_duration(estimate.fix_eta_s)})")
    warnings = plan_warnings(state, diff) + [s.message(units) for s in stalled[:_MAX_WARNED]]
    if len(stalled) > _MAX_WARNED:
        warnings.append(f"... and {len(stalled) - _MAX_WARNED} more move(s) never finish (see --output json)")
    if fix:
        warnings.append(fix)
    return PlanReport(diff=diff, throttles=throttles, brokers=loads, warnings=tuple(warnings), eta_s=eta,
                      stalled=stalled, write_rates=state.rates_origin())


def plan_warnings(state: ClusterState, diff: PlanDiff) -> list[str]:
    """Things an operator should know before executing the plan."""
    warnings: list[str] = []
    if diff.unknown_brokers:
        warnings.append("the plan names brokers the cluster does not list: "
                        + ",".join(map(str, diff.unknown_brokers))
                        + " (Kafka will refuse it with 'Unknown broker id')")
    changes = diff.partition_changes
    rf_changed = [c for c in changes if len(c.target) != len(c.current)]
    if rf_changed:
        warnings.append(f"{len(rf_changed)} partition(s) change replication factor, e.g. "
                        + ", ".join(f"{c.tp} {len(c.current)}->{len(c.target)}"
                                    for c in rf_changed[:_MAX_WARNED]))
    moving = [c.tp for c in changes if c.tp in state.reassignments]
    if moving:
        warnings.append(f"{len(moving)} partition(s) are already being reassigned; submitting "
                        "replaces their targets (needs --additional), e.g. "
                        + ", ".join(map(str, moving[:_MAX_WARNED])))
    racks = state.racks()
    distinct_racks = len({r for r in racks.values() if r is not None})
    if distinct_racks:
        crowded = [c.tp for c in changes
                   if len({racks.get(b) for b in c.target}) < min(len(c.target), distinct_racks)]
        if crowded:
            warnings.append(f"{len(crowded)} partition(s) would put two replicas in one rack "
                            "although enough racks exist, e.g. "
                            + ", ".join(map(str, crowded[:_MAX_WARNED])))
    return warnings
