"""`kreassign watch`: live progress, ETAs, stall detection, pacing and auto-throttle.

The loop is `kreassign.execute.watch.watch`; this module parses options, connects, and renders
events (rich bars on a terminal, one line per poll otherwise, JSON lines with --output json).
Tests inject the clock, the sleeper and the connection through `cli.runtime.Runtime`.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kreassign.cli.options import (
    COUNT,
    DEFAULT_SAMPLE_S,
    DURATION,
    PERCENT,
    RATE,
    SIZE,
    THROTTLE,
    cluster_options,
    output_option,
    plan_option,
    rate_options,
    units_option,
)
from kreassign.cli.runtime import connect, journal_store, run_control, runtime

if TYPE_CHECKING:
    from kreassign.cluster.units import Units
    from kreassign.execute.watch_events import WatchResult
    from kreassign.throttle.rates import Rates

F = TypeVar("F", bound=Callable[..., Any])


@click.command()
@cluster_options
@plan_option(required=False, help="Watch only this plan's partitions (default: every reassignment in flight).")
@click.option("--pace", "pace_file", type=click.Path(dir_okay=False),
              help="Submit this plan in waves as moves complete (with --max-moves-per-broker and/or "
                   "--max-inflight-bytes), then watch it to the end.")
@click.option("--max-moves-per-broker", type=COUNT, default=None,
              help="With --pace: moves each broker sends, and receives, at once.")
@click.option("--max-inflight-bytes", type=SIZE, default=None, help="With --pace: bytes moving at once.")
@click.option("--order", type=click.Choice(["small-first", "large-first", "plan", "broker-balanced"]), default="plan",
              show_default=True, help="With --pace: which partitions start first.")
@rate_options()
@click.option("--additional", is_flag=True, help="With --pace: start although other reassignments run.")
@click.option("--interval", type=DURATION, default=10.0, show_default=True, help="Time between polls.")
@click.option("--stop-after", "stop_after", type=DURATION, default=None,
              help="Stop watching after this long (exit status 3); the moves go on.")
@click.option("--timeout", "timeout_alias", type=DURATION, default=None,
              help="Deprecated: the old name of --stop-after (kept for one release).")
@click.option("--stall-after", type=DURATION, default=None,
              help="A move whose lag has not shrunk for this long is stalled (default: 3 intervals, >= 30s).")
@click.option("--fail-on-stall", is_flag=True, help="Stop with exit status 4 when a move cannot finish.")
@click.option("--keep-throttles", is_flag=True, help="Leave the throttles in place when everything is done.")
@click.option("--auto-throttle", is_flag=True, help="Adjust the rates live toward --target-headroom or --deadline.")
@click.option("--target-headroom", type=PERCENT, default=None,
              help="With --auto-throttle: share of each broker's network to keep free, e.g. 30%.")
@click.option("--deadline", default=None, help="With --auto-throttle: finish by then: 2h, 06:00, or a date-time.")
@click.option("--max-impact", type=PERCENT, default=None,
              help="With --auto-throttle and --canary or --metrics-url: keep clients' produce p99 within this much "
                   "above its baseline (e.g. 20%): raise the rates below the bound, lower them above it.")
@click.option("--min-rate", type=THROTTLE, default=1_000_000, show_default=True, help="Auto-throttle's lowest rate.")
@click.option("--max-rate", type=THROTTLE, default=None, help="Auto-throttle's highest rate.")
@click.option("--change-threshold", type=PERCENT, default=0.1, show_default=True,
              help="Auto-throttle changes a rate only when it differs by more than this.")
@click.option("--adjust-every", type=DURATION, default=60.0, show_default=True,
              help="Auto-throttle changes rates at most this often.")
@click.option("--network-capacity", type=RATE, default=None,
              help="Each broker's network capacity (both directions), for --target-headroom and the model.")
@click.option("--consumer-fanout", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Bytes consumers read per byte written (client traffic for --target-headroom).")
@click.option("--time-scale", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Cluster seconds per wall-clock second, for rates, ETAs, --interval and --stop-after "
                   "(default: what the cluster reports: a kreassign sandbox its --speed, Kafka 1).")
@click.option("--sample", type=DURATION, default=DEFAULT_SAMPLE_S, show_default=True,
              help="Measure the watched partitions' write rates over this long from the start (the first "
                   "poll comes at once with the rates known so far; the poll at the window's end brings the "
                   "sampled ones in) (0: learn them from the polls).")
@click.option("--metrics-url", "metrics_urls", multiple=True, metavar="ID=URL|@FILE",
              help="A broker's Prometheus endpoint (the JMX exporter's /metrics), repeatable, or a file of 'ID URL' "
                   "lines: shows produce latency, client throttle time, under-replicated partitions and "
                   "replication traffic per broker. A broker named again adds an endpoint read with its "
                   "others (e.g. a KIP-714 client-telemetry receiver serving what clients push).")
@click.option("--canary", "use_canary", is_flag=True,
              help="Measure clients with a canary producer and consumer (acks=all) on a topic with a partition "
                   "led by each broker (created and removed by watch): a baseline before the first poll, a "
                   "measurement at every poll.")
@click.option("--canary-topic", default=None, help="With --canary: an existing topic to use instead.")
@click.option("--metrics-names", type=click.Path(dir_okay=False),
              help="JSON mapping of the metric names to read, over Strimzi's example rule names.")
@units_option
@click.option("--dry-run", is_flag=True, help="Watch, but change nothing: say what would be set, submitted, cleared.")
@output_option
def watch(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
          journal_dir: str | None, plan_file: str | None, pace_file: str | None, max_moves_per_broker: int | None,
          max_inflight_bytes: int | None, order: str, rates: Rates, additional: bool, interval: float, stop_after: float | None,
          timeout_alias: float | None, stall_after: float | None, fail_on_stall: bool, keep_throttles: bool, auto_throttle: bool,
          target_headroom: float | None, deadline: str | None, max_impact: float | None, min_rate: int,
          max_rate: int | None,
          change_threshold: float, adjust_every: float, network_capacity: int | None, consumer_fanout: float,
          time_scale: float | None, sample: float, metrics_urls: tuple[str, ...], use_canary: bool,
          canary_topic: str | None, metrics_names: str | None,
          units: Units, dry_run: bool, output: str) -> int:
    """Follow reassignments live: progress bars per move and overall (bytes copied against the
    leader's size), throughput, the ETA from observed rates and from the replication model, and
    moves that cannot finish because their partition's writes exceed their throttled share (with
    the rates that would work). Every ETA, per move and overall, comes from one model run; a
    figure a poll could not read is held at its last value and marked so, never blanked.
    Throttles are restored when everything is done. With --pace it
    submits the plan in waves; with --auto-throttle it tunes the rates as it goes. Against an
    accelerated sandbox every time is sandbox time (the header says so).

    Exit status: 0 done, 1 error, 3 timed out, 4 a move cannot finish (--fail-on-stall)."""
    from kreassign.cli.runtime import read_text
    from kreassign.cluster.errors import InputError
    from kreassign.cluster.kafka_json import parse_reassignment, validate_execute_entries
    from kreassign.execute.auto_throttle import AutoThrottlePolicy
    from kreassign.execute.pacing import PaceLimits
    from kreassign.execute.watch_request import WatchRequest
    from kreassign.execute.run import watch_run
    from kreassign.cluster.units import parse_deadline

    if timeout_alias is not None:
        if stop_after is not None:
            raise click.UsageError("--timeout is the old name of --stop-after: give one of them")
        click.echo("Note: watch --timeout is deprecated: use --stop-after (same meaning); --timeout will be removed "
                   "in the next release", err=True)
        stop_after = timeout_alias
    if plan_file and pace_file:
        raise click.UsageError("give the plan once: --pace FILE both submits and watches it")
    pacing = max_moves_per_broker is not None or max_inflight_bytes is not None or order != "plan"
    if pacing and not pace_file:
        raise click.UsageError("--max-moves-per-broker, --max-inflight-bytes and --order need --pace PLAN_FILE")
    if not auto_throttle and (target_headroom is not None or deadline is not None or max_impact is not None):
        raise click.UsageError("--target-headroom, --deadline and --max-impact steer --auto-throttle; "
                               "add --auto-throttle")
    if max_impact is not None and not metrics_urls and not use_canary:
        raise click.UsageError("--max-impact needs a measure of client impact: add --canary or --metrics-url ID=URL")
    if canary_topic and not use_canary:
        raise click.UsageError("--canary-topic names the topic of --canary; add --canary")
    targets = None
    source = pace_file or plan_file
    if source:
        parsed = parse_reassignment(read_text(source))
        if pace_file:
            validate_execute_entries(parsed)
        targets = tuple(parsed.entries)
    rt = runtime()
    policy = None
    if auto_throttle:
        if target_headroom is None and deadline is None and max_impact is None:
            raise InputError("--auto-throttle needs --max-impact 20%, --target-headroom 30% or --deadline 06:00")
        deadline_s = parse_deadline(deadline, (rt.now or datetime.now().astimezone)()) if deadline else None
        policy = AutoThrottlePolicy(target_headroom=target_headroom, deadline_s=deadline_s, min_rate=min_rate,
                                    max_rate=max_rate, change_threshold=change_threshold,
                                    min_interval_s=adjust_every, consumer_fanout=consumer_fanout,
                                    max_impact=max_impact)
    capacity = (float(network_capacity), float(network_capacity)) if network_capacity else None
    request = WatchRequest(
        targets=targets, interval_s=interval, timeout_s=stop_after, keep_throttles=keep_throttles,
        fail_on_stall=fail_on_stall, stall_after_s=stall_after,
        pace=PaceLimits(max_moves_per_broker, max_inflight_bytes, order) if pace_file else None,  # type: ignore[arg-type]
        leader_rate=rates.leader, follower_rate=rates.follower,
        additional=additional, auto=policy, network_capacity=capacity, dry_run=dry_run, time_scale=time_scale,
        sample_s=sample, **metrics_request(metrics_urls, metrics_names))
    emit, close = event_printer(output, units)
    try:
        with connect(bootstrap_server, command_config, request_timeout) as port:
            closing = None
            if use_canary:
                request, closing = with_canary(port, request, bootstrap_server, command_config, request_timeout,
                                               canary_topic)
            try:
                result = watch_run(port, request, store=journal_store(journal_dir), control=run_control(), emit=emit)
            finally:
                for note in closing() if closing is not None else []:
                    click.echo(f"Note: {note}", err=True)
    finally:
        close()
    if dry_run and request.pace is not None:
        echo_first_wave(result, len(targets or ()), output)
    return int(result.status)


def echo_first_wave(result: WatchResult, partitions: int, output: str) -> None:
    """What a paced dry run would submit first."""
    first = [str(tp) for tp in result.first_wave]
    if output == "json":
        click.echo(json.dumps({"event": "dry-run", "first_wave": first, "partitions": partitions,
                               "pending_bytes": result.view.pending_bytes}))
    else:
        click.echo(f"Would submit {partitions} partition(s) in waves; the first wave: "
                   f"{','.join(first) or 'nothing fits yet'}. Nothing was changed.")


def with_canary(port: Any, request: Any, bootstrap_server: str | None, command_config: str | None,
                request_timeout: float | None, topic: str | None) -> tuple[Any, Callable[[], list[str]]]:
    """The request with a canary measurement, and the function that closes the canary."""
    import dataclasses
    import functools

    from kreassign.cluster.client_latency import CANARY_POLL_ROUNDS

    from kreassign.cluster.canary import open_canary
    from kreassign.cluster.client_config import load_client_config
    from kreassign.cluster.time_scale import read_time_scale

    config = load_client_config(command_config, bootstrap_server=bootstrap_server, timeout_s=request_timeout)
    scale = request.time_scale or read_time_scale(port, [b.id for b in port.describe_brokers().brokers])
    probe, close = open_canary(port, config, topic=topic, scale=scale)
    return dataclasses.replace(request, canary=functools.partial(probe.measure, CANARY_POLL_ROUNDS)), close


def metrics_request(urls: tuple[str, ...], names_file: str | None) -> dict[str, Any]:
    """The `WatchRequest` fields for --metrics-url and --metrics-names."""
    from kreassign.cli.runtime import read_text
    from kreassign.cluster.broker_metrics import MetricNames
    from kreassign.cluster.metrics_source import MetricsEndpoints

    if names_file and not urls:
        raise click.UsageError("--metrics-names maps the names read from --metrics-url; add --metrics-url")
    out: dict[str, Any] = {}
    if urls:
        out["metrics"] = MetricsEndpoints.parse(urls, read_text)
    if names_file:
        out["metric_names"] = MetricNames.from_mapping(read_text(names_file), names_file)
    return out


def event_printer(output: str, units: Units = "decimal") -> tuple[Callable[[Any], None], Callable[[], None]]:
    """How events reach the operator: JSON lines, one live screen (a terminal), or a line per poll."""
    from kreassign.cli.watch_render import WatchScreen, event_lines, summary_line, time_header, write_json_event
    from kreassign.execute.watch_events import ProgressEvent

    if output == "json":
        return (lambda event: write_json_event(sys.stdout, event)), (lambda: None)
    from kreassign.cli.console import stdout_console

    console = stdout_console()
    if not console.is_terminal:
        headed = False

        def plain(event: Any) -> None:
            nonlocal headed
            lines = event_lines(event, units)
            if isinstance(event, ProgressEvent):
                header = time_header(event.time_scale)
                lines = ([header] if header and not headed else []) + [summary_line(event, units)]
                headed = True
            for line in lines:
                click.echo(line)
        return plain, (lambda: None)
    from rich.live import Live

    screen = WatchScreen(units=units)
    live = Live(console=console, auto_refresh=False, transient=False)
    live.start()

    def show(event: Any) -> None:
        screen.update(event)
        live.update(screen.render(), refresh=True)
    return show, live.stop
