"""Capture a live cluster as a `ClusterState`: brokers, partitions, sizes, throttles, and
(optionally) measured write rates, all through the cluster port."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone

from kreassign.cluster.errors import ClusterError
from kreassign.cluster.model import ClusterState, PartitionInfo, Reassignment, ThrottleConfigs, TopicPartition
from kreassign.cluster.port import (
    BROKER_THROTTLE_KEYS,
    TOPIC_THROTTLE_KEYS,
    ClusterPort,
    ConfigEntry,
    ConfigsResult,
    LogDirReport,
)
from kreassign.cluster.write_sample import OFFSETS_MISSING, Reading, sampled_rates

_log = logging.getLogger(__name__)


def snapshot_state(
    port: ClusterPort,
    *,
    with_sizes: bool = True,
    warn: Callable[[str], None] | None = None,
    now: Callable[[], datetime] | None = None,
    sample_s: float = 0.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> ClusterState:
    """Read a complete `ClusterState` through the port.

    Sizes come from DescribeLogDirs of each partition's leader replica (the largest replica
    when the leader's broker did not answer). Throttles are every throttle key set on any
    broker or topic itself (cluster-wide defaults are left out: a per-broker DELETE cannot
    remove them). Brokers that do not answer are skipped with a warning.

    Args:
        port: the cluster.
        with_sizes: False skips DescribeLogDirs (sizes are then 0).
        warn: receives one line per skipped broker or topic (default: this module's logger).
        now: clock for `captured_at` (default: UTC now).
        sample_s: with a positive value, measure every partition's write rate from two readings
            of log end offsets and sizes this many seconds of `clock` apart (sizes are then
            read even without `with_sizes`); `clock` and `sleep` count cluster seconds.

    Raises:
        ClusterError: the cluster-wide reads (brokers, topics, reassignments) failed.
    """
    say = warn if warn is not None else _log.warning
    info = port.describe_brokers()
    partitions = port.describe_topics()
    write_rates = None
    report = None
    if sample_s > 0:
        if clock is None or sleep is None:
            raise ValueError("sampling write rates needs a clock and a sleeper")
        first, _, note1 = take_reading(port, partitions, clock)
        sleep(sample_s)
        second, report, note2 = take_reading(port, partitions, clock, with_offsets=first.offsets is not None)
        rates, write_rates = sampled_rates(first, second, (note1, note2), _stamp(now))
        if write_rates.note:
            say(write_rates.note)
        partitions = [replace(p, produce_bps=rates.get(p.tp, 0.0)) for p in partitions]
    elif with_sizes:
        report = port.log_dir_sizes(partitions=[p.tp for p in partitions])
    if report is not None:
        for broker, error in sorted(report.unreachable.items()):
            say(f"broker {broker} did not answer DescribeLogDirs, so sizes of partitions led "
                f"by it come from other replicas: {error.message}")
        partitions = [_with_size(p, report) for p in partitions]
    reassignments = port.list_reassignments()
    if report is not None:
        reassignments = {tp: _with_copied(move, tp, report) for tp, move in reassignments.items()}
    throttles = _read_throttles(port, [b.id for b in info.brokers],
                                sorted({p.topic for p in partitions}), say)
    return ClusterState.from_partitions(
        info.brokers, partitions, reassignments=reassignments, throttles=throttles,
        cluster_id=info.cluster_id, captured_at=_stamp(now), write_rates=write_rates,
    )


def _stamp(now: Callable[[], datetime] | None) -> str:
    captured = (now or (lambda: datetime.now(timezone.utc)))()
    return captured.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_size(p: PartitionInfo, report: LogDirReport) -> PartitionInfo:
    size = report.size(p.tp, p.leader) if p.leader is not None else None
    if size is None:
        sizes = [s for s in (report.size(p.tp, b) for b in p.replicas) if s is not None]
        size = max(sizes, default=0)
    return PartitionInfo(topic=p.topic, partition=p.partition, replicas=p.replicas,
                         leader=p.leader, isr=p.isr, size_bytes=size,
                         produce_bps=p.produce_bps, consume_bps=p.consume_bps)


def _with_copied(move: Reassignment, tp: TopicPartition, report: LogDirReport) -> Reassignment:
    """The reassignment with how much each adding replica's log holds, where it was reported."""
    sizes = ((b, report.size(tp, b)) for b in move.adding)
    return replace(move, copied=tuple((b, size) for b, size in sizes if size is not None))


def _read_throttles(port: ClusterPort, broker_ids: list[int], topics: list[str],
                    say: Callable[[str], None]) -> ThrottleConfigs:
    brokers = port.describe_broker_configs(broker_ids, BROKER_THROTTLE_KEYS)
    for broker, error in sorted(brokers.errors.items()):
        say(f"broker {broker}: could not read its throttle configs: {error.message}")
    topic_configs = port.describe_topic_configs(topics, TOPIC_THROTTLE_KEYS) if topics else ConfigsResult[str]()
    for topic, error in sorted(topic_configs.errors.items()):
        say(f"topic {topic}: could not read its throttle configs: {error.message}")

    def set_values(entries: Mapping[str, ConfigEntry], keys: tuple[str, ...]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, entry in sorted(entries.items()):
            if key in keys and entry.is_override and entry.value:
                out[key] = entry.value
        return out

    broker_out = {b: v for b, e in sorted(brokers.configs.items())
                  if (v := set_values(e, BROKER_THROTTLE_KEYS))}
    topic_out = {t: v for t, e in sorted(topic_configs.configs.items())
                 if (v := set_values(e, TOPIC_THROTTLE_KEYS))}
    return ThrottleConfigs(broker=broker_out, topic=topic_out)


def leader_sizes(partitions: Sequence[PartitionInfo], report: LogDirReport) -> dict[TopicPartition, int]:
    """The size of each partition's leader replica, where its broker answered."""
    out = {}
    for p in partitions:
        if p.leader is not None:
            size = report.size(p.tp, p.leader)
            if size is not None:
                out[p.tp] = size
    return out


def take_reading(port: ClusterPort, partitions: Sequence[PartitionInfo], clock: Callable[[], float], *,
                 with_offsets: bool = True) -> tuple[Reading, LogDirReport, str | None]:
    """Read offsets (end and start, when asked and supported) and sizes now, stamped with the middle of the
    reads on `clock`; the note says what was missing."""
    tps = [p.tp for p in partitions]
    before = clock()
    offsets: dict[TopicPartition, int] | None = None
    starts: dict[TopicPartition, int] | None = None
    note = None
    if with_offsets:
        try:
            offsets = port.log_end_offsets(tps)
            starts = port.log_start_offsets(tps) if offsets is not None else None
        except ClusterError as exc:
            offsets, note = None, f"ListOffsets failed ({exc}): write rates come from log sizes alone"
        if offsets is None and note is None:
            note = OFFSETS_MISSING
    report = port.log_dir_sizes(partitions=tps)
    return Reading((before + clock()) / 2, leader_sizes(partitions, report), offsets, starts), report, note
