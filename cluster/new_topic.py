"""A topic just created, once the brokers know it.

CreateTopics returns when the controller has the topic; each broker learns of it when it applies
that metadata, a moment later (on a loaded real cluster, hundreds of milliseconds), and until
then answers Metadata for it with UNKNOWN_TOPIC_OR_PARTITION or a partition without a leader.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from kreassign.cluster.errors import ClusterError, UnknownTopicError
from kreassign.cluster.model import PartitionInfo
from kreassign.cluster.port import ClusterPort

POLL_S = 0.2


def wait_until_led(port: ClusterPort, topic: str, partitions: int, *, timeout_s: float = 30.0,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> list[PartitionInfo]:
    """The `partitions` partitions of `topic`, each with a leader, as soon as the broker asked
    reports them so.

    Raises:
        ClusterError: not so after `timeout_s`.
    """
    deadline = clock() + timeout_s
    while True:
        try:
            parts = port.describe_topics([topic])
        except UnknownTopicError:
            parts = []
        if len(parts) == partitions and all(p.leader is not None and p.leader >= 0 for p in parts):
            return parts
        if clock() >= deadline:
            led = sum(1 for p in parts if p.leader is not None and p.leader >= 0)
            raise ClusterError(f"topic {topic} was created, but after {timeout_s:g}s the brokers report "
                               f"{led} of its {partitions} partition(s) with a leader; check the controller's "
                               "and the brokers' logs")
        sleep(POLL_S)
