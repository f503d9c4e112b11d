"""The actions behind the Kafka-compatible front door, printing exactly what Kafka's tool prints."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from kreassign.cli.kafka_args import KafkaArgs
from kreassign.cli.runtime import read_text
from kreassign.cluster.errors import AdminCommandFailed

if TYPE_CHECKING:
    from kreassign.cluster.model import TopicPartition


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
    current = current_assignment_json(result.current, bootstrap_server=args.value("bootstrap-server"),
                                      command_config=args.value("command-config"))
    out.write(render_generate(current, format_reassignment(result.proposed)))
    return 0


def current_assignment_json(current: Mapping[TopicPartition, Sequence[int]], *, bootstrap_server: str | None,
                            command_config: str | None, timeout_s: float | None = None) -> str:
    """The current assignment --generate prints: each replica's log dir, read from the cluster as
    Kafka 4.2+ does (KAFKA-19582); "any" when planning from a snapshot."""
    from kreassign.cluster.kafka_json import format_reassignment, with_log_dirs
    from kreassign.cluster.source import read_replica_log_dirs

    dirs = read_replica_log_dirs(current, bootstrap_server=bootstrap_server, command_config=command_config,
                                 timeout_s=timeout_s)
    return format_reassignment(with_log_dirs(current, dirs))


def render_generate(current_json: str, proposed_json: str) -> str:
    """Kafka's two-part --generate output (reference §2.3)."""
    return (f"Current partition replica assignment\n{current_json}\n\n"
            f"Proposed partition reassignment configuration\n{proposed_json}\n")
