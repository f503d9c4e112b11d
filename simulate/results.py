"""From the model tasks' rows to the tables the pipeline writes (`DataFrame -> DataFrame`)."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kreassign.simulate.schemas import (
    BROKER_TIMELINE,
    CLUSTER_TIMELINE,
    SCENARIO_SUMMARY,
    TIMELINE_COLUMNS,
    columns,
)


def broker_timelines(results: DataFrame) -> DataFrame:
    """Unpack each scenario's parallel timeline arrays into rows (SCENARIO_RESULT ->
    BROKER_TIMELINE)."""
    # One position per sample, each array read at it: zipping the arrays first would build a
    # struct per sample (most of the write's CPU on the 32-scenario sweep).
    first = f"tl_{TIMELINE_COLUMNS[0]}"
    arrays = [f"tl_{name}" for name in TIMELINE_COLUMNS]
    return (
        results.select("scenario_id", *arrays, F.posexplode(first).alias("i", "_first"))
        .select("scenario_id", *[F.col(a)[F.col("i")].alias(name) for a, name in zip(arrays, TIMELINE_COLUMNS)])
        .select(*columns(BROKER_TIMELINE))
    )


def cluster_timeline(results: DataFrame, timelines: DataFrame, headroom_target: float) -> DataFrame:
    """Per scenario and sample time: the plan's bytes not yet copied, and over all brokers the
    catch-up throughput (total, mean, busiest) and client headroom (worst, 5th percentile,
    brokers under target). (SCENARIO_RESULT, BROKER_TIMELINE -> CLUSTER_TIMELINE.)"""
    grid = F.arrays_zip(F.col("grid_t_s").alias("t_s"),
                        F.col("grid_bytes_remaining").alias("bytes_remaining"))
    remaining = (results.select("scenario_id", F.explode(grid).alias("g"))
                 .select("scenario_id", "g.t_s", "g.bytes_remaining"))
    brokers = timelines.groupBy("scenario_id", "t_s").agg(
        F.sum("replication_in_bps").alias("replication_in_bps"),
        F.avg("replication_in_bps").alias("mean_replication_in_bps"),
        F.max("replication_in_bps").alias("max_replication_in_bps"),
        F.min("headroom").alias("min_headroom"),
        F.percentile_approx("headroom", 0.05, 1000).alias("p05_headroom"),
        F.count_if(F.col("headroom") < headroom_target).alias("brokers_below_target"),
    )
    return remaining.join(brokers, ["scenario_id", "t_s"]).select(*columns(CLUSTER_TIMELINE))


def scenario_summary(results: DataFrame, scenarios: DataFrame) -> DataFrame:
    """One row per scenario: its settings and the model's outcome, with its lower bound and
    bottleneck broker. (SCENARIO_RESULT, SCENARIOS -> SCENARIO_SUMMARY.)"""
    outcome = results.drop(*[f"tl_{name}" for name in TIMELINE_COLUMNS], "grid_t_s", "grid_bytes_remaining")
    return scenarios.join(outcome, "scenario_id").select(*columns(SCENARIO_SUMMARY)).orderBy("scenario_id")
