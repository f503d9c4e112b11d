"""The `kafka-reassign-partitions.sh` front door: same flags, validation order, messages, exit codes.

Arguments are parsed and validated by `kafka_args`; the actions run in `kafka_actions`. Usage
errors print the message and the option help on stderr and exit 1; runtime errors print on stdout
like Kafka's `main` (without the Java stack trace).
"""
from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from kreassign.cli.errors import UsageError
from kreassign.cli.kafka_args import HELP_TEXT, parse_argv, print_usage, validate
from kreassign.cluster.errors import KreassignError


def run_kafka_style(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run a Kafka-style invocation; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    debug = "--debug" in argv
    try:
        args = parse_argv(argv)
        if not argv or args.has("help"):
            return print_usage(HELP_TEXT, err)
        if args.has("version"):
            from importlib.metadata import version

            out.write(f"{version('kreassign')} (kafka-reassign-partitions compatible, Kafka 4.4)\n")
            return 0
        validate(args)
    except UsageError as exc:
        return print_usage(str(exc), err)
    except KreassignError as exc:  # e.g. an ambiguous unit in --throttle: the hint matters
        err.write(f"Error: {exc}\n")
        return int(exc.exit_code)
    for word in args.non_options:
        if word.strip():
            err.write(f"Warning: ignoring '{word[:80]}': it is not an option (Kafka's tool ignores it too)\n")
    from kreassign.cli.kafka_actions import dispatch
    from kreassign.cluster.errors import KafkaCompatError, TerseError

    try:
        return dispatch(args, out=out, err=err)
    except UsageError as exc:
        return print_usage(str(exc), err)
    except TerseError as exc:
        out.write(f"{exc}\n")
        return int(exc.exit_code)
    except KafkaCompatError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        out.write(f"Error: {exc}\n")
        return int(exc.exit_code)
    except KreassignError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        out.write(f"Error: {exc}\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        err.write("Interrupted.\n")
        return 130
    except BrokenPipeError:
        # Whoever read stdout went away (`| head`): stop quietly, as the subcommands do, and keep
        # Python's exit-time flush from writing to the closed pipe.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        return 1
