"""What the `execute` subcommand tells a person once the moves are submitted: a short summary
(Kafka's compatibility text, with the rollback JSON, stays on the Kafka-compatible front door)."""
from __future__ import annotations

from kreassign.cli.kafka_live import describe_unconfirmed
from kreassign.cluster.units import Units, format_rate
from kreassign.execute.operations import ExecuteResult


def _brokers(ids: tuple[int, ...] | list[int]) -> str:
    return ",".join(map(str, sorted(ids)))


def execute_summary(result: ExecuteResult, plan_file: str, units: Units = "decimal") -> list[str]:
    """A few lines: what started, under which throttles, what did not answer, and what to run next."""
    plan = result.plan
    request = plan.request
    submitted = set(result.submitted)
    new = sum(len(set(t.replicas) - set(plan.current.get(t.tp, ()))) for t in request.targets if t.tp in submitted)
    moved = [t for t in request.targets if t.tp in submitted and set(t.replicas) != set(plan.current.get(t.tp, ()))]
    lines = [f"Started {len(submitted)} partition reassignment(s): {len(moved)} move data, {new} new replica(s)."]
    if request.leader_rate is not None or request.follower_rate is not None:
        sides = [f"{side} {format_rate(rate, units)}" for side, rate in
                 (("leader", request.leader_rate), ("follower", request.follower_rate)) if rate is not None]
        lines.append(f"Throttle: {', '.join(sides)} on broker(s) {_brokers(plan.throttles.reassigning_brokers)}; "
                     "it stays until `kreassign verify` or `kreassign watch` sees the moves done.")
    else:
        lines.append("No replication throttle: the moves copy as fast as the brokers allow.")
    if request.log_dir_rate is not None:
        lines.append(f"Log-dir throttle: {format_rate(request.log_dir_rate, units)} on broker(s) "
                     f"{_brokers(plan.throttles.log_dir_brokers)}.")
    if result.log_dir_moves.started:
        lines.append(f"Started {len(result.log_dir_moves.started)} log-dir move(s).")
    for broker, error in sorted(result.skipped_brokers.items()):
        lines.append(f"Warning: broker {broker} did not answer ({error.message}); its throttle is not set yet: "
                     "`kreassign resume` sets it once the broker is back.")
    lines += describe_unconfirmed(result.unconfirmed_brokers)
    lines.append(f"Follow it: kreassign watch -f {plan_file}")
    if result.journal_path is not None:
        lines.append(f"Undo it: kreassign abort --journal {result.journal_path}")
    return lines
