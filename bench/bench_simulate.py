"""Benchmark `kreassign simulate` on Spark (budgets from DESIGN.md, 2 cores):

* `million`: a 1,000,000-move rebalance on 2,000 brokers, one scenario (200 MB/s), under 20 s;
* `sweep32`: 32 scenarios (4 throttles x 2 schedules x 2 write loads x 2 failure settings) of a
  100,000-move rebalance on 1,000 brokers, under 60 s;
* scaling: the same plan with 1, 4, 16 and 32 scenarios, on local[1] and local[2].

Each case runs in its own process with its own embedded session (a master cannot change once
the JVM is up). Times exclude the session start, which is recorded separately; `cpu_s` is the
CPU time of the whole process tree (driver, JVM, Python workers) over the same span, the figure
that still means something when other work shares the 2 cores.

    python -m bench.bench_simulate              # headline cases and scaling runs
    python -m bench.bench_simulate headline [NOTE...]   # the two headline cases only The baseline of
a sweep is its model CPU time alone (the same scenarios through `scenario_run` in one Python
process, without Spark), measured on the 1-scenario case and scaled by the scenario count.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.common import record
from bench.profile_simulate import tree_cpu_s

# Rebalances among existing brokers: each partition moves one replica to a seeded other broker.
# Median partition 100 MB (lognormal), median write 10 kB/s (Pareto): every broker's moves can
# keep up with their writes at the throttles swept, so every scenario finishes.
MILLION = "brokers=2000,racks=20,partitions=1000000,moves=1000000,rf=3,size=100MB,write=10kB/s,seed=1"
HUNDRED_K = "brokers=1000,racks=20,partitions=100000,moves=100000,rf=3,size=100MB,write=10kB/s,seed=2"
BUDGETS_S = {"million": 20.0, "sweep32": 60.0}
"""issue 17's targets, with plots, on 2 cores (the session start is recorded apart)"""


def _axes(scenarios: int) -> dict[str, Any]:
    from kreassign.simulate.scenarios import ScenarioAxes, parse_failure

    full = dict(throttles=(25e6, 50e6, 100e6, 200e6), moves_per_broker=(None, 4),
                write_multipliers=(1.0, 1.5), failures=(None, parse_failure("random@50%")))
    if scenarios == 32:
        return {"axes": ScenarioAxes(**full)}  # type: ignore[arg-type]
    throttles = (25e6, 50e6, 100e6, 200e6)[:min(scenarios, 4)]
    per_broker = (None, 4)[:max(1, min(2, scenarios // 4))]
    multipliers = (1.0, 1.5)[:max(1, min(2, scenarios // 8))]
    return {"axes": ScenarioAxes(throttles=throttles, moves_per_broker=per_broker,
                                 write_multipliers=multipliers)}


def run_case(name: str, master: str, scenarios: int) -> dict[str, Any]:
    """One case in this process: start Spark, run the simulation, report times."""
    from kreassign.simulate.pipeline import run_simulation
    from kreassign.simulate.request import SimulationRequest
    from kreassign.simulate.scenarios import ScenarioAxes
    from kreassign.simulate.session import SparkOptions, start_session
    from kreassign.simulate.synthetic import parse_synthetic
    spec = parse_synthetic(MILLION if name == "million" else HUNDRED_K)
    axes = ScenarioAxes(throttles=(200e6,)) if name == "million" else _axes(scenarios)["axes"]
    load_before = os.getloadavg()
    started = time.perf_counter()
    spark = start_session(SparkOptions(master=master, shuffle_partitions=8, driver_memory="4g"))
    session_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as out:
        request = SimulationRequest(cluster=spec, output_dir=out, axes=axes, plots=True)
        started, cpu = time.perf_counter(), tree_cpu_s(os.getpid())
        result = run_simulation(request, spark=spark)
        wall_s = time.perf_counter() - started
        cpu_s = tree_cpu_s(os.getpid()) - cpu
    spark.stop()
    first = result.outcomes[0]
    return {
        "case": name, "master": master, "scenarios": len(result.outcomes), "brokers": result.brokers,
        "partitions": result.partitions, "moves": first.moves, "bytes": first.bytes,
        "wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2), "session_start_s": round(session_s, 2),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "stages_s": {k: round(v, 2) for k, v in result.timings_s.items()},
        "makespan_s": [o.makespan_s for o in result.outcomes][:4],
        "lower_bound_s": [o.lower_bound_s for o in result.outcomes][:4],
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def model_only(scenarios: int) -> float:
    """CPU seconds of the model alone for one scenario of the 100,000-move plan, times
    `scenarios`: what a sweep would cost with no Spark at all, on one core."""
    import numpy as np

    from kreassign.simulate.scenario_run import ScenarioArrays, run_scenario
    from kreassign.simulate.scenarios import Scenario

    rng = np.random.default_rng(2)
    brokers, moves = 1100, 100_000
    ids = np.arange(brokers)
    src = rng.integers(0, 1000, moves)
    arrays = ScenarioArrays(
        broker_ids=ids, network_in=np.full(brokers, 1.25e9), network_out=np.full(brokers, 1.25e9),
        client_in=np.full(brokers, 2e7), client_out=np.full(brokers, 4e7),
        replication_in=np.full(brokers, 4e7), replication_out=np.full(brokers, 4e7),
        leader_base=np.full(brokers, 5e6), leader_rate=np.full(brokers, 50e6),
        follower_rate=np.full(brokers, 50e6), move_id=np.arange(moves), source=src,
        dest=rng.integers(1000, 1100, moves),
        bytes=np.minimum(rng.lognormal(np.log(1e9), 1.5, moves), 2e12).astype(np.int64),
        write_bps=np.minimum(rng.pareto(1.5, moves) * 6e4 + 6e4, 1e7),
        failover_source=np.full(moves, -1), released_bps=np.zeros(moves),
    )
    started = time.process_time()
    run_scenario(arrays, Scenario(0, throttle_bps=50e6), 120)
    return (time.process_time() - started) * scenarios


def _subprocess(name: str, master: str, scenarios: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "bench.bench_simulate", "case", name, master, str(scenarios)],
                          capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"case {name} on {master} failed:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


def main(*, scaling_runs: bool = True, note: str = "") -> None:
    """The two headline cases, then (unless `scaling_runs` is off) the scaling runs."""
    load = os.getloadavg()[0]
    million = _subprocess("million", "local[2]", 1)
    record("bench_simulate", **million, budget_s=BUDGETS_S["million"],
           within_budget=million["wall_s"] < BUDGETS_S["million"], load_average_1m=round(load, 2), note=note)
    sweep = _subprocess("sweep32", "local[2]", 32)
    baseline = model_only(32)
    record("bench_simulate", **sweep, budget_s=BUDGETS_S["sweep32"],
           within_budget=sweep["wall_s"] < BUDGETS_S["sweep32"],
           baseline={"what": "model CPU time of 32 scenarios in one process, no Spark",
                     "seconds": round(baseline, 2)},
           ratio_vs_baseline=round(sweep["wall_s"] / baseline, 2), load_average_1m=round(load, 2), note=note)
    if not scaling_runs:
        return
    scaling = {}
    for master in ("local[1]", "local[2]"):
        for n in (1, 4, 16, 32):
            case = _subprocess("scaling", master, n)
            scaling[f"{master}/{n}"] = case["wall_s"]
    record("bench_simulate", case="scaling", wall_s_by_master_and_scenarios=scaling,
           speedup_local2_vs_local1_at_32=round(scaling["local[1]/32"] / scaling["local[2]/32"], 2),
           load_average_1m=round(os.getloadavg()[0], 2))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "case":
        print(json.dumps(run_case(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    elif len(sys.argv) >= 2 and sys.argv[1] == "headline":
        main(scaling_runs=False, note=" ".join(sys.argv[2:]))
    else:
        main()
