"""Time `kreassign --help` (budget 0.3 s) against a bare `python -c pass` baseline."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.common import best_of, record

BUDGET_S = 0.3


def main() -> None:
    script = str(Path(sys.executable).with_name("kreassign"))

    def run(*args: str) -> None:
        subprocess.run(list(args), check=False, capture_output=True)

    baseline = best_of(lambda: run(sys.executable, "-c", "pass"), repeat=5)
    help_s = best_of(lambda: run(script, "--help"), repeat=5)
    kafka_help = best_of(lambda: run(script, "--list"), repeat=5)
    record("bench_cli_help", help_s=round(help_s, 4), kafka_usage_error_s=round(kafka_help, 4),
           python_startup_s=round(baseline, 4), ratio_vs_python=round(help_s / baseline, 2),
           budget_s=BUDGET_S, within_budget=help_s < BUDGET_S)


if __name__ == "__main__":
    main()
