"""Shared options mean the same in every command: one --bootstrap-server, one --request-timeout,
and --timeout only where Kafka's tool has it (the log-dir start wait of execute and cancel; abort
sends log-dir moves back the same way)."""
from __future__ import annotations

from pathlib import Path

import click
import pytest
from cli_helpers import Kreassign

from kreassign.cli.main import cli

KAFKA_TIMEOUT_COMMANDS = {"execute", "cancel", "abort"}


def leaf_commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    found: dict[str, click.Command] = {}
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                found[f"{name} {sub}"] = command.get_command(ctx, sub)  # type: ignore[assignment]
        else:
            found[name] = command
    return found


def option(command: click.Command, flag: str) -> click.Option | None:
    return next((p for p in command.params if isinstance(p, click.Option) and flag in p.opts), None)


def test_every_command_that_reaches_a_cluster_has_the_same_bootstrap_and_request_timeout() -> None:
    bootstraps, timeouts = {}, {}
    for name, command in leaf_commands().items():
        bootstrap = option(command, "--bootstrap-server")
        if bootstrap is None:
            continue
        bootstraps[name] = (bootstrap.help, bootstrap.envvar)
        request_timeout = option(command, "--request-timeout")
        assert request_timeout is not None, f"{name} connects to a cluster but has no --request-timeout"
        timeouts[name] = request_timeout.help
    assert len(bootstraps) >= 15
    assert len(set(bootstraps.values())) == 1, bootstraps
    assert len(set(timeouts.values())) == 1, timeouts


# Old names kept for one release: they say so in their help and name the new option.
DEPRECATED_TIMEOUT_ALIASES = {"watch": "--stop-after"}


def test_timeout_only_where_kafkas_tool_has_it() -> None:
    with_timeout = {name for name, command in leaf_commands().items() if option(command, "--timeout")}
    assert with_timeout == KAFKA_TIMEOUT_COMMANDS | set(DEPRECATED_TIMEOUT_ALIASES)
    for name, new_name in DEPRECATED_TIMEOUT_ALIASES.items():
        alias = option(leaf_commands()[name], "--timeout")
        assert alias is not None and alias.help is not None
        assert alias.help.startswith("Deprecated") and new_name in alias.help


def test_request_timeout_is_only_ever_the_deadline_of_a_cluster_request() -> None:
    for name, command in leaf_commands().items():
        if option(command, "--request-timeout") is not None:
            assert option(command, "--bootstrap-server") is not None, name


def test_a_snapshot_on_the_command_line_wins_over_the_bootstrap_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kreassign: Kreassign) -> None:
    monkeypatch.setenv("KREASSIGN_BOOTSTRAP_SERVER", "127.0.0.1:1")
    snapshot = Path(__file__).resolve().parents[1] / "demo" / "sample-snapshot.json"
    ran = kreassign.run("snapshot", "--snapshot", str(snapshot), "--output-file", str(tmp_path / "copy.json"))
    assert ran.exit_code == 0
    assert (tmp_path / "copy.json").exists()
    ran = kreassign.run("snapshot", "--snapshot", str(snapshot), "--bootstrap-server", "127.0.0.1:1",
                        "--output-file", str(tmp_path / "again.json"))
    assert ran.exit_code != 0
