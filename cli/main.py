"""Entry point: routes Kafka-style invocations to the compatible front door, the rest to click.

`kreassign --bootstrap-server H --reassignment-json-file F --execute` behaves like
`kafka-reassign-partitions.sh`; `kreassign <command> ...` runs a kreassign subcommand.
Subcommand modules are imported only when used, so `kreassign --help` stays fast.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from kreassign.cli.boundary import run_guarded

# name -> "module:attribute"; the order here is the order in --help.
COMMANDS: dict[str, str] = {
    "generate": "kreassign.cli.generate_cmd:generate",
    "plan": "kreassign.cli.plan_cmd:plan",
    "rebalance": "kreassign.cli.balance_cmd:rebalance",
    "add-brokers": "kreassign.cli.balance_cmd:add_brokers",
    "decommission": "kreassign.cli.balance_cmd:decommission",
    "replace-broker": "kreassign.cli.balance_cmd:replace_broker",
    "set-rf": "kreassign.cli.balance_cmd:set_rf",
    "leaders": "kreassign.cli.balance_cmd:leaders",
    "snapshot": "kreassign.cli.snapshot_cmd:snapshot",
    "sandbox": "kreassign.cli.sandbox_cmd:sandbox",
    "execute": "kreassign.cli.ops_cmd:execute",
    "verify": "kreassign.cli.ops_cmd:verify",
    "cancel": "kreassign.cli.ops_cmd:cancel",
    "list": "kreassign.cli.ops_cmd:list_command",
    "resume": "kreassign.cli.ops_cmd:resume",
    "abort": "kreassign.cli.ops_cmd:abort",
    "watch": "kreassign.cli.watch_cmd:watch",
    "throttle": "kreassign.cli.throttle_cmd:throttle",
    "estimate": "kreassign.cli.estimate_cmd:estimate",
    "client-metrics": "kreassign.cli.client_metrics_cmd:client_metrics",
    "canary": "kreassign.cli.canary_cmd:canary",
    "simulate": "kreassign.cli.simulate_cmd:simulate",
    "spark": "kreassign.cli.spark_cmd:spark",
}

GLOBAL_FLAGS = {"--help", "-h", "--version", "--debug"}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _resolvable(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _resolvable(cmd_name):
            return None
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


def _resolvable(name: str) -> bool:
    module = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "KREASSIGN"},
    epilog="Kafka-compatible use: kreassign --bootstrap-server HOST:PORT "
    "--reassignment-json-file FILE --execute|--verify|--cancel, or --list, or "
    "--topics-to-move-json-file FILE --broker-list 1,2,3 --generate. "
    "See `man kreassign` for the differences from kafka-reassign-partitions.sh.",
)
@click.version_option(package_name="kreassign", prog_name="kreassign")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Plan, throttle, execute, watch and simulate Kafka partition reassignments."""


def is_kafka_style(argv: Sequence[str]) -> bool:
    """True when the first word is a Kafka tool flag rather than a subcommand or global flag, or is
    blank (`kreassign " "`), which Kafka's tool answers with its missing-action usage message."""
    words = [a for a in argv if a != "--debug"]
    if not words:
        return False
    first = words[0]
    return not first.strip() or (first.startswith("--") and first.split("=")[0] not in GLOBAL_FLAGS)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if is_kafka_style(args):
        from kreassign.cli.kafka_compat import run_kafka_style

        sys.exit(run_kafka_style(args))
    sys.exit(run_guarded(lambda: cli.main(args=args, prog_name="kreassign", standalone_mode=False),
                         debug="--debug" in args))


if __name__ == "__main__":
    main()
