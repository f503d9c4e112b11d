"""One partition's log: record batches in segment files, an offset index, and the leader's
bookkeeping (high watermark, leader-epoch cache, idempotent producer state).

Layout under the partition's directory, as Kafka names its files: `<base offset:020d>.log`
holds the batches exactly as stored (base offset and leader epoch assigned), and the sidecar
`<base offset:020d>.index` one fixed-size entry per batch. The index also records where the batch
sits in the partition's *byte stream*: the sandbox's replication engine moves bytes (client
batches interleaved with its synthetic background writes), so a replica that holds the first `b`
bytes holds exactly the batches that end at or before `b`. That is how a follower's byte
position becomes a log end offset.

Only the index lives in memory (a few dozen bytes per batch, in arrays); records are read back
from the files, so memory stays flat under sustained load.
"""
from __future__ import annotations

import bisect
import os
import struct
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kreassign.sandbox import codes
from kreassign.sandbox.batches import BatchHeader, stamp
from kreassign.sandbox.errors import SequenceError

SEGMENT_BYTES = 1 << 30  # log.segment.bytes
PRODUCER_BATCHES = 5      # Kafka keeps the last five batches per producer for duplicate detection
_ENTRY = struct.Struct(">qqqqddqiqiii")
_COLUMNS = ("base", "last", "pos", "size", "byte_end", "in_sync_at", "max_ts", "epoch", "pid", "pepoch",
            "bseq", "lseq")
_TYPES = "qqqqddqiqiii"


@dataclass(frozen=True)
class Appended:
    """Where a produce landed: first and last offset (a duplicate gets its original offsets)."""

    base_offset: int
    last_offset: int
    duplicate: bool = False


class _Segment:
    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.log_path = directory / f"{base:020d}.log"
        self.index_path = directory / f"{base:020d}.index"
        # Records are client data: owner-only, like every state file.
        self.log_fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o600)
        self.index_path.touch(mode=0o600)
        self.size = os.fstat(self.log_fd).st_size

    def append_index(self, entries: bytes) -> None:
        # One descriptor per segment (the log): the index is opened only to append, so thousands
        # of partitions stay within the process's file limit.
        with open(self.index_path, "ab") as f:
            f.write(entries)

    def close(self) -> None:
        os.close(self.log_fd)


class PartitionLog:
    """The log of one partition; `hw` is the high watermark the leader last computed."""

    def __init__(self, directory: Path, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.cols = {name: array(t) for name, t in zip(_COLUMNS, _TYPES)}
        self.segments: list[_Segment] = []
        self.seg_bases: list[int] = []
        self.hw = 0
        self.producers: dict[int, tuple[int, deque[tuple[int, int, int, int]]]] = {}
        self.epochs: list[tuple[int, int]] = []  # (leader epoch, start offset), ascending
        self._load()

    # ---- loading -------------------------------------------------------------------------------
    def _load(self) -> None:
        for path in sorted(self.dir.glob("*.log")):
            seg = _Segment(self.dir, int(path.stem))
            raw = seg.index_path.read_bytes()
            whole = len(raw) // _ENTRY.size
            for i in range(whole):
                entry = _ENTRY.unpack_from(raw, i * _ENTRY.size)
                if entry[2] + entry[3] > seg.size:
                    whole = i  # the batch did not reach the segment file: drop the torn tail
                    break
                self._remember(entry)
            os.truncate(seg.index_path, whole * _ENTRY.size)
            self.segments.append(seg)
            self.seg_bases.append(seg.base)
        if self.segments:
            last = self.segments[-1]
            has_entries = bool(self.cols["base"]) and self.cols["base"][-1] >= last.base
            end = int(self.cols["pos"][-1] + self.cols["size"][-1]) if has_entries else 0
            os.ftruncate(last.log_fd, end)  # bytes written after the last indexed batch
            last.size = end
        self.hw = self.leo

    def _remember(self, entry: tuple[int | float, ...]) -> None:
        for name, value in zip(_COLUMNS, entry):
            self.cols[name].append(value)  # type: ignore[arg-type]
        base, last, epoch, pid, pepoch, bseq, lseq = (int(entry[0]), int(entry[1]), int(entry[7]), int(entry[8]),
                                                      int(entry[9]), int(entry[10]), int(entry[11]))
        if not self.epochs or epoch > self.epochs[-1][0]:
            self.epochs.append((epoch, base))
        if pid >= 0:
            known = self.producers.get(pid)
            batches = known[1] if known is not None and known[0] == pepoch else deque(maxlen=PRODUCER_BATCHES)
            batches.append((bseq, lseq, base, last))
            self.producers[pid] = (pepoch, batches)

    # ---- offsets ---------------------------------------------------------------------------------
    @property
    def log_start(self) -> int:
        return int(self.cols["base"][0]) if self.cols["base"] else 0

    @property
    def leo(self) -> int:
        """Log end offset: the offset the next record will get."""
        return int(self.cols["last"][-1]) + 1 if self.cols["last"] else 0

    @property
    def byte_end(self) -> float:
        """Where the last batch ends in the partition's byte stream (0 for an empty log)."""
        return float(self.cols["byte_end"][-1]) if self.cols["byte_end"] else 0.0

    def offset_at_bytes(self, nbytes: float) -> int:
        """The log end offset of a replica that holds the first `nbytes` of the byte stream."""
        k = bisect.bisect_right(self.cols["byte_end"], nbytes + 1e-6)
        return int(self.cols["last"][k - 1]) + 1 if k else 0

    def batch_cut(self, start: float, limit: float) -> float:
        """Where a read of whole batches from byte `start` of the stream, taking up to byte
        `limit`, stops: never inside a batch, but past the first batch if that one alone is
        larger (a log read returns at least one batch)."""
        ends, sizes = self.cols["byte_end"], self.cols["size"]
        k = bisect.bisect_right(ends, limit + 1e-6)
        if k == len(ends):
            return limit
        first = float(ends[k]) - float(sizes[k])
        if first >= limit - 1e-6:
            return limit
        return first if first > start + 1e-6 else float(ends[k])

    def offset_in_sync_by(self, when: float) -> int:
        """The log end offset the in-sync followers hold at sandbox time `when`."""
        k = bisect.bisect_right(self.cols["in_sync_at"], when)
        return int(self.cols["last"][k - 1]) + 1 if k else 0

    def next_in_sync_after(self, when: float) -> float | None:
        """When the in-sync followers next gain a batch, after `when` (None if they hold all)."""
        k = bisect.bisect_right(self.cols["in_sync_at"], when)
        return float(self.cols["in_sync_at"][k]) if k < len(self.cols["in_sync_at"]) else None

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first batch with a record at or after `ts`.

        The answer is batch-granular (the batch's max timestamp and base offset), as the sandbox
        does not index records inside batches."""
        for i, max_ts in enumerate(self.cols["max_ts"]):
            if max_ts >= ts:
                return int(self.cols["base"][i]), int(max_ts)
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the batch with the largest timestamp (ListOffsets -3, KIP-734)."""
        if not self.cols["max_ts"]:
            return None
        i = max(range(len(self.cols["max_ts"])), key=self.cols["max_ts"].__getitem__)
        return int(self.cols["last"][i]), int(self.cols["max_ts"][i])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset), or (-1, -1) if none."""
        k = bisect.bisect_right([e for e, _ in self.epochs], epoch)
        if k == 0:
            return -1, -1
        end = self.epochs[k][1] if k < len(self.epochs) else self.leo
        return self.epochs[k - 1][0], end

    # ---- writing ---------------------------------------------------------------------------------
    def check_sequence(self, h: BatchHeader) -> Appended | None:
        """Idempotence: a duplicate of one of the producer's last batches gets its original
        offsets; a gap or a fenced epoch raises; anything else may be appended (None).

        Raises:
            SequenceError: OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH.
        """
        if h.producer_id < 0 or h.base_sequence < 0:
            return None
        known = self.producers.get(h.producer_id)
        if known is None:
            return None
        epoch, batches = known
        if h.producer_epoch < epoch:
            raise SequenceError(codes.INVALID_PRODUCER_EPOCH,
                                f"Producer epoch {h.producer_epoch} is older than the current epoch {epoch}")
        if h.producer_epoch > epoch:
            if h.base_sequence != 0:
                raise SequenceError(codes.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"A new producer epoch must start at sequence 0, not {h.base_sequence}")
            return None
        for bseq, lseq, base, last in batches:
            if bseq == h.base_sequence and lseq == h.last_sequence:
                return Appended(base, last, duplicate=True)
        expected = (batches[-1][1] + 1) % (1 << 31) if batches else 0
        if h.base_sequence != expected:
            raise SequenceError(codes.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                f"Out of order sequence number for producer {h.producer_id}: "
                                f"{h.base_sequence} (expected {expected})")
        return None

    def append(self, data: bytes, headers: list[BatchHeader], *, leader_epoch: int, in_sync_at: float,
               byte_start: float) -> Appended:
        """Append a checked record set at the log end; `byte_start` is where it starts in the
        partition's byte stream, `in_sync_at` the sandbox time by which every in-sync follower
        holds it. Returns its first and last offset."""
        base = self.leo
        if self.cols["in_sync_at"]:
            # followers fetch in order (and a restart may resume from an older saved time)
            in_sync_at = max(in_sync_at, self.cols["in_sync_at"][-1])
        stamped = stamp(data, headers, base, leader_epoch)
        seg = self._segment_for_append(len(stamped), base)
        os.pwrite(seg.log_fd, stamped, seg.size)
        entries = bytearray()
        offset, pos, at = base, seg.size, byte_start
        for h in headers:
            at += h.size
            entry = (offset, offset + h.last_offset_delta, pos, h.size, at, in_sync_at, h.max_timestamp, leader_epoch,
                     h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence)
            entries += _ENTRY.pack(*entry)
            self._remember(entry)
            offset += h.count
            pos += h.size
        seg.append_index(bytes(entries))
        seg.size = pos
        return Appended(base, offset - 1)

    def _segment_for_append(self, nbytes: int, base: int) -> _Segment:
        if not self.segments or (self.segments[-1].size > 0 and self.segments[-1].size + nbytes > self.segment_bytes):
            seg = _Segment(self.dir, base)
            self.segments.append(seg)
            self.seg_bases.append(base)
        return self.segments[-1]

    def truncate_to_bytes(self, nbytes: float) -> None:
        """An out-of-sync replica became leader (unclean election): drop the batches it lacks."""
        keep = bisect.bisect_right(self.cols["byte_end"], nbytes + 1e-6)
        if keep == len(self.cols["base"]):
            return
        cut = int(self.cols["base"][keep])
        while self.segments and self.segments[-1].base >= cut and self.segments[-1].base > 0:
            seg = self.segments.pop()
            self.seg_bases.pop()
            seg.close()
            seg.log_path.unlink()
            seg.index_path.unlink()
        kept_entries = [tuple(self.cols[c][i] for c in _COLUMNS) for i in range(keep)]
        self.cols = {name: array(t) for name, t in zip(_COLUMNS, _TYPES)}
        self.producers.clear()
        self.epochs.clear()
        for entry in kept_entries:
            self._remember(entry)
        if self.segments:
            seg = self.segments[-1]
            in_seg = [e for e in kept_entries if int(e[0]) >= seg.base]
            seg.size = int(in_seg[-1][2]) + int(in_seg[-1][3]) if in_seg else 0
            os.ftruncate(seg.log_fd, seg.size)
            os.truncate(seg.index_path, len(in_seg) * _ENTRY.size)
        self.hw = min(self.hw, self.leo)

    # ---- reading ---------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upper: int, *, at_least_one: bool = True) -> bytes:
        """Whole batches from the one holding `offset`, below offset `upper`, up to `max_bytes`;
        with `at_least_one` the first batch comes even if larger (KIP-74's first partition)."""
        first = bisect.bisect_left(self.cols["last"], offset)
        return b"".join(self._chunks(first, max_bytes, upper, at_least_one))

    def readable_bytes(self, offset: int, upper: int) -> int:
        """How many bytes of batches lie between `offset` and `upper` (for fetch min_bytes)."""
        first = bisect.bisect_left(self.cols["last"], offset)
        end = bisect.bisect_left(self.cols["last"], upper)
        return int(sum(self.cols["size"][first:end])) if end > first else 0

    def _chunks(self, first: int, max_bytes: int, upper: int, at_least_one: bool) -> Iterator[bytes]:
        """Contiguous runs of batches, one `pread` per segment touched."""
        cols = self.cols
        n = len(cols["base"])
        i, total = first, 0
        while i < n and cols["last"][i] < upper:
            seg = self._segment_of(i)
            j = i
            full = False
            while j < n and cols["last"][j] < upper and self._segment_of(j) is seg:
                size = int(cols["size"][j])
                if total + size > max_bytes and (total > 0 or not at_least_one):
                    full = True
                    break
                total += size
                j += 1
            if j == i:
                return
            start = int(cols["pos"][i])
            yield os.pread(seg.log_fd, int(cols["pos"][j - 1] + cols["size"][j - 1]) - start, start)
            if full:
                return
            i = j

    def _segment_of(self, i: int) -> _Segment:
        return self.segments[bisect.bisect_right(self.seg_bases, self.cols["base"][i]) - 1]

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self.segments.clear()
        self.seg_bases.clear()
