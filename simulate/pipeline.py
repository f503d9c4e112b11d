"""`run_simulation`: inputs -> per-broker aggregates -> one model task per scenario ->
Parquet tables and plots. Only the summary and the per-scenario cluster timeline (scenarios x
samples rows) reach the driver."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kreassign.simulate.request import ScenarioOutcome, SimulationRequest, SimulationResult
from kreassign.simulate.scenarios import Scenario, scenario_grid

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from kreassign.cluster.model import ClusterState
    from kreassign.cluster.units import Units
    from kreassign.planner.diff import Moves
    from kreassign.simulate.plots import PlotSpec
    from kreassign.simulate.inputs import Inputs

SUMMARY_DIR = "summary.parquet"
BROKER_TIMELINE_DIR = "broker_timeline.parquet"
CLUSTER_TIMELINE_DIR = "cluster_timeline.parquet"


def run_simulation(request: SimulationRequest, *, spark: SparkSession | None = None,
                   starting: Callable[[], None] = lambda: None) -> SimulationResult:
    """Run every scenario of `request` on Spark and write the results under its output dir.

    Args:
        request: the cluster, plan, scenario axes and output settings.
        spark: a session to use. By default the active session is joined if there is one,
            else one is started from `request.spark` and stopped at the end.
        starting: called once the inputs are checked, as the simulation goes to Spark.

    Raises:
        SparkUnavailable: Spark cannot start (no Java, bad master, no Connect client).
        InputError: unreadable snapshot or plan, a plan that does not fit the cluster.
    """
    from kreassign.simulate.session import active_session, start_session, stop_session

    # the snapshot and the plan first: a damaged file ends in one line before Spark starts (seconds)
    prepared = prepare_inputs(request)
    starting()
    session = spark if spark is not None else active_session()
    own_session = session is None
    if session is None:
        if request.plots or request.report_path:
            # matplotlib takes about a CPU second to import: while the JVM starts, not after the
            # Parquet tables are written
            threading.Thread(target=_import_plotting, name="import-matplotlib", daemon=True).start()
        session = start_session(request.spark)
    warming = None
    if own_session and request.spark.is_local:
        from kreassign.simulate.model_task import warm_workers

        warming = warm_workers(session, min(len(scenario_grid(request.axes)), session.sparkContext.defaultParallelism))
    try:
        return _run(session, request, prepared)
    finally:
        if warming is not None:
            warming.join()
        if own_session:
            stop_session(session, request.spark)


def _import_plotting() -> None:
    from kreassign.simulate.plots import agg_pyplot

    agg_pyplot()


def prepare_inputs(request: SimulationRequest) -> tuple[ClusterState, Moves] | None:
    """The snapshot and the plan's moves, read and checked without Spark (None: a synthetic
    cluster, made on Spark).

    Raises:
        InputError: unreadable snapshot or plan, a plan that does not fit the cluster.
    """
    from kreassign.simulate.inputs import SnapshotInput, read_plan_moves

    if not isinstance(request.cluster, SnapshotInput):
        return None
    from kreassign.cluster.snapshot import read_snapshot

    assert request.plan is not None
    state = read_snapshot(request.cluster.path)
    return state, read_plan_moves(state, request.plan)


def load_inputs(spark: SparkSession, request: SimulationRequest,
                prepared: tuple[ClusterState, Moves] | None = None) -> Inputs:
    """The brokers, partitions and moves DataFrames of the request's cluster and plan."""
    from kreassign.simulate.inputs import snapshot_inputs, synthetic_inputs
    from kreassign.simulate.synthetic import SyntheticSpec

    if prepared is None:
        prepared = prepare_inputs(request)
    if prepared is not None:
        state, moves = prepared
        default = request.default_network_bps
        return snapshot_inputs(spark, state, moves, default_bps=float("inf") if default is None else default)
    assert isinstance(request.cluster, SyntheticSpec)
    return synthetic_inputs(spark, request.cluster)


def _run(spark: SparkSession, request: SimulationRequest,
         prepared: tuple[ClusterState, Moves] | None = None) -> SimulationResult:
    from pyspark import StorageLevel

    from kreassign.simulate.aggregates import broker_base, broker_traffic, leader_base
    from kreassign.simulate.model_task import gather_inputs, ship_inputs, simulate_scenarios
    from kreassign.simulate.results import scenario_summary
    from kreassign.simulate.scenarios import scenarios_frame

    timings: dict[str, float] = {}
    scenarios = scenario_grid(request.axes)
    out = Path(request.output_dir)
    target = request.clients.headroom_target

    with _timed(timings, "inputs_s"):
        inputs = load_inputs(spark, request, prepared)
        _check_failures(inputs.brokers, scenarios)
        # Not cached: generating the synthetic moves again for `leader_base` costs about 1 CPU s
        # for 1M moves, caching them 7 (bench/results/profile_simulate.jsonl).
        streams = gather_inputs(inputs.moves, lambda: broker_base(
            inputs.brokers, broker_traffic(inputs.partitions, inputs.brokers), leader_base(inputs.moves)))
    with ExitStack() as shipping:
        with _timed(timings, "model_s"):
            shipped = shipping.enter_context(ship_inputs(spark, streams))
            results = simulate_scenarios(shipped, scenarios, request.clients, request.timeline_points,
                                         ).persist(StorageLevel.MEMORY_AND_DISK)
            scenario_df = scenarios_frame(spark, scenarios, request.units)
            summary = scenario_summary(results, scenario_df).persist(StorageLevel.MEMORY_AND_DISK)
            outcomes = tuple(ScenarioOutcome.from_row(r.asDict()) for r in summary.collect())
        with _timed(timings, "write_s"):
            files = write_results(results, summary, out, target)
        for frame in (summary, results):
            frame.unpersist()
    pngs: dict[Path, bytes] = {}
    specs: tuple[PlotSpec, ...] = ()
    if request.plots or request.report_path:
        from kreassign.simulate.plots import render_png, write_plots

        with _timed(timings, "plots_s"):
            specs = timeline_plots(spark, out, outcomes, target, request.units)
            pngs = write_plots(specs, out) if request.plots else {out / s.file: render_png(s) for s in specs}
        files += [str(p) for p in pngs if request.plots]
    result = SimulationResult(
        outcomes=outcomes, scenarios=scenarios, output_dir=str(out), files=tuple(files),
        brokers=inputs.broker_count, partitions=inputs.partition_count,
        headroom_target=target, timings_s=timings, units=request.units,
    )
    if request.report_path:
        from dataclasses import replace

        from kreassign.simulate.report import render_report

        report = Path(request.report_path)
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(render_report(result, {p.name: png for p, png in pngs.items()}, specs), encoding="utf-8")
        result = replace(result, files=(*result.files, str(report)))
    return result


def write_results(results: DataFrame, summary: DataFrame, out: Path, headroom_target: float) -> list[str]:
    """Write the summary, the per-broker timelines and the cluster timeline as Parquet under `out`."""
    from concurrent.futures import ThreadPoolExecutor

    from kreassign.simulate.results import broker_timelines, cluster_timeline

    # Both tables below explode the timelines; caching the exploded rows once cost more CPU than
    # exploding twice (bench/results/profile_simulate.jsonl, sweep32). The three jobs run at
    # once: each spends much of its time on the driver (planning, code generation, committing
    # files), so one job's tasks fill the cores another leaves idle (1.6-2 s instead of 3 on the
    # 1M-move case).
    timelines = broker_timelines(results)
    writes = (
        lambda: summary.coalesce(1).write.mode("overwrite").parquet(str(out / SUMMARY_DIR)),
        lambda: timelines.write.mode("overwrite").partitionBy("scenario_id").parquet(str(out / BROKER_TIMELINE_DIR)),
        lambda: cluster_timeline(results, timelines, headroom_target).coalesce(1).write.mode("overwrite").parquet(
            str(out / CLUSTER_TIMELINE_DIR)),
    )
    with ThreadPoolExecutor(len(writes), thread_name_prefix="write") as pool:
        for done in [pool.submit(w) for w in writes]:
            done.result()
    return [str(out / d) for d in (SUMMARY_DIR, BROKER_TIMELINE_DIR, CLUSTER_TIMELINE_DIR)]


def _check_failures(brokers: DataFrame, scenarios: tuple[Scenario, ...]) -> None:
    """Fail before the sweep, not inside a task, when a scenario fails an unknown broker."""
    from pyspark.sql import functions as F

    from kreassign.cluster.errors import InputError

    named = sorted({s.failure.broker for s in scenarios if s.failure is not None and s.failure.broker >= 0})
    if not named:
        return
    found = {r["broker"] for r in brokers.where(F.col("broker").isin(named)).select("broker").collect()}
    missing = [b for b in named if b not in found]
    if missing:
        raise InputError(f"--fail names broker {missing[0]}, which is not in the cluster")


def timeline_plots(spark: SparkSession, out: Path, outcomes: tuple[ScenarioOutcome, ...], target: float,
                   units: Units) -> tuple[PlotSpec, ...]:
    """The plots of the cluster timeline written under `out`, each scenario under its one name."""
    from kreassign.simulate.plots import PlotScenario, plot_specs

    cluster = spark.read.parquet(str(out / CLUSTER_TIMELINE_DIR)).toPandas()
    info = {o.scenario_id: PlotScenario(f"#{o.scenario_id} {o.name}", o.stalled_moves) for o in outcomes}
    return plot_specs(cluster, info, target, units)


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - start
