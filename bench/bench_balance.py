"""The balanced planner on seeded synthetic clusters, against Kafka-compatible `generate`.

Clusters: RF 3, three racks of unequal size, log-normal partition sizes (sigma 1.2; 2.0 in the
`-sigma2` decommission cases), Zipf-sized
topics. Scenarios (the issue's budgets): 150,000 partitions rebalanced from a skewed start
(< 5 s); 1,000 brokers / 300,000 partitions after adding 10% empty brokers (< 10 s, < 2 GiB);
with BENCH_BALANCE_LARGE=1 also 3,000,000 replicas (< 60 s). Each scenario runs in its own
process so peak memory is its own. Recorded per scenario: wall and CPU time (the machine is
shared, so CPU time is the steadier number), peak RSS, moves and bytes against the lower bounds
the plan reports (method in `LowerBounds.method`), balance reached, and the same numbers for
`generate` (all topics laid out anew on all brokers, rack-aware, seed 0) with our/their ratios.

Decommission scenarios (issue 16): heavy-tailed sizes, a few brokers removed from a small, a
medium and a large cluster, from the skewed synthetic start, from a balanced one (the skewed
cluster after its rebalance plan) and from a nearly balanced random one (the same cluster placed
without skew, where bytes are within about 15% of the mean and counts within a few percent),
plain and with --rebalance-rest; from the random start also a plain rebalance. Recorded: bytes
max/mean before (all brokers) and after (the brokers left), the same against each rack's mean
(rack diversity fixes each rack's share), bytes max over the plan's fair-share target, moved
bytes and moves over their lower bounds, count and leader spread, rack violations, time.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import time
from typing import Any

import numpy as np

from bench.common import record

SCENARIOS: dict[str, dict[str, Any]] = {
    "rebalance-150k": dict(brokers=300, partitions=150_000, rack_sizes=[90, 100, 110], new_brokers=0,
                           skew_sigma=0.3, budget_s=5.0),
    "add-10pct-1000b-300k": dict(brokers=900, partitions=300_000, rack_sizes=[250, 300, 350],
                                 new_brokers=100, skew_sigma=0.0, budget_s=10.0),
}
DECOMMISSION: dict[str, dict[str, Any]] = {
    "decommission-60b-30k": dict(brokers=60, partitions=30_000, rack_sizes=[18, 20, 22], remove=2, budget_s=1.0),
    "decommission-300b-150k": dict(brokers=300, partitions=150_000, rack_sizes=[90, 100, 110], remove=6,
                                   budget_s=5.0),
    "decommission-1000b-300k": dict(brokers=1000, partitions=300_000, rack_sizes=[300, 330, 370], remove=20,
                                    budget_s=5.0),
    # Heavier tails (sigma 2.0: the largest partition is 0.16x a broker's share at 60 brokers,
    # 1.56x at 1,000, where no plan gets its three brokers within 1.05 of their share).
    "decommission-60b-30k-sigma2": dict(brokers=60, partitions=30_000, rack_sizes=[18, 20, 22], remove=2,
                                        size_sigma=2.0, budget_s=1.0),
    "decommission-1000b-300k-sigma2": dict(brokers=1000, partitions=300_000, rack_sizes=[300, 330, 370],
                                           remove=20, size_sigma=2.0, budget_s=5.0),
}
LARGE = {
    "rebalance-3m-replicas": dict(brokers=300, partitions=1_000_000, rack_sizes=[90, 100, 110],
                                  new_brokers=30, skew_sigma=0.0, budget_s=60.0),
}


def balance_of(state: Any, matrix: np.ndarray, ids: np.ndarray, racks: np.ndarray) -> dict[str, float]:
    """Replica spread (worst within a rack), bytes max/mean, leader spread of an assignment."""
    pos = np.searchsorted(ids, np.maximum(matrix, 0))
    valid = matrix >= 0
    counts = np.bincount(pos[valid], minlength=len(ids))
    size = np.bincount(pos[valid], weights=np.broadcast_to(state.size_bytes[:, None], matrix.shape)[valid],
                       minlength=len(ids))
    leaders = np.bincount(pos[:, 0], minlength=len(ids))
    per_rack = max(int(counts[racks == r].max() - counts[racks == r].min()) for r in np.unique(racks))
    rack_mean = {r: size[racks == r].mean() for r in np.unique(racks)}
    over = max(float(size[racks == r].max() / rack_mean[r]) for r in rack_mean)
    return {"replica_spread_in_rack": per_rack, "bytes_max_over_rack_mean": round(over, 4),
            "bytes_max_over_mean": round(float(size.max() / size.mean()), 4),
            "leader_spread": int(leaders.max() - leaders.min())}


def moved(state: Any, before: np.ndarray, after: np.ndarray) -> tuple[int, int, int]:
    added = ((after[:, :, None] != before[:, None, :]).all(axis=2) & (after >= 0)).sum(axis=1)
    leader_changes = int((after[:, 0] != before[:, 0]).sum())
    return int(added.sum()), int((added * state.size_bytes).sum()), leader_changes


def run_scenario(name: str, spec: dict[str, Any], queue: Any) -> None:
    from kreassign.cluster.model import TopicPartition
    from kreassign.planner.balance import rebalance
    from kreassign.simulate.synthetic_state import synthetic_cluster
    from kreassign.planner.generate import generate_assignment

    params = {k: v for k, v in spec.items() if k != "budget_s"}
    state = synthetic_cluster(rf=3, seed=11, **params)
    ids = np.array(state.broker_ids)
    racks = np.array([b.rack for b in state.brokers])
    before = state.replica_matrix().astype(np.int64)
    wall, cpu = time.perf_counter(), time.process_time()
    plan = rebalance(state)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    after = before.copy()
    rows = state.find_rows([t.topic for t in plan.targets], [t.partition for t in plan.targets])
    after[rows] = np.array([t.replicas for t in plan.targets], dtype=np.int64).reshape(len(rows), -1)
    ours = balance_of(state, after, ids, racks)

    gen_wall = time.perf_counter()
    gen = generate_assignment(state, list(state.topics), list(state.broker_ids), rack_aware=True, seed=0)
    gen_wall = time.perf_counter() - gen_wall
    proposed = before.copy()
    keys = list(gen.proposed)
    grow = state.find_rows([tp.topic for tp in keys], [tp.partition for tp in keys])
    proposed[grow] = np.array([gen.proposed[TopicPartition(tp.topic, tp.partition)] for tp in keys])
    g_moves, g_bytes, g_leaders = moved(state, before, proposed)
    theirs = balance_of(state, proposed, ids, racks)

    lb = plan.lower_bounds
    queue.put({
        "scenario": name, "brokers": len(ids), "partitions": len(state), "replicas": int(len(state.replica_ids)),
        "rack_sizes": spec["rack_sizes"], "new_brokers": spec["new_brokers"], "budget_s": spec["budget_s"],
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(rss_mb),
        "replica_moves": plan.replica_moves, "lower_bound_moves": lb.replica_moves,
        "bytes_moved": plan.bytes_moved, "lower_bound_bytes": lb.bytes_moved,
        "bytes_over_lower_bound": round(plan.bytes_moved / max(lb.bytes_moved, 1), 4),
        "leader_changes": plan.leader_changes,
        "bytes_over_target": round(plan.after.bytes_over_target, 4),
        "replica_spread_allowed": plan.after.replica_spread_allowed,
        "leader_bps_max_over_mean": round(plan.after.leader_bps.max / max(plan.after.leader_bps.mean, 1e-9), 3),
        "rack_violations": plan.after.rack_violations, "warnings": list(plan.warnings),
        "ours": ours, "lower_bound_method": lb.method,
        "generate": {"wall_s": round(gen_wall, 2), "replica_moves": g_moves, "bytes_moved": g_bytes,
                     "leader_changes": g_leaders, **theirs},
        "ratio_bytes_moved_ours_over_generate": round(plan.bytes_moved / max(g_bytes, 1), 4),
        "ratio_leader_changes_ours_over_generate": round(plan.leader_changes / max(g_leaders, 1), 4),
    })


def run_decommission(name: str, spec: dict[str, Any], queue: Any) -> None:
    from kreassign.cluster.model import TopicPartition
    from kreassign.planner.balance import decommission, rebalance
    from kreassign.simulate.synthetic_state import synthetic_cluster

    sigma = spec.get("size_sigma", 1.2)
    skewed = synthetic_cluster(brokers=spec["brokers"], partitions=spec["partitions"], rf=3,
                               rack_sizes=spec["rack_sizes"], seed=11, size_sigma=sigma)
    balanced_plan = rebalance(skewed)
    starts = {"skewed": skewed, "balanced": skewed.with_assignment(
        {TopicPartition(t.topic, t.partition): t.replicas for t in balanced_plan.targets}),
        "random": synthetic_cluster(brokers=spec["brokers"], partitions=spec["partitions"], rf=3,
                                    rack_sizes=spec["rack_sizes"], seed=11, skew_sigma=0.0, size_sigma=sigma)}
    ids = np.array(skewed.broker_ids)
    racks = np.array([b.rack for b in skewed.brokers])
    gone = np.random.default_rng(7).choice(ids, spec["remove"], replace=False)
    keep = ~np.isin(ids, gone)
    rows = []
    for start, state in starts.items():
        before = state.replica_matrix().astype(np.int64)
        runs = [("decommission", False), ("decommission", True)] + [("rebalance", False)] * (start == "random")
        for command, rest in runs:
            wall, cpu = time.perf_counter(), time.process_time()
            plan = decommission(state, sorted(gone.tolist()), rebalance_rest=rest) if command == "decommission" \
                else rebalance(state)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            left = keep if command == "decommission" else np.ones(len(ids), dtype=bool)
            after = before.copy()
            changed = state.find_rows([t.topic for t in plan.targets], [t.partition for t in plan.targets])
            after[changed] = np.array([t.replicas for t in plan.targets], dtype=np.int64).reshape(len(changed), -1)
            was = balance_of(state, before, ids, racks)
            now = balance_of(state, after, ids[left], racks[left])
            lb = plan.lower_bounds
            rows.append({
                "start": start, "command": command, "rebalance_rest": rest, "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "bytes_max_over_mean_before": was["bytes_max_over_mean"],
                "bytes_max_over_mean_after": now["bytes_max_over_mean"],
                "bytes_max_over_rack_mean_before": was["bytes_max_over_rack_mean"],
                "bytes_max_over_rack_mean_after": now["bytes_max_over_rack_mean"],
                "bytes_over_target_after": round(plan.after.bytes_over_target, 4),
                "replica_moves": plan.replica_moves, "lower_bound_moves": lb.replica_moves,
                "bytes_moved": plan.bytes_moved, "lower_bound_bytes": lb.bytes_moved,
                "bytes_over_lower_bound": round(plan.bytes_moved / max(lb.bytes_moved, 1), 4),
                "replica_spread_in_rack_after": now["replica_spread_in_rack"],
                "replica_spread_after": plan.after.replicas.spread,
                "replica_spread_allowed": plan.after.replica_spread_allowed,
                "leader_spread_after": plan.after.leaders.spread,
                "rack_violations_before": plan.before.rack_violations,
                "rack_violations_after": plan.after.rack_violations, "warnings": list(plan.warnings),
            })
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put({"scenario": name, "brokers": len(ids), "partitions": len(skewed), "rack_sizes": spec["rack_sizes"],
               "size_sigma": sigma, "largest_partition_over_mean_broker_bytes": round(
                   float(skewed.size_bytes.max() * len(ids) / (3 * skewed.size_bytes.sum())), 3),
               "removed": sorted(gone.tolist()), "budget_s": spec["budget_s"], "peak_rss_mb": round(rss_mb),
               "runs": rows, "wall_s": max(r["wall_s"] for r in rows), "cpu_s": max(r["cpu_s"] for r in rows)})


def main() -> None:
    scenarios = dict(SCENARIOS)
    if os.environ.get("BENCH_BALANCE_LARGE"):
        scenarios.update(LARGE)
    scenarios.update(DECOMMISSION)
    only = os.environ.get("BENCH_BALANCE_ONLY")
    ctx = mp.get_context("spawn")
    for name, spec in scenarios.items():
        if only and only not in name:
            continue
        queue = ctx.Queue()
        target = run_decommission if name in DECOMMISSION else run_scenario
        proc = ctx.Process(target=target, args=(name, spec, queue))
        proc.start()
        row = queue.get()
        proc.join()
        row["load_average_1m"] = round(os.getloadavg()[0], 2)
        record("bench_balance", **row)
        print(json.dumps({"scenario": name, "wall_s": row["wall_s"], "cpu_s": row["cpu_s"]}))


if __name__ == "__main__":
    main()
