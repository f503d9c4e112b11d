"""The README's sample-snapshot transcript is what the commands print today."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cli_helpers import Kreassign

ROOT = Path(__file__).resolve().parent.parent


def transcript() -> list[tuple[str, list[str]]]:
    """($ command, the lines shown after it) for the first example block of the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Examples", 1)[1].split("```", 2)[1]
    steps: list[tuple[str, list[str]]] = []
    for line in block.strip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def test_the_sample_transcript_is_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          kreassign: Kreassign) -> None:
    monkeypatch.chdir(tmp_path)
    os.symlink(ROOT / "demo", tmp_path / "demo")
    steps = transcript()
    assert [cmd.split()[1] for cmd, _ in steps] == ["add-brokers", "estimate", "throttle"]
    for command, shown in steps:
        result = kreassign.run(*command.split()[1:])
        assert result.code == 0, result.err
        actual = [line.rstrip() for line in (result.out + result.err).splitlines()]
        for line in shown:
            if line != "...":
                assert line.rstrip() in actual, f"{command!r} no longer prints {line!r}"
    assert re.search(r'"topic"', (tmp_path / "plan.json").read_text())
