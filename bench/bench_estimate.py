"""Benchmark the replication model: 100,000 moves on 1,000 brokers (budget: under 2 s).

Heavy-tailed partition sizes (Pareto, shape 1.3), log-normal write rates, 50 MB/s throttles
on both sides and Kafka's default fetch limits. Times the model (best of 3) and a batched
schedule, records makespan / lower bound, and checks the default event batching against the
exact model on a smaller plan.
"""
from __future__ import annotations

import os
import time

import numpy as np

from bench.common import best_of, record
from kreassign.predict.model import DEFAULT_TOLERANCE, ModelInput, simulate
from kreassign.predict.schedule import schedule_waves

MB = 1_000_000
BUDGET_S = 2.0


def make_input(moves: int, brokers: int, seed: int) -> ModelInput:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, brokers, moves)
    dst = (src + rng.integers(1, brokers, moves)) % brokers
    size = np.minimum(rng.pareto(1.3, moves) * 200 * MB + MB, 2e12)
    writes = np.minimum(rng.lognormal(np.log(50e3), 1.0, moves), 2 * MB)
    return ModelInput.build(broker_ids=np.arange(brokers), source=src, dest=dst, bytes=size, write_bps=writes,
                            leader_rate=50 * MB, follower_rate=50 * MB)


def _cpu(fn: object) -> float:
    start = time.process_time()
    fn()  # type: ignore[operator]
    return time.process_time() - start


def main() -> None:
    inp = make_input(100_000, 1_000, seed=0)
    result = simulate(inp)
    model_s = best_of(lambda: simulate(inp))
    model_cpu_s = _cpu(lambda: simulate(inp))
    schedule = schedule_waves(inp, max_moves_per_broker=5, order="broker-balanced")
    schedule_s = best_of(lambda: schedule_waves(inp, max_moves_per_broker=5, order="broker-balanced"))

    small = make_input(2_000, 50, seed=1)
    exact = simulate(small, tolerance=0.0)
    batched = simulate(small)
    error = np.abs(batched.finish_s / exact.finish_s - 1)

    record(
        "bench_estimate",
        moves=len(inp), brokers=inp.n_brokers, tolerance=DEFAULT_TOLERANCE, budget_s=BUDGET_S,
        load_average_1m=round(os.getloadavg()[0], 2),
        model={"best_of_3_s": round(model_s, 3), "cpu_s": round(model_cpu_s, 3), "steps": result.steps,
               "within_budget": model_s < BUDGET_S, "makespan_s": round(result.makespan, 1),
               "lower_bound_s": round(result.lower.seconds, 1),
               "ratio_to_lower_bound": round(result.makespan / result.lower.seconds, 4),
               "stalled": int(result.stalled.sum())},
        schedule={"max_moves_per_broker": 5, "order": "broker-balanced", "best_of_3_s": round(schedule_s, 3),
                  "steps": schedule.result.steps, "makespan_s": round(schedule.makespan, 1),
                  "ratio_to_lower_bound": round(schedule.ratio_to_lower_bound, 4)},
        accuracy_vs_exact={"moves": len(small), "brokers": small.n_brokers, "exact_steps": exact.steps,
                           "batched_steps": batched.steps,
                           "makespan_error": round(batched.makespan / exact.makespan - 1, 5),
                           "median_move_error": round(float(np.median(error)), 5),
                           "p99_move_error": round(float(np.quantile(error, 0.99)), 5)},
    )


if __name__ == "__main__":
    main()
