"""Measured write rates: two readings of the partitions' logs a known time apart.

Each reading takes the log start and end offsets of every partition (ListOffsets at its leader;
the end a client is told is the high watermark) and the size of its leader replica
(DescribeLogDirs: the batches as stored, headers and record framing included, not the index
files). Bytes per second come from the size growth; a size that shrank between the readings
(retention deleted a segment) is rebuilt from the offsets' growth times the bytes per record of
what the log still holds (its size over its end minus its start offset). A cluster without
ListOffsets is read from sizes alone, with a one-line note. The window is in cluster seconds: the caller's clock
and sleeper follow the cluster's time scale, so an accelerated sandbox measures what Kafka would.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import TopicPartition, WriteRates
from kreassign.cluster.units import format_duration

OFFSETS_MISSING = "ListOffsets is not available on this cluster: write rates come from log sizes alone"


@dataclass(frozen=True)
class Reading:
    """One look at the logs: when (cluster seconds), leader sizes, log end and start offsets."""

    at: float
    sizes: Mapping[TopicPartition, int]
    offsets: Mapping[TopicPartition, int] | None
    starts: Mapping[TopicPartition, int] | None = None
    """log start offsets (0 where unknown: nothing deleted)"""


def rates_between(first: Reading, second: Reading) -> dict[TopicPartition, float]:
    """Bytes per second written to each partition between two readings (pure).

    Partitions missing from either reading get no rate; growth below zero that offsets cannot
    explain counts as no writes."""
    window = second.at - first.at
    if window <= 0:
        raise InputError("the two readings of a write-rate sample must be taken at different times")
    out: dict[TopicPartition, float] = {}
    for tp, size in second.sizes.items():
        before = first.sizes.get(tp)
        if before is None:
            continue
        grown = size - before
        if grown < 0 and first.offsets is not None and second.offsets is not None:
            records = second.offsets.get(tp, 0) - first.offsets.get(tp, 0)
            held = second.offsets.get(tp, 0) - (second.starts or {}).get(tp, 0)
            grown = records * size / held if records > 0 and held > 0 else 0
        out[tp] = max(float(grown), 0.0) / window
    return out


def sampled_rates(first: Reading, second: Reading, notes: Sequence[str | None],
                  measured_at: str | None) -> tuple[dict[TopicPartition, float], WriteRates]:
    """The rates and how they were measured, for `ClusterState.write_rates`."""
    note = next((n for n in notes if n), None)
    method = "offsets+sizes" if first.offsets is not None and second.offsets is not None else "sizes"
    return rates_between(first, second), WriteRates("measured", window_s=round(second.at - first.at, 6),
                                                     method=method, measured_at=measured_at, note=note)


UNKNOWN_RATES = ("write rates unknown, taken as 0: the ETA is optimistic if the partitions take writes "
                 "(measure them: --bootstrap-server with --sample, or a snapshot taken that way)")


def rates_to_dict(origin: WriteRates | None) -> dict[str, object]:
    """The `write_rates` object of every JSON answer that carries an ETA."""
    if origin is None:
        return {"known": False, "source": None, "window_s": None, "method": None, "measured_at": None,
                "note": UNKNOWN_RATES}
    return {"known": True, **origin.to_dict()}


def rates_line(origin: WriteRates | None) -> str:
    """One line saying what the ETA assumed about writes."""
    if origin is None:
        return UNKNOWN_RATES[0].upper() + UNKNOWN_RATES[1:] + "."
    if origin.source == "given":
        return "Write rates: as given in the snapshot."
    how = {"offsets+sizes": "log end offsets and sizes", "sizes": "log sizes"}.get(origin.method or "", "the logs")
    window = f" over {format_duration(origin.window_s)}" if origin.window_s else ""
    note = f" ({origin.note})" if origin.note else ""
    return f"Write rates: measured{window} from {how}{note}."
