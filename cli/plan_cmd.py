"""`kreassign plan`: what a reassignment would do, before anything touches the cluster."""
from __future__ import annotations

import click

from typing import TYPE_CHECKING

from kreassign.cli.options import output_option, plan_option, rate_options, sample_option, source_options, units_option

if TYPE_CHECKING:
    from kreassign.cluster.units import Units
    from kreassign.throttle.rates import Rates


@click.command()
@plan_option(help="Kafka reassignment JSON to examine.")
@source_options
@sample_option
@rate_options()
@units_option
@output_option
def plan(plan_file: str, bootstrap_server: str | None, snapshot: str | None, command_config: str | None,
         request_timeout: float | None, sample: float | None,
         rates: Rates, units: Units, output: str) -> None:
    """Summarise a reassignment: moves, bytes in and out per broker, leader changes, and the
    throttle configs that execution would set. Changes nothing."""
    from kreassign.cli.console import emit_json, stdout_console
    from kreassign.cli.runtime import load_state, read_text
    from kreassign.cli.plan_render import render_plan
    from kreassign.cluster.kafka_json import parse_reassignment, validate_execute_entries
    from kreassign.predict.plan_report import build_plan_report

    parsed = parse_reassignment(read_text(plan_file))
    validate_execute_entries(parsed)
    state = load_state(bootstrap_server, snapshot, command_config, request_timeout, sample)
    report = build_plan_report(state, parsed.entries, leader_rate=rates.leader,
                               follower_rate=rates.follower, replica_log_dirs=parsed.replica_log_dirs,
                               units=units)
    if output == "json":
        emit_json(report.to_dict())
    else:
        stdout_console().print(render_plan(report, units))
