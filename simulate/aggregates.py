"""Per-broker aggregates computed in Spark (`DataFrame -> DataFrame`). The makespan lower bound
is the model task's own (`replication_model.lower_bound`), which holds the moves anyway: a second
implementation in Spark SQL cost a pass over the brokers per scenario and could only agree."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kreassign.simulate.schemas import BROKER_TRAFFIC, MODEL_BROKERS, MOVE_LOAD, columns


def broker_traffic(partitions: DataFrame, brokers: DataFrame) -> DataFrame:
    """Steady traffic per broker before any move (PARTITIONS, BROKERS -> BROKER_TRAFFIC).

    Leaders take the produce traffic in, serve the consumers, and send every write on to each
    follower; followers take each write in once. Brokers without replicas get zeros.
    """
    replicas = partitions.select(
        "leader", "produce_bps", "consume_bps", F.size("replicas").alias("rf"),
        F.explode("replicas").alias("broker"),
    )
    is_leader = F.col("broker") == F.col("leader")
    per_broker = replicas.groupBy("broker").agg(
        F.count_if(is_leader).alias("leaders"),
        F.count(F.lit(1)).alias("replicas"),
        F.sum(F.when(is_leader, F.col("produce_bps")).otherwise(0.0)).alias("client_in_bps"),
        F.sum(F.when(is_leader, F.col("consume_bps")).otherwise(0.0)).alias("client_out_bps"),
        F.sum(F.when(is_leader, 0.0).otherwise(F.col("produce_bps"))).alias("replication_in_bps"),
        F.sum(F.when(is_leader, F.col("produce_bps") * (F.col("rf") - 1)).otherwise(0.0))
        .alias("replication_out_bps"),
    )
    return (
        brokers.select("broker")
        .join(per_broker, "broker", "left")
        .fillna(0, subset=["leaders", "replicas"])
        .fillna(0.0, subset=["client_in_bps", "client_out_bps", "replication_in_bps",
                             "replication_out_bps"])
        .select(*columns(BROKER_TRAFFIC))
    )


def move_load(moves: DataFrame) -> DataFrame:
    """What the plan asks of each broker that sends or receives (MOVES -> MOVE_LOAD).

    Moves whose partition has no leader cannot copy and are left out (the model never
    finishes them and the lower bound is infinite).
    """
    led = moves.where(F.col("source") >= 0)
    incoming = led.groupBy(F.col("dest").alias("broker")).agg(
        F.count(F.lit(1)).alias("moves_in"), F.sum("bytes").alias("bytes_in"),
        F.sum("write_bps").alias("write_in_bps"),
    )
    outgoing = led.groupBy(F.col("source").alias("broker")).agg(
        F.count(F.lit(1)).alias("moves_out"), F.sum("bytes").alias("bytes_out"),
        F.sum("write_bps").alias("write_out_bps"), F.sum("leader_base_bps").alias("leader_base_bps"),
    )
    return (
        incoming.join(outgoing, "broker", "full")
        .fillna(0, subset=["moves_in", "moves_out", "bytes_in", "bytes_out"])
        .fillna(0.0, subset=["write_in_bps", "write_out_bps", "leader_base_bps"])
        .select(*columns(MOVE_LOAD))
    )


def model_brokers(brokers: DataFrame, traffic: DataFrame, load: DataFrame,
                  scenarios: DataFrame) -> DataFrame:
    """Each scenario's view of every broker (BROKERS, BROKER_TRAFFIC, MOVE_LOAD, SCENARIOS ->
    MODEL_BROKERS).

    Consumers read what is written, so the write multiplier scales every client and
    replication rate. Both throttles take the scenario's rate, as `--throttle` sets them.
    """
    scaled = [
        (F.coalesce(F.col(name), F.lit(0.0)) * F.col("write_multiplier")).alias(name)
        for name in ("client_in_bps", "client_out_bps", "replication_in_bps",
                     "replication_out_bps", "leader_base_bps")
    ]
    rate = F.coalesce(F.col("throttle_bps"), F.lit(float("inf")))
    return (
        brokers.join(traffic, "broker").join(load.select("broker", "leader_base_bps"), "broker", "left")
        .crossJoin(F.broadcast(scenarios.select("scenario_id", "write_multiplier", "throttle_bps")))
        .select("scenario_id", "broker", "network_in_bps", "network_out_bps", *scaled,
                rate.alias("leader_rate_bps"), rate.alias("follower_rate_bps"))
        .select(*columns(MODEL_BROKERS))
    )
