"""`kreassign generate`: Kafka's --generate as a subcommand, seedable and scriptable."""
from __future__ import annotations

import click

from kreassign.cli.options import BROKER_LIST, output_option, seed_option, source_options


@click.command()
@click.option("--topics-to-move-json-file", "topics_file", type=click.Path(dir_okay=False),
              help='Topics JSON: {"topics":[{"topic":"foo"}],"version":1}.')
@click.option("--topic", "topics", multiple=True, help="A topic to move (repeatable), instead of the JSON file.")
@click.option("--broker-list", required=True, type=BROKER_LIST, help="Target brokers, e.g. 1,2,3.")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore racks, like Kafka's flag.")
@source_options
@seed_option
@click.option("--write-plan", type=click.Path(dir_okay=False),
              help="Also write the proposed reassignment JSON here, and the current one to FILE.rollback.json.")
@output_option
def generate(topics_file: str | None, topics: tuple[str, ...], broker_list: tuple[int, ...],
             disable_rack_aware: bool, bootstrap_server: str | None, snapshot: str | None,
             command_config: str | None, request_timeout: float | None, seed: int | None, write_plan: str | None, output: str) -> None:
    """Propose a layout with Kafka's own algorithm (AdminUtils.assignReplicasToBrokers).

    Like Kafka, this lays every listed topic out anew and ignores where data is now; use
    `kreassign rebalance` for a minimal-movement plan."""
    from kreassign.cli.console import emit_json
    from kreassign.cli.kafka_actions import current_assignment_json, render_generate
    from kreassign.cli.runtime import read_text
    from kreassign.cluster.errors import InputError
    from kreassign.cluster.kafka_json import format_reassignment, parse_topics_to_move
    from kreassign.cluster.source import load_cluster_state
    from kreassign.planner.generate import generate_assignment

    if bool(topics_file) == bool(topics):
        raise InputError("give the topics either with --topics-to-move-json-file or with --topic, not both")
    names = parse_topics_to_move(read_text(topics_file)) if topics_file else list(topics)
    state = load_cluster_state(bootstrap_server=bootstrap_server, snapshot=snapshot,
                               command_config=command_config, timeout_s=request_timeout, with_sizes=False)
    result = generate_assignment(state, names, list(broker_list), rack_aware=not disable_rack_aware, seed=seed)
    for warning in result.warnings:
        click.echo(f"Warning: {warning}", err=True)
    current = current_assignment_json(result.current, bootstrap_server=bootstrap_server,
                                      command_config=command_config, timeout_s=request_timeout)
    proposed = format_reassignment(result.proposed)
    if write_plan:
        from kreassign.cli.runtime import write_text

        write_text(write_plan, proposed + "\n")
        write_text(f"{write_plan.removesuffix('.json')}.rollback.json", current + "\n")
    if output == "json":
        import json

        emit_json({"current": json.loads(current), "proposed": json.loads(proposed)})
    else:
        click.echo(render_generate(current, proposed), nl=False)
