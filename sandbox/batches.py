"""Produced record sets, read with kafka-python's record classes (`kafka.record`).

A Produce request carries one or more v2 record batches per partition. The leader checks each
batch (magic 2, length, CRC) and learns what its log needs: offsets, timestamps and the
idempotent producer's id, epoch and sequence range. Assigning offsets rewrites only the base
offset and the partition leader epoch, which sit outside the CRC (KIP-98 batch layout), so the
client's bytes are stored as sent, like Kafka does without recompression.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch

from kreassign.sandbox import codes
from kreassign.sandbox.errors import InvalidRecords

BATCH_OVERHEAD = 61  # v2 header size: the smallest valid batch
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH_AT = 12
_LEADER_EPOCH = struct.Struct(">i")
_LENGTH = struct.Struct(">qi")


@dataclass(frozen=True)
class BatchHeader:
    """What the log keeps about one produced batch (offsets relative to the batch)."""

    start: int                # byte offset of the batch in the request's record set
    size: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool

    @property
    def count(self) -> int:
        return self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_batches(data: bytes) -> list[BatchHeader]:
    """Check a produced record set and return its batch headers.

    Raises:
        InvalidRecords: not v2 batches (UNSUPPORTED_FOR_MESSAGE_FORMAT), a truncated or
            oversized length, a CRC mismatch, or an empty set (CORRUPT_MESSAGE / INVALID_RECORD).
    """
    if not data:
        raise InvalidRecords(codes.INVALID_RECORD, "The record set is empty")
    out: list[BatchHeader] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < BATCH_OVERHEAD:
            raise InvalidRecords(codes.CORRUPT_MESSAGE, "Truncated record batch header")
        _, length = _LENGTH.unpack_from(data, pos)
        size = length + 12
        if length < BATCH_OVERHEAD - 12 or pos + size > len(data):
            raise InvalidRecords(codes.CORRUPT_MESSAGE, f"Record batch length {length} does not fit the record set")
        if data[pos + 16] != 2:
            raise InvalidRecords(codes.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                                 f"Record batch magic {data[pos + 16]} is not supported (only v2)")
        batch = DefaultRecordBatch(memoryview(data)[pos:pos + size])
        if not batch.validate_crc():
            raise InvalidRecords(codes.CORRUPT_MESSAGE, "Record batch CRC mismatch")
        if batch.records_count != batch.last_offset_delta + 1 or batch.last_offset_delta < 0:
            raise InvalidRecords(codes.INVALID_RECORD, "Record count does not match the last offset delta")
        out.append(BatchHeader(pos, size, batch.last_offset_delta, batch.max_timestamp, batch.producer_id,
                               batch.producer_epoch, batch.base_sequence, batch.is_transactional))
        pos += size
    return out


def stamp(data: bytes, headers: list[BatchHeader], base_offset: int, leader_epoch: int) -> bytearray:
    """A copy of the record set with each batch's base offset and leader epoch assigned."""
    out = bytearray(data)
    offset = base_offset
    for h in headers:
        _BASE_OFFSET.pack_into(out, h.start, offset)
        _LEADER_EPOCH.pack_into(out, h.start + _LEADER_EPOCH_AT, leader_epoch)
        offset += h.count
    return out

