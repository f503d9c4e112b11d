"""Read a 1,000,000-partition snapshot (RF 3, 1,000 brokers) as JSON and as Parquet.

Baselines: the stdlib `json.load` of the same JSON file (parse only, no checks, no columns) and
pyarrow's `read_table` of the same Parquet file (no checks). Budgets from DESIGN.md: Parquet in
about a second, JSON in a few seconds.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import best_of, record
from kreassign.cluster.model import Broker, ClusterState
from kreassign.cluster.snapshot import read_snapshot, write_snapshot

PARTITIONS = 1_000_000
BROKERS = 1_000
PARTITIONS_PER_TOPIC = 100


def synthetic_state(seed: int = 7) -> ClusterState:
    """RF 3 on 1,000 brokers in 3 racks; three distinct replicas per partition, built as columns."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, BROKERS, PARTITIONS)
    second = (first + rng.integers(1, BROKERS // 2, PARTITIONS)) % BROKERS
    third = (first + rng.integers(BROKERS // 2, BROKERS, PARTITIONS)) % BROKERS
    replica_ids = np.stack([first, second, third], axis=1).ravel()
    names = np.array([f"topic-{i:05d}" for i in range(PARTITIONS // PARTITIONS_PER_TOPIC)], dtype=object)
    return ClusterState.from_arrays(
        brokers=[Broker(b, rack=f"rack-{b % 3}", host=f"kafka-{b}.example", port=9092)
                 for b in range(BROKERS)],
        topic=np.repeat(names, PARTITIONS_PER_TOPIC),
        partition=np.tile(np.arange(PARTITIONS_PER_TOPIC), len(names)),
        replica_offsets=np.arange(PARTITIONS + 1) * 3,
        replica_ids=replica_ids,
        size_bytes=rng.lognormal(20, 2, PARTITIONS).astype(np.int64),
        produce_bps=np.round(rng.exponential(50_000, PARTITIONS), 1),
        consume_bps=np.round(rng.exponential(100_000, PARTITIONS), 1),
        cluster_id="bench", captured_at="2024-01-01T00:00:00Z",
    )


def nproc() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    state = synthetic_state()
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        for fmt in ("json", "parquet"):
            path = Path(scratch) / f"snapshot.{fmt}"
            start = time.perf_counter()
            write_snapshot(state, path)
            write_s = time.perf_counter() - start
            read_s = best_of(lambda: read_snapshot(path), repeat=3)
            back = read_snapshot(path)
            assert len(back) == PARTITIONS and np.array_equal(back.replica_ids, state.replica_ids)
            if fmt == "json":
                def baseline() -> None:
                    with open(path, "rb") as handle:
                        json.load(handle)
                baseline_s = best_of(baseline, repeat=1)
            else:
                baseline_s = best_of(lambda: pq.read_table(path), repeat=3)
            rows[fmt] = {"bytes": path.stat().st_size, "write_s": round(write_s, 3),
                         "read_s": round(read_s, 3), "partitions_per_s": round(PARTITIONS / read_s),
                         "baseline_s": round(baseline_s, 3),
                         "ratio_vs_baseline": round(read_s / baseline_s, 2)}
    print(f"{'format':8} {'MB':>7} {'write s':>8} {'read s':>7} {'partitions/s':>13} "
          f"{'baseline s':>10} {'ratio':>6}")
    for fmt, row in rows.items():
        print(f"{fmt:8} {row['bytes'] / 1e6:7.1f} {row['write_s']:8.2f} {row['read_s']:7.2f} "
              f"{row['partitions_per_s']:13,} {row['baseline_s']:10.2f} {row['ratio_vs_baseline']:6.2f}")
    # Other work on the machine slows the reads; the load average says how busy it was.
    record("bench_snapshot", nproc=nproc(), load_average_1m=round(os.getloadavg()[0], 2),
           partitions=PARTITIONS, brokers=BROKERS,
           replication_factor=3, pyarrow=pa.__version__,
           baselines={"json": "stdlib json.load, no checks", "parquet": "pyarrow.parquet.read_table, no checks"},
           **{fmt: row for fmt, row in rows.items()})


if __name__ == "__main__":
    main()
