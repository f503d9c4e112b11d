"""The Spark side of `simulate`: generation, aggregates, bounds, the model tasks, and the CLI.

All tests share the session of `conftest_spark`; inputs are tiny so each job takes a second.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import Kreassign
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from kreassign.cluster.kafka_json import format_reassignment
from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, TopicPartition
from kreassign.cluster.snapshot import write_snapshot
from kreassign.planner.diff import diff_plan
from kreassign.simulate.aggregates import broker_base, broker_traffic, leader_base
from kreassign.simulate.inputs import PlanFile, SnapshotInput, snapshot_inputs, synthetic_inputs
from kreassign.simulate.model_task import (
    MOVE_COLUMNS,
    gather_inputs,
    packed_frame,
    scenario_brokers,
    unpack_brokers,
    unpack_moves,
)
from kreassign.simulate.pipeline import BROKER_TIMELINE_DIR, CLUSTER_TIMELINE_DIR, run_simulation
from kreassign.simulate.request import SimulationRequest
from kreassign.simulate.scenarios import Scenario, ScenarioAxes, scenario_grid, scenarios_frame
from kreassign.simulate.schemas import (
    BROKER_TIMELINE,
    BROKER_TRAFFIC,
    BROKERS,
    CLUSTER_TIMELINE,
    LEADER_BASE,
    MOVES,
    PACKED_INPUTS,
    PARTITIONS,
    SCENARIO_SUMMARY,
)
from kreassign.simulate.synthetic import SyntheticSpec, synthetic_moves, synthetic_partitions
from kreassign.predict.estimate import RateRequest, estimate_plan

pytestmark = pytest.mark.spark

MB = 1_000_000


@pytest.fixture(scope="module")
def state() -> ClusterState:
    """Brokers 1-5 with 100 MB/s NICs; broker 5 is new and empty. Whole-number rates keep
    every sum exact, whatever order Spark adds them in."""
    brokers = [Broker(i, rack=f"r{i % 2}", network_in_bps=100e6, network_out_bps=100e6) for i in range(1, 6)]
    parts = [
        PartitionInfo("orders", p, replicas=((p % 4) + 1, ((p + 1) % 4) + 1), size_bytes=(p + 1) * 400 * MB,
                      produce_bps=float(100_000 * (p + 1)), consume_bps=float(200_000 * (p + 1)))
        for p in range(8)
    ]
    return ClusterState.from_partitions(brokers, parts)


def _targets(state: ClusterState) -> dict[TopicPartition, tuple[int, ...]]:
    """Move the second replica of every other partition to broker 5."""
    return {state.tp(r): (state.replicas(r)[0], 5) for r in range(0, len(state), 2)}


def test_synthetic_cluster_is_seeded_and_consistent(spark: SparkSession) -> None:
    spec = SyntheticSpec(brokers=20, racks=4, partitions=2000, add=4, seed=5)
    parts = synthetic_partitions(spark, spec)
    assertSchemaEqual(parts.schema, PARTITIONS)
    assertDataFrameEqual(parts, synthetic_partitions(spark, spec).repartition(3))
    bad = parts.where((F.size(F.array_distinct("replicas")) != 3) | (F.col("leader") != F.col("replicas")[0])
                      | (F.col("size_bytes") <= 0) | (F.col("produce_bps") <= 0)
                      | (F.col("produce_bps") > spec.write_max))
    assert bad.count() == 0
    moves = synthetic_moves(parts, spec)
    assertSchemaEqual(moves.schema, MOVES)
    checked = moves.join(parts.select("row", "replicas"), "row").select(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.array_contains("replicas", F.col("dest")).cast("int")).alias("dest_in_replicas"),
        F.min("dest").alias("lo"), F.max("dest").alias("hi"),
        F.sum((F.col("source") != F.col("replicas")[0]).cast("int")).alias("not_from_leader"),
        F.sum((F.col("failover_source") != F.col("replicas")[1]).cast("int")).alias("bad_failover"),
    ).first()
    assert checked is not None
    expected = spec.move_probability * spec.partitions  # 3 * 4 / 24 = half the partitions
    assert abs(checked["n"] - expected) < 0.1 * expected
    assert (checked["dest_in_replicas"], checked["lo"], checked["hi"], checked["not_from_leader"],
            checked["bad_failover"]) == (0, 20, 23, 0, 0)


def test_decommission_moves_every_replica_off_the_removed_brokers(spark: SparkSession) -> None:
    spec = SyntheticSpec(brokers=12, racks=3, partitions=600, remove=3, seed=1)
    parts = synthetic_partitions(spark, spec)
    on_removed = parts.select(F.explode("replicas").alias("b")).where("b < 3").count()
    moves = synthetic_moves(parts, spec)
    checked = moves.join(parts.select("row", "replicas", "produce_bps"), "row").select(
        F.count(F.lit(1)).alias("n"), F.countDistinct("row", "dest").alias("pairs"),
        F.min("dest").alias("lo"),
        F.sum(F.array_contains("replicas", F.col("dest")).cast("int")).alias("dest_in_replicas"),
        F.sum((~F.array_contains("replicas", F.col("failover_source")) | (F.col("failover_source") == F.col("source"))
               | (F.col("failover_source") == F.col("dest"))).cast("int")).alias("bad_failover"),
        F.sum("leader_base_bps").alias("leader_base"),
    ).first()
    moving = parts.join(moves.select("row").distinct(), "row").select(F.sum(F.col("produce_bps") * 2)).first()
    assert checked is not None and moving is not None
    assert (checked["n"], checked["pairs"], checked["dest_in_replicas"], checked["bad_failover"]) == (
        on_removed, on_removed, 0, 0)
    assert checked["lo"] >= 3
    # each moving partition's in-sync replication counted once, whatever its number of moves
    assert checked["leader_base"] == pytest.approx(moving[0], rel=1e-12)


def test_broker_traffic_and_leader_base(spark: SparkSession) -> None:
    brokers = spark.createDataFrame([(1, "a", 1e9, 1e9), (2, "b", 1e9, 1e9), (3, "a", 1e9, 1e9)], BROKERS)
    partitions = spark.createDataFrame([
        (0, "t", 0, 1, [1, 2], 2, 1000, 10.0, 30.0),
        (1, "t", 1, 2, [2, 1], 1, 500, 20.0, 0.0),
    ], PARTITIONS)
    moves = spark.createDataFrame([(0, 0, 1, 3, 1000, 10.0, 10.0, 2, 10.0, 0, 1), (1, 1, 2, 3, 500, 20.0, 0.0, 1, 0.0, 0, 1),
                                   (2, 2, -1, 3, 700, 5.0, 5.0, -1, 0.0, 0, 0)], MOVES)
    assertDataFrameEqual(broker_traffic(partitions, brokers), spark.createDataFrame([
        (1, 1, 2, 10.0, 30.0, 20.0, 10.0),
        (2, 1, 2, 20.0, 0.0, 10.0, 20.0),
        (3, 0, 0, 0.0, 0.0, 0.0, 0.0),
    ], BROKER_TRAFFIC))
    # broker 1 leads partition 0, whose ISR has one follower: 10 B/s count against its quota
    # broker 3 only receives and the leaderless partition (source -1) has no sender: no rows
    assertDataFrameEqual(leader_base(moves), spark.createDataFrame([(1, 10.0), (2, 0.0)], LEADER_BASE))


def test_the_spark_path_agrees_with_the_estimate(spark: SparkSession, state: ClusterState,
                                                 tmp_path: Path) -> None:
    snapshot, plan = tmp_path / "cluster.json", tmp_path / "plan.json"
    write_snapshot(state, snapshot)
    plan.write_text(format_reassignment(_targets(state)))
    request = SimulationRequest(
        cluster=SnapshotInput(str(snapshot)), plan=PlanFile(str(plan)), output_dir=str(tmp_path / "out"),
        axes=ScenarioAxes(throttles=(10e6, 30e6), moves_per_broker=(None, 1)), plots=False,
        timeline_points=25,
    )
    result = run_simulation(request, spark=spark)
    curves = spark.read.parquet(str(tmp_path / "out" / CLUSTER_TIMELINE_DIR))
    timelines = spark.read.parquet(str(tmp_path / "out" / BROKER_TIMELINE_DIR))
    assert len(result.outcomes) == 4
    for outcome in result.outcomes:
        estimate = estimate_plan(state, _targets(state), rates=RateRequest(throttle=outcome.throttle_bps),
                                 max_moves_per_broker=outcome.moves_per_broker)
        assert outcome.makespan_s == estimate.eta_s
        assert outcome.stalled_moves == len(estimate.stalled) == 0
        assert outcome.lower_bound_s == estimate.lower.seconds
        assert outcome.bottleneck_broker == estimate.lower.broker
        assert (outcome.moves, outcome.bytes) == (estimate.moves, estimate.bytes)
        curve = curves.where(F.col("scenario_id") == outcome.scenario_id).orderBy("t_s").toPandas()
        grid = np.linspace(0.0, estimate.eta_s, 25)
        assert curve["t_s"].tolist() == grid.tolist()
        # what is left of the plan comes from the brokers' timeline the throughput plot draws
        brokers = timelines.where(F.col("scenario_id") == outcome.scenario_id).orderBy("broker", "t_s").toPandas()
        rate = brokers["replication_in_bps"].to_numpy().reshape(-1, 25)
        pending = brokers["pending_bytes"].to_numpy().reshape(-1, 25)
        received = np.concatenate((np.zeros((len(rate), 1)), np.cumsum(rate[:, :-1] * np.diff(grid), axis=1)), axis=1)
        # every move finishes: a byte a broker receives counts for the plan's share of all it receives
        total, everything = pending[:, :1], received[:, -1:]
        expected = (total * (1 - np.divide(received, everything, out=np.zeros_like(received),
                                           where=everything > 0))).sum(axis=0)
        assert curve["bytes_remaining"].to_numpy() == pytest.approx(expected, rel=1e-12, abs=1e-3)
        assert curve["bytes_remaining"].iloc[0] == outcome.bytes and curve["bytes_remaining"].iloc[-1] == 0.0


def test_a_small_synthetic_sweep_from_the_cli(spark: SparkSession, tmp_path: Path, kreassign: Kreassign) -> None:
    out = tmp_path / "sim"
    args = ["simulate", "--synthetic", "brokers=50,racks=5,partitions=5000,rf=3,seed=11",
            "--throttle", "100MB/s,none", "--fail", "none,random@50%", "--seed", "4",
            "--timeline-points", "20", "--out", str(out), "--report", str(tmp_path / "report.html"),
            "--output", "json"]
    run = kreassign.run(*args)
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    rows = doc["scenarios"]
    assert [r["scenario_id"] for r in rows] == [0, 1, 2, 3]
    assert doc["brokers"] == 55 and doc["partitions"] == 5000
    throttled, throttled_fail, free, free_fail = rows
    assert throttled["failed_broker"] is None and throttled_fail["failed_broker"] is not None
    assert throttled_fail["failed_broker"] == free_fail["failed_broker"]  # same seed, same victim
    assert free["makespan_s"] <= throttled["makespan_s"]
    for r in rows:  # with a failure too: its bound is the failure time plus that of what is left
        assert r["makespan_s"] is None or r["makespan_s"] >= r["lower_bound_s"] * (1 - 1e-9)
    assert {Path(f).name for f in doc["files"]} >= {"summary.parquet", "broker_timeline.parquet",
                                                   "cluster_timeline.parquet", "bytes_remaining.png",
                                                   "broker_throughput.png", "client_headroom.png",
                                                   "report.html"}
    report = (tmp_path / "report.html").read_text()
    assert report.count('src="data:image/png;base64,') == 3 and report.count("<section id=") == 5
    timelines = spark.read.parquet(str(out / BROKER_TIMELINE_DIR))
    assertSchemaEqual(timelines.select(*BROKER_TIMELINE.fieldNames()).schema, BROKER_TIMELINE)
    assert timelines.count() == 4 * 55 * 20
    cluster = spark.read.parquet(str(out / CLUSTER_TIMELINE_DIR))
    assertSchemaEqual(cluster.schema, CLUSTER_TIMELINE)
    summary = spark.read.parquet(str(out / "summary.parquet"))
    assertSchemaEqual(summary.schema, SCENARIO_SUMMARY)
    first = cluster.where("scenario_id = 0").orderBy("t_s").select("bytes_remaining").toPandas()
    assert first["bytes_remaining"].iloc[0] == throttled["bytes"]
    assert first["bytes_remaining"].iloc[-1] == 0.0


def test_scenario_grid_frame_matches_the_grid(spark: SparkSession) -> None:
    grid = scenario_grid(ScenarioAxes(throttles=(1e6, None), moves_per_broker=(None, 3)))
    frame = scenarios_frame(spark, grid).orderBy("scenario_id").collect()
    assert [(r["throttle_bps"], r["moves_per_broker"]) for r in frame] == [
        (1e6, None), (1e6, 3), (None, None), (None, 3)]


def test_inputs_are_packed_once_and_unpacked_in_plan_order(spark: SparkSession) -> None:
    spec = SyntheticSpec(brokers=20, racks=4, partitions=3000, add=4, seed=3)
    inputs = synthetic_inputs(spark, spec)
    moves = inputs.moves.repartition(3)  # rows in any order
    brokers = broker_base(inputs.brokers, broker_traffic(inputs.partitions, inputs.brokers),
                          leader_base(moves)).repartition(3)
    streams = gather_inputs(moves, lambda: brokers)
    packed = packed_frame(spark, streams)  # what a Spark Connect session ships
    assertSchemaEqual(packed.schema, PACKED_INPUTS)
    rows = packed.collect()
    assert len(rows) == 1 and len(rows[0]["move_chunks"]) == 1
    expected = moves.orderBy("move_id").select(*MOVE_COLUMNS).toPandas()
    # the joined row (Connect) and the broadcast streams (classic) unpack alike, in plan order
    for unpacked in (unpack_moves(rows[0]["move_chunks"]), unpack_moves([streams.moves.to_pybytes()])):
        for name in MOVE_COLUMNS:
            assert unpacked[name].tolist() == expected[name].tolist()
    for base in (unpack_brokers(rows[0]["broker_chunk"]), unpack_brokers(streams.brokers.to_pybytes())):
        assert base["broker"].tolist() == list(range(24))
        assert base["leader_base_bps"][20:].tolist() == [0.0] * 4  # new brokers lead nothing
    empty = unpack_moves([gather_inputs(moves.limit(0), lambda: brokers).moves])
    assert {name: (len(v), v.dtype.kind) for name, v in empty.items()} == {
        "move_id": (0, "i"), "source": (0, "i"), "dest": (0, "i"), "bytes": (0, "i"),
        "write_bps": (0, "f"), "failover_source": (0, "i"), "released_bps": (0, "f"), "session": (0, "i"),
        "warm": (0, "i")}
    assert set(expected["session"]) == {0}  # new brokers follow nothing yet: their sessions carry nothing else


def test_synthetic_moves_know_what_their_fetcher_sessions_carry(spark: SparkSession) -> None:
    spec = SyntheticSpec(brokers=8, racks=2, partitions=400, remove=2, seed=5)
    partitions = synthetic_partitions(spark, spec)
    followed = {(int(r["leader"]), int(b)) for r in partitions.collect() for b in r["replicas"][1:]}
    moves = synthetic_moves(partitions, spec).toPandas()
    # every synthetic partition is in sync and written, but a leader's followers are the same rf - 1
    # brokers for all its partitions, and new replicas land elsewhere: no session carries any
    assert not any((s, d) in followed for s, d in zip(moves["source"], moves["dest"]))
    assert set(moves["session"]) == {0}


def test_each_scenario_scales_the_broker_base_and_sets_its_throttle(spark: SparkSession, state: ClusterState) -> None:
    inputs = snapshot_inputs(spark, state, diff_plan(state, _targets(state)).moves)
    base = broker_base(inputs.brokers, broker_traffic(inputs.partitions, inputs.brokers), leader_base(inputs.moves))
    table = unpack_brokers(gather_inputs(inputs.moves, lambda: base.repartition(4)).brokers)
    assert table["broker"].tolist() == [1, 2, 3, 4, 5]
    flat = base.orderBy("broker").toPandas()
    throttled = scenario_brokers(table, Scenario(0, throttle_bps=1e6, write_multiplier=1.5))
    assert throttled["client_in_bps"].tolist() == (flat["client_in_bps"] * 1.5).tolist()
    assert throttled["leader_base_bps"].tolist() == (flat["leader_base_bps"] * 1.5).tolist()
    assert throttled["network_in_bps"].tolist() == flat["network_in_bps"].tolist()
    assert throttled["leader_rate_bps"].tolist() == throttled["follower_rate_bps"].tolist() == [1e6] * 5
    assert scenario_brokers(table, Scenario(1))["leader_rate_bps"].tolist() == [float("inf")] * 5


def test_broker_timelines_unpack_each_scenarios_arrays_into_rows(spark: SparkSession) -> None:
    import pyarrow as pa
    from test_simulate_scenario_run import _arrays

    from kreassign.simulate.client_impact import ClientModel
    from kreassign.simulate.inputs import arrow_schema
    from kreassign.simulate.model_task import _cell
    from kreassign.simulate.results import broker_timelines
    from kreassign.simulate.scenario_run import run_scenario, scenario_row
    from kreassign.simulate.schemas import SCENARIO_RESULT

    arrays = _arrays()
    run = run_scenario(arrays, Scenario(3, throttle_bps=10 * MB), points=5)
    row = scenario_row(3, arrays, run, ClientModel())
    schema = arrow_schema(SCENARIO_RESULT)
    batch = pa.RecordBatch.from_arrays([_cell(row[f.name], f.type) for f in schema], schema=schema)
    frame = spark.createDataFrame(batch.to_pandas(), schema=SCENARIO_RESULT)
    got = [(r["broker"], r["t_s"], r["replication_in_bps"], r["headroom"])
           for r in broker_timelines(frame).orderBy("broker", "t_s").collect()]
    assert got == [(int(b), float(t), float(run.rate_in[i, k]), float(row["tl_headroom"][i * 5 + k]))
                   for i, b in enumerate(arrays.broker_ids) for k, t in enumerate(run.grid_t_s)]
