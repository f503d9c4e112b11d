"""Cluster snapshot files: kreassign's own versioned format, JSON for people, Parquet for big ones.

The format is described field by field in docs/snapshot-format.md. Reading is columnar: the
partitions of a JSON snapshot written by kreassign (one partition per line) are parsed by
pyarrow's multi-threaded JSON reader, a Parquet snapshot's by pyarrow directly, and every check
runs on numpy arrays. A JSON file laid out differently (pretty-printed by jq, edited by hand) or
one with a mistake takes the exact path, a plain `json` parse that names the first bad field.
"""
from __future__ import annotations

import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from kreassign.cluster.errors import JAVA_LONG_MAX, InputError, clip
from kreassign.cluster.files import SNAPSHOT_LIMIT, read_bytes
from kreassign.cluster.model import NO_LEADER, ClusterState
from kreassign.cluster.snapshot_checks import first_missing, first_repeat, is_member, row_of
from kreassign.cluster.snapshot_header import (
    BROKER_KEYS,
    FORMAT_NAME,
    FORMAT_VERSION,
    INT32_MAX,
    Header,
    fail,
    is_int,
    parse_header,
    parse_time,
    show,
)

PARQUET_METADATA_KEY = b"kreassign.snapshot"
_PARTITIONS_MARKER = b'\n"partitions":[\n'
_SENTINEL = "\u0000kreassign: partitions read separately"

SnapshotFormat = Literal["json", "parquet"]


# ---- public API ------------------------------------------------------------------------------
def read_snapshot(path: str | os.PathLike[str]) -> ClusterState:
    """Read a JSON or Parquet snapshot (told apart by content, not by name).

    Raises:
        InputError: the file is missing, unreadable, or any field is malformed or inconsistent;
            the message names the file, the field and the row.
    """
    source = os.fspath(path)
    try:
        data = read_bytes(source, limit=SNAPSHOT_LIMIT)
    except FileNotFoundError:
        raise InputError(f"snapshot file {clip(source)} does not exist") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read snapshot file {clip(source)}: {getattr(exc, 'strerror', None) or exc}") from None
    if data[:4] == b"PAR1":
        return _read_parquet(data, source)
    return _read_json(data, source)


def write_snapshot(
    state: ClusterState,
    path: str | os.PathLike[str],
    *,
    format: SnapshotFormat | None = None,
) -> None:
    """Write `state` as a snapshot; the format comes from `format` or the `.json`/`.parquet` suffix.

    The file is written next to its final name and renamed, so readers never see half a file.

    Raises:
        InputError: the format cannot be told from the name, or the file cannot be written.
    """
    target = Path(path)
    fmt = format or {".json": "json", ".parquet": "parquet"}.get(target.suffix.lower())
    if fmt not in ("json", "parquet"):
        raise InputError(f"cannot tell the snapshot format of {target.name!r}: name it *.json or "
                         "*.parquet, or choose the format explicitly")
    tmp = target.with_name(target.name + ".tmp")
    try:
        if fmt == "json":
            tmp.write_bytes(_json_bytes(state))
        else:
            _write_parquet(state, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write snapshot {target}: {exc.strerror or exc}") from None


def snapshot_to_dict(state: ClusterState) -> dict[str, Any]:
    """The snapshot as plain JSON-ready data (one dict per partition: for small clusters)."""
    doc = _header_dict(state)
    doc["partitions"] = [
        {"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas),
         "leader": p.leader, "isr": list(p.isr), "size_bytes": p.size_bytes,
         "produce_bps": p.produce_bps, "consume_bps": p.consume_bps}
        for p in state.iter_partitions()
    ]
    order = ["format", "version", "cluster_id", "captured_at", "write_rates", "brokers", "partitions",
             "reassignments", "throttles"]
    return {key: doc[key] for key in order}


def snapshot_from_dict(doc: Any, *, source: str = "snapshot") -> ClusterState:
    """Validate parsed snapshot data and build the state; `source` prefixes every message.

    Raises:
        InputError: the first malformed or inconsistent field, named with its place.
    """
    header = parse_header(doc, source)
    if "partitions" not in doc:
        fail(source, "partitions", "is missing: a snapshot lists its partitions, even if none")
    return _build_state(_columns_from_rows(doc["partitions"], source), header, source)


# ---- partitions as columns -------------------------------------------------------------------
@dataclass
class _Columns:
    """Partition columns in file order; topic names are codes into `names` (maybe with repeats)."""

    names: list[str]
    codes: np.ndarray
    partition: np.ndarray
    replica_offsets: np.ndarray
    replica_ids: np.ndarray
    leader: np.ndarray | None
    isr_offsets: np.ndarray | None
    isr_ids: np.ndarray | None
    size_bytes: np.ndarray | None
    produce_bps: np.ndarray | None
    consume_bps: np.ndarray | None


def _columns_from_rows(rows: Any, source: str) -> _Columns:
    """The exact path: check each partition object's types, naming the first bad field."""
    if not isinstance(rows, list):
        fail(source, "partitions", f"must be a list of partition objects, got {show(rows)}")
    n = len(rows)
    code_of: dict[str, int] = {}
    codes = np.empty(n, dtype=np.int64)
    partition = np.empty(n, dtype=np.int64)
    leader = np.empty(n, dtype=np.int64)
    size = np.zeros(n, dtype=np.int64)
    rates = np.zeros((2, n), dtype=np.float64)
    replicas: list[int] = []
    isr: list[int] = []
    roff = np.zeros(n + 1, dtype=np.int64)
    ioff = np.zeros(n + 1, dtype=np.int64)
    for i, row in enumerate(rows):
        where = f"partitions[{i}]"
        if not isinstance(row, dict):
            fail(source, where, "must be an object like {\"topic\": \"foo\", \"partition\": 0, "
                  f"\"replicas\": [1, 2, 3]}}, got {show(row)}")
        for key in ("topic", "partition", "replicas"):
            if key not in row:
                fail(source, where, f"has no \"{key}\"")
        topic = row["topic"]
        if not isinstance(topic, str):
            fail(source, f"{where}.topic", f"must be a topic name, got {show(topic)}")
        codes[i] = code_of.setdefault(topic, len(code_of))
        if not is_int(row["partition"]):
            fail(source, f"{where}.partition", f"must be a partition number, got {show(row['partition'])}")
        partition[i] = row["partition"]
        reps = row["replicas"]
        if not isinstance(reps, list) or not all(is_int(r) for r in reps):
            fail(source, f"{where}.replicas", f"must be a list of broker ids, got {show(reps)}")
        replicas.extend(reps)
        roff[i + 1] = len(replicas)
        lead = row.get("leader", reps[0] if reps else None)
        if lead is not None and not is_int(lead):
            fail(source, f"{where}.leader", f"must be a broker id or null, got {show(lead)}")
        leader[i] = NO_LEADER if lead is None else lead
        in_sync = row.get("isr")
        if in_sync is None:
            in_sync = reps
        elif not isinstance(in_sync, list) or not all(is_int(r) for r in in_sync):
            fail(source, f"{where}.isr", f"must be a list of broker ids or null, got {show(in_sync)}")
        isr.extend(in_sync)
        ioff[i + 1] = len(isr)
        value = row.get("size_bytes")
        if value is not None:
            if not is_int(value):
                fail(source, f"{where}.size_bytes", f"must be a whole number of bytes, got {show(value)}")
            size[i] = value
        for k, key in enumerate(("produce_bps", "consume_bps")):
            value = row.get(key)
            if value is not None:
                if type(value) not in (int, float) or (type(value) is int and abs(value) > JAVA_LONG_MAX) or (
                        not math.isfinite(value)):
                    fail(source, f"{where}.{key}", f"must be a number of bytes per second, got {show(value)}")
                rates[k, i] = value
    return _Columns(
        names=list(code_of), codes=codes, partition=partition, replica_offsets=roff,
        replica_ids=np.array(replicas, dtype=np.int64), leader=leader, isr_offsets=ioff,
        isr_ids=np.array(isr, dtype=np.int64), size_bytes=size, produce_bps=rates[0],
        consume_bps=rates[1],
    )


def _columns_from_table(table: Any, source: str) -> _Columns:
    """Columns from a pyarrow table (Parquet, or the JSON fast path), checking types and nulls."""
    import pyarrow as pa

    present = set(table.column_names)
    for key in ("topic", "partition", "replicas"):
        if key not in present:
            fail(source, "partitions", f"have no \"{key}\" column")

    def column(key: str) -> Any:
        col = table.column(key).combine_chunks()
        if col.null_count:
            first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            fail(source, f"partitions[{first}].{key}", "is missing")
        return col

    def ints(key: str) -> np.ndarray:
        col = column(key)
        if not pa.types.is_integer(col.type):
            fail(source, f"partitions.{key}", f"must hold whole numbers, not {col.type}")
        values: np.ndarray = col.to_numpy().astype(np.int64, copy=False)
        return values

    def floats(key: str) -> np.ndarray | None:
        if key not in present:
            return None
        col = column(key)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            fail(source, f"partitions.{key}", f"must hold numbers, not {col.type}")
        values: np.ndarray = col.to_numpy().astype(np.float64, copy=False)
        return values

    def ragged(col: Any, key: str) -> tuple[np.ndarray, np.ndarray]:
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)) or not \
                pa.types.is_integer(col.type.value_type):
            fail(source, f"partitions.{key}", f"must hold lists of broker ids, not {col.type}")
        values = col.flatten()
        if values.null_count:
            offsets = col.offsets.to_numpy()
            bad = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            row = int(np.searchsorted(offsets - offsets[0], bad, side="right") - 1)
            fail(source, f"partitions[{row}].{key}", "must be a list of broker ids, not contain null")
        offsets = col.offsets.to_numpy().astype(np.int64)
        return offsets - offsets[0], values.to_numpy().astype(np.int64, copy=False)

    topic = column("topic")
    if not pa.types.is_dictionary(topic.type):
        if not (pa.types.is_string(topic.type) or pa.types.is_large_string(topic.type)):
            fail(source, "partitions.topic", f"must hold topic names, not {topic.type}")
        topic = topic.dictionary_encode()
    roff, rids = ragged(column("replicas"), "replicas")
    leader = None
    if "leader" in present:
        col = table.column("leader").combine_chunks()
        if not pa.types.is_integer(col.type):
            fail(source, "partitions.leader", f"must hold broker ids, not {col.type}")
        leader = col.fill_null(NO_LEADER).to_numpy().astype(np.int64)  # null: no leader
    ioff = iids = None
    if "isr" in present:
        col = table.column("isr").combine_chunks()
        ioff, iids = ragged(col, "isr")
        if col.null_count:  # a null ISR means "all replicas in sync"
            null = col.is_null().to_numpy(zero_copy_only=False)
            ioff, iids = _merge_ragged(null, (roff, rids), (ioff, iids))
    try:
        names = [str(x) for x in topic.dictionary.to_pylist()]
    except UnicodeDecodeError as exc:
        fail(source, "partitions.topic", f"holds a topic name that is not UTF-8 text ({exc.reason} at byte {exc.start})")
    return _Columns(
        names=names,
        codes=topic.indices.to_numpy().astype(np.int64), partition=ints("partition"),
        replica_offsets=roff, replica_ids=rids, leader=leader, isr_offsets=ioff, isr_ids=iids,
        size_bytes=ints("size_bytes") if "size_bytes" in present else None,
        produce_bps=floats("produce_bps"), consume_bps=floats("consume_bps"),
    )


def _gather_ragged(starts: np.ndarray, lengths: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows `values[starts[i]:starts[i]+lengths[i]]` as a new ragged array, without a Python loop."""
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64)
    return offsets, values[index]


def _merge_ragged(take_first: np.ndarray, first: tuple[np.ndarray, np.ndarray],
                  second: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise choice between two ragged arrays: `first` where `take_first`, else `second`."""
    (off1, ids1), (off2, ids2) = first, second
    starts = np.where(take_first, off1[:-1], off2[:-1] + len(ids1))
    lengths = np.where(take_first, np.diff(off1), np.diff(off2))
    return _gather_ragged(starts, lengths, np.concatenate([ids1, ids2]))


# ---- checks and construction -----------------------------------------------------------------
def _build_state(cols: _Columns, header: Header, source: str) -> ClusterState:
    """Check the columns against each other and the brokers, then sort them into a ClusterState."""
    # Topic names may repeat in a Parquet dictionary: map each code to a sorted, unique name.
    unique = sorted(set(cols.names))
    rank = {name: i for i, name in enumerate(unique)}
    remap = np.array([rank[name] for name in cols.names], dtype=np.int64)
    tidx = remap[cols.codes] if len(cols.codes) else cols.codes
    n = len(tidx)
    part = cols.partition
    roff, rids = cols.replica_offsets, cols.replica_ids
    rf = np.diff(roff)

    def label(row: int) -> str:
        return f"partitions[{row}] ({unique[tidx[row]]}-{part[row]})"

    if "" in rank and np.any(tidx == rank[""]):
        fail(source, f"partitions[{int(np.argmax(tidx == rank['']))}].topic", "must not be empty")
    bad = np.flatnonzero((part < 0) | (part > INT32_MAX))
    if len(bad):
        fail(source, f"partitions[{bad[0]}].partition",
              f"must be between 0 and {INT32_MAX}, got {part[bad[0]]}")
    bad = np.flatnonzero(rf == 0)
    if len(bad):
        fail(source, label(bad[0]), "has no replicas: list at least one broker id")
    broker_ids = np.array(sorted(b.id for b in header.brokers), dtype=np.int64)
    known = is_member(rids, broker_ids)
    if not known.all():
        j = int(np.argmin(known))
        row = row_of(roff, j)
        fail(source, label(row), f"names broker {rids[j]} in its replicas, which is not in the "
              "brokers list (list every broker that holds a replica, with \"host\": null if it is down)")
    j = first_repeat(roff, rids)
    if j >= 0:
        fail(source, label(row_of(roff, j)), f"lists broker {rids[j]} twice in its replicas")
    leader = cols.leader
    if leader is None:
        leader = rids[roff[:-1]]
    led = np.flatnonzero(leader != NO_LEADER)
    j = first_missing(roff, rids, led, leader[led])
    if j >= 0:
        row = int(led[j])
        fail(source, label(row), f"has leader {leader[row]}, which is not one of its replicas "
              f"{rids[roff[row]:roff[row + 1]].tolist()}")
    ioff, iids = cols.isr_offsets, cols.isr_ids
    if ioff is None or iids is None:
        ioff, iids = roff, rids
    elif not (np.array_equal(ioff, roff) and np.array_equal(iids, rids)):
        isr_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(ioff))
        j = first_missing(roff, rids, isr_rows, iids)
        if j >= 0:
            row = int(isr_rows[j])
            fail(source, label(row), f"has broker {iids[j]} in its isr, which is not one of its "
                  f"replicas {rids[roff[row]:roff[row + 1]].tolist()}")
        j = first_repeat(ioff, iids)
        if j >= 0:
            fail(source, label(row_of(ioff, j)), f"lists broker {iids[j]} twice in its isr")
    size = np.zeros(n, dtype=np.int64) if cols.size_bytes is None else cols.size_bytes
    bad = np.flatnonzero(size < 0)
    if len(bad):
        fail(source, label(bad[0]), f"has size_bytes {size[bad[0]]}: sizes cannot be negative")
    rates = {}
    for key, values in (("produce_bps", cols.produce_bps), ("consume_bps", cols.consume_bps)):
        values = np.zeros(n) if values is None else values
        bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
        if len(bad):
            fail(source, label(bad[0]), f"has {key} {values[bad[0]]}: rates are numbers >= 0")
        rates[key] = values

    # Sort by (topic, partition) unless the file is already in order, as ours always are.
    ordered = n < 2 or bool(np.all((tidx[1:] > tidx[:-1])
                                   | ((tidx[1:] == tidx[:-1]) & (part[1:] > part[:-1]))))
    if not ordered:
        order = np.lexsort((part, tidx))
        same = (tidx[order][1:] == tidx[order][:-1]) & (part[order][1:] == part[order][:-1])
        if same.any():
            i = int(np.argmax(same))
            first, second = sorted((int(order[i]), int(order[i + 1])))
            fail(source, f"partitions[{second}]", f"repeats partition {unique[tidx[first]]}-"
                  f"{part[first]} (already at partitions[{first}])")
        tidx, part, leader, size = tidx[order], part[order], leader[order], size[order]
        rates = {k: v[order] for k, v in rates.items()}
        roff, rids = _gather_ragged(roff[:-1][order], rf[order], rids)
        ioff, iids = _gather_ragged(ioff[:-1][order], np.diff(ioff)[order], iids)

    state = ClusterState(
        brokers=header.brokers, topics=unique, topic_index=tidx.astype(np.int32),
        partition=part.astype(np.int32), replica_offsets=roff.astype(np.int64),
        replica_ids=rids.astype(np.int32), leader=leader.astype(np.int32),
        isr_offsets=ioff.astype(np.int64), isr_ids=iids.astype(np.int32), size_bytes=size,
        produce_bps=rates["produce_bps"].astype(np.float64),
        consume_bps=rates["consume_bps"].astype(np.float64),
        throttles=header.throttles, cluster_id=header.cluster_id,
        captured_at=header.captured_at, write_rates=header.write_rates,
    )
    moves = dict(header.reassignments)
    if moves:
        tps = list(moves)
        found = state.find_rows([tp.topic for tp in tps], [tp.partition for tp in tps])
        if (found < 0).any():
            i = int(np.argmax(found < 0))
            fail(source, f"reassignments[{i}] ({tps[i]})", "is for a partition that is not in "
                  "partitions")
        state.reassignments.update(moves)
    return state


# ---- JSON ------------------------------------------------------------------------------------
def _read_json(data: bytes, source: str) -> ClusterState:
    fast = _read_json_fast(data, source)
    if fast is not None:
        return fast
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source} is not UTF-8 text (bad byte at offset {exc.start})") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        hint = " (is it a kreassign snapshot?)" if exc.pos == 0 else ""
        raise InputError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}{hint}") from None
    except RecursionError:
        raise InputError(f"{source} is not a kreassign snapshot: its JSON is nested too deeply") from None
    except ValueError as exc:  # numbers too long for int(), or NaN/Infinity
        raise InputError(f"{source} is not valid JSON: {exc}") from None
    return snapshot_from_dict(doc, source=source)


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


def _read_json_fast(data: bytes, source: str) -> ClusterState | None:
    """Our own layout, with pyarrow: None whenever anything differs, so the exact path decides."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    start = data.find(_PARTITIONS_MARKER)
    if start < 0:
        return None
    body_start = start + len(_PARTITIONS_MARKER)
    # Our writer puts the reassignments right after the partitions; searching from the end
    # skips the partitions. Any other layout fails one of the checks below.
    end = data.rfind(b'\n],\n"reassignments":[')
    if end < body_start - 1:
        return None
    # A raw newline cannot occur inside a JSON string, so these cuts fall between tokens.
    rest = data[:start + 1] + b'"partitions":' + json.dumps(_SENTINEL).encode() + data[end + 2:]
    try:
        head = json.loads(rest.decode("utf-8-sig"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(head, dict) or head.get("partitions") != _SENTINEL:
        return None
    header = parse_header(head, source)
    body = data[body_start:end]
    if not body:
        empty = pa.table({"topic": pa.array([], pa.string()), "partition": pa.array([], pa.int64()),
                          "replicas": pa.array([], pa.list_(pa.int64()))})
        return _build_state(_columns_from_table(empty, source), header, source)
    lines = body.replace(b"},\n{", b"}\n{")
    try:
        table = pa_json.read_json(
            io.BytesIO(lines + b"\n"),
            read_options=pa_json.ReadOptions(block_size=8 << 20),
            parse_options=pa_json.ParseOptions(explicit_schema=_json_schema(),
                                               unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != (len(body) - len(lines)) + 1:
        return None
    for key in ("topic", "partition", "replicas", "leader"):
        if table.column(key).null_count:
            return None
    for key in ("replicas", "isr"):
        if table.column(key).combine_chunks().flatten().null_count:
            return None
    for key in ("produce_bps", "consume_bps"):
        values = table.column(key).combine_chunks().fill_null(0).to_numpy()
        if not np.isfinite(values).all():
            return None
    table = table.set_column(table.schema.get_field_index("size_bytes"), "size_bytes",
                             table.column("size_bytes").fill_null(0))
    for key in ("produce_bps", "consume_bps"):
        table = table.set_column(table.schema.get_field_index(key), key,
                                 table.column(key).fill_null(0.0))
    return _build_state(_columns_from_table(table, source), header, source)


def _json_schema() -> Any:
    import pyarrow as pa

    ids = pa.list_(pa.int64())
    return pa.schema([("topic", pa.string()), ("partition", pa.int64()), ("replicas", ids),
                      ("leader", pa.int64()), ("isr", ids), ("size_bytes", pa.int64()),
                      ("produce_bps", pa.float64()), ("consume_bps", pa.float64())])


def _header_dict(state: ClusterState) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "cluster_id": state.cluster_id,
        "captured_at": None if state.captured_at is None else parse_time(state.captured_at, "state"),
        "write_rates": None if state.write_rates is None else state.write_rates.to_dict(),
        "brokers": [{key: getattr(b, key) for key in BROKER_KEYS} for b in state.brokers],
        "reassignments": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(r.replicas),
             "adding": list(r.adding), "removing": list(r.removing),
             **({"copied": [{"broker": b, "bytes": n} for b, n in r.copied]} if r.copied else {})}
            for tp, r in sorted(state.reassignments.items())
        ],
        "throttles": {
            "broker": {str(b): dict(sorted(c.items())) for b, c in sorted(state.throttles.broker.items())},
            "topic": {t: dict(sorted(c.items())) for t, c in sorted(state.throttles.topic.items())},
        },
    }


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _json_bytes(state: ClusterState) -> bytes:
    """One record per line, so people can read and grep it and the fast reader can split it."""
    head = _header_dict(state)
    out = [f'{{"format":{_compact(FORMAT_NAME)},"version":{FORMAT_VERSION},',
           f'"cluster_id":{_compact(head["cluster_id"])},"captured_at":{_compact(head["captured_at"])},',
           f'"write_rates":{_compact(head["write_rates"])},',
           '"brokers":[', ",\n".join(_compact(b) for b in head["brokers"]), "],",
           '"partitions":[']
    if len(state):
        out.append(",\n".join(_partition_lines(state)))
    out += ["],", '"reassignments":[', ",\n".join(_compact(r) for r in head["reassignments"]), "],",
            f'"throttles":{_compact(head["throttles"])}', "}"]
    return "\n".join(line for line in out if line).encode("utf-8")


def _partition_lines(state: ClusterState) -> list[str]:
    topic_json = [_compact(t) for t in state.topics]
    topics = [topic_json[i] for i in state.topic_index.tolist()]
    roff, rids = state.replica_offsets.tolist(), state.replica_ids.tolist()
    ioff, iids = state.isr_offsets.tolist(), state.isr_ids.tolist()
    leaders = ["null" if x == NO_LEADER else str(x) for x in state.leader.tolist()]
    sizes = state.size_bytes.tolist()
    produce, consume = state.produce_bps.tolist(), state.consume_bps.tolist()
    return [
        f'{{"topic":{topics[i]},"partition":{p},"replicas":[{",".join(map(str, rids[roff[i]:roff[i + 1]]))}],'
        f'"leader":{leaders[i]},"isr":[{",".join(map(str, iids[ioff[i]:ioff[i + 1]]))}],'
        f'"size_bytes":{sizes[i]},"produce_bps":{produce[i]!r},"consume_bps":{consume[i]!r}}}'
        for i, p in enumerate(state.partition.tolist())
    ]


# ---- Parquet ---------------------------------------------------------------------------------
def _write_parquet(state: ClusterState, path: Path) -> None:
    """One file: a row per partition, the rest (brokers, moves, throttles) as JSON metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def ids(offsets: np.ndarray, values: np.ndarray) -> Any:
        if offsets[-1] > INT32_MAX:
            return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, pa.int32()))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.int32()))

    table = pa.table({
        "topic": pa.DictionaryArray.from_arrays(pa.array(state.topic_index, pa.int32()),
                                                pa.array(list(state.topics), pa.string())),
        "partition": pa.array(state.partition, pa.int32()),
        "replicas": ids(state.replica_offsets, state.replica_ids),
        "leader": pa.array(state.leader, pa.int32(), mask=state.leader == NO_LEADER),
        "isr": ids(state.isr_offsets, state.isr_ids),
        "size_bytes": pa.array(state.size_bytes, pa.int64()),
        "produce_bps": pa.array(state.produce_bps, pa.float64()),
        "consume_bps": pa.array(state.consume_bps, pa.float64()),
    })
    table = table.replace_schema_metadata({PARQUET_METADATA_KEY: _compact(_header_dict(state)).encode()})
    pq.write_table(table, path, compression="zstd")


def _read_parquet(data: bytes, source: str) -> ClusterState:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
        table.validate(full=True)  # a damaged file can hold bad offsets or invalid UTF-8
        table.column_names  # noqa: B018 (decodes the names, which may be damaged too)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{source} is not a readable Parquet file: {exc}") from None
    raw = (table.schema.metadata or {}).get(PARQUET_METADATA_KEY)
    if raw is None:
        raise InputError(f"{source} is a Parquet file but not a kreassign snapshot (it has no "
                         f"{PARQUET_METADATA_KEY.decode()} metadata)")
    try:
        head = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise InputError(f"{source}: its {PARQUET_METADATA_KEY.decode()} metadata is not valid JSON") from None
    header = parse_header(head, source)
    return _build_state(_columns_from_table(table, source), header, source)
