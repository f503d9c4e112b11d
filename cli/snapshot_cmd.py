"""`kreassign snapshot`: capture a cluster (or convert a snapshot) to a file for offline planning."""
from __future__ import annotations

import click

from typing import TYPE_CHECKING

from kreassign.cli.options import output_option, sample_option, source_options, units_option

if TYPE_CHECKING:
    from kreassign.cluster.units import Units


@click.command()
@source_options
@click.option("--output-file", "-f", "output_file", required=True, type=click.Path(dir_okay=False),
              help="Where to write: FILE.json (for people) or FILE.parquet (for big clusters).")
@click.option("--format", "fmt", type=click.Choice(["json", "parquet"]), default=None,
              help="File format (default: from the file name).")
@sample_option
@click.option("--no-sizes", is_flag=True, help="Skip DescribeLogDirs (partition sizes are then 0).")
@units_option
@output_option
def snapshot(bootstrap_server: str | None, snapshot: str | None, command_config: str | None, request_timeout: float | None,
             output_file: str, fmt: str | None, sample: float | None, no_sizes: bool, units: Units, output: str) -> None:
    """Write the cluster's brokers, partitions (replicas, leader, ISR, sizes), in-flight
    reassignments and throttle configs to a snapshot file, with each partition's write rate
    measured over --sample. With --snapshot, convert a file."""
    from kreassign.cluster.snapshot import write_snapshot
    from kreassign.cli.runtime import load_state
    from kreassign.cluster.units import format_bytes
    from kreassign.cluster.write_sample import rates_line, rates_to_dict

    state = load_state(bootstrap_server, snapshot, command_config, request_timeout, sample, with_sizes=not no_sizes)
    write_snapshot(state, output_file, format=fmt)  # type: ignore[arg-type]
    facts = state.describe()
    if output == "json":
        from kreassign.cli.console import emit_json

        emit_json({"file": output_file, **facts, "reassignments_in_flight": len(state.reassignments),
                   "write_rates": rates_to_dict(state.rates_origin())})
        return
    click.echo(
        f"Wrote {output_file}: {facts['brokers']} brokers, {facts['topics']} topics, "
        f"{facts['partitions']} partitions, {format_bytes(facts['bytes'], units)}, "
        f"{len(state.reassignments)} reassignment(s) in flight.", err=True)
    click.echo(rates_line(state.rates_origin()), err=True)
