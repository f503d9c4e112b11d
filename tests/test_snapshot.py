"""Snapshot files: round trips in both formats, the fast and exact JSON paths, and every refusal."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.cluster.model import (
    Broker,
    ClusterState,
    PartitionInfo,
    Reassignment,
    ThrottleConfigs,
    TopicPartition,
    WriteRates,
)
from kreassign.cluster.snapshot import (
    PARQUET_METADATA_KEY,
    _read_json_fast,
    read_snapshot,
    snapshot_from_dict,
    snapshot_to_dict,
    write_snapshot,
)


def sample_state() -> ClusterState:
    brokers = [Broker(1, rack="a", host="k1", port=9092, network_in_bps=1.25e8,
                      network_out_bps=1e8, disk_bytes=10**12),
               Broker(2, rack="b"), Broker(3), Broker(4, rack="é/ü", host="k4")]
    # Built from columns: from_partitions cannot express "no leader" (leader=None means default).
    return ClusterState.from_arrays(
        brokers=brokers,
        topic=["orders", "orders", "clicks\u00e9", "a"],
        partition=[1, 0, 0, 10],
        replica_offsets=np.array([0, 3, 6, 7, 11]),
        replica_ids=np.array([2, 3, 1, 1, 2, 3, 4, 1, 2, 4, 3]),
        leader=[3, 1, -1, 4],
        isr_offsets=np.array([0, 2, 5, 6, 7]),
        isr_ids=np.array([3, 2, 1, 2, 3, 4, 4]),
        size_bytes=[5_000, 7 * 2**40, 0, 0],
        produce_bps=[1.5, 0.0, 0.0, 0.1],
        consume_bps=[3.0, 0.0, 0.0, 0.0],
        reassignments={TopicPartition("a", 10): Reassignment((1, 2, 4, 3), adding=(4,), removing=(3,),
                                                             copied=((4, 1_250),))},
        throttles=ThrottleConfigs(
            broker={1: {"leader.replication.throttled.rate": "1000000"}},
            topic={"a": {"leader.replication.throttled.replicas": "10:1,10:2,10:3"}},
        ),
        cluster_id="Mk3OEYBSD34fcwNTJENDM2Qk", captured_at="2024-05-01T12:00:00Z",
    )


def assert_same(a: ClusterState, b: ClusterState) -> None:
    assert snapshot_to_dict(a) == snapshot_to_dict(b)
    for name in ("topic_index", "partition", "replica_offsets", "replica_ids", "leader",
                 "isr_offsets", "isr_ids", "size_bytes", "produce_bps", "consume_bps"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert getattr(a, name).dtype == getattr(b, name).dtype, name


def ours(doc: dict[str, Any]) -> str:
    """A document in the writer's layout (one partition per line), which the fast path reads."""
    head = {k: v for k, v in doc.items() if k != "partitions"}
    rows = ",\n".join(json.dumps(with_leader(p), separators=(",", ":")) for p in doc["partitions"])
    rest = {k: head.pop(k) for k in ("reassignments", "throttles") if k in head}
    text = json.dumps(head)[:-1] + ',\n"partitions":[\n' + rows + '\n],\n"reassignments":'
    text += json.dumps(rest.get("reassignments", [])) + ',"throttles":'
    return text + json.dumps(rest.get("throttles", {})) + "}"


def with_leader(row: Any) -> Any:
    """The writer always writes the leader; the fast path leaves files without one to the exact path."""
    if isinstance(row, dict) and "leader" not in row and isinstance(row.get("replicas"), list) \
            and row["replicas"]:
        return {**row, "leader": row["replicas"][0]}
    return row


def pretty(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2)


LAYOUTS: dict[str, Callable[[dict[str, Any]], str]] = {"ours": ours, "pretty": pretty}


def write(tmp_path: Path, text: str, name: str = "snapshot.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- round trips -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["s.json", "s.parquet", "S.JSON"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    state = sample_state()
    write_snapshot(state, tmp_path / name)
    back = read_snapshot(tmp_path / name)
    assert_same(state, back)
    assert back.reassignments == state.reassignments
    assert back.leader_of(back.find_row("clicks\u00e9", 0)) is None
    assert back.isr(back.find_row("orders", 1)) == (3, 2)
    assert back.brokers[0] == Broker(1, "a", "k1", 9092, 1.25e8, 1e8, 10**12)
    assert not list(tmp_path.glob("*.tmp"))


def test_explicit_format_overrides_suffix(tmp_path: Path) -> None:
    write_snapshot(sample_state(), tmp_path / "snap.data", format="parquet")
    assert (tmp_path / "snap.data").read_bytes()[:4] == b"PAR1"
    assert_same(read_snapshot(tmp_path / "snap.data"), sample_state())


def test_empty_cluster_round_trips(tmp_path: Path) -> None:
    state = ClusterState.from_partitions([Broker(1)], [])
    for name in ("e.json", "e.parquet"):
        write_snapshot(state, tmp_path / name)
        back = read_snapshot(tmp_path / name)
        assert len(back) == 0 and back.broker_ids == (1,) and back.captured_at is None


def test_json_layout_is_one_record_per_line(tmp_path: Path) -> None:
    write_snapshot(sample_state(), tmp_path / "s.json")
    lines = (tmp_path / "s.json").read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"format":"kreassign-snapshot","version":2,'
    assert lines[1] == '"cluster_id":"Mk3OEYBSD34fcwNTJENDM2Qk","captured_at":"2024-05-01T12:00:00Z",'
    assert lines[2] == '"write_rates":null,'
    assert lines[lines.index('"partitions":[') + 1] == (
        '{"topic":"a","partition":10,"replicas":[1,2,4,3],"leader":4,"isr":[4],'
        '"size_bytes":0,"produce_bps":0.1,"consume_bps":0.0},')
    assert '{"topic":"clicksé","partition":0,"replicas":[4],"leader":null,"isr":[4],' \
           '"size_bytes":0,"produce_bps":0.0,"consume_bps":0.0},' in lines


def test_fast_path_reads_our_layout_and_exact_path_agrees(tmp_path: Path) -> None:
    state = sample_state()
    state = state.with_assignment({TopicPartition("clicks\u00e9", 0): (4,)})  # give it a leader
    write_snapshot(state, tmp_path / "s.json")
    data = (tmp_path / "s.json").read_bytes()
    fast = _read_json_fast(data, "s.json")
    assert fast is not None
    reformatted = write(tmp_path, pretty(json.loads(data)), "pretty.json")
    assert _read_json_fast(reformatted.read_bytes(), "pretty.json") is None
    assert_same(fast, read_snapshot(reformatted))
    assert_same(fast, state)


def test_unsorted_input_is_sorted(tmp_path: Path) -> None:
    doc = snapshot_to_dict(sample_state())
    doc["partitions"].reverse()
    for layout in LAYOUTS.values():
        assert_same(read_snapshot(write(tmp_path, layout(doc))), sample_state())


def minimal_doc() -> dict[str, Any]:
    return {"format": "kreassign-snapshot", "version": 1, "brokers": [{"id": 1}, {"id": 2}],
            "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 1]}]}


def test_hand_written_minimal_snapshot_uses_defaults(tmp_path: Path) -> None:
    state = read_snapshot(write(tmp_path, json.dumps(minimal_doc())))
    assert state.partition_info(0) == PartitionInfo("t", 0, (2, 1), leader=2, isr=(2, 1))
    assert state.cluster_id is None and state.reassignments == {} and state.throttles.is_empty()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_leader_and_isr_null_and_empty(tmp_path: Path, layout: str) -> None:
    doc = minimal_doc()
    doc["partitions"] = [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "leader": None, "isr": []},
        {"topic": "t", "partition": 1, "replicas": [1, 2], "leader": 2, "isr": None,
         "size_bytes": None, "produce_bps": 7},
    ]
    state = read_snapshot(write(tmp_path, LAYOUTS[layout](doc)))
    assert state.leader_of(0) is None and state.isr(0) == ()
    assert state.leader_of(1) == 2 and state.isr(1) == (1, 2)
    assert state.produce_bps.tolist() == [0.0, 7.0]


def test_captured_at_is_normalised_to_utc(tmp_path: Path) -> None:
    doc = minimal_doc() | {"captured_at": "2024-05-01T14:00:00.5+02:00"}
    assert read_snapshot(write(tmp_path, json.dumps(doc))).captured_at == "2024-05-01T12:00:00.500000Z"


def test_parquet_from_another_tool_with_plain_columns(tmp_path: Path) -> None:
    table = pa.table({"topic": ["b", "a"], "partition": pa.array([0, 3], pa.int64()),
                      "replicas": pa.array([[1], [2, 1]], pa.list_(pa.int64()))})
    header = {"format": "kreassign-snapshot", "version": 1, "brokers": [{"id": 1}, {"id": 2}]}
    table = table.replace_schema_metadata({PARQUET_METADATA_KEY: json.dumps(header)})
    pq.write_table(table, tmp_path / "x.parquet")
    state = read_snapshot(tmp_path / "x.parquet")
    assert [p.tp for p in state.iter_partitions()] == [TopicPartition("a", 3), TopicPartition("b", 0)]
    assert state.leader_of(0) == 2 and state.isr(0) == (2, 1)


def test_parquet_null_isr_means_all_replicas(tmp_path: Path) -> None:
    table = pa.table({"topic": ["a", "a"], "partition": [0, 1], "replicas": [[1, 2], [2, 1]],
                      "isr": pa.array([None, [2]], pa.list_(pa.int32())),
                      "leader": pa.array([None, 2], pa.int32())})
    header = {"format": "kreassign-snapshot", "version": 1, "brokers": [{"id": 1}, {"id": 2}]}
    pq.write_table(table.replace_schema_metadata({PARQUET_METADATA_KEY: json.dumps(header)}),
                   tmp_path / "x.parquet")
    state = read_snapshot(tmp_path / "x.parquet")
    assert state.isr(0) == (1, 2) and state.isr(1) == (2,)
    assert state.leader_of(0) is None and state.leader_of(1) == 2


# ---- refusals --------------------------------------------------------------------------------
def mutate(path: str, value: Any) -> dict[str, Any]:
    """minimal_doc() with `path` (dotted, list indexes as numbers) set, or deleted if value is DEL."""
    doc: Any = copy.deepcopy(minimal_doc())
    doc["partitions"] += [{"topic": "t", "partition": 1, "replicas": [1, 2]},
                          {"topic": "u", "partition": 0, "replicas": [1]}]
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    place: Any = int(last) if isinstance(node, list) else last
    if value is DEL:
        del node[place]
    else:
        node[place] = value
    return doc


DEL = object()

TYPE_ERRORS = [
    ("format", DEL, 'is not a kreassign snapshot: its "format" field should be "kreassign-snapshot", got null'),
    ("version", 7, "snapshot format version 7 is newer than this kreassign understands (2); upgrade kreassign"),
    ("version", "1", 'version must be a positive integer, got "1"'),
    ("brokers", DEL, "brokers must be a list of broker objects, got null"),
    ("brokers.0.id", -1, "brokers[0].id must be a broker id (0 or more), got -1"),
    ("brokers.1.id", 1, "brokers[1].id 1 is listed more than once"),
    ("brokers.0.port", "9092", 'brokers[0].port must be a TCP port or null, got "9092"'),
    ("brokers.1.network_in_bps", -5, "brokers[1].network_in_bps must be a number of bytes per second"),
    ("captured_at", "yesterday", "captured_at must be an ISO-8601 time with a zone"),
    ("captured_at", "2024-05-01T12:00:00", "captured_at must be an ISO-8601 time with a zone"),
    ("partitions", DEL, "partitions is missing"),
    ("partitions.1", [1], 'partitions[1] must be an object like {"topic": "foo"'),
    ("partitions.1.replicas", "1,2", 'partitions[1].replicas must be a list of broker ids, got "1,2"'),
    ("partitions.1.replicas", DEL, 'partitions[1] has no "replicas"'),
    ("partitions.1.replicas", [1, 2.0], "partitions[1].replicas must be a list of broker ids, got [1, 2.0]"),
    ("partitions.1.partition", 1.0, "partitions[1].partition must be a partition number, got 1.0"),
    ("partitions.1.topic", 5, "partitions[1].topic must be a topic name, got 5"),
    ("partitions.1.leader", "1", 'partitions[1].leader must be a broker id or null, got "1"'),
    ("partitions.1.isr", 1, "partitions[1].isr must be a list of broker ids or null, got 1"),
    ("partitions.1.size_bytes", 1.5, "partitions[1].size_bytes must be a whole number of bytes, got 1.5"),
    ("partitions.1.produce_bps", "fast", 'partitions[1].produce_bps must be a number of bytes per second, got "fast"'),
    ("throttles", {"broker": {"x": {}}}, 'throttles.broker["x"] must be keyed by a broker id'),
    ("throttles", {"topic": {"t": {"a": 1.5}}}, 'throttles.topic["t"] must map config names to string values'),
    ("throttles", [], "throttles must be an object like"),
]
CONSISTENCY_ERRORS = [
    ("partitions.1.topic", "", "partitions[1].topic must not be empty"),
    ("partitions.1.partition", -1, "partitions[1].partition must be between 0 and 2147483647, got -1"),
    ("partitions.1.partition", 2**31, "partitions[1].partition must be between 0 and 2147483647"),
    ("partitions.1.replicas", [], "partitions[1] (t-1) has no replicas"),
    ("partitions.1.replicas", [1, 7], "partitions[1] (t-1) names broker 7 in its replicas, which is not in the brokers list"),
    ("partitions.2.replicas", [1, -3], "partitions[2] (u-0) names broker -3 in its replicas"),
    ("partitions.1.replicas", [2, 1, 2], "partitions[1] (t-1) lists broker 2 twice in its replicas"),
    ("partitions.1.leader", 3, "partitions[1] (t-1) has leader 3, which is not one of its replicas [1, 2]"),
    ("partitions.1.isr", [1, 5], "partitions[1] (t-1) has broker 5 in its isr, which is not one of its replicas [1, 2]"),
    ("partitions.1.isr", [1, 1], "partitions[1] (t-1) lists broker 1 twice in its isr"),
    ("partitions.1.size_bytes", -1, "partitions[1] (t-1) has size_bytes -1: sizes cannot be negative"),
    ("partitions.1.consume_bps", -0.5, "partitions[1] (t-1) has consume_bps -0.5: rates are numbers >= 0"),
    ("partitions.1.partition", 0, "partitions[1] repeats partition t-0 (already at partitions[0])"),
    ("reassignments", [{"topic": "t", "partition": 9, "replicas": [1]}],
     "reassignments[0] (t-9) is for a partition that is not in partitions"),
    ("reassignments", [{"topic": "t", "partition": 0, "replicas": [1], "adding": [2]}],
     "reassignments[0] (t-0) adding names broker 2, which is not in its replicas [1]"),
    ("reassignments", [{"topic": "t", "partition": 0}], 'reassignments[0] has no "replicas"'),
    ("reassignments", [{"topic": "t", "partition": 0, "replicas": [1, 2], "adding": [2],
                        "copied": [{"broker": 1, "bytes": 5}]}],
     "reassignments[0] (t-0) copied names broker 1, which is not in its adding replicas [2]"),
    ("reassignments", [{"topic": "t", "partition": 0, "replicas": [1, 2], "adding": [2],
                        "copied": [{"broker": 2, "bytes": -5}]}],
     "reassignments[0].copied[0].bytes must be a size in bytes, got -5"),
]
ERRORS = TYPE_ERRORS + CONSISTENCY_ERRORS


@pytest.mark.parametrize(("layout", "path", "value", "message"), [
    (layout, *error) for layout in LAYOUTS for error in ERRORS
    if layout == "pretty" or error[:2] != ("partitions", DEL)
])
def test_malformed_field_gives_one_clear_error(tmp_path: Path, layout: str, path: str, value: Any,
                                               message: str) -> None:
    doc = mutate(path, value)
    file = write(tmp_path, LAYOUTS[layout](doc))
    with pytest.raises(InputError) as info:
        read_snapshot(file)
    text = str(info.value)
    assert text.startswith(str(file)), text
    assert message in text, text


@pytest.mark.parametrize(("path", "value", "message"), [e for e in CONSISTENCY_ERRORS if e[1] != []])
def test_consistency_errors_come_from_the_fast_path(path: str, value: Any, message: str) -> None:
    with pytest.raises(InputError) as info:
        _read_json_fast(ours(mutate(path, value)).encode(), "s.json")
    assert message in str(info.value)


@pytest.mark.parametrize(("path", "value", "message"), [e for e in ERRORS if "partitions" in e[0]
                                                          and "." in e[0]])
def test_same_errors_from_snapshot_from_dict(path: str, value: Any, message: str) -> None:
    with pytest.raises(InputError, match="^snap: ") as info:
        snapshot_from_dict(mutate(path, value), source="snap")
    assert message in str(info.value)


@pytest.mark.parametrize(("text", "message"), [
    ("", "is not valid JSON: Expecting value at line 1 column 1 (is it a kreassign snapshot?)"),
    ('{"format": "kreassign-snapshot",', "is not valid JSON: Expecting property name"),
    ("[1, 2]", "is not a kreassign snapshot: expected a JSON object, got [1, 2]"),
    ('{"format": "kreassign-snapshot", "version": NaN}', "is not valid JSON: NaN is not a JSON number"),
    ("[" * 50_000, "nested too deeply"),
])
def test_not_a_snapshot(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match="snapshot.json") as info:
        read_snapshot(write(tmp_path, text))
    assert message in str(info.value)


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_bytes(b'{"format": "\xff"}')
    with pytest.raises(InputError, match="is not UTF-8 text"):
        read_snapshot(tmp_path / "s.json")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_snapshot(tmp_path / "nope.json")
    with pytest.raises(InputError, match="cannot read snapshot file"):
        read_snapshot(tmp_path)


def test_parquet_refusals(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": [1]}), tmp_path / "plain.parquet")
    with pytest.raises(InputError, match="is a Parquet file but not a kreassign snapshot"):
        read_snapshot(tmp_path / "plain.parquet")
    header = json.dumps({"format": "kreassign-snapshot", "version": 3, "brokers": []})
    pq.write_table(pa.table({"x": [1]}).replace_schema_metadata({PARQUET_METADATA_KEY: header}),
                   tmp_path / "new.parquet")
    with pytest.raises(InputError, match=r"version 3 is newer than this kreassign understands \(2\)"):
        read_snapshot(tmp_path / "new.parquet")
    header = json.dumps({"format": "kreassign-snapshot", "version": 1, "brokers": [{"id": 1}]})
    bad = pa.table({"topic": ["a"], "partition": [0], "replicas": ["1,2"]})
    pq.write_table(bad.replace_schema_metadata({PARQUET_METADATA_KEY: header}), tmp_path / "b.parquet")
    with pytest.raises(InputError, match="partitions.replicas must hold lists of broker ids, not string"):
        read_snapshot(tmp_path / "b.parquet")
    nulls = pa.table({"topic": ["a", "a"], "partition": [0, 1],
                      "replicas": pa.array([[1], [1, None]], pa.list_(pa.int32()))})
    pq.write_table(nulls.replace_schema_metadata({PARQUET_METADATA_KEY: header}), tmp_path / "n.parquet")
    with pytest.raises(InputError, match=r"partitions\[1\].replicas must be a list of broker ids"):
        read_snapshot(tmp_path / "n.parquet")
    (tmp_path / "cut.parquet").write_bytes((tmp_path / "n.parquet").read_bytes()[:40])
    with pytest.raises(InputError, match="is not a readable Parquet file"):
        read_snapshot(tmp_path / "cut.parquet")


def test_write_refusals(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot tell the snapshot format of 'snap.txt'"):
        write_snapshot(sample_state(), tmp_path / "snap.txt")
    with pytest.raises(InputError, match="cannot write snapshot"):
        write_snapshot(sample_state(), tmp_path / "missing-dir" / "s.json")


# ---- properties ------------------------------------------------------------------------------
@st.composite
def states(draw: st.DrawFn) -> ClusterState:
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=6, unique=True))
    brokers = [Broker(i, rack=draw(st.none() | st.sampled_from(["a", "b"]))) for i in ids]
    keys = draw(st.lists(st.tuples(st.sampled_from(["x", "y", "\u00fc", "z z"]), st.integers(0, 40)),
                         max_size=12, unique=True))
    parts = []
    for topic, partition in keys:
        replicas = tuple(draw(st.permutations(ids))[:draw(st.integers(1, len(ids)))])
        isr = tuple(r for r in replicas if draw(st.booleans()))
        leader = draw(st.none() | st.sampled_from(replicas))
        parts.append(PartitionInfo(topic, partition, replicas, leader=leader, isr=isr or replicas,
                                   size_bytes=draw(st.integers(0, 2**50)),
                                   produce_bps=draw(st.floats(0, 1e9)),
                                   consume_bps=draw(st.floats(0, 1e9))))
    return ClusterState.from_partitions(brokers, parts, captured_at="2024-01-02T03:04:05Z")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=states())
def test_any_state_round_trips_through_both_formats(tmp_path: Path, state: ClusterState) -> None:
    for name in ("p.json", "p.parquet"):
        write_snapshot(state, tmp_path / name)
        assert_same(read_snapshot(tmp_path / name), state)
    assert_same(snapshot_from_dict(snapshot_to_dict(state)), state)


@pytest.mark.parametrize("width", [3, 20])  # 20 takes the sorting path for wide rows
@pytest.mark.parametrize(("change", "message"), [
    ({}, None),
    ({"replicas": "dup"}, "lists broker 0 twice in its replicas"),
    ({"leader": 99}, "has leader 99, which is not one of its replicas"),
    ({"isr": [1, 99]}, "has broker 99 in its isr"),
    ({"isr": [-1]}, "has broker -1 in its isr"),
    ({"isr": [2, 1, 2]}, "lists broker 2 twice in its isr"),
])
def test_row_checks_for_narrow_and_wide_rows(width: int, change: dict[str, Any],
                                             message: str | None) -> None:
    replicas = list(range(width))
    row: dict[str, Any] = {"topic": "w", "partition": 0, "replicas": replicas, "leader": width - 1,
                           "isr": list(reversed(replicas))}
    row |= change
    if row["replicas"] == "dup":
        row["replicas"] = replicas + [0]
    doc = {"format": "kreassign-snapshot", "version": 1, "brokers": [{"id": i} for i in range(30)],
           "partitions": [{"topic": "a", "partition": 0, "replicas": [5, 6]}, row]}
    if message is None:
        state = snapshot_from_dict(doc)
        assert state.replicas(1) == tuple(replicas) and state.isr(1) == tuple(reversed(replicas))
    else:
        with pytest.raises(InputError, match=r"partitions\[1\] \(w-0\) " + message):
            snapshot_from_dict(doc)


MEASURED = WriteRates("measured", window_s=30.0, method="sizes", measured_at="2024-05-01T12:00:30Z",
                      note="ListOffsets is not supported by this cluster: rates from log sizes only")


@pytest.mark.parametrize("name", ["m.json", "m.parquet"])
def test_measured_write_rates_round_trip(tmp_path: Path, name: str) -> None:
    state = ClusterState.from_partitions([Broker(1)], [PartitionInfo("a", 0, (1,), produce_bps=2048.0)],
                                         write_rates=MEASURED)
    write_snapshot(state, tmp_path / name)
    back = read_snapshot(tmp_path / name)
    assert back.write_rates == MEASURED and back.rates_origin() == MEASURED
    assert back.produce_bps.tolist() == [2048.0]


def test_version_1_files_stay_readable_and_say_where_rates_came_from(tmp_path: Path) -> None:
    given = {"format": "kreassign-snapshot", "version": 1, "brokers": [{"id": 1}],
             "partitions": [{"topic": "a", "partition": 0, "replicas": [1], "produce_bps": 5.0}]}
    unknown = {**given, "partitions": [{"topic": "a", "partition": 0, "replicas": [1]}]}
    (tmp_path / "given.json").write_text(json.dumps(given), encoding="utf-8")
    (tmp_path / "unknown.json").write_text(json.dumps(unknown), encoding="utf-8")
    assert read_snapshot(tmp_path / "given.json").rates_origin() == WriteRates("given")
    assert read_snapshot(tmp_path / "unknown.json").rates_origin() is None


def test_bad_write_rates_field_is_named(tmp_path: Path) -> None:
    doc = {"format": "kreassign-snapshot", "version": 2, "brokers": [{"id": 1}], "partitions": [],
           "write_rates": {"source": "measured", "window_s": -1}}
    (tmp_path / "bad.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.json: write_rates.window_s must be a positive number of seconds"):
        read_snapshot(tmp_path / "bad.json")
