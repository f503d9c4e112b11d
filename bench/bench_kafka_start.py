"""How long a user waits for a real Kafka cluster: `kreassign sandbox start --engine kafka --daemon`
(1 controller, 5 brokers, 3 log dirs each, format included) timed from the command's start to its
exit (every broker registered), then `sandbox stop`; with no topics and with the default topic
set (created and filled with real records). Target: under 60 s on 2 cores.

    python -m bench.bench_kafka_start [REPEAT] [NOTE]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import record
from kreassign.sandbox.kafka_engine.dist import MATRIX

TARGET_S = 60.0


def kreassign(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kreassign.cli.main", *argv], capture_output=True, text=True,
                          check=False, timeout=600)


def one(version: str, topics: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        state = Path(tmp) / "sandbox"
        args = ["sandbox", "start", "--engine", "kafka", "--daemon", "--kafka-version", version,
                "--state-dir", str(state)]
        if not topics:
            args += ["--topics", "none"]
        load = os.getloadavg()[0]
        start = time.perf_counter()
        done = kreassign(*args)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"start failed: {done.stderr.strip()}")
        start = time.perf_counter()
        stopped = kreassign("sandbox", "stop", "--state-dir", str(state))
        stop_s = time.perf_counter() - start
        if stopped.returncode != 0:
            raise SystemExit(f"stop failed: {stopped.stderr.strip()}")
        return {"start_s": round(wall, 2), "stop_s": round(stop_s, 2), "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str]) -> None:
    repeat = int(argv[0]) if argv else 3
    note = argv[1] if len(argv) > 1 else ""
    for version in MATRIX:
        for topics in (False, True):
            runs = [one(version, topics) for _ in range(repeat)]
            starts = sorted(r["start_s"] for r in runs)
            record("bench_kafka_start", kafka_version=version, brokers=5, controllers=1, log_dirs=3,
                   topics="default set (1/100 of the emulator's sizes)" if topics else "none",
                   runs=runs, start_median_s=starts[len(starts) // 2], start_max_s=starts[-1],
                   target_s=TARGET_S, within_target=starts[-1] < TARGET_S, note=note)


if __name__ == "__main__":
    main(sys.argv[1:])
