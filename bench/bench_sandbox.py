"""Sandbox: start-up of a 6-broker cluster, and listing 10,000 partitions with their
reassignment state (Metadata + ListPartitionReassignments through kafka-python) while 2,000
moves are in flight; also the engine's cost per tick with those moves, i.e. the fastest --speed
it can keep up with.

Baselines: the same two admin calls against the 50-partition demo sandbox (fixed per-call
cost), and DESIGN.md's budget of 2 s for `verify` on a 10,000-partition sandbox.
"""
from __future__ import annotations

import os
import time
import warnings

from bench.common import best_of, record

BUDGET_S = 2.0
MOVES = 2_000


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import TopicPartition
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    from kreassign.sandbox.clock import ManualClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import TopicSpec

    def start_and_connect() -> None:
        sb = SandboxCluster(6, 3, clock=ManualClock(), seed=1).start()
        admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap)
        admin.describe_cluster()
        admin.close()
        sb.stop()

    def start_only() -> None:
        SandboxCluster(6, 3, clock=ManualClock(), seed=1).start().stop()

    startup_s = best_of(start_only, repeat=5)
    startup_connect_s = best_of(start_and_connect, repeat=3)

    def list_all(admin: KafkaAdminClient) -> tuple[int, int]:
        topics = admin.describe_topics()
        moves = admin.list_partition_reassignments()
        return sum(len(t["partitions"]) for t in topics), len(moves)

    with SandboxCluster(6, 3, clock=ManualClock(), seed=1) as small:
        admin = KafkaAdminClient(bootstrap_servers=small.bootstrap)
        small_s = best_of(lambda: list_all(admin), repeat=5)
        admin.close()

    specs = [TopicSpec(f"topic-{i:02d}", 500, 3, 10_000_000, 1_000.0) for i in range(20)]
    build_start = time.perf_counter()
    big = SandboxCluster(6, 3, specs, clock=ManualClock(), seed=1).start()
    build_s = time.perf_counter() - build_start
    try:
        admin = KafkaAdminClient(bootstrap_servers=big.bootstrap, request_timeout_ms=30_000)
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b), {
            "leader.replication.throttled.rate": "5000000", "follower.replication.throttled.rate": "5000000"})
            for b in range(1, 7)], incremental=True, raise_on_unknown=False)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, s.name, {
            "leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"})
            for s in specs], incremental=True, raise_on_unknown=False)
        moves = {}
        for t in admin.describe_topics():
            for p in t["partitions"][: MOVES // len(specs)]:
                moves[TopicPartition(t["name"], p["partition_index"])] = [
                    b for b in range(1, 7) if b not in p["replica_nodes"]]
        submit_start = time.perf_counter()
        admin.alter_partition_reassignments(moves)
        submit_s = time.perf_counter() - submit_start
        big.advance(1.0)
        counts = list_all(admin)
        list_s = best_of(lambda: list_all(admin), repeat=3)
        steps = 50
        step_start = time.perf_counter()
        big.advance(steps * 0.1)
        step_s = (time.perf_counter() - step_start) / steps
        admin.close()
    finally:
        big.stop()
    record("bench_sandbox", startup_6_brokers_s=round(startup_s, 4),
           startup_and_first_admin_call_s=round(startup_connect_s, 4),
           build_10k_partitions_s=round(build_s, 3), partitions=counts[0], moves_in_flight=counts[1],
           submit_moves_s=round(submit_s, 3), list_10k_with_moves_s=round(list_s, 3),
           list_50_demo_s=round(small_s, 4), ratio_10k_vs_demo=round(list_s / small_s, 1),
           budget_s=BUDGET_S, within_budget=list_s < BUDGET_S,
           engine_tick_ms_with_moves=round(step_s * 1000, 3),
           max_speed_keeping_up=round(0.1 / step_s, 1), loadavg=[round(x, 2) for x in os.getloadavg()])


if __name__ == "__main__":
    main()
