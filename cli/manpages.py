"""Generate man pages from the click command tree and the docs/ texts.

`python -m kreassign.cli.manpages man` writes man/kreassign.1 and man/kreassign-<command>.1.
The pages are committed; tests/test_docs.py checks they are up to date.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from kreassign.cli.kafka_args import OPTIONS, _option_label
from kreassign.cli.main import COMMANDS, cli
from kreassign.cluster.errors import ExitStatus

DOCS = Path(__file__).resolve().parent.parent / "docs"
EXIT_TEXT = {
    ExitStatus.OK: "success",
    ExitStatus.ERROR: "an error: bad input, a refused request, or a failed operation",
    ExitStatus.USAGE: "a usage error in a subcommand's options (Kafka-compatible mode uses 1, like Kafka)",
    ExitStatus.IN_PROGRESS: "verify or watch with --exit-status ended while moves are still running",
    ExitStatus.CANNOT_COMPLETE: "a move cannot complete: its partition's write rate exceeds its throttled share",
    ExitStatus.CLUSTER_UNREACHABLE: "no broker could be reached in time",
    ExitStatus.INFEASIBLE_PLAN: "a planner could not place replicas that must move (a hard constraint "
                                "such as RF larger than the brokers left, rack diversity or disk "
                                "headroom); nothing was written unless --allow-partial",
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C); the execution journal says how to resume or abort",
}


def esc(text: str) -> str:
    """Escape text for roff."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def markdown_to_roff(markdown: str) -> str:
    """A small converter for the subset our docs use: headings, paragraphs, lists, code."""
    out: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            out.append(".fi\n.RE" if in_code else ".RS 4\n.nf")
            in_code = not in_code
        elif in_code:
            out.append(esc(line))
        elif line.startswith("# "):
            continue
        elif line.startswith("#"):
            out.append(f".SS {esc(line.lstrip('#').strip())}")
        elif re.match(r"^\s*[-*] ", line):
            indent = len(line) - len(line.lstrip())
            out.append(f'.IP "\\(bu" {4 + indent}\n{esc(_inline(line.strip()[2:]))}')
        elif not line.strip():
            out.append(".PP")
        else:
            out.append(esc(_inline(line.strip())))
    return "\n".join(out)


def _inline(text: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*|`(.+?)`", lambda m: m.group(1) or m.group(2), text)


def _header(name: str, summary: str) -> list[str]:
    return [f'.TH "{name.upper()}" "1" "" "kreassign" "kreassign manual"',
            ".SH NAME", f"{esc(name)} \\- {esc(summary)}"]


def _options(command: click.Command, ctx: click.Context) -> list[str]:
    lines: list[str] = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        label, text = record
        lines += [".TP", f"\\fB{esc(label)}\\fR", esc(text or "")]
    return lines


_HELP_NAMES: list[str] = cli.context_settings["help_option_names"]


def command_page(name: str, command: click.Command) -> str:
    # The group's help_option_names (-h too) as a real invocation has them: click caches each
    # command's help option, so a page rendered without them differed after any earlier --help.
    ctx = click.Context(command, info_name=f"kreassign {name}", help_option_names=_HELP_NAMES)
    lines = _header(f"kreassign-{name}", command.get_short_help_str(limit=200))
    lines += [".SH SYNOPSIS", f"\\fBkreassign {esc(name)}\\fR {esc(' '.join(command.collect_usage_pieces(ctx)))}",
              ".SH DESCRIPTION", esc(command.help or "")]
    if isinstance(command, click.Group):
        lines.append(".SH COMMANDS")
        for sub in command.list_commands(ctx):
            subcmd = command.get_command(ctx, sub)
            if subcmd is None:
                continue
            subctx = click.Context(subcmd, info_name=sub, parent=ctx)
            lines += [".SS", f"\\fBkreassign {esc(name)} {esc(sub)}\\fR "
                      f"{esc(' '.join(subcmd.collect_usage_pieces(subctx)))}", esc(subcmd.help or "")]
            lines += _options(subcmd, subctx)
    lines += [".SH OPTIONS", *_options(command, ctx), ".SH SEE ALSO", "\\fBkreassign\\fR(1)"]
    return "\n".join(lines) + "\n"


def main_page() -> str:
    ctx = click.Context(cli, info_name="kreassign", help_option_names=_HELP_NAMES)
    lines = _header("kreassign", "plan, throttle, execute, watch and simulate Kafka partition reassignments")
    lines += [".SH SYNOPSIS", "\\fBkreassign\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]", ".br",
              "\\fBkreassign\\fR \\-\\-bootstrap\\-server \\fIHOST:PORT\\fR "
              "\\fI<kafka\\-reassign\\-partitions.sh options>\\fR",
              ".SH DESCRIPTION", esc(cli.help or ""), ".SH COMMANDS"]
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        lines += [".TP", f"\\fBkreassign {esc(name)}\\fR", esc(command.get_short_help_str(limit=120)),
                  f"See \\fBkreassign\\-{esc(name)}\\fR(1)."]
    lines += [".SH KAFKA-COMPATIBLE MODE", esc(
        "When the first argument is an option rather than a command, kreassign behaves like "
        "kafka-reassign-partitions.sh from Kafka 4.4 (the newest release tested; against every cluster "
        "version): the same options, validation order, messages, "
        "JSON and exit codes. Options:")]
    for name in sorted(OPTIONS):
        lines += [".TP", f"\\fB{esc(_option_label(OPTIONS[name]))}\\fR", esc(OPTIONS[name].description)]
    for doc, title in (("kafka-differences.md", "DIFFERENCES FROM KAFKA'S TOOL"),
                       ("snapshot-format.md", "SNAPSHOT FORMAT"),
                       ("journal.md", "EXECUTION JOURNAL"),
                       ("security.md", "SECURITY")):
        path = DOCS / doc
        if path.exists():
            lines += [f".SH {title}", markdown_to_roff(path.read_text(encoding="utf-8"))]
    lines.append(".SH EXIT STATUS")
    for status in ExitStatus:
        lines += [".TP", f"\\fB{int(status)}\\fR", esc(EXIT_TEXT[status])]
    lines += [".SH ENVIRONMENT", ".TP", "\\fBKREASSIGN_BOOTSTRAP_SERVER\\fR",
              "Default for \\-\\-bootstrap\\-server in subcommands (every option can come from "
              "KREASSIGN_<COMMAND>_<OPTION>).",
              ".TP", "\\fBKREASSIGN_SPARK_CDS\\fR",
              "0 turns off the class\\-data archive of the Spark driver's JVM that \\fBkreassign simulate\\fR "
              "uses, and records in the background when it has none ($XDG_CACHE_HOME/kreassign/spark\\-cds).",
              ".SH SEE ALSO", ", ".join(f"\\fBkreassign\\-{esc(n)}\\fR(1)" for n in cli.list_commands(ctx))]
    return "\n".join(lines) + "\n"


def render_all() -> dict[str, str]:
    """File name -> page text, for every page."""
    ctx = click.Context(cli, info_name="kreassign")
    pages = {"kreassign.1": main_page()}
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        if command is not None:
            pages[f"kreassign-{name}.1"] = command_page(name, command)
    return pages


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for stale in directory.glob("kreassign*.1"):
        stale.unlink()
    for name, text in render_all().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "man")):
        print(path)
