"""Docs are generated and tested: man pages are current, every command is documented."""
from __future__ import annotations

from pathlib import Path

import click
import pytest

from kreassign.cli.main import COMMANDS, cli
from kreassign.cli.manpages import esc, render_all

ROOT = Path(__file__).resolve().parent.parent


def test_man_pages_are_up_to_date() -> None:
    pages = render_all()
    stale = [name for name, text in pages.items()
             if not (ROOT / "man" / name).exists() or (ROOT / "man" / name).read_text(encoding="utf-8") != text]
    assert not stale, f"run `make man` to regenerate: {stale}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_and_a_man_page(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.help, f"{name} has no help text"
    assert f"kreassign-{name}.1" in render_all()
    assert f"kreassign {esc(name)}" in (ROOT / "man" / "kreassign.1").read_text(encoding="utf-8")


def test_readme_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [line.strip() for line in text.splitlines() if line.startswith("make ")]
    assert blocks[:2] == ["make demo", "make test"]
    assert text.index("make demo") < text.index("##")


def test_cli_import_does_not_pull_heavy_modules() -> None:
    import subprocess
    import sys

    code = ("import sys, kreassign.cli.main as m; [m.cli.get_command(None, n) for n in m.cli.list_commands(None)]; "
            "heavy = [n for n in ('numpy', 'pyspark', 'kafka', 'pandas', 'pyarrow', 'rich') if n in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_exit_status_values_and_meanings_are_pinned_as_the_man_page_lists_them() -> None:
    """The exit codes are an interface: scripts branch on them. Changing one is a breaking change
    that must show up here, and the man page must list exactly these."""
    import re

    from kreassign.cli.manpages import EXIT_TEXT
    from kreassign.cluster.errors import ExitStatus

    assert {s.name: int(s) for s in ExitStatus} == {
        "OK": 0, "ERROR": 1, "USAGE": 2, "IN_PROGRESS": 3, "CANNOT_COMPLETE": 4, "CLUSTER_UNREACHABLE": 5,
        "INFEASIBLE_PLAN": 6, "INTERRUPTED": 130,
    }
    assert set(EXIT_TEXT) == set(ExitStatus)
    page = (ROOT / "man" / "kreassign.1").read_text(encoding="utf-8")
    section = page.split(".SH EXIT STATUS", 1)[1].split("\n.SH ", 1)[0]
    listed = re.findall(r"^\.TP\n\\fB(\d+)\\fR\n(.+)$", section, re.M)
    assert [(int(code), text.replace("\\-", "-").replace("\\e", "\\")) for code, text in listed] == [
        (0, "success"),
        (1, "an error: bad input, a refused request, or a failed operation"),
        (2, "a usage error in a subcommand's options (Kafka-compatible mode uses 1, like Kafka)"),
        (3, "verify or watch with --exit-status ended while moves are still running"),
        (4, "a move cannot complete: its partition's write rate exceeds its throttled share"),
        (5, "no broker could be reached in time"),
        (6, "a planner could not place replicas that must move (a hard constraint such as RF larger than the "
            "brokers left, rack diversity or disk headroom); nothing was written unless --allow-partial"),
        (130, "interrupted (Ctrl-C); the execution journal says how to resume or abort"),
    ]
