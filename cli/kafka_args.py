"""Kafka-compatible arguments: `kafka-reassign-partitions.sh`'s flags, parsed and validated as Kafka does.

Parsing follows jopt-simple as Kafka configures it: long options only, no abbreviations,
`--opt value` and `--opt=value`, any order. Validation follows `validateAndParseArgs` in
Kafka 4.4 (reference §1.2; checked side by side with the real tool, tests/test_side_by_side_kafka.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from kreassign.cli.errors import UsageError

HELP_TEXT = "This tool helps to move topic partitions between replicas."

ACTIONS = ("generate", "execute", "verify", "cancel", "list")


@dataclass(frozen=True)
class Opt:
    name: str
    takes_value: bool
    description: str
    long_value: bool = False
    kreassign_only: bool = False


OPTIONS: dict[str, Opt] = {o.name: o for o in (
    Opt("additional", False, "Execute this reassignment in addition to any other ongoing ones. "
        "This option can also be used to change the throttle of an ongoing reassignment."),
    Opt("bootstrap-controller", True, "The controller to use for reassignment. By default, the tool "
        "will get the quorum controller. This option supports the actions --cancel and --list."),
    Opt("bootstrap-server", True, "the server(s) to use for bootstrapping."),
    Opt("broker-list", True, "The list of brokers to which the partitions need to be reassigned in "
        "the form \"0,1,2\". This is required if --topics-to-move-json-file is used to generate "
        "reassignment configuration"),
    Opt("cancel", False, "Cancel an active reassignment."),
    Opt("command-config", True, "Property file containing configs to be passed to Admin Client."),
    Opt("disable-rack-aware", False, "Disable rack aware replica assignment"),
    Opt("disallow-replication-factor-change", False, "Denies the ability to change a partition's replication "
        "factor as part of this reassignment through adding validation against it."),
    Opt("execute", False, "Kick off the reassignment as specified by the --reassignment-json-file option."),
    Opt("generate", False, "Generate a candidate partition reassignment configuration. Note that this "
        "only generates a candidate assignment, it does not execute it."),
    Opt("help", False, "Print usage information."),
    Opt("list", False, "List all active partition reassignments."),
    Opt("preserve-throttles", False, "Do not modify broker or topic throttles."),
    Opt("reassignment-json-file", True, "The JSON file with the partition reassignment configuration."),
    Opt("replica-alter-log-dirs-throttle", True, "The movement of replicas between log directories on "
        "the same broker will be throttled to this value (bytes/sec). The throttle can be removed by "
        "rerunning --verify once the reassignment completes.", long_value=True),
    Opt("throttle", True, "The movement of partitions between brokers will be throttled to this value "
        "(bytes/sec). The throttle can be removed by rerunning --verify once the reassignment completes. "
        "kreassign also accepts units such as 50MB/s.", long_value=True),
    Opt("timeout", True, "The maximum time in ms to wait for log directory replica assignment to begin.",
        long_value=True),
    Opt("topics-to-move-json-file", True, "Generate a reassignment configuration to move the partitions "
        "of the specified topics to the list of brokers specified by the --broker-list option."),
    Opt("verify", False, "Verify if the reassignment completed as specified by the "
        "--reassignment-json-file option. If there is a throttle engaged for the replicas specified, "
        "and the rebalance has completed, the throttle will be removed"),
    Opt("version", False, "Display Kafka version."),
    Opt("snapshot", True, "kreassign: read cluster state from a snapshot file instead of a cluster "
        "(--generate only).", kreassign_only=True),
    Opt("seed", True, "kreassign: seed the random start index and shift of --generate, for "
        "reproducible output.", kreassign_only=True),
    Opt("journal-dir", True, "kreassign: where execution journals live (default: "
        "$KREASSIGN_JOURNAL_DIR or ~/.kreassign/journal).", kreassign_only=True),
    Opt("debug", False, "kreassign: show tracebacks for errors.", kreassign_only=True),
    Opt("force", False, "kreassign: take the cluster's execution lock from a run that is proven dead "
        "(its process gone, or its lease expired) although it ran another plan.", kreassign_only=True),
    Opt("retarget-in-flight", False, "kreassign: re-target partitions whose reassignment in flight "
        "another run started (refused by default).", kreassign_only=True),
)}

REQUIRED: dict[str, tuple[str, ...]] = {
    "verify": ("reassignment-json-file",),
    "generate": ("topics-to-move-json-file", "broker-list"),
    "execute": ("reassignment-json-file",),
    "cancel": ("reassignment-json-file",),
    "list": (),
}

PERMITTED: dict[str, tuple[str, ...]] = {
    "verify": ("bootstrap-server", "command-config", "preserve-throttles", "journal-dir"),
    "generate": ("bootstrap-server", "broker-list", "command-config", "disable-rack-aware",
                 "snapshot", "seed"),
    "execute": ("additional", "bootstrap-server", "command-config", "throttle",
                "replica-alter-log-dirs-throttle", "timeout", "disallow-replication-factor-change", "journal-dir",
                "force", "retarget-in-flight"),
    "cancel": ("command-config", "preserve-throttles", "timeout", "journal-dir"),
    "list": ("command-config",),
}


@dataclass
class KafkaArgs:
    """Parsed options: flags present and option values (last one wins, like jopt-simple)."""

    present: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    non_options: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        return name in self.present

    def value(self, name: str) -> str | None:
        return self.values.get(name)

    @property
    def action(self) -> str:
        return next(a for a in ACTIONS if self.has(a))

    def long(self, name: str, default: int = -1) -> int:
        """A Long-typed option (throttles, timeout); units are a kreassign extension.

        Like jopt-simple's `valueOf`, which Kafka's tool calls when an action needs the value
        (after reading the JSON file), a bad value fails then, as `Error: Cannot parse argument
        ...` on stdout.

        Raises:
            AdminCommandFailed: not a number (nor a rate with a unit), or beyond Java's long.
            UnitError: an ambiguous unit (`Mb`).
        """
        raw = self.values.get(name)
        if raw is None:
            return default
        from kreassign.cluster.errors import JAVA_LONG_MAX, AdminCommandFailed, clip

        try:
            value = int(raw)
        except ValueError:
            pass
        else:
            if not -JAVA_LONG_MAX - 1 <= value <= JAVA_LONG_MAX:  # jopt-simple's Long conversion fails
                raise AdminCommandFailed(f"Cannot parse argument '{clip(raw)}' of option {name}")
            return value
        from kreassign.cluster.errors import InputError, UnitError
        from kreassign.cluster.units import parse_rate

        try:
            return parse_rate(raw)
        except UnitError:
            raise
        except InputError:
            raise AdminCommandFailed(f"Cannot parse argument '{clip(raw)}' of option {name}") from None


def parse_argv(argv: Sequence[str]) -> KafkaArgs:
    """Tokenise like jopt-simple with abbreviations off: words that are not options (and
    everything after `--`) are non-option arguments, which Kafka's tool accepts and ignores."""
    args = KafkaArgs()
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            args.non_options.extend(argv[i + 1:])
            break
        if not token.startswith("--"):
            args.non_options.append(token)
            i += 1
            continue
        name, eq, inline = token[2:].partition("=")
        opt = OPTIONS.get(name)
        if opt is None:
            raise UsageError(f"{name} is not a recognized option")
        if opt.takes_value:
            if eq:
                value = inline
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                i += 1
                value = argv[i]
            else:
                raise UsageError(f"Option {name} requires an argument")
            args.values[name] = value
        elif eq:
            raise UsageError(f"Option {name} does not take an argument")
        if name not in args.present:
            args.present.append(name)
        i += 1
    return args


def validate(args: KafkaArgs) -> None:
    """Kafka 4.4's validateAndParseArgs, in order (the help and version checks come first). Typed values
    (--throttle, --timeout) are converted when an action reads them, as jopt-simple does."""
    if args.has("seed"):  # a kreassign option: checked up front (Kafka's own typed values fail when used)
        from kreassign.cluster.errors import AdminCommandFailed

        try:
            args.long("seed")
        except AdminCommandFailed as exc:
            raise UsageError(str(exc)) from None
    actions = [a for a in ACTIONS if args.has(a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --generate, --execute, --verify, "
                         "--cancel, --list")
    action = actions[0]
    has_server = args.has("bootstrap-server")
    has_controller = args.has("bootstrap-controller")
    if has_server and has_controller:
        raise UsageError("Please don't specify both --bootstrap-server and --bootstrap-controller")
    if not has_server and not has_controller and not (action == "generate" and args.has("snapshot")):
        raise UsageError("Please specify either --bootstrap-server or --bootstrap-controller")
    for name in REQUIRED[action]:
        if not args.has(name):
            raise UsageError(f'Missing required argument "[{name}]"')
    bootstrap = "bootstrap-controller" if has_controller else "bootstrap-server"
    permitted = set(PERMITTED[action]) | set(REQUIRED[action]) | {action, "debug"}
    if action in ("cancel", "list"):
        permitted.add(bootstrap)
    for name in args.present:
        if name not in permitted:
            raise UsageError(f'Option "[{name}]" can\'t be used with action "[{action}]"')


def option_help() -> str:
    """The option table jopt-simple prints after a usage message."""
    width = max(len(_option_label(o)) for o in OPTIONS.values()) + 2
    lines = [f"{'Option':<{width}}Description", f"{'------':<{width}}-----------"]
    for name in sorted(OPTIONS):
        opt = OPTIONS[name]
        lines.append(f"{_option_label(opt):<{width}}{opt.description}")
    return "\n".join(lines)


def _option_label(opt: Opt) -> str:
    if not opt.takes_value:
        return f"--{opt.name}"
    kind = "Long" if opt.long_value else "String"
    return f"--{opt.name} <{kind}>"


def print_usage(message: str, err: TextIO) -> int:
    err.write(f"{message}\n{option_help()}\n")
    return 1
