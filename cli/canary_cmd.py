"""`kreassign canary`: what a client of each broker sees now (and, against a baseline, how much
worse it is): produce p50/p99 with acks=all, end-to-end p99, KIP-13 throttle time, timeouts."""
from __future__ import annotations

import click

from kreassign.cli.options import DURATION, cluster_options, output_option
from kreassign.cluster.client_latency import CANARY_INTERVAL_S, CANARY_ROUNDS, P99_BOUNDED_AT, BrokerLatency, Impact


@click.command()
@cluster_options
@click.option("--topic", default=None,
              help="Measure on this existing topic (default: create __kreassign_canary with a partition led by "
                   "each broker, and remove it afterwards).")
@click.option("--rounds", type=click.IntRange(min=1), default=CANARY_ROUNDS, show_default=True,
              help=f"Records sent to every partition ({P99_BOUNDED_AT} or more bound the p99 on both sides).")
@click.option("--interval", type=DURATION, default=CANARY_INTERVAL_S, show_default=True, help="Time between rounds.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False),
              help="A previous `kreassign canary -o json` (before the move): report the impact against it.")
@output_option
def canary(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
           journal_dir: str | None, topic: str | None, rounds: int, interval: float, baseline_file: str | None,
           output: str) -> None:
    """Measure what clients experience, per broker: a real producer (acks=all) and consumer on a
    canary topic. Run it before a move for a baseline (-o json > baseline.json), and during the
    move with --baseline baseline.json to see the impact as a ratio. Each p99 comes with its 95%
    interval; a rise counts as impact only when more produces exceed the baseline's tail than
    chance allows (at most 1% false alarms per broker), else it is reported as within the noise."""
    from kreassign.cli.console import emit_json
    from kreassign.cli.runtime import connect, read_text
    from kreassign.cluster.canary import run_canary
    from kreassign.cluster.client_config import load_client_config
    from kreassign.cluster.client_latency import impact, read_canary, worst

    baseline = read_canary(read_text(baseline_file), baseline_file) if baseline_file else ()
    config = load_client_config(command_config, bootstrap_server=bootstrap_server, timeout_s=request_timeout)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        report = run_canary(port, config, topic=topic, rounds=rounds, interval_s=interval)
    impacts = impact(baseline, report.brokers) if baseline else {}
    if output == "json":
        doc = report.to_dict()
        if baseline:
            doc["impact"] = [i.to_dict() for i in impacts.values()]
            doc["worst_impact"] = worst(impacts)
        emit_json(doc)
        return
    click.echo(f"Canary on {report.topic} (times in cluster ms; p99 with its 95% interval):")
    for b, lat in report.brokers.items():
        click.echo(f"  broker {b}: {lat.requests} produce(s), {lat.timeouts} timed out, p50 {_ms(lat.p50_ms)}, "
                   f"p99 {_ms(lat.p99_ms)} {_interval(lat)}, end-to-end p99 {_ms(lat.end_to_end_p99_ms)}, "
                   f"throttled up to {lat.throttle_max_ms:.0f} ms{_rise(impacts.get(b))}")
    for note in report.notes:
        click.echo(f"Note: {note}", err=True)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _interval(lat: BrokerLatency) -> str:
    """The p99's interval; an open end where the requests are too few to bound it."""
    if lat.p99_ms is None:
        return ""
    low = "0" if lat.p99_low_ms is None else f"{lat.p99_low_ms:.1f}"
    high = f"{lat.p99_high_ms:.1f}" if lat.p99_high_ms is not None else f"? (needs {P99_BOUNDED_AT} produces)"
    return f"[{low}, {high}]"


def _rise(rise: Impact | None) -> str:
    if rise is None or rise.measured_increase is None:
        return ""
    if rise.within_noise:
        return f", p99 {rise.measured_increase:+.0%} vs baseline (within the noise: no impact)"
    return f", p99 {rise.p99_increase:+.0%} vs baseline"
