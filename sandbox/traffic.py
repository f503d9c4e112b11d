"""Cumulative byte and message counts per broker, as Kafka's BrokerTopicMetrics count them
(BytesIn/MessagesIn for produced data accepted by a leader, BytesOut for data fetched by
consumers, ReplicationBytesIn/Out for data followers fetch). Replication of moving replicas is
counted by the replication step (`Replication.sent`/`received`); in-sync followers take every
produced byte, counted here when the leader appends it. A deleted topic's meters go
(`BrokerTopicStats.removeMetrics`); the all-topics meters (`all_topics`, by meter name and broker)
keep what it counted, so they never go down."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Traffic:
    bytes_in: defaultdict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    messages_in: defaultdict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))
    bytes_out: defaultdict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    replication_in: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    replication_out: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    all_topics: defaultdict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))

    def produced(self, leader: int, topic: str, nbytes: int, messages: int, isr: Sequence[int]) -> None:
        self.bytes_in[(leader, topic)] += nbytes
        self.messages_in[(leader, topic)] += messages
        self.all_topics[("bytesin", leader)] += nbytes
        self.all_topics[("messagesin", leader)] += messages
        for follower in isr:
            if follower != leader:
                self.replication_out[leader] += nbytes
                self.replication_in[follower] += nbytes

    def fetched(self, broker: int, topic: str, nbytes: int) -> None:
        self.bytes_out[(broker, topic)] += nbytes
        self.all_topics[("bytesout", broker)] += nbytes

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: its per-topic meters go, on every broker."""
        for table in (self.bytes_in, self.messages_in, self.bytes_out):
            for key in [k for k in table if k[1] == topic]:
                del table[key]
