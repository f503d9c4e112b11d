"""The partition log: segment files, offsets, byte positions, idempotence and restarts."""
from __future__ import annotations

from itertools import accumulate
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kreassign.sandbox import codes
from kreassign.sandbox.batches import InvalidRecords, parse_batches
from kreassign.sandbox.log import PartitionLog, SequenceError


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1, ts: int = 1000) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    if pid >= 0:
        b.set_producer_state(pid, epoch, seq, False)
    for i, v in enumerate(values):
        b.append(timestamp=ts + i, key=None, value=v, headers=[])
    b.close()
    return bytes(b.buffer())


def record_values(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in fetched bytes, read with kafka-python's classes."""
    out = []
    records = MemoryRecords(bytes(data))
    while (b := records.next_batch()) is not None:
        out.extend((r.offset, r.key, r.value) for r in b)
    return out


def append(log: PartitionLog, data: bytes, *, now: float = 0.0, start: float | None = None, epoch: int = 0) -> tuple[int, int]:
    headers = parse_batches(data)
    a = log.append(data, headers, leader_epoch=epoch, in_sync_at=now,
                   byte_start=log.byte_end if start is None else start)
    return a.base_offset, a.last_offset


def test_offsets_are_assigned_and_records_read_back(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0")
    assert (log.log_start, log.leo) == (0, 0)
    assert append(log, batch([b"a", b"b", b"c"])) == (0, 2)
    assert append(log, batch([b"d"])) == (3, 3)
    assert log.leo == 4
    assert [(o, v) for o, _, v in record_values(log.read(0, 1 << 20, 4))] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    # the batch holding offset 1 is returned whole; the upper bound hides the second batch
    assert [o for o, _, _ in record_values(log.read(1, 1 << 20, 3))] == [0, 1, 2]
    assert log.read(4, 1 << 20, 4) == b""
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == ["00000000000000000000.index",
                                                                      "00000000000000000000.log"]


def test_max_bytes_returns_at_least_one_batch(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0")
    first = batch([b"x" * 500])
    append(log, first)
    append(log, batch([b"y" * 500]))
    assert len(log.read(0, 10, 2)) == len(first)  # KIP-74: the first batch even if larger
    assert log.read(0, 10, 2, at_least_one=False) == b""  # not for later partitions of a response
    assert log.readable_bytes(0, 2) == len(first) * 2
    assert log.readable_bytes(1, 2) == len(first)
    assert log.readable_bytes(2, 2) == 0


def test_byte_positions_map_to_replica_offsets(tmp_path: Path) -> None:
    """Client batches interleave with synthetic bytes: a replica holding b bytes holds the
    batches that end at or before b."""
    log = PartitionLog(tmp_path / "t-0")
    a = batch([b"a"])
    append(log, a, start=1000.0)          # bytes 1000 .. 1000+len(a)
    append(log, batch([b"b", b"c"]), start=5000.0)
    assert log.offset_at_bytes(0) == 0
    assert log.offset_at_bytes(1000 + len(a) - 1) == 0
    assert log.offset_at_bytes(1000 + len(a)) == 1
    assert log.offset_at_bytes(4999) == 1
    assert log.offset_at_bytes(1e12) == 3


def test_log_survives_reopen_and_drops_a_torn_tail(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0")
    append(log, batch([b"a", b"b"], pid=7, epoch=0, seq=0), now=1.0, epoch=3)
    append(log, batch([b"c"], pid=7, epoch=0, seq=2), now=2.0, epoch=4)
    log.close()
    with open(tmp_path / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(b"\0" * 17)  # a crash in the middle of an append
    again = PartitionLog(tmp_path / "t-0")
    assert again.leo == 3
    assert again.epochs == [(3, 0), (4, 2)]
    assert again.end_offset_for_epoch(3) == (3, 2)
    assert again.end_offset_for_epoch(9) == (4, 3)
    assert again.end_offset_for_epoch(1) == (-1, -1)
    assert [v for _, _, v in record_values(again.read(0, 1 << 20, 3))] == [b"a", b"b", b"c"]
    # the producer state is rebuilt: a retry of the last batch is a duplicate with its old offset
    dup = again.check_sequence(parse_batches(batch([b"c"], pid=7, epoch=0, seq=2))[0])
    assert dup is not None and (dup.base_offset, dup.last_offset, dup.duplicate) == (2, 2, True)


def test_idempotent_sequences(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0")
    append(log, batch([b"a"], pid=5, epoch=1, seq=0))
    with pytest.raises(SequenceError) as gap:
        log.check_sequence(parse_batches(batch([b"b"], pid=5, epoch=1, seq=3))[0])
    assert gap.value.code == codes.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(SequenceError) as fenced:
        log.check_sequence(parse_batches(batch([b"b"], pid=5, epoch=0, seq=1))[0])
    assert fenced.value.code == codes.INVALID_PRODUCER_EPOCH
    assert log.check_sequence(parse_batches(batch([b"b"], pid=5, epoch=1, seq=1))[0]) is None
    assert log.check_sequence(parse_batches(batch([b"b"], pid=5, epoch=2, seq=0))[0]) is None
    assert log.check_sequence(parse_batches(batch([b"b"], pid=6, epoch=0, seq=9))[0]) is None


def test_segments_roll_and_reads_span_them(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", segment_bytes=300)
    for i in range(6):
        append(log, batch([bytes([65 + i]) * 100]))
    assert len(log.segments) == 6
    assert [v for _, _, v in record_values(log.read(0, 1 << 20, 6))] == [bytes([65 + i]) * 100 for i in range(6)]
    log.close()
    again = PartitionLog(tmp_path / "t-0", segment_bytes=300)
    assert [o for o, _, _ in record_values(again.read(2, 1 << 20, 6))] == [2, 3, 4, 5]


def test_truncation_to_bytes(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", segment_bytes=300)
    ends = []
    for i in range(4):
        append(log, batch([b"z" * 100]))
        ends.append(log.byte_end)
    log.truncate_to_bytes(ends[1] + 5)
    assert log.leo == 2
    assert append(log, batch([b"new"])) == (2, 2)
    assert [v for _, _, v in record_values(log.read(0, 1 << 20, 3))] == [b"z" * 100, b"z" * 100, b"new"]


def test_offsets_by_timestamp(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0")
    append(log, batch([b"a", b"b"], ts=100))   # timestamps 100, 101
    append(log, batch([b"c"], ts=500))
    assert log.offset_for_timestamp(0) == (0, 101)
    assert log.offset_for_timestamp(101) == (0, 101)
    assert log.offset_for_timestamp(102) == (2, 500)
    assert log.offset_for_timestamp(501) is None
    assert log.max_timestamp() == (2, 500)


@pytest.mark.parametrize(("data", "code"), [
    (b"", codes.INVALID_RECORD),
    (b"\0" * 30, codes.CORRUPT_MESSAGE),
])
def test_bad_record_sets_are_refused(data: bytes, code: int) -> None:
    with pytest.raises(InvalidRecords) as exc:
        parse_batches(data)
    assert exc.value.code == code


def test_crc_and_magic_are_checked() -> None:
    good = bytearray(batch([b"hello"]))
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    with pytest.raises(InvalidRecords) as crc:
        parse_batches(bytes(flipped))
    assert crc.value.code == codes.CORRUPT_MESSAGE
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(InvalidRecords) as magic:
        parse_batches(bytes(old))
    assert magic.value.code == codes.UNSUPPORTED_FOR_MESSAGE_FORMAT


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_parser(data: bytes) -> None:
    try:
        headers = parse_batches(data)
    except InvalidRecords as exc:
        assert exc.code in (codes.INVALID_RECORD, codes.CORRUPT_MESSAGE, codes.UNSUPPORTED_FOR_MESSAGE_FORMAT)
    else:
        assert sum(h.size for h in headers) == len(data)


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(1, 5), min_size=1, max_size=25), segment=st.integers(80, 600),
       cut=st.integers(0, 25), data=st.data())
def test_reads_after_reopen_and_truncation_match_a_model(tmp_path_factory: pytest.TempPathFactory,
                                                         counts: list[int], segment: int, cut: int,
                                                         data: st.DataObject) -> None:
    """Whatever the batch and segment sizes: every offset below the end is read back inside its
    own batch, the byte mapping is monotonic, and a reopened or truncated log agrees."""
    directory = tmp_path_factory.mktemp("log") / "t-0"
    log = PartitionLog(directory, segment_bytes=segment)
    values: list[bytes] = []
    ends: list[float] = []
    for n in counts:
        vs = [f"{len(values) + i}".encode() for i in range(n)]
        append(log, batch(vs))
        values += vs
        ends.append(log.byte_end)
    log.close()
    log = PartitionLog(directory, segment_bytes=segment)
    assert log.leo == len(values)
    offset = data.draw(st.integers(0, len(values) - 1))
    got = record_values(log.read(offset, data.draw(st.integers(1, 5000)), len(values)))
    assert got[0][0] <= offset <= got[-1][0]                     # the batch holding `offset` comes first
    assert [v for _, _, v in got] == values[got[0][0]:got[-1][0] + 1]
    assert [log.offset_at_bytes(e) for e in ends] == list(accumulate(counts))
    keep = min(cut, len(counts))
    log.truncate_to_bytes(ends[keep - 1] if keep else 0.0)
    assert log.leo == sum(counts[:keep])
    log.close()
    again = PartitionLog(directory, segment_bytes=segment)
    assert again.leo == sum(counts[:keep])
    assert [v for _, _, v in record_values(again.read(0, 1 << 20, again.leo))] == values[:again.leo]
    again.close()

