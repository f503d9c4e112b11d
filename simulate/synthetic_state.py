"""Seeded synthetic clusters for the balance benchmarks and tests.

Heavy-tailed partition sizes (log-normal), topics of Zipf-like partition counts, racks of
unequal size, and a skewed but rack-aware starting placement (brokers drawn with log-normal
weights), optionally with extra empty brokers as if just added.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kreassign.cluster.model import Broker, ClusterState


def synthetic_cluster(
    *,
    brokers: int,
    partitions: int,
    rf: int = 3,
    rack_sizes: Sequence[int] | None = None,
    new_brokers: int = 0,
    topics: int | None = None,
    size_sigma: float = 1.2,
    skew_sigma: float = 0.3,
    mean_size: float = 1e9,
    seed: int = 0,
) -> ClusterState:
    """A cluster of `brokers` loaded brokers (+ `new_brokers` empty ones) and `partitions`.

    Args:
        rack_sizes: brokers per rack for the loaded brokers (sum = brokers); None = no racks.
        new_brokers: empty brokers spread over the racks in proportion to their size.
        size_sigma: log-normal sigma of partition sizes (1.2 gives a max/median near 300).
        skew_sigma: log-normal sigma of broker weights in the starting placement.
    """
    rng = np.random.default_rng(seed)
    n_topics = topics or max(1, partitions // 100)
    racks = list(rack_sizes) if rack_sizes else None
    if racks is not None and sum(racks) != brokers:
        raise ValueError("rack_sizes must add up to brokers")
    rack_of = np.repeat(np.arange(len(racks)), racks) if racks else np.zeros(brokers, dtype=np.int64)
    k = len(racks) if racks else 1
    weight = rng.lognormal(0.0, skew_sigma, brokers)

    if racks and k >= rf:
        pick_racks = np.argsort(rng.random((partitions, k)), axis=1)[:, :rf]
        matrix = np.empty((partitions, rf), dtype=np.int64)
        for r in range(k):
            members = np.flatnonzero(rack_of == r)
            cw = np.cumsum(weight[members])
            draw = np.searchsorted(cw, rng.random(partitions) * cw[-1])
            choice = members[np.minimum(draw, len(members) - 1)]
            matrix = np.where(pick_racks == r, choice[:, None], matrix)
    else:
        keys = np.log(rng.random((partitions, brokers))) / weight[None, :]
        matrix = np.argsort(-keys, axis=1)[:, :rf]

    ids = np.arange(1, brokers + new_brokers + 1)
    extra_rack = (np.arange(new_brokers) % k) if new_brokers else np.zeros(0, dtype=np.int64)
    if racks and new_brokers:
        share = np.array(racks, dtype=np.float64) / brokers
        extra_rack = np.sort(np.searchsorted(np.cumsum(share), (np.arange(new_brokers) + 0.5) / new_brokers))
    all_racks = np.concatenate([rack_of, extra_rack])
    broker_list = [Broker(int(ids[i]), rack=(f"rack-{int(all_racks[i])}" if racks else None))
                   for i in range(len(ids))]

    counts = rng.zipf(1.6, n_topics).astype(np.float64)
    topic_of = np.minimum(np.searchsorted(np.cumsum(counts) / counts.sum(), rng.random(partitions)),
                          n_topics - 1)
    topic_of = np.sort(topic_of)
    part = np.arange(partitions) - np.searchsorted(topic_of, topic_of)
    names = np.array([f"topic-{i:05d}" for i in range(n_topics)], dtype=object)[topic_of]

    sizes = rng.lognormal(0.0, size_sigma, partitions)
    sizes = (sizes / sizes.mean() * mean_size).astype(np.int64)
    bps = sizes / 86_400.0 * rng.lognormal(0.0, 0.5, partitions)
    offsets = np.arange(partitions + 1, dtype=np.int64) * rf
    return ClusterState.from_arrays(
        brokers=broker_list, topic=names, partition=part, replica_offsets=offsets,
        replica_ids=ids[matrix].ravel(), size_bytes=sizes, produce_bps=bps,
    )
