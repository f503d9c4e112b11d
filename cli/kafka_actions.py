"""The actions behind the Kafka-compatible front door, printing exactly what Kafka's tool prints."""
from __future__ import annotations

from typing import TextIO

from kreassign.cli.kafka_args import KafkaArgs
from kreassign.cli.runtime import read_text
from kreassign.cluster.errors import AdminCommandFailed


def dispatch(args: KafkaArgs, *, out: TextIO, err: TextIO) -> int:
    action = args.action
    if action == "generate":
        return generate(args, out=out, err=err)
    from kreassign.cli import kafka_live

    actions = {"execute": kafka_live.execute, "verify": kafka_live.verify,
               "cancel": kafka_live.cancel, "list": kafka_live.list_action}
    return int(actions[action](args, out=out, err=err))


def generate(args: KafkaArgs, *, out: TextIO, err: TextIO) -> int:
    from kreassign.cluster.kafka_json import (
        format_reassignment,
        parse_broker_list,
        parse_topics_to_move,
    )
    from kreassign.cluster.source import load_cluster_state
    from kreassign.planner.generate import generate_assignment

    brokers = parse_broker_list(args.value("broker-list") or "")
    topics = parse_topics_to_move(read_text(args.value("topics-to-move-json-file") or ""))
    seed = args.long("seed", default=-1) if args.has("seed") else None
    state = load_cluster_state(
        bootstrap_server=args.value("bootstrap-server"), snapshot=args.value("snapshot"),
        command_config=args.value("command-config"), with_sizes=False,
    )
    result = generate_assignment(
        state, topics, brokers, rack_aware=not args.has("disable-rack-aware"),
        seed=seed,
    )
    for warning in result.warnings:
        err.write(f"Warning: {warning}\n")
    out.write(render_generate(format_reassignment(result.current), format_reassignment(result.proposed)))
    return 0


def render_generate(current_json: str, proposed_json: str) -> str:
    """Kafka's two-part --generate output (reference §2.3)."""
    return (f"Current partition replica assignment\n{current_json}\n\n"
            f"Proposed partition reassignment configuration\n{proposed_json}\n")
