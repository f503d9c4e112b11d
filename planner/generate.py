"""Kafka-compatible `--generate`: `AdminUtils.assignReplicasToBrokers` and the tool around it.

The layout a fresh topic would get on the listed brokers, as Kafka's tool proposes it
(reference kafka-reassign-tool.md §4). Kafka draws its random numbers from an unseeded
`java.util.Random`; here they come from a `random.Random` (seedable), or are injected, so a
proposal can be reproduced.
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from kreassign.cluster.errors import AdminCommandFailed, InputError
from kreassign.cluster.model import ClusterState, PartitionTarget, TopicPartition

_T = TypeVar("_T", int, str)
_UNKNOWN_TOPIC = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


def replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Position of the (j+2)-th replica: never `first`, spread by `shift` (Kafka's replicaIndex)."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: racks by name, brokers in a rack by id, round robin.

    `{0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}` gives `[0, 3, 1, 5, 4, 2]`.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def assign_replicas_to_brokers(
    brokers: Sequence[tuple[int, str | None]],
    n_partitions: int,
    rf: int,
    *,
    rng: random.Random | None = None,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    start_index: int | None = None,
    shift: int | None = None,
) -> dict[int, list[int]]:
    """Kafka's replica assignment for one topic, rack-aware when every broker has a rack.

    Args:
        brokers: (id, rack) pairs in the order Kafka would see them (rack-unaware uses it).
        n_partitions: how many partitions to place.
        rf: replicas per partition.
        rng: source of the two random draws (start index, then shift), each `randrange(n)`;
            a fresh unseeded generator when None, as Kafka does.
        fixed_start_index: when >= 0, used as both start index and shift (Kafka's tests).
        start_partition_id: first partition id (Kafka's partition expansion), 0 when < 0.
        start_index, shift: inject one or both draws (tests, reproducing a known outcome).

    Returns:
        partition id -> replica list (first replica is the preferred leader), ids ascending.

    Raises:
        AdminCommandFailed: Kafka's precondition failures, with Kafka's messages.
        InputError: a broker id is listed twice.
    """
    if n_partitions <= 0:
        raise AdminCommandFailed("Number of partitions must be larger than 0.")
    if rf <= 0:
        raise AdminCommandFailed("Replication factor must be larger than 0.")
    if rf > len(brokers):  # Kafka 4.4's text (3.9: "Replication factor: 3 larger than available brokers: 2.")
        raise AdminCommandFailed(
            f"The target replication factor of {rf} cannot be reached because only {len(brokers)} broker(s) are "
            "registered or some brokers have all their log directories cordoned.")
    ids = [b for b, _ in brokers]
    if len(set(ids)) != len(ids):
        dup = sorted(b for b, c in Counter(ids).items() if c > 1)
        raise InputError(f"broker ids must be distinct, got {', '.join(map(str, dup))} more than once")
    racks = {b: r for b, r in brokers}
    rack_unaware = all(r is None for r in racks.values())
    if rack_unaware:
        arranged = ids
    elif any(r is None for r in racks.values()):
        raise AdminCommandFailed("Not all brokers have rack information for replica rack aware assignment.")
    else:
        arranged = rack_alternated_list({b: r for b, r in racks.items() if r is not None})
    n = len(arranged)
    rng = rng if rng is not None else random.Random()
    if fixed_start_index >= 0:
        start, first_shift = fixed_start_index, fixed_start_index
    else:
        # Kafka draws the start index first, then the shift; keep that order for a given seed.
        start = start_index if start_index is not None else rng.randrange(n)
        first_shift = shift if shift is not None else rng.randrange(n)
    first_pid = max(0, start_partition_id)
    if rack_unaware:
        return _rack_unaware(arranged, n_partitions, rf, start, first_shift, first_pid)
    return _rack_aware(arranged, racks, n_partitions, rf, start, first_shift, first_pid)


def _shifts(pids: np.ndarray, first_pid: int, first_shift: int, n: int) -> np.ndarray:
    """The shift in force at each partition id: +1 at every positive multiple of n reached."""
    return first_shift + pids // n - max(first_pid - 1, 0) // n


def _rack_unaware(ids: Sequence[int], n_partitions: int, rf: int, start: int, first_shift: int,
                  first_pid: int) -> dict[int, list[int]]:
    n = len(ids)
    pids = np.arange(first_pid, first_pid + n_partitions, dtype=np.int64)
    first = (pids + start) % n
    positions = np.empty((n_partitions, rf), dtype=np.int64)
    positions[:, 0] = first
    if rf > 1:
        shifts = _shifts(pids, first_pid, first_shift, n)
        j = np.arange(rf - 1, dtype=np.int64)
        positions[:, 1:] = (first[:, None] + 1 + (shifts[:, None] + j[None, :]) % (n - 1)) % n
    chosen = np.asarray(ids, dtype=np.int64)[positions]
    return {int(p): row for p, row in zip(pids, chosen.tolist())}


def _rack_aware(arranged: Sequence[int], racks: Mapping[int, str | None], n_partitions: int,
                rf: int, start: int, first_shift: int, first_pid: int) -> dict[int, list[int]]:
    n = len(arranged)
    n_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    shift = first_shift
    for pid in range(first_pid, first_pid + n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack = racks[broker]
                # Prefer a rack without a replica until every rack has one, and never reuse a
                # broker while some broker is still free (Kafka's acceptance rule).
                if ((rack not in used_racks or len(used_racks) == n_racks)
                        and (broker not in used or len(used) == n)):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used.add(broker)
                    break
        out[pid] = replicas
    return out


@dataclass(frozen=True)
class GenerateResult:
    """What `--generate` prints: the current assignment of the topics and the proposal.

    `warnings` lists what Kafka's tool does silently (brokers in --broker-list that the
    cluster does not have are dropped); Kafka prints nothing for them.
    """

    current: dict[TopicPartition, tuple[int, ...]]
    proposed: dict[TopicPartition, tuple[int, ...]]
    warnings: tuple[str, ...] = ()

    def proposed_targets(self) -> list[PartitionTarget]:
        """The proposal as reassignment entries, sorted by topic then partition."""
        return [PartitionTarget(tp.topic, tp.partition, r) for tp, r in sorted(self.proposed.items())]

    def current_targets(self) -> list[PartitionTarget]:
        """The current assignment as reassignment entries (the rollback file), sorted."""
        return [PartitionTarget(tp.topic, tp.partition, r) for tp, r in sorted(self.current.items())]


def _duplicates(values: Sequence[_T]) -> list[_T]:
    return sorted(v for v, c in Counter(values).items() if c > 1)


def generate_assignment(
    state: ClusterState,
    topics: Sequence[str],
    broker_list: Sequence[int],
    *,
    rack_aware: bool = True,
    seed: int | None = None,
) -> GenerateResult:
    """Kafka's `--generate`: propose a fresh layout of whole topics on `broker_list`.

    Checks run in Kafka's order: duplicate brokers, duplicate topics, unknown topics, rack
    information, then the per-topic preconditions of `assign_replicas_to_brokers`.

    Differences from Kafka, all deterministic choices where Kafka is arbitrary:
    - topics are placed in name order, each drawing its own (start, shift) from one
      `random.Random(seed)`, so a seed reproduces the whole proposal;
    - the replication factor is that of the topic's lowest-numbered partition (Kafka takes
      an arbitrary one, which matters only for topics with mixed replication factors);
    - brokers are taken in the cluster's order, ascending id (Kafka: describeCluster order).

    Raises:
        AdminCommandFailed: with Kafka's text (duplicates, unknown topic, racks, RF too big).
    """
    dup_brokers = _duplicates(list(broker_list))
    if dup_brokers:
        raise AdminCommandFailed(
            f"Broker list contains duplicate entries: [{', '.join(map(str, dup_brokers))}]")
    dup_topics = _duplicates(list(topics))
    if dup_topics:
        raise AdminCommandFailed(
            f"List of topics to reassign contains duplicate entries: [{', '.join(map(str, dup_topics))}]")
    for topic in sorted(topics):
        if not state.has_topic(topic) or not state.topic_rows(topic):
            raise AdminCommandFailed(f"{_UNKNOWN_TOPIC}: Topic {topic} not found.")

    wanted = set(broker_list)
    selected = [b for b in state.brokers if b.id in wanted]
    metadata = [(b.id, b.rack if rack_aware else None) for b in selected]
    rackless = sum(1 for _, rack in metadata if rack is None)
    if rack_aware and rackless not in (0, len(metadata)):
        raise AdminCommandFailed(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to "
            "make replica assignment without rack information.")
    missing = sorted(wanted - {b.id for b in selected})
    warnings: tuple[str, ...] = ()
    if missing:
        warnings = (f"--broker-list names broker(s) the cluster does not have, so they get no "
                    f"replicas: {','.join(map(str, missing))}",)

    rng = random.Random(seed)
    current: dict[TopicPartition, tuple[int, ...]] = {}
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for topic in sorted(topics):
        rows = state.topic_rows(topic)
        for row in rows:
            current[state.tp(row)] = state.replicas(row)
        rf = len(state.replicas(rows.start))
        for pid, replicas in assign_replicas_to_brokers(metadata, len(rows), rf, rng=rng).items():
            proposed[TopicPartition(topic, pid)] = tuple(replicas)
    return GenerateResult(current=current, proposed=proposed, warnings=warnings)
