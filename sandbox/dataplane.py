"""The sandbox's data path state: a log per partition under `<root>/<topic>-<partition>/`, joined
to the replication engine's byte positions.

The engine moves *bytes*: a partition's leader log grows by its synthetic background rate and
by every batch clients produce, and a lagging replica holds the first `size` bytes of that
stream. Each batch remembers where it ends in the stream, so a replica's log end offset is the
end of the last batch it fully holds.

In-sync followers are exactly as long as the leader in the engine; here a batch reaches them
through each follower broker's network (`network_bps`, a first-in first-out pipe shared by all
the partitions it follows, behind the catch-up bytes a fetch response on the same links carries)
and one more follower fetch round (`FetchConfig.round_s`, the engine's own round trip
assumption), because Kafka's high watermark only moves when a follower's *next* fetch reports
its new log end offset (broker-semantics Part B §4.3). So acks=all waits longer when followers
are busy, and longer still while a move copies over their links. The high watermark is the
minimum log end offset over the ISR, and never moves back except by truncation.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

from kreassign.sandbox.batches import BatchHeader
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.log import SEGMENT_BYTES, Appended, PartitionLog
from kreassign.sandbox.logdir_moves import LogDirMoves
from kreassign.sandbox.private_files import write_private
from kreassign.sandbox.state import PartitionState

CHECKPOINT = "checkpoint.json"
DEFAULT_MIN_ISR = 1
MAX_MESSAGE_BYTES = 1_048_588  # message.max.bytes / max.message.bytes default
LINK_FILLED = 0.9
"""a link's catch-up share from which the copy, not a throttle, holds it: responses follow each
other back to back"""


class DataPlane:
    """Partition logs of one sandbox; every method expects the engine lock to be held."""

    def __init__(self, engine: Engine, root: Path, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.engine = engine
        self.root = root
        self.segment_bytes = segment_bytes
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.next_producer_id = 1000
        self.log_dir_moves = LogDirMoves(engine, cut=self._batch_cut)
        self.follower_busy: dict[int, float] = {}  # sandbox time each follower's inbound pipe frees up
        self._draws = random.Random(0)  # where an in-sync batch falls among the catch-up responses
        self._ahead: dict[int, tuple[float, float]] = {}  # follower -> (when drawn, catch-up bytes ahead)
        self.root.mkdir(parents=True, exist_ok=True)
        saved = self._read_checkpoint()
        moves = saved.get("log_dir_moves")
        if isinstance(moves, list):
            self.log_dir_moves.load(moves)
        for d in sorted(self.root.iterdir()):
            topic, _, index = d.name.rpartition("-")
            if d.is_dir() and index.isdigit() and engine.partition(topic, int(index)) is not None:
                log = self._open(topic, int(index))
                log.hw = min(int(saved.get("hw", {}).get(d.name, log.leo)), log.leo)
                self.next_producer_id = max([self.next_producer_id, *(pid + 1 for pid in log.producers)])
        self.next_producer_id = max(self.next_producer_id, int(saved.get("next_producer_id", 0)))

    # ---- logs ------------------------------------------------------------------------------------
    def _open(self, topic: str, index: int) -> PartitionLog:
        log = PartitionLog(self.root / f"{topic}-{index}", segment_bytes=self.segment_bytes)
        p = self.engine.partition(topic, index)
        assert p is not None
        # Records are the truth: a state file saved before the last appends must not hide them.
        if self.engine.log_end[p.row] < log.byte_end:
            self.engine.log_end[p.row] = log.byte_end
        self.logs[(topic, index)] = log
        return log

    def log(self, p: PartitionState) -> PartitionLog:
        """The partition's log, truncated first if an unclean election shrank the leader's bytes."""
        log = self.logs.get((p.topic, p.index))
        if log is None:
            return self._open(p.topic, p.index)
        end = float(self.engine.log_end[p.row])
        if end < log.byte_end:
            log.truncate_to_bytes(end)
        return log

    def follow_truncations(self) -> None:
        """Truncate every open log whose leader lost bytes (an unclean election or a cancel just
        ran), before synthetic writes could grow the partition past the lost batches again."""
        for (topic, index) in list(self.logs):
            p = self.engine.partition(topic, index)
            if p is not None:
                self.log(p)

    def existing(self, p: PartitionState) -> PartitionLog | None:
        """The partition's log if clients ever wrote or read it (no files are created)."""
        return self.log(p) if (p.topic, p.index) in self.logs else None

    def _batch_cut(self, p: PartitionState, start: float, limit: float) -> float:
        """Where a log-dir copy's read of whole batches stops (bytes alone where clients never wrote)."""
        log = self.existing(p)
        return limit if log is None else log.batch_cut(start, limit)

    def delete_topic(self, topic: str, indexes: list[int]) -> None:
        """The topic was deleted: close its logs and remove their files, high watermarks and
        log-dir moves, so a topic created again under the name starts empty (Kafka renames the
        directories `-delete` and removes them later; none of it is readable meanwhile)."""
        for index in indexes:
            log = self.logs.pop((topic, index), None)
            if log is not None:
                log.close()
            shutil.rmtree(self.root / f"{topic}-{index}", ignore_errors=True)
        self.log_dir_moves.forget(topic)
        self.checkpoint()  # no saved high watermark may outlive its log

    def tick(self, now: float) -> None:
        """Sandbox time moved: the log-dir copy threads make their fetches."""
        self.log_dir_moves.advance(now)

    # ---- offsets of replicas ---------------------------------------------------------------------
    def replica_leo(self, p: PartitionState, broker_id: int, now: float) -> int:
        """A replica's log end offset, from its byte position (lagging) or the fetch round (in sync)."""
        log = self.log(p)
        if broker_id == p.leader:
            return log.leo
        if broker_id in p.lagging:
            return min(log.offset_at_bytes(self.engine.replica_size(p, broker_id)), log.leo)
        return log.offset_in_sync_by(now)

    def high_watermark(self, p: PartitionState, now: float) -> int:
        """Advance and return the high watermark: the smallest log end offset in the ISR."""
        log = self.log(p)
        isr = [b for b in p.isr if b == p.leader or self.engine.brokers[b].alive]
        hw = min((self.replica_leo(p, b, now) for b in isr), default=log.leo)
        if hw > log.hw:
            log.hw = min(hw, log.leo)
        return log.hw

    def next_hw_change(self, p: PartitionState, now: float) -> float | None:
        """When in-sync followers will next report a new log end offset (None: no such event
        pending; lagging replicas move only on engine ticks)."""
        log = self.log(p)
        if log.hw >= log.leo or not any(b != p.leader for b in p.isr):
            return None
        return log.next_in_sync_after(now)

    def min_insync_replicas(self, topic: str) -> int:
        value = self.engine.configs.topic.get(topic, {}).get("min.insync.replicas")
        try:
            return int(value) if value is not None else DEFAULT_MIN_ISR
        except ValueError:
            return DEFAULT_MIN_ISR

    def max_message_bytes(self, topic: str) -> int:
        value = self.engine.configs.topic.get(topic, {}).get("max.message.bytes")
        try:
            return int(value) if value is not None else MAX_MESSAGE_BYTES
        except ValueError:
            return MAX_MESSAGE_BYTES

    # ---- writing ---------------------------------------------------------------------------------
    def append(self, p: PartitionState, data: bytes, headers: list[BatchHeader], now: float) -> Appended:
        """Append a checked record set on the leader; the partition grows by its size, so the
        bytes count in DescribeLogDirs and in what new replicas must copy.

        Raises:
            SequenceError: an idempotent producer's batch is out of order or fenced.
        """
        log = self.log(p)
        dup = log.check_sequence(headers[0])
        if dup is not None:
            return dup
        start = float(self.engine.log_end[p.row])
        appended = log.append(data, headers, leader_epoch=p.leader_epoch, byte_start=start,
                              in_sync_at=self._in_sync_at(p, len(data), now))
        self.engine.log_end[p.row] = start + len(data)
        if len(p.isr) == 1 and p.isr[0] == p.leader:
            log.hw = log.leo  # a leader alone in the ISR advances the HW on append
        return appended

    def _in_sync_at(self, p: PartitionState, nbytes: int, now: float) -> float:
        """When every live in-sync follower holds `nbytes` appended now: each follower broker
        receives them after what it is already receiving, then reports them one fetch round later.

        A fetch response carries the catch-up partitions of its session ahead of the in-sync
        ones, and the links it crosses carry other sessions' catch-up responses too
        (`Replication.catchup_link`; broker-semantics Part B §4.3, the model's
        `simulate.client_impact.follower_fetch_ms`). As often as the busier link carries catch-up
        (its share of the last second), a catch-up response is on it when the batch arrives, sent
        without the batch: the batch waits for what is left of it. Where the copy fills the link
        (unthrottled) the next response, which carries the batch, brings a whole catch-up
        response too; under a throttle it does not (the follower leaves a partition out of its
        next fetch once its quota is over, which one response of 1 MiB is at these rates). Real
        Kafka 4.4.0's canary on 20 MB/s links: 1.5 responses at the median and 2 at the tail
        unthrottled; the idle round at the median and up to about one response at the tail
        under a throttle (bench_client_impact). The in-sync bytes queue on the follower
        (`follower_busy`) behind that wait: batches appended at one instant travel in one
        response, behind the same catch-up, not behind a catch-up response each."""
        followers = [b for b in p.isr if b != p.leader and self.engine.brokers[b].alive]
        if not followers:
            return now
        rep = self.engine.replication
        bps = self.engine.network_bps
        done = now
        for b in followers:
            share, response = rep.catchup_link(rep.pos[p.leader], rep.pos[b])
            drawn_at, ahead = self._ahead.get(b, (None, 0.0))
            if drawn_at != now:  # batches appended at one instant meet the same responses
                ahead = 0.0
                if response > 0 and self._draws.random() < share:
                    ahead = self._draws.random() * response
                    if share >= LINK_FILLED:
                        ahead += response
                self._ahead[b] = (now, ahead)
            self.follower_busy[b] = max(self.follower_busy.get(b, now), now + ahead / bps) + nbytes / bps
            done = max(done, self.follower_busy[b])
        return done + self.engine.fetch.round_s

    def allocate_producer_id(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    # ---- persistence -----------------------------------------------------------------------------
    def _read_checkpoint(self) -> dict[str, Any]:
        try:
            data = json.loads((self.root / CHECKPOINT).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def checkpoint(self) -> None:
        """Write the high watermarks and the next producer id (Kafka's replication-offset-checkpoint)."""
        data = {"hw": {f"{t}-{i}": log.hw for (t, i), log in self.logs.items()},
                "next_producer_id": self.next_producer_id, "log_dir_moves": self.log_dir_moves.to_json()}
        tmp = self.root / (CHECKPOINT + ".tmp")
        write_private(tmp, json.dumps(data, separators=(",", ":")))
        os.replace(tmp, self.root / CHECKPOINT)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        self.logs.clear()

