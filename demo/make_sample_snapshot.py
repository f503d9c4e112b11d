"""Regenerate demo/sample-snapshot.json: a small seeded cluster for examples and CLI tests.

Six loaded brokers in three racks plus three brokers just added (empty), 120 partitions with
heavy-tailed sizes, 1 Gb/s NICs and 4 TB disks. Run: python demo/make_sample_snapshot.py
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from kreassign.cluster.model import ClusterState
from kreassign.cluster.snapshot import write_snapshot
from kreassign.simulate.synthetic_state import synthetic_cluster

NAMES = ("orders", "payments", "clickstream", "inventory", "audit-log", "sessions")
NIC_BPS = 125_000_000.0
DISK_BYTES = 4_000_000_000_000


def sample() -> ClusterState:
    base = synthetic_cluster(brokers=6, partitions=120, rf=3, rack_sizes=[2, 2, 2], new_brokers=3,
                             topics=len(NAMES), mean_size=2e9, seed=7)
    brokers = [replace(b, network_in_bps=NIC_BPS, network_out_bps=NIC_BPS, disk_bytes=DISK_BYTES)
               for b in base.brokers]
    names = np.array(NAMES, dtype=object)[base.topic_index]
    return ClusterState.from_arrays(
        brokers=brokers, topic=names, partition=base.partition, replica_offsets=base.replica_offsets,
        replica_ids=base.replica_ids, size_bytes=base.size_bytes, produce_bps=base.produce_bps,
        consume_bps=base.produce_bps * 2, cluster_id="sample-cluster", captured_at="2026-11-22T00:00:00Z",
    )


if __name__ == "__main__":
    path = Path(__file__).with_name("sample-snapshot.json")
    write_snapshot(sample(), path)
    print(path)
