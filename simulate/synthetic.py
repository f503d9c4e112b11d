"""Synthetic clusters and plans generated on Spark, so millions of partitions never touch the driver.

Every random number is a hash of (seed, salt, row), not `rand()`, so a cluster is the same for a
given seed whatever the number of Spark partitions or executors.

Sizes are lognormal (a few huge partitions, many small ones) and write rates Pareto, both capped.
Brokers `0..brokers-1` exist, on racks `r0..r{racks-1}` round-robin; replica `j` of a partition
sits on broker `(first + j) mod brokers`, which keeps replicas on distinct racks when `brokers`
is a multiple of `racks`. The plan either adds `add` empty brokers and moves one replica of
a seeded subset of partitions onto them, or decommissions brokers `0..remove-1` and moves every
replica they hold onto survivors, or (`moves=M` alone) moves one replica of M partitions to
other existing brokers, as a rebalance does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from kreassign.cluster.errors import InputError
from kreassign.cluster.units import parse_bytes, parse_rate

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_MANTISSA = float(1 << 53)


@dataclass(frozen=True)
class SyntheticSpec:
    """The shape of a synthetic cluster and of the plan run on it."""

    brokers: int = 100
    racks: int = 10
    partitions: int = 10_000
    rf: int = 3
    topics: int = 0
    """0: one topic per 100 partitions"""
    size: int = 1_000_000_000
    """median partition size, bytes"""
    size_sigma: float = 1.5
    size_max: int = 2_000_000_000_000
    write: float = 100_000.0
    """median produce rate per partition, bytes/s"""
    write_alpha: float = 1.5
    write_max: float = 10_000_000.0
    read: float = 2.0
    """consume rate as a multiple of the produce rate"""
    capacity: float = 1_250_000_000.0
    """network capacity of every broker, each direction, bytes/s (10 Gbit/s)"""
    add: int = 0
    remove: int = 0
    moves: int = 0
    """partitions that move a replica: with `add`, onto the new brokers (0: enough to even out
    replica counts); alone, onto other existing brokers"""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.brokers < 1 or self.partitions < 1 or self.racks < 1:
            raise InputError("a synthetic cluster needs at least one broker, rack and partition")
        if not 1 <= self.rf <= self.brokers:
            raise InputError(f"rf={self.rf} needs 1 to {self.brokers} brokers per partition")
        if self.add and self.remove:
            raise InputError("give add= or remove= for a synthetic plan, not both")
        if self.add < 0 or self.remove < 0 or self.moves < 0:
            raise InputError("add=, remove= and moves= must not be negative")
        if self.shuffles and self.brokers <= self.rf:
            raise InputError(f"moving replicas among {self.brokers} brokers needs more than rf={self.rf}")
        if self.remove and self.brokers - self.remove < self.rf:
            raise InputError(f"removing {self.remove} of {self.brokers} brokers leaves too few "
                             f"for rf={self.rf}")
        if self.size <= 0 or self.write < 0 or self.capacity <= 0 or self.write_alpha <= 0:
            raise InputError("size=, capacity= and write_alpha= must be positive, write= not negative")

    @property
    def topic_count(self) -> int:
        return self.topics if self.topics > 0 else max(1, self.partitions // 100)

    @property
    def shuffles(self) -> bool:
        """The plan moves replicas among existing brokers (moves= without add= or remove=)."""
        return bool(self.moves) and not self.add and not self.remove

    @property
    def added(self) -> int:
        """Brokers the plan adds (10% when none of add=, remove=, moves= is given)."""
        if self.add or self.remove or self.moves:
            return self.add
        return max(1, self.brokers // 10)

    @property
    def move_probability(self) -> float:
        """With brokers added: the chance that a partition moves one replica onto them."""
        if self.moves:
            return min(1.0, self.moves / self.partitions)
        total = self.brokers + self.added
        return min(1.0, self.rf * self.added / total)


_INT_KEYS = {"brokers", "racks", "partitions", "rf", "topics", "add", "remove", "moves", "seed"}
_FLOAT_KEYS = {"size_sigma", "write_alpha", "read"}
_SIZE_KEYS = {"size", "size_max"}
_RATE_KEYS = {"write", "write_max", "capacity"}


def parse_synthetic(text: str) -> SyntheticSpec:
    """`brokers=10000,racks=20,partitions=2000000,rf=3,seed=7` -> SyntheticSpec.

    Sizes accept units (`size=2GB`), rates too (`write=1MB/s`, `capacity=10Gbit` is not a unit:
    use `capacity=1.25GB/s`).

    Raises:
        InputError: an unknown key, a malformed value, or an inconsistent cluster.
    """
    known = {f.name for f in fields(SyntheticSpec)}
    values: dict[str, int | float] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in known:
            raise InputError(f"'{item}' is not a synthetic-cluster setting: use key=value with keys "
                             + ", ".join(sorted(known)))
        raw = raw.strip()
        try:
            if key in _INT_KEYS:
                values[key] = _whole(raw)
            elif key in _FLOAT_KEYS:
                values[key] = float(raw)
            elif key in _SIZE_KEYS:
                values[key] = parse_bytes(raw)
            else:
                values[key] = float(parse_rate(raw))
        except ValueError:
            raise InputError(f"'{item}': {key} must be a number") from None
    return SyntheticSpec(**values)  # type: ignore[arg-type]


def _whole(raw: str) -> int:
    """`2000000`, `2e6` -> 2000000; `2.5` is an error."""
    value = float(raw)
    if not value.is_integer():
        raise ValueError(raw)
    return int(value)


# ---- seeded randomness as column expressions ------------------------------------------------
def uniform(seed: int, salt: str, *cols: Column) -> Column:
    """A uniform number in (0, 1) from a hash of the seed, a salt and the given columns."""
    from pyspark.sql import functions as F

    bits = F.pmod(F.xxhash64(F.lit(seed), F.lit(salt), *cols), F.lit(1 << 53))
    return (bits.cast("double") + F.lit(0.5)) / F.lit(_MANTISSA)


def standard_normal(seed: int, salt: str, *cols: Column) -> Column:
    """A standard normal number (Box-Muller on two hashed uniforms)."""
    from pyspark.sql import functions as F

    u1 = uniform(seed, salt + ":1", *cols)
    u2 = uniform(seed, salt + ":2", *cols)
    return F.sqrt(F.lit(-2.0) * F.log(u1)) * F.cos(F.lit(2 * math.pi) * u2)


# ---- the cluster ---------------------------------------------------------------------------
def synthetic_brokers(spark: SparkSession, spec: SyntheticSpec) -> DataFrame:
    """Existing and added brokers, schema BROKERS."""
    from pyspark.sql import functions as F

    from kreassign.simulate.schemas import BROKERS, columns

    return (
        spark.range(spec.brokers + spec.added)
        .select(
            F.col("id").cast("int").alias("broker"),
            F.concat(F.lit("r"), (F.col("id") % spec.racks).cast("string")).alias("rack"),
            F.lit(float(spec.capacity)).alias("network_in_bps"),
            F.lit(float(spec.capacity)).alias("network_out_bps"),
        )
        .select(*columns(BROKERS))
    )


def synthetic_partitions(spark: SparkSession, spec: SyntheticSpec) -> DataFrame:
    """Partitions with heavy-tailed sizes and write rates, schema PARTITIONS."""
    from pyspark.sql import functions as F

    from kreassign.simulate.schemas import PARTITIONS, columns

    per_topic = math.ceil(spec.partitions / spec.topic_count)
    row = F.col("id")
    first = (F.floor(uniform(spec.seed, "first", row) * spec.brokers)).cast("long")
    replicas = F.array(*[((first + j) % spec.brokers).cast("int") for j in range(spec.rf)])
    log_size = math.log(spec.size) + spec.size_sigma * standard_normal(spec.seed, "size", row)
    pareto_min = spec.write / 2.0 ** (1.0 / spec.write_alpha)
    write = F.lit(pareto_min) / F.pow(uniform(spec.seed, "write", row), 1.0 / spec.write_alpha)
    produce = F.least(write, F.lit(spec.write_max))
    return (
        spark.range(spec.partitions)
        .select(
            row.alias("row"),
            F.format_string("topic-%05d", (row / per_topic).cast("long")).alias("topic"),
            (row % per_topic).cast("int").alias("partition"),
            replicas.alias("replicas"),
            F.least(F.exp(log_size), F.lit(float(spec.size_max))).cast("long").alias("size_bytes"),
            produce.alias("produce_bps"),
        )
        .select(
            "row", "topic", "partition", F.col("replicas")[0].alias("leader"), "replicas",
            F.lit(spec.rf).alias("isr_size"), "size_bytes", "produce_bps", (F.col("produce_bps") * spec.read).alias("consume_bps"),
        )
        .select(*columns(PARTITIONS))
    )


def synthetic_moves(partitions: DataFrame, spec: SyntheticSpec) -> DataFrame:
    """The plan of the spec (brokers added or removed) as moves, schema MOVES."""
    from kreassign.simulate.schemas import MOVES, columns

    from pyspark.sql import functions as F

    from kreassign.predict.model import Session

    moves = _decommission_moves(partitions, spec) if spec.remove else _expansion_moves(partitions, spec)
    # A leader's partitions all have the replicas leader .. leader+rf-1 and every new replica lands
    # outside them, so no move's fetcher session carries in-sync partitions (as
    # `predict.model.fetch_sessions` would read it from a snapshot of this cluster).
    # Every leader of a partition with in-sync followers answers them: warm (rf > 1, all in sync).
    return (moves.withColumn("session", F.lit(int(Session.ALONE)))
            .withColumn("warm", F.lit(int(spec.rf > 1)))
            .select(*columns(MOVES)))


def _shuffle_dest(spec: SyntheticSpec) -> Column:
    """A seeded broker outside the partition's replicas `first .. first+rf-1 (mod brokers)`."""
    from pyspark.sql import functions as F

    offset = F.floor(uniform(spec.seed, "dest", F.col("row")) * (spec.brokers - spec.rf)).cast("long")
    return ((F.col("replicas")[0] + spec.rf + offset) % spec.brokers).cast("int")


def _expansion_moves(partitions: DataFrame, spec: SyntheticSpec) -> DataFrame:
    """One replica of a seeded subset of partitions moves to a seeded new broker (or, with
    `moves=` alone, to a seeded existing broker outside its replica set)."""
    from pyspark.sql import functions as F

    row = F.col("row")
    return (
        partitions
        .where(uniform(spec.seed, "moves", row) < F.lit(spec.move_probability))
        .select(
            row.alias("move_id"), row,
            F.col("leader").alias("source"),
            (_shuffle_dest(spec) if spec.shuffles else
             (F.lit(spec.brokers) + F.floor(uniform(spec.seed, "dest", row) * spec.added)).cast("int"))
            .alias("dest"),
            F.col("size_bytes").alias("bytes"),
            F.col("produce_bps").alias("write_bps"),
            (F.col("produce_bps") * (F.col("isr_size") - 1)).alias("leader_base_bps"),
            (F.col("replicas")[1] if spec.rf > 1 else F.lit(-1)).alias("failover_source"),
            # the replica it replaces stops replicating: an in-sync follower when the ISR has one
            F.when(F.col("isr_size") > 1, F.col("produce_bps")).otherwise(0.0).alias("released_bps"),
        )
    )


def _decommission_moves(partitions: DataFrame, spec: SyntheticSpec) -> DataFrame:
    """Every replica on brokers 0..remove-1 moves to a survivor not already in its partition.

    Replica `j` tries survivor `(h + j + k*rf) mod survivors` for k = 0, 1, ...: candidates of
    different positions never coincide, and rf tries always find one outside the replica set.
    """
    from pyspark.sql import functions as F

    survivors = spec.brokers - spec.remove
    h = F.floor(uniform(spec.seed, "dest", F.col("row")) * survivors).cast("long")
    candidates = [
        (F.lit(spec.remove) + (h + F.col("pos") + k * spec.rf) % survivors).cast("int")
        for k in range(spec.rf)
    ]
    dest = F.coalesce(*[F.when(~F.array_contains("replicas", c), c) for c in candidates])
    removed = F.transform("replicas", lambda b: b < spec.remove)
    first_removed = F.array_position(removed, True) - 1
    others = F.filter("replicas", lambda b: (b != F.col("leader")) & (b != F.col("dest")))
    return (
        partitions
        .select("row", "leader", "replicas", "isr_size", "size_bytes", "produce_bps",
                first_removed.alias("first_removed"), F.posexplode("replicas").alias("pos", "broker"))
        .where(F.col("broker") < spec.remove)
        .select(
            (F.col("row") * spec.rf + F.col("pos")).alias("move_id"), "row", "replicas", "leader",
            F.col("leader").alias("source"), dest.alias("dest"),
            F.col("size_bytes").alias("bytes"), F.col("produce_bps").alias("write_bps"),
            F.when(F.col("pos") == F.col("first_removed"),
                   F.col("produce_bps") * (F.col("isr_size") - 1)).otherwise(0.0).alias("leader_base_bps"),
            # the removed replica stops replicating when it was an in-sync follower
            F.when((F.col("broker") != F.col("leader")) & (F.col("isr_size") > 1),
                   F.col("produce_bps")).otherwise(0.0).alias("released_bps"),
        )
        .withColumn("failover_source", F.coalesce(F.element_at(others, 1), F.lit(-1)))
    )
