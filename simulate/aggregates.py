"""Per-broker aggregates and makespan lower bounds, computed in Spark (`DataFrame -> DataFrame`)."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kreassign.simulate.schemas import BROKER_TRAFFIC, LOWER_BOUNDS, MODEL_BROKERS, MOVE_LOAD, columns
from kreassign.throttle.replication_model import FOLLOWER_GRANULARITY, LEADER_GRANULARITY, FetchLimits


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


def _ratio(num: Column, den: Column) -> Column:
    """num / den, 0 when num is 0, infinite when den <= 0 < num (as the model's `_ratio`)."""
    return (F.when(num <= 0, F.lit(0.0))
            .when(den <= 0, F.lit(float("inf")))
            .otherwise(num / den))


def quota_share(rate: Column, fetch: FetchLimits, pause_s: float, granularity: float) -> Column:
    """`FetchLimits.quota_share` as a column (the same pause and granularity per side)."""
    if fetch.round_trip_s <= 0:
        return F.lit(1.0)
    span = fetch.quota_span_s
    chunk = F.least(F.lit(float(fetch.partition_max_bytes)) / rate, F.lit(span)) / span
    share = span / (span + pause_s) * (1.0 + granularity * chunk)
    return F.when(rate == float("inf"), F.lit(1.0)).when(rate <= 0, F.lit(span / (span + pause_s))
                                                         * (1.0 + granularity)).otherwise(share)


def woken_share(rate: Column, fetch: FetchLimits) -> Column:
    """`FetchLimits.woken_share` as a column."""
    if fetch.round_trip_s <= 0:
        return F.lit(1.0)
    span = fetch.quota_span_s + fetch.quota_window_s / 2
    chunk = float(fetch.partition_max_bytes)
    cycle = fetch.quota_span_s / (fetch.quota_span_s + fetch.round_trip_s)
    whole = F.ceil(rate * span / chunk) * chunk / (rate * span)
    return F.when(rate == float("inf"), F.lit(1.0)).when(rate <= 0, F.lit(cycle)).otherwise(cycle * whole)


def capacities(per_broker: DataFrame, fetch: FetchLimits | None = None) -> DataFrame:
    """Adds `out_cap` and `in_cap`: what a broker has left for catch-up before any move is in
    sync (the model's `out_capacity`/`in_capacity` at zero in-sync traffic, with what fetches
    get of the throttles). `per_broker` also has the scenario's `write_multiplier` and the
    writes of the moves a broker sends (`write_out_bps`): where they take writes, appends wake
    the leader's parked fetches (`FetchLimits.leader_share`)."""
    fetch = fetch if fetch is not None else FetchLimits()
    lead, fol = F.col("leader_rate_bps"), F.col("follower_rate_bps")
    written = F.col("write_out_bps") * F.col("write_multiplier") > 0
    share = F.when(written, woken_share(lead, fetch)).otherwise(quota_share(lead, fetch, fetch.wait_max_s,
                                                                            LEADER_GRANULARITY))
    leader = lead * share - F.col("leader_base_bps")
    nic_out = F.col("network_out_bps") - F.col("client_out_bps") - F.col("replication_out_bps")
    follower = fol * quota_share(fol, fetch, fetch.backoff_s, FOLLOWER_GRANULARITY)
    nic_in = F.col("network_in_bps") - F.col("client_in_bps") - F.col("replication_in_bps")
    return per_broker.withColumns({
        "out_cap": F.greatest(F.least(leader, nic_out), F.lit(0.0)),
        "in_cap": F.greatest(F.least(follower, nic_in), F.lit(0.0)),
    })


def broker_lower_bounds(per_broker: DataFrame, load: DataFrame, scenarios: DataFrame) -> DataFrame:
    """The brokers' part of `replication_model.lower_bound`, per scenario (MODEL_BROKERS,
    MOVE_LOAD, SCENARIOS -> LOWER_BOUNDS).

    Per broker and side: its bytes over the capacity left once its moves' writes are served,
    `bytes / (cap - sum w)` (infinite when nothing is left, 0 when the capacity is unknown).
    The largest wins; ties go to the sending side, then to the lowest broker id, as in the
    model.
    """
    mult = F.broadcast(scenarios.select("scenario_id", "write_multiplier"))
    sides = capacities(per_broker.join(load.drop("leader_base_bps"), "broker").join(mult, "scenario_id"))
    infinite = F.lit(float("inf"))

    def side_seconds(size: str, cap: str, writes: str) -> Column:
        return F.when(F.col(cap) == infinite, F.lit(0.0)).otherwise(
            _ratio(F.col(size).cast("double"), F.col(cap) - F.col(writes) * F.col("write_multiplier")))

    per_side = sides.groupBy("scenario_id").agg(*[
        agg
        for side, size, cap, writes in (("out", "bytes_out", "out_cap", "write_out_bps"),
                                        ("in", "bytes_in", "in_cap", "write_in_bps"))
        for agg in (
            F.max(side_seconds(size, cap, writes)).alias(f"{side}_s"),
            F.max_by("broker", F.struct(side_seconds(size, cap, writes), -F.col("broker"))).alias(f"{side}_broker"),
        )
    ])
    top = F.greatest("out_s", "in_s")
    bounds = per_side.select(
        "scenario_id", top.alias("lower_bound_s"),
        F.when(top <= 0, F.lit(None)).when(F.col("out_s") == top, F.col("out_broker"))
        .otherwise(F.col("in_broker")).alias("bottleneck_broker"),
    )
    return (
        scenarios.select("scenario_id")
        .join(bounds, "scenario_id", "left")
        .fillna(0.0, subset=["lower_bound_s"])
        .select(*columns(LOWER_BOUNDS))
    )
