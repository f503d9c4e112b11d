"""`rebalance`, `add-brokers`, `decommission`, `replace-broker`, `set-rf`, `leaders`.

Each loads the cluster state, calls one planner function, writes the reassignment JSON and its
rollback, and shows a before/after summary (rich tables, or `--output json`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kreassign.cli.options import BROKER_ID, BROKER_LIST, SIZE, output_option, source_options, units_option
from kreassign.cluster.errors import JAVA_LONG_MAX

if TYPE_CHECKING:
    from rich.console import Console

    from kreassign.cluster.units import Units

    from kreassign.cluster.model import ClusterState
    from kreassign.planner.balance.values import BalanceOptions, BalancePlan

F = TypeVar("F", bound=Callable[..., Any])


def plan_options(f: F) -> F:
    """Goals, constraints and output shared by every balance command."""
    options = [
        click.option("--goals", default="rack,replicas,disk,leaders,leader_bytes,topic", show_default=True,
                     help="Goals in priority order (drop one to ignore it)."),
        click.option("--exclude-topics", default="", help="Comma-separated topics never to move."),
        click.option("--exclude-brokers", default="", help="Comma-separated brokers that neither give nor take."),
        click.option("--pin", "pins", multiple=True, metavar="TOPIC:PARTITION:BROKER",
                     help="A replica that must stay where it is (repeatable)."),
        click.option("--max-moves", type=click.IntRange(min=0, max=JAVA_LONG_MAX), help="Most replica moves in the plan."),
        click.option("--max-bytes", type=SIZE, help="Most bytes the plan may move, e.g. 500GB."),
        click.option("--disk-tolerance", type=click.FloatRange(0, 1, min_open=True, max_open=True),
                     default=0.03, show_default=True, help="Accepted deviation of a broker's bytes from its target."),
        click.option("--disk-headroom", type=click.FloatRange(0, 1, max_open=True), default=0.0,
                     show_default=True, help="Fraction of each broker's known disk that must stay free."),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Breaks ties between equal brokers."),
        click.option("--allow-partial", is_flag=True,
                     help="Write the plan even if some replicas that must move find no broker "
                          "(otherwise exit 6 and write nothing)."),
        click.option("--write-plan", type=click.Path(dir_okay=False),
                     help="Write the reassignment JSON here and the rollback to FILE.rollback.json."),
        output_option,
        units_option,
        source_options,
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _ids(text: str) -> frozenset[int]:
    from kreassign.cluster.errors import InputError

    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"'{text}' is not a comma-separated list of broker ids such as 1,2,3") from None


def build_options(kw: dict[str, Any]) -> BalanceOptions:
    from kreassign.cluster.errors import InputError
    from kreassign.cluster.model import TopicPartitionReplica
    from kreassign.planner.balance.values import BalanceOptions, parse_goals

    pins = []
    for pin in kw["pins"]:
        parts = pin.split(":")  # Kafka topic names cannot contain ':'
        try:
            topic, partition, broker = parts[0], int(parts[1]), int(parts[2])
            if len(parts) != 3 or not topic:
                raise ValueError(pin)
        except (ValueError, IndexError):
            raise InputError(f"--pin '{pin}' should look like TOPIC:PARTITION:BROKER, e.g. orders:3:101") from None
        pins.append(TopicPartitionReplica(topic, partition, broker))
    return BalanceOptions(
        goals=parse_goals([g.strip() for g in kw["goals"].split(",") if g.strip()]),
        exclude_topics=frozenset(t.strip() for t in kw["exclude_topics"].split(",") if t.strip()),
        exclude_brokers=_ids(kw["exclude_brokers"]), pinned=frozenset(pins),
        max_moves=kw["max_moves"], max_bytes=kw["max_bytes"], disk_tolerance=kw["disk_tolerance"],
        disk_headroom=kw["disk_headroom"], seed=kw["seed"], allow_partial=kw["allow_partial"],
    )


def run(kw: dict[str, Any], planner: Callable[[ClusterState, BalanceOptions], BalancePlan]) -> None:
    """Load the state, plan, write the files, show the summary."""
    from kreassign.cli.console import emit_json, stderr_console, stdout_console
    from kreassign.cli.runtime import write_text
    from kreassign.cluster.kafka_json import format_reassignment
    from kreassign.cluster.source import load_cluster_state

    options = build_options(kw)
    state = load_cluster_state(bootstrap_server=kw["bootstrap_server"], snapshot=kw["snapshot"],
                               command_config=kw["command_config"], timeout_s=kw["request_timeout"])
    plan = planner(state, options)
    proposed, rollback = format_reassignment(plan.targets), format_reassignment(plan.rollback)
    if kw["write_plan"]:
        rollback_path = f"{kw['write_plan'].removesuffix('.json')}.rollback.json"
        for path, text in ((kw["write_plan"], proposed), (rollback_path, rollback)):
            write_text(path, text + "\n")
        stderr_console().print(f"Wrote {len(plan.targets)} partition(s) to {kw['write_plan']} "
                               f"(rollback: {rollback_path})")
    if kw["output"] == "json":
        import json

        doc = plan.to_dict()
        doc["reassignment"] = json.loads(proposed)
        doc["rollback_reassignment"] = json.loads(rollback)
        emit_json(doc)
        return
    render_summary(plan, stdout_console(), kw["units"])
    for warning in plan.warnings:
        stderr_console().print(f"Warning: {warning}", markup=False)
    if not kw["write_plan"] and plan.targets:
        click.echo("Proposed partition reassignment configuration")
        click.echo(proposed)


def render_summary(plan: BalancePlan, console: Console, units: Units = "decimal") -> None:
    """Before/after per-broker loads, their spread, movement against the lower bound."""
    from rich.table import Table

    from kreassign.cluster.units import format_bytes, format_rate

    before = {b.broker: b for b in plan.before.brokers}
    table = Table(title=f"{plan.command}: per-broker load (before -> after)", show_edge=False)
    for name in ("broker", "rack", "replicas", "leaders", "bytes"):
        table.add_column(name, justify="left" if name == "rack" else "right")
    for b in plan.after.brokers:
        was = before.get(b.broker, b)
        table.add_row(str(b.broker), b.rack or "-", f"{was.replicas} -> {b.replicas}",
                      f"{was.leaders} -> {b.leaders}", f"{format_bytes(was.bytes, units)} -> {format_bytes(b.bytes, units)}")
    console.print(table)
    stats = Table(show_edge=False, title="balance (min / max / stddev)")
    for name in ("", "before", "after"):
        stats.add_column(name, justify="left" if not name else "right")
    shown: dict[str, Callable[[float], str]] = {
        "replicas": "{:.0f}".format, "leaders": "{:.0f}".format,
        "bytes": lambda v: format_bytes(int(v), units), "leader_bps": lambda v: format_rate(v, units)}
    for label, attr in (("replicas", "replicas"), ("leaders", "leaders"), ("bytes", "bytes"),
                        ("leader bytes/s", "leader_bps")):
        row = [label]
        for m in (plan.before, plan.after):
            s = getattr(m, attr)
            row.append(" / ".join(shown[attr](v) for v in (s.min, s.max, s.stddev)))
        stats.add_row(*row)
    stats.add_row("bytes max / target", f"{plan.before.bytes_over_target:.3f}", f"{plan.after.bytes_over_target:.3f}")
    stats.add_row("rack violations", str(plan.before.rack_violations), str(plan.after.rack_violations))
    console.print(stats)
    lb = plan.lower_bounds
    ratio = f" ({plan.bytes_moved / lb.bytes_moved:.2f}x the lower bound)" if lb.bytes_moved else ""
    console.print(f"Moves: {plan.replica_moves} replicas (lower bound {lb.replica_moves}), "
                  f"{format_bytes(plan.bytes_moved, units)}{ratio}; leader changes: {plan.leader_changes}; "
                  f"partitions changed: {len(plan.targets)}", markup=False)


@click.command()
@plan_options
def rebalance(**kw: Any) -> None:
    """Balance racks, replicas, disk and leaders, moving as little as possible.

    Rack diversity comes first: each partition's replicas span min(RF, racks) racks with
    per-rack counts within one of each other (Kafka's rule); partitions off it are repaired and
    no move ever narrows a partition's spread. Warnings name racks too small for their forced
    share (a hotspot no plan can lift), topics that cannot be balanced within a rack, and
    brokers over their disk capacity."""
    from kreassign.planner import balance

    run(kw, balance.rebalance)


@click.command("add-brokers")
@click.option("--brokers", "brokers", required=True, type=BROKER_LIST, help="The new brokers, e.g. 7,8,9.")
@click.option("--only-new", is_flag=True, help="Only the new brokers receive replicas.")
@click.option("--move-existing", is_flag=True,
              help="Let the plan move replicas the named brokers already hold (by default they stay put).")
@plan_options
def add_brokers(brokers: tuple[int, ...], only_new: bool, move_existing: bool, **kw: Any) -> None:
    """Move load onto newly added brokers."""
    from kreassign.planner import balance

    run(kw, lambda s, o: balance.add_brokers(s, list(brokers), o, only_new=only_new, move_existing=move_existing,
                                             units=kw["units"]))


@click.command()
@click.option("--brokers", "brokers", required=True, type=BROKER_LIST, help="Brokers to empty, e.g. 4,5.")
@click.option("--rebalance-rest", is_flag=True, help="Also rebalance the remaining brokers.")
@plan_options
def decommission(brokers: tuple[int, ...], rebalance_rest: bool, **kw: Any) -> None:
    """Empty brokers before removing them.

    Their replicas go largest first to the brokers furthest below their byte share (in the
    same rack when rack diversity fixes each rack's share), so bytes stay as balanced as moving
    only those replicas allows. With --rebalance-rest the removed brokers drain through the
    replica-count phase of a full rebalance instead. If some replica has no broker that may
    take it (RF larger than the brokers left, rack diversity, disk headroom, a budget) the
    command names the partitions and the constraint, writes nothing and exits 6, unless
    --allow-partial."""
    from kreassign.planner import balance

    run(kw, lambda s, o: balance.decommission(s, list(brokers), o, rebalance_rest=rebalance_rest))


@click.command("replace-broker")
@click.option("--from", "old", required=True, type=BROKER_ID, help="The broker to replace.")
@click.option("--to", "new", required=True, type=BROKER_ID, help="The broker that takes its replicas.")
@plan_options
def replace_broker(old: int, new: int, **kw: Any) -> None:
    """Move every replica of one broker to another, keeping replica order.

    Replicas the new broker cannot take go to the broker furthest below its byte share; if
    none may take one, the command exits 6 and writes nothing, unless --allow-partial."""
    from kreassign.planner import balance

    run(kw, lambda s, o: balance.replace_broker(s, old, new, o))


@click.command("set-rf")
@click.option("--topic", required=True, help="The topic to change.")
@click.option("--rf", required=True, type=click.IntRange(min=1), help="The new replication factor.")
@plan_options
def set_rf(topic: str, rf: int, **kw: Any) -> None:
    """Change a topic's replication factor."""
    from kreassign.planner import balance

    run(kw, lambda s, o: balance.set_replication_factor(s, topic, rf, o))


@click.command()
@plan_options
def leaders(**kw: Any) -> None:
    """Balance preferred leaders by reordering replica lists (no data moves)."""
    from kreassign.planner import balance

    run(kw, balance.balance_leaders)
