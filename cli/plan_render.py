"""Rich renderables for a plan report (`kreassign plan`)."""
from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kreassign.cluster.units import Units, format_bytes, format_duration, format_rate
from kreassign.cluster.write_sample import rates_line
from kreassign.predict.plan_report import PlanReport

_MAX_PARTITION_ROWS = 20


def render_plan(report: PlanReport, units: Units = "decimal") -> RenderableType:
    diff = report.diff
    totals = diff.totals()
    head = Text()
    head.append(f"{totals['partitions']} partition(s) in the plan: ", style="bold")
    head.append(f"{totals['partitions_moved']} move data, {totals['partitions_changed']} change, "
                f"{totals['replicas_added']} replica(s) added, {totals['replicas_removed']} removed, "
                f"{format_bytes(totals['bytes_moved'], units)} to copy, "
                f"{totals['leader_changes']} preferred-leader change(s).")
    parts: list[RenderableType] = [head, broker_table(report, units)]
    changes = diff.partition_changes
    if changes:
        table = Table(title="Partition changes", title_justify="left")
        for col in ("partition", "current", "target", "adding", "removing", "leader"):
            table.add_column(col)
        for c in changes[:_MAX_PARTITION_ROWS]:
            leader = f"{c.leader_before}->{c.preferred_leader_after}" if c.leader_changes else str(c.leader_before)
            table.add_row(str(c.tp), _ids(c.current), _ids(c.target), _ids(c.adding), _ids(c.removing), leader)
        if len(changes) > _MAX_PARTITION_ROWS:
            table.caption = f"... and {len(changes) - _MAX_PARTITION_ROWS} more (use --output json for all)"
        parts.append(table)
    parts.append(throttle_table(report, units))
    if report.eta_s is not None:
        parts.append(Text(f"At these throttles the replication model's ETA is {format_duration(report.eta_s)}."))
        parts.append(Text(rates_line(report.write_rates), style="yellow" if report.write_rates is None else ""))
    for warning in report.warnings:
        parts.append(Text(f"Warning: {warning}", style="yellow"))
    return Group(*parts)


def broker_table(report: PlanReport, units: Units = "decimal") -> Table:
    table = Table(title="Per broker", title_justify="left")
    for col in ("broker", "rack", "bytes in", "bytes out", "replicas", "leaders"):
        table.add_column(col, justify="right" if col != "rack" else "left")
    for b in report.brokers:
        table.add_row(str(b.broker), b.rack or "-", format_bytes(b.bytes_in, units), format_bytes(b.bytes_out, units),
                      _before_after(b.replicas_before, b.replicas_after),
                      _before_after(b.leaders_before, b.leaders_after))
    return table


def throttle_table(report: PlanReport, units: Units = "decimal") -> RenderableType:
    from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, LOG_DIR_RATE

    throttles = report.throttles
    if throttles.is_empty():
        return Text("Throttles: none would be set (give --throttle or --leader-rate/--follower-rate).")
    rates = Table(title="Broker rates execute would set", title_justify="left")
    for col in ("broker", "leader rate", "follower rate", "log-dir rate"):
        rates.add_column(col, justify="right")
    for broker, keys in throttles.broker_rates.items():
        rates.add_row(str(broker), *(_rate(keys.get(k), units) for k in (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)))
    lists = Table(title="Throttled replicas (partition:broker) execute would set", title_justify="left")
    lists.add_column("topic")
    lists.add_column("leader side", overflow="fold")
    lists.add_column("follower side", overflow="fold")
    for topic, keys in throttles.topic_configs.items():
        lists.add_row(topic, keys.get(LEADER_REPLICAS) or '""', keys.get(FOLLOWER_REPLICAS) or '""')
    return Group(rates, lists)


def _rate(value: str | None, units: Units) -> str:
    return "-" if value is None else format_rate(int(value), units)


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "-"


def _before_after(before: int, after: int) -> str:
    return str(before) if before == after else f"{before} -> {after}"
