"""Helpers shared by the benchmark scripts: timing and recording results as JSON lines."""
from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def best_of(fn: Callable[[], Any], repeat: int = 3) -> float:
    """Best wall time of `repeat` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def record(name: str, *, quiet: bool = False, **fields: Any) -> dict[str, Any]:
    """Append one result line to bench/results/<name>.jsonl and print it (unless `quiet`)."""
    row = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "cpus": os.cpu_count(), "python": platform.python_version(), **fields}
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{name}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, sort_keys=True) + "\n")
    if not quiet:
        print(json.dumps(row, indent=1, sort_keys=True))
    return row
