"""Where the time of `kreassign simulate` goes, stage by stage (issue 17: profile before tuning).

Runs the pipeline's stages one at a time, forcing each with an action, on the 1M-move case
(`million`) or the 32-scenario sweep (`sweep32`) of bench_simulate, and records per stage the
wall time and the CPU time of the whole process tree (this driver, the JVM, its Python
workers), read from /proc. On a shared machine the wall times stretch with the load; the CPU
times, and the model-only CPU time measured in-process, are the figures to compare across runs.

    python -m bench.profile_simulate million|sweep32 [--throttle 100MB/s] [--seed 5] [NOTE...]

`--throttle` and `--seed` change the 1M-move case (default 200 MB/s, seed 1): the model has more
events at lower throttles, and each seed is another cluster and plan.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import record

_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """user+system CPU seconds of `root` and every live descendant (plus their waited-for children)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(v) for v in fields[11:15]) / _TICK  # utime stime cutime cstime
    total = 0.0
    for pid, cpu in times.items():
        p = pid
        while p > 1 and p != root:
            p = parents.get(p, 1)
        if p == root:
            total += cpu
    return total


class Stages:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, float]] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), tree_cpu_s(os.getpid())
        yield
        self.rows[name] = {"wall_s": round(time.perf_counter() - wall, 2),
                           "cpu_s": round(tree_cpu_s(os.getpid()) - cpu, 2)}


def profile(case: str, note: str = "", *, throttle_bps: float = 200e6, seed: int | None = None) -> dict[str, Any]:
    from pyspark import StorageLevel

    from bench.bench_simulate import HUNDRED_K, MILLION, _axes
    from kreassign.simulate.aggregates import broker_base, broker_traffic, leader_base
    from kreassign.simulate.client_impact import ClientModel
    from kreassign.simulate.inputs import synthetic_inputs
    from kreassign.simulate.model_task import gather_inputs, ship_inputs, simulate_scenarios
    from kreassign.simulate.pipeline import timeline_plots, write_results
    from kreassign.simulate.plots import write_plots
    from kreassign.simulate.results import scenario_summary
    from kreassign.simulate.request import ScenarioOutcome
    from kreassign.simulate.scenarios import ScenarioAxes, scenario_grid, scenarios_frame
    from kreassign.simulate.session import SparkOptions, start_session
    from kreassign.simulate.synthetic import parse_synthetic

    spec = parse_synthetic(MILLION if case == "million" else HUNDRED_K)
    if seed is not None:
        spec = replace(spec, seed=seed)
    axes = ScenarioAxes(throttles=(throttle_bps,)) if case == "million" else _axes(32)["axes"]
    scenarios = scenario_grid(axes)
    s = Stages()
    load_before = os.getloadavg()
    with s.stage("jvm_session_start"):
        spark = start_session(SparkOptions(master="local[2]", shuffle_partitions=8, driver_memory="4g"))
    out = Path(tempfile.mkdtemp())
    clients = ClientModel()
    with s.stage("first_job"):  # class loading, code generation: what any first Spark job pays
        spark.range(1).count()
    inputs = synthetic_inputs(spark, spec)
    with s.stage("aggregates"):  # traffic, leader base, per broker: collected when packed
        scenario_df = scenarios_frame(spark, scenarios)
        brokers = broker_base(inputs.brokers, broker_traffic(inputs.partitions, inputs.brokers),
                              leader_base(inputs.moves)).persist(StorageLevel.MEMORY_AND_DISK)
        brokers.count()
    shipping = ExitStack()
    with s.stage("generate_and_pack_inputs"):  # as the pipeline: moves not cached, through the driver
        shipped = shipping.enter_context(ship_inputs(spark, gather_inputs(inputs.moves, lambda: brokers)))
    with s.stage("model_tasks"):
        results = simulate_scenarios(shipped, scenarios, clients, 120).persist(StorageLevel.MEMORY_AND_DISK)
        results.count()
    with s.stage("summary_collect"):
        summary = scenario_summary(results, scenario_df)
        outcomes = tuple(ScenarioOutcome.from_row(r.asDict()) for r in summary.collect())
    with s.stage("write_parquet"):
        write_results(results, summary, out, clients.headroom_target)
    with s.stage("plots"):
        write_plots(timeline_plots(spark, out, outcomes, clients.headroom_target, "decimal"), out)
    shipping.close()
    spark.stop()
    model_cpu = _model_only_cpu(case)
    return {"case": case, "note": note, "scenarios": len(scenarios), "seed": spec.seed,
            "throttle_bps": throttle_bps if case == "million" else None, "stages": s.rows,
            "pipeline_wall_s": round(sum(r["wall_s"] for k, r in s.rows.items() if k != "jvm_session_start"), 2),
            "pipeline_cpu_s": round(sum(r["cpu_s"] for k, r in s.rows.items() if k != "jvm_session_start"), 2),
            "model_only_cpu_s_per_scenario": model_cpu, "makespan_s": [o.makespan_s for o in outcomes][:4],
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def _model_only_cpu(case: str) -> float:
    """CPU seconds of one scenario through `scenario_run` in this process, on moves of the
    same size as the case's (no Spark): the floor any pipeline pays per scenario."""
    import numpy as np

    from kreassign.simulate.client_impact import ClientModel
    from kreassign.simulate.scenario_run import ScenarioArrays, run_scenario, scenario_row
    from kreassign.simulate.scenarios import Scenario

    brokers, moves = (2000, 1_000_000) if case == "million" else (1000, 100_000)
    rng = np.random.default_rng(1)
    src = rng.integers(0, brokers, moves)
    arrays = ScenarioArrays(
        broker_ids=np.arange(brokers), network_in=np.full(brokers, 1.25e9), network_out=np.full(brokers, 1.25e9),
        client_in=np.full(brokers, 2e7), client_out=np.full(brokers, 4e7), replication_in=np.full(brokers, 4e7),
        replication_out=np.full(brokers, 4e7), leader_base=np.full(brokers, 5e6),
        leader_rate=np.full(brokers, 200e6), follower_rate=np.full(brokers, 200e6), move_id=np.arange(moves),
        source=src, dest=(src + rng.integers(1, brokers, moves)) % brokers,
        bytes=np.minimum(rng.lognormal(np.log(1e8), 1.0, moves), 2e12).astype(np.int64),
        write_bps=np.minimum(rng.pareto(1.5, moves) * 1e4 + 1e4, 1e6), failover_source=np.full(moves, -1), released_bps=np.zeros(moves),
    )
    run: Callable[[], Any] = lambda: scenario_row(0, arrays, run_scenario(arrays, Scenario(0, throttle_bps=200e6), 120),
                                                  ClientModel())
    started = time.process_time()
    run()
    return round(time.process_time() - started, 2)


def main(argv: list[str]) -> None:
    import argparse

    from kreassign.cluster.units import parse_rate

    parser = argparse.ArgumentParser(prog="python -m bench.profile_simulate")
    parser.add_argument("case", nargs="?", default="million", choices=("million", "sweep32"))
    parser.add_argument("--throttle", default="200MB/s", help="the 1M case's throttle")
    parser.add_argument("--seed", type=int, default=None, help="the 1M case's synthetic seed (default 1)")
    parser.add_argument("note", nargs="*")
    args = parser.parse_intermixed_args(argv)
    record("profile_simulate", **profile(args.case, " ".join(args.note), throttle_bps=float(parse_rate(args.throttle)),
                                         seed=args.seed))


if __name__ == "__main__":
    main(sys.argv[1:])
