"""`kreassign throttle show|set|clear|suggest`: throttles of running moves, live, journaled."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from kreassign.cli.options import (
    BROKER_LIST,
    COUNT,
    PERCENT,
    RATE,
    cluster_options,
    output_option,
    plan_option,
    rate_options,
    sample_option,
    source_options,
    units_option,
)
from kreassign.cli.runtime import connect, journal_store, runtime

if TYPE_CHECKING:
    from kreassign.cluster.units import Units
    from kreassign.predict.suggest import MeasuredImpact
    from kreassign.throttle.rates import Rates


@click.group()
def throttle() -> None:
    """Show, change, clear and suggest replication throttles (KIP-73), on running moves too."""


def _topics(value: str | None) -> list[str] | None:
    return None if value is None else [t.strip() for t in value.split(",") if t.strip()]


@throttle.command()
@cluster_options
@click.option("--brokers", type=BROKER_LIST, default=None, help="Only these brokers (default: every live broker).")
@click.option("--topics", default=None, help="Only these topics, comma-separated (default: every topic with lists).")
@units_option
@output_option
def show(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
         journal_dir: str | None, brokers: tuple[int, ...] | None, topics: str | None, units: Units,
         output: str) -> None:
    """Show each broker's leader, follower and log-dir rates (and where they come from) and each
    topic's throttled-replica lists, with the reassignments in flight."""
    from kreassign.cli.console import emit_json, stdout_console
    from kreassign.cli.watch_render import render_throttle_view
    from kreassign.execute.live_throttle import read_throttle_view

    names = _topics(topics)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        view = read_throttle_view(port, brokers=brokers, topics=names, all_topics=names is None)
    if output == "json":
        emit_json(view.to_dict())
    else:
        stdout_console().print(render_throttle_view(view, units))


@throttle.command(name="set")
@cluster_options
@rate_options(alias="--rate")
@click.option("--brokers", type=BROKER_LIST, default=None,
              help="Only these brokers (default: every broker in a reassignment in flight).")
@click.option("--keep-lists", is_flag=True,
              help="Leave the topics' throttled-replica lists alone (default: recompute them from the "
                   "reassignments in flight, by Kafka's rules).")
@click.option("--dry-run", is_flag=True, help="Say what would be set; change nothing.")
@units_option
@output_option
def set_command(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
                journal_dir: str | None, rates: Rates,
                brokers: tuple[int, ...] | None, keep_lists: bool, dry_run: bool, units: Units, output: str) -> None:
    """Change the throttle of a running move, without restarting anything. Every change is
    journaled with the values it replaces, so `throttle clear` restores them. It returns once each
    broker reads its new rates back (at most 10s; a broker slower than that is named), so a
    `throttle show` right after shows them."""
    from kreassign.cli.console import emit_json
    from kreassign.cli.runtime import run_control, timing
    from kreassign.cli.watch_render import set_lines
    from kreassign.execute.live_throttle import ThrottleSetRequest, apply_throttle_change, plan_throttle_set
    from kreassign.execute.run import live_owner, throttle_through_run
    from kreassign.execute.throttle_io import Confirm

    request = ThrottleSetRequest(leader_rate=rates.leader, follower_rate=rates.follower,
                                 brokers=brokers, update_lists=not keep_lists)
    store = journal_store(journal_dir)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        if request.leader_rate is None and request.follower_rate is None:
            plan_throttle_set(port, request)  # the one message for a missing rate
        owner = live_owner(port, run_control())
        if owner is not None and dry_run:
            click.echo(f"Would change the rates of the running {owner.describe()} through it; nothing was changed.")
            return
        through = throttle_through_run(port, request.leader_rate, request.follower_rate, brokers, store=store,
                                       control=run_control()) if owner is not None else None
        if through is None:
            change = plan_throttle_set(port, request)
            result = apply_throttle_change(port, change, store=store, dry_run=dry_run, confirm=Confirm(*timing()))
    if through is not None:
        if output == "json":
            emit_json(through.to_dict())
        else:
            for line in run_rates_lines(through, units):
                click.echo(line)
        return
    if output == "json":
        emit_json(result.to_dict())
    else:
        for line in set_lines(result):
            click.echo(line)


def run_rates_lines(through: Any, units: Units = "decimal") -> list[str]:
    """What `throttle set` changed through the run in flight."""
    from kreassign.cluster.units import format_rate

    a = through.answer
    rates = ", ".join(f"{side} {format_rate(v, units)}" for side, v in (("leader", a.leader_rate), ("follower", a.follower_rate))
                      if v is not None)
    scope = "every broker of its plan" if a.brokers is None else f"broker(s) {','.join(map(str, a.brokers))}"
    lines = [f"Changed the rates of the running {through.owner.describe()} through it: {rates} on {scope}.",
             f"Set now on broker(s) {','.join(map(str, a.applied)) or 'none (no broker is throttled yet)'}; "
             "its later waves start with these rates."]
    if a.pending:
        lines.append(f"Broker(s) {','.join(map(str, a.pending))} did not answer: the run sets them once they are back, "
                     "before any of their moves starts.")
    if through.journal_path is not None:
        lines.append(f"Journaled by the run in {through.journal_path}.")
    return lines


@throttle.command()
@cluster_options
@click.option("--brokers", type=BROKER_LIST, default=None, help="Only these brokers (journals stay open).")
@click.option("--topics", default=None, help="Only these topics, comma-separated (journals stay open).")
@click.option("--force", is_flag=True, help="Clear although reassignments are still running.")
@click.option("--dry-run", is_flag=True, help="Say what would be cleared and restored; change nothing.")
@output_option
def clear(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
          journal_dir: str | None, brokers: tuple[int, ...] | None, topics: str | None, force: bool,
          dry_run: bool, output: str) -> int:
    """Remove throttles, putting back the values that existed before kreassign changed them
    (from the open execution journals); throttles no journal knows are deleted, as Kafka does.
    Safe to run at any time; refuses while moves run unless --force."""
    from kreassign.cli.console import emit_json
    from kreassign.cli.watch_render import clear_lines
    from kreassign.execute.live_throttle import clear_all_throttles

    from kreassign.cli.runtime import run_control
    from kreassign.execute.run import refuse_clear_while_running

    with connect(bootstrap_server, command_config, request_timeout) as port:
        if not dry_run:
            refuse_clear_while_running(port, run_control())
        result = clear_all_throttles(port, store=journal_store(journal_dir), brokers=brokers, topics=_topics(topics),
                                     force=force, dry_run=dry_run)
    if output == "json":
        emit_json(result.to_dict())
    else:
        for line in clear_lines(result):
            click.echo(line)
    return 0 if result.complete else 1


@throttle.command()
@plan_option(help="The reassignment to throttle.")
@source_options
@sample_option
@click.option("--max-impact", type=PERCENT, required=True,
              help="The bound, e.g. 20%. With --canary-baseline: how far the canary's produce p99 may rise over "
                   "its baseline. Without: the most of each broker's network capacity the moves may take (a "
                   "capacity share, not measured latency; the output says which).")
@click.option("--canary-baseline", type=click.Path(dir_okay=False), default=None,
              help="A `kreassign canary -o json` from before the move. While the moves run, measure the canary "
                   "now and suggest the rates at which its p99 rise reaches --max-impact (needs --bootstrap-server).")
@click.option("--canary-topic", default=None, help="With --canary-baseline: an existing topic to measure on.")
@click.option("--deadline", default=None, help="Finish by then: 2h, 06:00, or a date-time.")
@click.option("--network-capacity", type=RATE, default=None,
              help="Network capacity (each direction) of brokers whose capacity the snapshot lacks.")
@click.option("--max-moves-per-broker", type=COUNT, default=None,
              help="Plan for paced execution with this many moves per broker.")
@units_option
@output_option
def suggest(plan_file: str, bootstrap_server: str | None, snapshot: str | None, command_config: str | None,
            request_timeout: float | None, sample: float | None,
            max_impact: float, canary_baseline: str | None, canary_topic: str | None, deadline: str | None,
            network_capacity: int | None, max_moves_per_broker: int | None, units: Units, output: str) -> None:
    """Suggest the highest leader and follower rates that keep client impact within --max-impact,
    and say whether --deadline is reachable (by the replication model); if not, what would reach
    it: a rate, more concurrency, or which brokers bound it. The impact is the measured rise of a
    canary's produce p99 with --canary-baseline (while the moves run), else each broker's network
    capacity share, as the output says."""
    from datetime import datetime

    from kreassign.cli.console import emit_json, stdout_console
    from kreassign.cli.runtime import read_text
    from kreassign.cluster.units import parse_deadline
    from kreassign.cli.watch_render import render_suggestion
    from kreassign.cluster.kafka_json import parse_reassignment
    from kreassign.cli.runtime import load_state
    from kreassign.predict.suggest import SuggestRequest, check_capacities, suggest_throttle

    if canary_topic and not canary_baseline:
        raise click.UsageError("--canary-topic names the topic of --canary-baseline; add --canary-baseline")
    if canary_baseline and not bootstrap_server:
        raise click.UsageError("--canary-baseline measures the cluster now: give --bootstrap-server")
    parsed = parse_reassignment(read_text(plan_file))
    capacity = (float(network_capacity), float(network_capacity)) if network_capacity else None
    if bootstrap_server and not snapshot and not canary_baseline and sample != 0:
        # what the answer needs and a moment's read can tell, before the write rates are sampled
        check_capacities(load_state(bootstrap_server, None, command_config, request_timeout, 0), parsed.entries,
                         capacity)
    state = load_state(bootstrap_server, snapshot, command_config, request_timeout, sample)
    measured = None
    if canary_baseline:
        measured = _measure(canary_baseline, canary_topic, bootstrap_server, command_config, request_timeout)
    now = runtime().now or datetime.now().astimezone
    request = SuggestRequest(
        max_impact=max_impact, deadline_s=parse_deadline(deadline, now()) if deadline else None,
        max_moves_per_broker=max_moves_per_broker, measured=measured, network_capacity=capacity, units=units)
    result = suggest_throttle(state, parsed.entries, request)
    if output == "json":
        emit_json(result.to_dict())
    else:
        stdout_console().print(render_suggestion(result, units))


def _measure(baseline_file: str, topic: str | None, bootstrap_server: str | None, command_config: str | None,
             request_timeout: float | None) -> MeasuredImpact:
    """The canary now against its baseline from before the move."""
    from kreassign.cli.runtime import read_text, timing
    from kreassign.cluster.client_config import load_client_config
    from kreassign.cluster.client_latency import read_canary
    from kreassign.execute.measured_impact import measure_impact

    baseline = read_canary(read_text(baseline_file), baseline_file)
    config = load_client_config(command_config, bootstrap_server=bootstrap_server, timeout_s=request_timeout)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        return measure_impact(port, config, baseline, topic=topic, sleep=timing()[1],
                              warn=lambda line: click.echo(f"Note: {line}", err=True))
