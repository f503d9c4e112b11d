"""A small run of the CLI fuzzer (bench/bench_fuzz_cli.py runs 10,000): no generated command
line ends in a traceback or a hang."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_fuzz_cli import fuzz  # noqa: E402


@pytest.mark.parametrize("seed", [11, 12])
def test_generated_command_lines_end_in_a_clear_line(seed: int) -> None:
    harness = fuzz(250, seed)
    assert harness.tracebacks == [] and harness.hangs == []
    assert sum(harness.outcomes.values()) == 250
