"""KIP-73 throttle configs exactly as Kafka's reassignment tool writes and clears them.

Reference kafka-reassign-tool.md §3: the move map (in-flight reassignments plus the plan), the
leader and follower throttled-replica lists per topic (string-sorted, every topic of the move
map, an empty follower list still SET), rates only on the brokers that take part, and which
brokers and topics a clear touches. Pure: callers apply the result through the admin adapter.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from kreassign.cluster.errors import AdminCommandFailed, InputError
from kreassign.cluster.model import Reassignment, TopicPartition, TopicPartitionReplica

# The config keys are defined once, in the cluster layer; these are the short names used here.
# A clear DELETEs BROKER_THROTTLE_KEYS on brokers (the log-dir rate too, as Kafka does) and
# TOPIC_THROTTLE_KEYS on the plan's topics.
from kreassign.cluster.port import BROKER_THROTTLE_KEYS, TOPIC_THROTTLE_KEYS
from kreassign.cluster.port import FOLLOWER_THROTTLED_RATE as FOLLOWER_RATE
from kreassign.cluster.port import FOLLOWER_THROTTLED_REPLICAS as FOLLOWER_REPLICAS
from kreassign.cluster.port import LEADER_THROTTLED_RATE as LEADER_RATE
from kreassign.cluster.port import LEADER_THROTTLED_REPLICAS as LEADER_REPLICAS
from kreassign.cluster.port import LOG_DIR_THROTTLED_RATE as LOG_DIR_RATE
from kreassign.throttle.rates import Rates

__all__ = [
    "ALL_REPLICAS", "BROKER_THROTTLE_KEYS", "FOLLOWER_RATE", "FOLLOWER_REPLICAS", "LEADER_RATE",
    "LEADER_REPLICAS", "LOG_DIR_RATE", "TOPIC_THROTTLE_KEYS", "PartitionMove", "ThrottlePlan",
    "clear_targets", "compute_move_map", "follower_throttled_replicas", "format_throttled_replicas",
    "leader_throttled_replicas", "only_keys", "parse_throttled_replicas", "rate_configs",
    "reassigning_brokers", "throttle_plan", "validate_throttled_replicas",
]

ALL_REPLICAS: Literal["*"] = "*"
V = TypeVar("V")
_REPLICA_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class PartitionMove:
    """One partition's part in a reassignment: where data comes from and where it goes."""

    sources: frozenset[int]
    """replicas before the move; any of them may lead, so all are leader-throttled"""
    destinations: frozenset[int]
    """replicas the move adds (never overlaps sources); they are follower-throttled"""


def compute_move_map(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Iterable[tuple[TopicPartition, Sequence[int]]],
    in_flight: Mapping[TopicPartition, Reassignment],
) -> dict[str, dict[int, PartitionMove]]:
    """Kafka's `calculateProposedMoveMap`: every in-flight move, overridden by the plan.

    Args:
        current: the replicas the cluster reports for the planned partitions.
        proposed: (partition, target replicas) of the plan.
        in_flight: every reassignment running in the cluster, whatever its topic.

    Returns:
        topic -> partition -> move. A planned partition that is already moving keeps the
        sources of the running move (its original replicas, KAFKA-10779), so replicas being
        added by the running move are not leader-throttled.

    Raises:
        AdminCommandFailed: a planned partition is neither moving nor in `current`.
    """
    moves: dict[str, dict[int, PartitionMove]] = {}
    for tp, reassignment in in_flight.items():
        adding = frozenset(reassignment.adding)
        moves.setdefault(tp.topic, {})[tp.partition] = PartitionMove(
            sources=frozenset(reassignment.replicas) - adding, destinations=adding)
    for tp, target in proposed:
        by_partition = moves.setdefault(tp.topic, {})
        if tp.partition in by_partition:
            sources = by_partition[tp.partition].sources
        elif tp in current:
            sources = frozenset(current[tp])
        else:
            raise AdminCommandFailed(f"Trying to reassign a topic partition {tp} with 0 replicas")
        by_partition[tp.partition] = PartitionMove(
            sources=sources, destinations=frozenset(target) - sources)
    return moves


def leader_throttled_replicas(moves: Mapping[int, PartitionMove]) -> str:
    """A topic's `leader.replication.throttled.replicas`: every source, sorted as strings."""
    return ",".join(sorted({f"{p}:{b}" for p, m in moves.items() for b in m.sources}))


def follower_throttled_replicas(moves: Mapping[int, PartitionMove]) -> str:
    """A topic's `follower.replication.throttled.replicas`: new replicas, sorted as strings."""
    return ",".join(sorted({f"{p}:{b}" for p, m in moves.items()
                            for b in m.destinations if b not in m.sources}))


def reassigning_brokers(move_map: Mapping[str, Mapping[int, PartitionMove]]) -> tuple[int, ...]:
    """Every source and destination of every move, ascending: where the rates go."""
    brokers: set[int] = set()
    for moves in move_map.values():
        for m in moves.values():
            brokers |= m.sources | m.destinations
    return tuple(sorted(brokers))


def rate_configs(leader_rate: int | None, follower_rate: int | None) -> dict[str, str]:
    """The broker rate keys to SET for these rates, as Kafka writes them (`Rates.configs`).

    Raises:
        InputError: a negative rate.
    """
    return Rates(leader_rate, follower_rate).configs()


def only_keys(configs: Mapping[int, Mapping[str, V]], keys: Iterable[str]) -> dict[int, dict[str, V]]:
    """Per broker, only these config keys; brokers left with none are left out."""
    wanted = frozenset(keys)
    picked = {b: {k: v for k, v in ops.items() if k in wanted} for b, ops in configs.items()}
    return {b: ops for b, ops in picked.items() if ops}


@dataclass(frozen=True)
class ThrottlePlan:
    """The configs to SET, as Kafka's `--execute --throttle` would.

    `topic_configs` is empty when no inter-broker rate is given (Kafka leaves the lists alone
    then); `broker_rates` holds, per broker, only the keys being set.
    """

    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_rates: dict[int, dict[str, str]] = field(default_factory=dict)
    reassigning_brokers: tuple[int, ...] = ()
    """brokers that get the inter-broker rates (when a rate is given)"""
    log_dir_brokers: tuple[int, ...] = ()
    """brokers that get the log-dir rate (when one is given)"""

    def is_empty(self) -> bool:
        return not self.topic_configs and not self.broker_rates


def throttle_plan(
    move_map: Mapping[str, Mapping[int, PartitionMove]],
    *,
    rate: int | None,
    log_dir_rate: int | None = None,
    replica_log_dirs: Iterable[TopicPartitionReplica] = (),
    leader_rate: int | None = None,
    follower_rate: int | None = None,
) -> ThrottlePlan:
    """The throttle configs for a move map.

    Args:
        move_map: from `compute_move_map`.
        rate: the inter-broker rate in bytes/s (Kafka's `--throttle`); None leaves the
            inter-broker throttles untouched (Kafka's default of -1). 0 is a valid rate.
        log_dir_rate: the log-dir move rate (`--replica-alter-log-dirs-throttle`), or None.
        replica_log_dirs: replicas with an explicit (non-"any") log dir; a mapping of them to
            dirs works too. Their brokers get the log-dir rate.
        leader_rate, follower_rate: set the two sides separately; each overrides `rate` on its
            side (`Rates.of`; Kafka always sets both to the same value).

    Raises:
        InputError: a negative rate.
    """
    rates = Rates.of(rate, leader=leader_rate, follower=follower_rate, log_dir=log_dir_rate)
    topic_configs: dict[str, dict[str, str]] = {}
    broker_rates: dict[int, dict[str, str]] = {}
    brokers = reassigning_brokers(move_map)
    if rates.inter_broker:
        for topic in sorted(move_map):
            moves = move_map[topic]
            topic_configs[topic] = {LEADER_REPLICAS: leader_throttled_replicas(moves),
                                    FOLLOWER_REPLICAS: follower_throttled_replicas(moves)}
        for broker in brokers:
            broker_rates.setdefault(broker, {}).update(rates.configs())
    log_dir_brokers = tuple(sorted({r.broker for r in replica_log_dirs}))
    if rates.log_dir is not None:
        for broker in log_dir_brokers:
            broker_rates.setdefault(broker, {}).update(rates.log_dir_configs())
    return ThrottlePlan(topic_configs=topic_configs,
                        broker_rates=dict(sorted(broker_rates.items())),
                        reassigning_brokers=brokers, log_dir_brokers=log_dir_brokers)


def clear_targets(
    cluster_brokers: Iterable[int],
    file_targets: Iterable[tuple[TopicPartition, Sequence[int]]],
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Where Kafka's `clearAllThrottles` DELETEs throttles (reference §3.6).

    Args:
        cluster_brokers: the brokers the cluster reports.
        file_targets: (partition, target replicas) of the reassignment file.

    Returns:
        (brokers, topics) in the order Kafka adds them to its sets (which decides the order it
        prints them in, `cluster.java_order`): every cluster broker, ascending, then the other
        brokers of the file's target lists (these lose `BROKER_THROTTLE_KEYS`); the file's topics
        in file order (these lose `TOPIC_THROTTLE_KEYS`).
    """
    brokers = dict.fromkeys(sorted(set(cluster_brokers)))
    topics: dict[str, None] = {}
    for tp, replicas in file_targets:
        brokers.update(dict.fromkeys(replicas))
        topics.setdefault(tp.topic)
    return tuple(brokers), tuple(topics)


def _elements(value: str) -> list[str]:
    # How a LIST config is parsed before validation: empty means no elements, else split on
    # commas (empty elements kept) with surrounding whitespace dropped.
    stripped = value.strip()
    return [] if not stripped else [e.strip() for e in stripped.split(",")]


def validate_throttled_replicas(value: str) -> bool:
    """Whether a broker accepts this `*.replication.throttled.replicas` value.

    The broker's ThrottledReplicaListValidator rule: every trimmed element is empty or
    `partition:broker` in decimal digits, or the elements joined together are exactly `*`.
    An empty value is valid and throttles nothing.
    """
    elements = _elements(value)
    return (all(_REPLICA_ENTRY.fullmatch(e) for e in elements)
            or "".join(elements) == ALL_REPLICAS)


def parse_throttled_replicas(value: str) -> set[tuple[int, int]] | Literal["*"]:
    """The (partition, broker) pairs a throttled-replicas value names, or "*" for all.

    Raises:
        InputError: the value is not one a broker would accept.
    """
    if not validate_throttled_replicas(value):
        raise InputError(
            f"{value!r} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    elements = [e for e in _elements(value) if e]
    if elements == [ALL_REPLICAS]:
        return ALL_REPLICAS
    pairs: set[tuple[int, int]] = set()
    for element in elements:
        partition, broker = element.split(":")
        pairs.add((int(partition), int(broker)))
    return pairs


def format_throttled_replicas(pairs: Iterable[tuple[int, int]]) -> str:
    """A throttled-replicas value for (partition, broker) pairs, in Kafka's string order."""
    return ",".join(sorted({f"{p}:{b}" for p, b in pairs}))
