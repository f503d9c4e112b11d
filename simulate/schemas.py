"""Every DataFrame shape of the simulation pipeline, declared once.

Transforms end with `select(*columns(SCHEMA))` so their output matches these schemas; tests check
them with `assertSchemaEqual`. Rates are bytes per second, times seconds from the start of the
rebalance, sizes bytes.
"""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)


def _fields(*spec: tuple[str, DataType, bool]) -> StructType:
    return StructType([StructField(name, kind, nullable) for name, kind, nullable in spec])


_INT, _LONG, _DOUBLE, _STRING = IntegerType(), LongType(), DoubleType(), StringType()

BROKERS = _fields(
    ("broker", _INT, False),
    ("rack", _STRING, True),
    ("network_in_bps", _DOUBLE, False),
    ("network_out_bps", _DOUBLE, False),
)
"""One row per broker; a capacity the snapshot does not know is infinite, as in the model."""

PARTITIONS = _fields(
    ("row", _LONG, False),
    ("topic", _STRING, False),
    ("partition", _INT, False),
    ("leader", _INT, False),
    ("replicas", ArrayType(_INT), False),
    ("isr_size", _INT, False),
    ("size_bytes", _LONG, False),
    ("produce_bps", _DOUBLE, False),
    ("consume_bps", _DOUBLE, False),
)
"""One row per partition; `leader` is -1 for a partition without one."""

MOVES = _fields(
    ("move_id", _LONG, False),
    ("row", _LONG, False),
    ("source", _INT, False),
    ("dest", _INT, False),
    ("bytes", _LONG, False),
    ("write_bps", _DOUBLE, False),
    ("leader_base_bps", _DOUBLE, False),
    ("failover_source", _INT, False),
    ("released_bps", _DOUBLE, False),
    ("session", _INT, False),
    ("warm", _INT, False),
)
"""One row per replica a plan adds, as `planner.diff.Moves` (source -1: partition has no leader).

Two partition facts ride along so that no step has to join moves with partitions:
`leader_base_bps` is the partition's in-sync replication (produce rate x in-sync followers),
which the leader throttle counts because Kafka's tool lists every replica of a moving
partition; it sits on the partition's first move only (0 on the others) so that sums count
each partition once. `failover_source` is the first current replica other than the leader
and the destination, which takes over if the source fails (-1: none). `session` is what else
the move's fetcher session carries (`predict.model.Session`: 0 nothing, 1 idle in-sync
partitions, 2 written ones), which sets what its follower throttle gives it; `warm` (0/1)
whether its leader answers in-sync followers, so that its leader throttle floods once a quota
span (`predict.model.ModelInput.leader_flood`)."""

SCENARIOS = _fields(
    ("scenario_id", _INT, False),
    ("name", _STRING, False),
    ("throttle_bps", _DOUBLE, True),
    ("moves_per_broker", _INT, True),
    ("write_multiplier", _DOUBLE, False),
    ("fail_broker", _INT, True),
    ("fail_at_s", _DOUBLE, True),
    ("fail_at_fraction", _DOUBLE, True),
    ("seed", _LONG, False),
)
"""One row per scenario, with its one name (`Scenario.name`). Nulls mean: no throttle, no batching, no failure. A failure names a
broker (-1: chosen at random from the seed) and a time, absolute or as a fraction of the
makespan without the failure."""

BROKER_TRAFFIC = _fields(
    ("broker", _INT, False),
    ("leaders", _LONG, False),
    ("replicas", _LONG, False),
    ("client_in_bps", _DOUBLE, False),
    ("client_out_bps", _DOUBLE, False),
    ("replication_in_bps", _DOUBLE, False),
    ("replication_out_bps", _DOUBLE, False),
)
"""Steady traffic before any move: produce into leaders, consume from leaders, and the
replication that keeps in-sync followers up to date (in on followers, out on leaders)."""

LEADER_BASE = _fields(
    ("broker", _INT, False),
    ("leader_base_bps", _DOUBLE, False),
)
"""Per broker that leads a moving partition: the in-sync replication of those partitions, which
its leader throttle counts (`leader.replication.throttled.replicas` lists every current
replica)."""

BROKER_BASE = _fields(
    ("broker", _INT, False),
    ("network_in_bps", _DOUBLE, False),
    ("network_out_bps", _DOUBLE, False),
    ("client_in_bps", _DOUBLE, False),
    ("client_out_bps", _DOUBLE, False),
    ("replication_in_bps", _DOUBLE, False),
    ("replication_out_bps", _DOUBLE, False),
    ("leader_base_bps", _DOUBLE, False),
)
"""The per-broker side of every scenario's model run, before the scenario's write load and
throttle: capacities, steady traffic, and the in-sync replication of moving partitions that the
leader throttle counts (`model_task.scenario_brokers` scales it per scenario)."""

MODEL_MOVES = _fields(
    ("move_id", _LONG, False),
    ("source", _INT, False),
    ("dest", _INT, False),
    ("bytes", _LONG, False),
    ("write_bps", _DOUBLE, False),
    ("failover_source", _INT, False),
    ("released_bps", _DOUBLE, False),
    ("session", _INT, False),
    ("warm", _INT, False),
)
"""The moves side of every scenario's model run (the same for all of them)."""

PACKED_INPUTS = _fields(
    ("move_chunks", ArrayType(BinaryType(), containsNull=False), False),
    ("broker_chunk", BinaryType(), False),
)
"""All MODEL_MOVES rows and all BROKER_BASE rows as one row, each table as an Arrow IPC stream:
what every model task receives by broadcast, never shuffled."""

SCENARIO_RESULT = _fields(
    ("scenario_id", _INT, False),
    ("moves", _LONG, False),
    ("bytes", _LONG, False),
    ("makespan_s", _DOUBLE, False),
    ("lower_bound_s", _DOUBLE, False),
    ("bottleneck_broker", _INT, True),
    ("stalled_moves", _LONG, False),
    ("failed_broker", _INT, True),
    ("failed_at_s", _DOUBLE, True),
    ("max_client_throttle_ms", _DOUBLE, False),
    ("minutes_below_headroom", _DOUBLE, False),
    ("brokers_at_risk", _LONG, False),
    ("brokers_saturated", _LONG, False),
    ("max_produce_remote_ms", _DOUBLE, False),
    ("timed_out_requests", _DOUBLE, False),
    ("grid_t_s", ArrayType(_DOUBLE), False),
    ("grid_bytes_remaining", ArrayType(_DOUBLE), False),
    ("tl_broker", ArrayType(_INT), False),
    ("tl_t_s", ArrayType(_DOUBLE), False),
    ("tl_replication_in_bps", ArrayType(_DOUBLE), False),
    ("tl_replication_out_bps", ArrayType(_DOUBLE), False),
    ("tl_pending_bytes", ArrayType(_DOUBLE), False),
    ("tl_headroom", ArrayType(_DOUBLE), False),
    ("tl_client_throttle_ms", ArrayType(_DOUBLE), False),
    ("tl_produce_remote_ms", ArrayType(_DOUBLE), False),
    ("tl_request_delay_ms", ArrayType(_DOUBLE), False),
)
"""What one model task returns: one row per scenario, with the plan's bytes not yet copied on
the sample grid (`grid_*`) and its per-broker timelines packed as parallel arrays, broker-major
(`tl_*`), so one task yields one row."""

TIMELINE_COLUMNS = tuple(f.name[3:] for f in SCENARIO_RESULT.fields if f.name.startswith("tl_"))

SCENARIO_SUMMARY = _fields(
    ("scenario_id", _INT, False),
    ("name", _STRING, False),
    ("throttle_bps", _DOUBLE, True),
    ("moves_per_broker", _INT, True),
    ("write_multiplier", _DOUBLE, False),
    ("seed", _LONG, False),
    ("failed_broker", _INT, True),
    ("failed_at_s", _DOUBLE, True),
    ("moves", _LONG, False),
    ("bytes", _LONG, False),
    ("makespan_s", _DOUBLE, False),
    ("lower_bound_s", _DOUBLE, False),
    ("bottleneck_broker", _INT, True),
    ("stalled_moves", _LONG, False),
    ("max_client_throttle_ms", _DOUBLE, False),
    ("minutes_below_headroom", _DOUBLE, False),
    ("brokers_at_risk", _LONG, False),
    ("brokers_saturated", _LONG, False),
    ("max_produce_remote_ms", _DOUBLE, False),
    ("timed_out_requests", _DOUBLE, False),
)
"""The per-scenario summary written to Parquet and shown as the table. `makespan_s` is
infinite when a move never finishes."""

BROKER_TIMELINE = _fields(
    ("scenario_id", _INT, False),
    ("broker", _INT, False),
    ("t_s", _DOUBLE, False),
    ("replication_in_bps", _DOUBLE, False),
    ("replication_out_bps", _DOUBLE, False),
    ("pending_bytes", _DOUBLE, False),
    ("headroom", _DOUBLE, False),
    ("client_throttle_ms", _DOUBLE, False),
    ("produce_remote_ms", _DOUBLE, False),
    ("request_delay_ms", _DOUBLE, False),
)
"""Per scenario, broker and sample time: catch-up traffic (the average over the sample), the
bytes of moves into the broker not finished yet, the share of network capacity left for
clients, and the client effects of that."""

CLUSTER_TIMELINE = _fields(
    ("scenario_id", _INT, False),
    ("t_s", _DOUBLE, False),
    ("bytes_remaining", _DOUBLE, False),
    ("replication_in_bps", _DOUBLE, False),
    ("mean_replication_in_bps", _DOUBLE, False),
    ("max_replication_in_bps", _DOUBLE, False),
    ("min_headroom", _DOUBLE, False),
    ("p05_headroom", _DOUBLE, False),
    ("brokers_below_target", _LONG, False),
)
"""Per scenario and sample time: the bytes of the plan not yet copied (from the same per-broker
catch-up rates as the throughput columns: `scenario_run.plan_bytes_left`) and, over all
brokers, catch-up throughput and client headroom. What the plots draw (small enough to
collect)."""


def columns(schema: StructType) -> list[Column]:
    """`select(*columns(S))` casts and orders a DataFrame's columns as schema `S` says."""
    return [F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields]
