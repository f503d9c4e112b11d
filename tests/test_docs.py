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
