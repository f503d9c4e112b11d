"""`kreassign canary`: what a client of each broker sees now (and, against a baseline, how much
worse it is): produce p50/p99 with acks=all, end-to-end p99, KIP-13 throttle time, timeouts."""
from __future__ import annotations

import click

from kreassign.cli.options import DURATION, cluster_options, output_option
from kreassign.cluster.client_latency import CANARY_INTERVAL_S, CANARY_ROUNDS


@click.command()
@cluster_options
@click.option("--topic", default=None,
              help="Measure on this existing topic (default: create __kreassign_canary with a partition led by "
                   "each broker, and remove it afterwards).")
@click.option("--rounds", type=click.IntRange(min=1), default=CANARY_ROUNDS, show_default=True,
              help="Records sent to every partition.")
@click.option("--interval", type=DURATION, default=CANARY_INTERVAL_S, show_default=True, help="Time between rounds.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False),
              help="A previous `kreassign canary -o json` (before the move): report the impact against it.")
@output_option
def canary(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
           journal_dir: str | None, topic: str | None, rounds: int, interval: float, baseline_file: str | None,
           output: str) -> None:
    """Measure what clients experience, per broker: a real producer (acks=all) and consumer on a
    canary topic. Run it before a move for a baseline (-o json > baseline.json), and during the
    move with --baseline baseline.json to see the impact as a ratio."""
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
    click.echo(f"Canary on {report.topic} (times in cluster ms):")
    for b, lat in report.brokers.items():
        rise = impacts.get(b)
        extra = "" if rise is None or rise.p99_increase is None else f", p99 {rise.p99_increase:+.0%} vs baseline"
        click.echo(f"  broker {b}: {lat.requests} produce(s), {lat.timeouts} timed out, p50 {_ms(lat.p50_ms)}, "
                   f"p99 {_ms(lat.p99_ms)}, end-to-end p99 {_ms(lat.end_to_end_p99_ms)}, "
                   f"throttled up to {lat.throttle_max_ms:.0f} ms{extra}")
    for note in report.notes:
        click.echo(f"Note: {note}", err=True)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"
