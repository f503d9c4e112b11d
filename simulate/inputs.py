"""The pipeline's three DataFrames (brokers, partitions, moves) from a snapshot and a plan, or
from a synthetic cluster generated on Spark.

A snapshot is read on the driver (it is the operator's own cluster, a few million rows at
most) and handed to Spark as Arrow tables without per-row Python objects.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kreassign.cluster.errors import PATH_CLIP, InputError, clip

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from kreassign.cluster.model import ClusterState, PartitionTarget
    from kreassign.planner.diff import Moves
    from kreassign.simulate.synthetic import SyntheticSpec

UNKNOWN = float("inf")
"""A capacity the snapshot does not give: unlimited, as the replication model takes it"""


@dataclass(frozen=True)
class SnapshotInput:
    """A cluster snapshot file (JSON or Parquet) written by `kreassign snapshot`."""

    path: str


@dataclass(frozen=True)
class PlanFile:
    """A reassignment JSON, as kafka-reassign-partitions takes it."""

    path: str


@dataclass(frozen=True)
class PlannerRun:
    """Plan on the input with the balanced planner (`kreassign rebalance`)."""

    seed: int = 0


@dataclass(frozen=True)
class Inputs:
    """Schemas BROKERS, PARTITIONS and MOVES, and their sizes as the driver knows them."""

    brokers: DataFrame
    partitions: DataFrame
    moves: DataFrame
    broker_count: int
    partition_count: int


def read_plan_moves(state: ClusterState, plan: PlanFile | PlannerRun) -> Moves:
    """The moves of a plan file, or of the balanced planner run on `state`.

    Raises:
        InputError: the file is unreadable or names partitions the cluster does not have.
    """
    from kreassign.planner.diff import diff_plan

    if isinstance(plan, PlanFile):
        from kreassign.cluster.errors import KafkaCompatError
        from kreassign.cluster.kafka_json import parse_reassignment

        from kreassign.cluster.files import PLAN_LIMIT, read_text

        try:
            text = read_text(plan.path, limit=PLAN_LIMIT)
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise InputError(f"cannot read the plan {clip(plan.path, PATH_CLIP)}: {why}") from None
        try:
            entries = parse_reassignment(text).entries
        except KafkaCompatError as exc:
            raise InputError(f"{plan.path} is not a reassignment JSON: {exc}") from None
        return diff_plan(state.with_copies_pending(), entries).moves  # as estimate does
    return diff_plan(state, run_planner(state, plan)).moves


def run_planner(state: ClusterState, plan: PlannerRun) -> tuple[PartitionTarget, ...]:
    """Targets of the balanced planner (`kreassign rebalance`) on `state`."""
    from kreassign.planner.balance import rebalance
    from kreassign.planner.balance.values import BalanceOptions

    return rebalance(state, BalanceOptions(seed=plan.seed)).targets


def brokers_table(state: ClusterState, extra_ids: np.ndarray, default_bps: float) -> pa.Table:
    """BROKERS rows for the cluster's brokers plus brokers only the plan names (brokers being
    added that the snapshot does not list yet), whose capacities are unknown."""
    import pyarrow as pa

    from kreassign.simulate.schemas import BROKERS

    known = {b.id for b in state.brokers}
    extra = sorted(int(b) for b in extra_ids if int(b) not in known)
    ids = [b.id for b in state.brokers] + extra
    racks = [b.rack for b in state.brokers] + [None] * len(extra)

    def capacity(value: float | None) -> float:
        return default_bps if value is None else float(value)

    net_in = [capacity(b.network_in_bps) for b in state.brokers] + [default_bps] * len(extra)
    net_out = [capacity(b.network_out_bps) for b in state.brokers] + [default_bps] * len(extra)
    return pa.table([pa.array(ids, pa.int32()), pa.array(racks, pa.string()),
                     pa.array(net_in, pa.float64()), pa.array(net_out, pa.float64())],
                    schema=arrow_schema(BROKERS))


def partitions_table(state: ClusterState) -> pa.Table:
    """PARTITIONS rows, replica lists passed as Arrow list offsets (no Python lists)."""
    import pyarrow as pa

    from kreassign.simulate.schemas import PARTITIONS

    n = len(state)
    topics = np.asarray(state.topics, dtype=object)[state.topic_index] if n else np.zeros(0, object)
    replicas = pa.ListArray.from_arrays(pa.array(state.replica_offsets.astype(np.int32)),
                                        pa.array(state.replica_ids.astype(np.int32)))
    columns = [
        pa.array(np.arange(n, dtype=np.int64)), pa.array(topics, pa.string()),
        pa.array(state.partition.astype(np.int32)), pa.array(state.leader.astype(np.int32)),
        replicas, pa.array(np.diff(state.isr_offsets).astype(np.int32)),
        pa.array(state.size_bytes.astype(np.int64)),
        pa.array(state.produce_bps.astype(np.float64)), pa.array(state.consume_bps.astype(np.float64)),
    ]
    return pa.table(columns, schema=arrow_schema(PARTITIONS))


def moves_table(moves: Moves, state: ClusterState) -> pa.Table:
    """MOVES rows, numbered in plan order.

    A leader the cluster does not list cannot serve the copy, so its moves get source -1, as
    in `predict.model.from_moves`; the in-sync replication the leader throttle counts is
    the partition's produce rate times its in-sync followers, on its first move; what else each
    move's fetcher session carries and whether its leader is warm, as `from_moves` has them
    (`predict.model.move_sessions`).
    """
    import pyarrow as pa

    from kreassign.simulate.schemas import MOVES
    from kreassign.predict.model import FetchLimits, move_sessions

    known = np.asarray(state.broker_ids, dtype=np.int64)
    rows = moves.row.astype(np.int64)
    source = np.where(np.isin(moves.source, known), moves.source, -1)
    first = np.zeros(len(rows), dtype=bool)
    first[np.unique(rows, return_index=True)[1]] = True
    followers = np.maximum(np.diff(state.isr_offsets)[rows] - 1, 0)
    leader_base = np.where(first, state.produce_bps[rows] * followers, 0.0)
    replicas = state.replica_matrix()[rows]
    leader = state.leader[rows].astype(np.int64)
    other = (replicas >= 0) & (replicas != leader[:, None]) & (replicas != moves.dest[:, None])
    failover = np.where(other.any(axis=1), replicas[np.arange(len(rows)), other.argmax(axis=1)], -1)
    session, warm = move_sessions(state, rows, moves.dest.astype(np.int64), source, FetchLimits().num_fetchers)
    columns = [
        pa.array(np.arange(len(moves), dtype=np.int64)), pa.array(rows),
        pa.array(source.astype(np.int32)), pa.array(moves.dest.astype(np.int32)),
        pa.array(moves.bytes.astype(np.int64)), pa.array(moves.write_bps.astype(np.float64)),
        pa.array(leader_base.astype(np.float64)), pa.array(failover.astype(np.int32)),
        pa.array(moves.released_bps.astype(np.float64)), pa.array(session.astype(np.int32)),
        pa.array(warm.astype(np.int32)),
    ]
    return pa.table(columns, schema=arrow_schema(MOVES))


def snapshot_inputs(spark: SparkSession, state: ClusterState, moves: Moves,
                    default_bps: float = UNKNOWN) -> Inputs:
    """Hand a cluster state and its plan to Spark."""
    from kreassign.simulate.schemas import BROKERS, MOVES, PARTITIONS

    brokers = brokers_table(state, moves.dest, default_bps)
    return Inputs(
        brokers=spark.createDataFrame(brokers, schema=BROKERS),
        partitions=spark.createDataFrame(partitions_table(state), schema=PARTITIONS),
        moves=spark.createDataFrame(moves_table(moves, state), schema=MOVES),
        broker_count=brokers.num_rows, partition_count=len(state),
    )


def synthetic_inputs(spark: SparkSession, spec: SyntheticSpec) -> Inputs:
    """A synthetic cluster and its plan, generated on the executors."""
    from kreassign.simulate.synthetic import synthetic_brokers, synthetic_moves, synthetic_partitions

    partitions = synthetic_partitions(spark, spec)
    return Inputs(brokers=synthetic_brokers(spark, spec), partitions=partitions,
                  moves=synthetic_moves(partitions, spec), broker_count=spec.brokers + spec.added,
                  partition_count=spec.partitions)


def arrow_schema(schema: object) -> pa.Schema:
    """The Arrow twin of a Spark StructType (the subset of types schemas.py uses)."""
    import pyarrow as pa
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructType,
    )

    assert isinstance(schema, StructType)
    simple = {IntegerType: pa.int32(), LongType: pa.int64(), DoubleType: pa.float64(),
              StringType: pa.string(), BinaryType: pa.binary()}

    def arrow(kind: object) -> pa.DataType:
        if isinstance(kind, ArrayType):
            return pa.list_(arrow(kind.elementType))
        return simple[type(kind)]

    return pa.schema([pa.field(f.name, arrow(f.dataType), f.nullable) for f in schema.fields])
