"""`kreassign estimate`: how long a reassignment would take at given throttles, and what limits it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from kreassign.cli.options import (
    COUNT, DURATION, SIZE, THROTTLE, output_option, plan_option, rate_options, sample_option, source_options, units_option,
)

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kreassign.cluster.units import Units
    from kreassign.predict.estimate import EstimateResult
    from kreassign.throttle.rates import Rates

_MAX_STALLED_ROWS = 20
_ORDERS = ("plan", "small-first", "large-first", "broker-balanced")


class BrokerRateType(click.ParamType):
    """`ID=RATE`: a throttle for both sides of one broker, e.g. `3=20MB/s`."""

    name = "ID=RATE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, int]:
        if isinstance(value, tuple):
            return value
        broker, sep, rate = str(value).partition("=")
        try:
            broker_id = int(broker.strip())
        except ValueError:
            broker_id = -1
        if not sep or broker_id < 0:
            self.fail(f"'{value}' is not ID=RATE, e.g. 3=20MB/s", param, ctx)
        return broker_id, THROTTLE.convert(rate, param, ctx)


@click.command()
@plan_option(help="Kafka reassignment JSON to estimate.")
@source_options
@sample_option
@rate_options(scope=" on every broker", default="; default: the cluster's current throttles")
@click.option("--broker-rate", "broker_rates", type=BrokerRateType(), multiple=True,
              help="Both rates of one broker, ID=RATE (repeatable; overrides the others).")
@click.option("--max-moves-per-broker", type=COUNT, default=None,
              help="Run at most N moves at a time out of, and into, each broker.")
@click.option("--max-inflight-bytes", type=SIZE, default=None, help="Run at most this many bytes of moves at a time.")
@click.option("--order", type=click.Choice(_ORDERS), default="plan", show_default=True,
              help="Which moves start first when a limit holds the others back.")
@click.option("--interval", type=DURATION, default=None,
              help="With a limit: how often the run polls for finished moves, as `execute --interval` "
              "(default 10s); a move starts at the first poll after a slot frees.")
@units_option
@output_option
def estimate(plan_file: str, bootstrap_server: str | None, snapshot: str | None, command_config: str | None,
             request_timeout: float | None, sample: float | None,
             rates: Rates,
             broker_rates: tuple[tuple[int, int], ...], max_moves_per_broker: int | None,
             max_inflight_bytes: int | None, order: str, interval: float | None, units: Units, output: str) -> None:
    """Estimate when a reassignment completes under replication throttles: the ETA, the lower
    bound no schedule can beat, the brokers that decide it, and the moves that can never catch
    up with their partition's writes (with the rate that would let them). Changes nothing."""
    from kreassign.cli.console import emit_json, stdout_console
    from kreassign.cli.runtime import load_state, read_text
    from kreassign.cluster.kafka_json import parse_reassignment, validate_execute_entries
    from kreassign.predict.estimate import RateRequest, estimate_plan

    parsed = parse_reassignment(read_text(plan_file))
    validate_execute_entries(parsed)
    state = load_state(bootstrap_server, snapshot, command_config, request_timeout, sample)
    request = RateRequest(leader_rate=rates.leader, follower_rate=rates.follower, broker_rates=dict(broker_rates))
    result = estimate_plan(state, parsed.entries, rates=request, max_moves_per_broker=max_moves_per_broker,
                           max_inflight_bytes=max_inflight_bytes, order=order,
                           **({} if interval is None else {"poll_s": interval}))
    if output == "json":
        emit_json(result.to_dict())
    else:
        stdout_console().print(render_estimate(result, units))


def render_estimate(result: EstimateResult, units: Units = "decimal") -> RenderableType:
    """The ETA headline, the bottlenecks, the moves that never complete and a per-broker table."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from kreassign.cluster.units import format_bytes, format_duration, format_rate
    from kreassign.cluster.write_sample import rates_line

    lower = result.lower
    head = Text()
    head.append(f"ETA {format_duration(result.eta_s)}", style="bold")
    where = f" on broker {lower.broker}" if lower.broker is not None else ""
    head.append(f" (lower bound {format_duration(lower.seconds)}: {lower.limit.label}{where}); "
                f"{result.moves} move(s) of {result.partitions} partition(s), {format_bytes(result.bytes, units)} to copy.")
    parts: list[RenderableType] = [head, Text(rates_line(result.write_rates),
                                              style="yellow" if result.write_rates is None else "")]
    if result.paced:
        limits = [f"{result.max_moves_per_broker} move(s) per broker" if result.max_moves_per_broker else "",
                  f"{format_bytes(result.max_inflight_bytes, units)} in flight" if result.max_inflight_bytes else ""]
        parts.append(Text(f"Paced ({', '.join(x for x in limits if x)}, order {result.order}): a move starts at the "
                          f"run's first poll after a slot frees (every {format_duration(result.poll_s)}, --interval)."))
    if not result.completes and result.completable_eta_s > 0:
        parts.append(Text(f"The moves that do complete are done after {format_duration(result.completable_eta_s)}."))
    if result.critical:
        named = ", ".join(
            (f"broker {c.broker} ({c.limit.label}" if c.broker is not None else f"({c.limit.label}")
            + f", {c.moves} move(s))" for c in result.critical[:5])
        parts.append(Text(f"Critical: {named}"))
    if result.stalled:
        table = Table(title=f"{len(result.stalled)} move(s) never complete", title_justify="left")
        for col in ("partition", "from", "to", "write rate", "limited by", "needs more than", "throttle that works"):
            table.add_column(col, justify="left" if col in ("partition", "limited by") else "right")
        for s in result.stalled[:_MAX_STALLED_ROWS]:
            limit = s.limit.label + (f" on broker {s.broker}" if s.broker is not None else "")
            table.add_row(str(s.tp), "-" if s.source is None else str(s.source), str(s.dest),
                          format_rate(s.write_bps, units), limit,
                          "-" if s.needed_bps is None else format_rate(s.needed_bps, units),
                          "-" if s.suggested_rate is None else format_rate(s.suggested_rate, units))
        if len(result.stalled) > _MAX_STALLED_ROWS:
            table.caption = f"... and {len(result.stalled) - _MAX_STALLED_ROWS} more (use --output json for all)"
        parts.append(table)
        if result.fix_rate is not None and result.fix_eta_s is not None:
            parts.append(Text(f"--throttle {result.fix_rate} ({format_rate(result.fix_rate, units)}) lets every move finish: "
                              f"ETA {format_duration(result.fix_eta_s)}."))
        else:
            parts.append(Text("No throttle alone lets these moves finish: a network or fetch limit holds them."))
    table = Table(title="Per broker", title_justify="left")
    for col in ("broker", "leader rate", "follower rate", "bytes in", "bytes out", "busy until"):
        table.add_column(col, justify="right")
    for b in result.brokers:
        table.add_row(str(b.broker), _rate(b.leader_rate, units), _rate(b.follower_rate, units),
                      format_bytes(b.bytes_in, units), format_bytes(b.bytes_out, units), format_duration(b.busy_until_s))
    parts.append(table)
    return Group(*parts)


def _rate(value: float, units: Units) -> str:
    from kreassign.cluster.units import format_rate

    return "unthrottled" if value == float("inf") else format_rate(value, units)
