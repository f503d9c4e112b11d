"""Per-broker aggregates computed in Spark (`DataFrame -> DataFrame`). The makespan lower bound
is the model task's own (`predict.model.lower_bound`), which holds the moves anyway: a second
implementation in Spark SQL cost a pass over the brokers per scenario and could only agree."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kreassign.simulate.schemas import BROKER_BASE, BROKER_TRAFFIC, LEADER_BASE, columns


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


def leader_base(moves: DataFrame) -> DataFrame:
    """The in-sync replication of the moving partitions each broker leads, which its leader
    throttle counts (MOVES -> LEADER_BASE); brokers that lead none have no row.

    Moves whose partition has no leader are left out: no broker sends them.
    """
    return (
        moves.where(F.col("source") >= 0)
        .groupBy(F.col("source").alias("broker")).agg(F.sum("leader_base_bps").alias("leader_base_bps"))
        .select(*columns(LEADER_BASE))
    )


def broker_base(brokers: DataFrame, traffic: DataFrame, base: DataFrame) -> DataFrame:
    """Every broker's side of the model before any scenario (BROKERS, BROKER_TRAFFIC,
    LEADER_BASE -> BROKER_BASE): one row per broker, which the model tasks scale by each
    scenario's write load and give its throttle (`model_task.scenario_brokers`)."""
    return (
        brokers.join(traffic, "broker").join(base, "broker", "left")
        .select("broker", "network_in_bps", "network_out_bps", "client_in_bps", "client_out_bps",
                "replication_in_bps", "replication_out_bps",
                F.coalesce(F.col("leader_base_bps"), F.lit(0.0)).alias("leader_base_bps"))
        .select(*columns(BROKER_BASE))
    )
