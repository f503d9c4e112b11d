"""Every parser of user files either succeeds or raises a KreassignError, whatever it is fed."""
from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreassign.cluster.errors import KreassignError
from kreassign.cluster.kafka_json import (
    format_reassignment,
    format_topics_to_move,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    validate_execute_entries,
)
from kreassign.cluster.model import Broker, ClusterState, TopicPartition
from kreassign.cluster.snapshot import read_snapshot, snapshot_to_dict, write_snapshot

FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_FILES = settings(FUZZ, max_examples=40)


def only_kreassign_errors(func: Callable[[], Any]) -> None:
    try:
        func()
    except KreassignError as exc:
        assert str(exc), "an error must say something"


def reassignment_then_checks(text: str) -> None:
    validate_execute_entries(parse_reassignment(text))


TEXT_PARSERS = [parse_topics_to_move, reassignment_then_checks, parse_broker_list]

json_scalars = (st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)
json_tokens = st.text(alphabet='{}[]:,"\\ \n\t0123456789-+.eEtrufalsnN\x01éx', max_size=60)


# ---- Kafka JSON and the broker list ----------------------------------------------------------
@pytest.mark.parametrize("parse", TEXT_PARSERS)
@FUZZ
@given(text=st.text(max_size=80) | json_tokens)
def test_random_text(parse: Callable[[str], Any], text: str) -> None:
    only_kreassign_errors(lambda: parse(text))


@pytest.mark.parametrize("parse", TEXT_PARSERS[:2])
@FUZZ
@given(value=json_values)
def test_random_json_documents(parse: Callable[[str], Any], value: Any) -> None:
    only_kreassign_errors(lambda: parse(json.dumps(value)))


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON document, parents before children."""
    yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield from paths(child, prefix + (key,))


MUTATIONS = ["delete", "replace", "wrap_in_list", "wrap_in_object", "stringify", "huge_number",
             "deep_nesting", "float"]


@st.composite
def mutated(draw: st.DrawFn, doc: Any) -> str:
    """`doc` with one to three places deleted, retyped or replaced, as JSON text (maybe with a
    duplicated key or cut short)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        places = [p for p in paths(doc) if p]
        if not places:
            break
        place = draw(st.sampled_from(places))
        parent = doc
        for key in place[:-1]:
            parent = parent[key]
        key = place[-1]
        old = parent[key]
        kind = draw(st.sampled_from(MUTATIONS))
        if kind == "delete":
            del parent[key]
            continue
        parent[key] = {
            "replace": lambda: draw(json_values),
            "wrap_in_list": lambda: [old],
            "wrap_in_object": lambda: {"value": old},
            "stringify": lambda: json.dumps(old),
            "huge_number": lambda: draw(st.sampled_from([2**31, -(2**31) - 1, 2**63, 10**400, -1, 1e308])),
            "deep_nesting": lambda: json.loads("[" * 200 + "1" + "]" * 200),
            "float": lambda: float(old) if type(old) is int and abs(old) < 2**53 else 1.5,
        }[kind]()
    text = json.dumps(doc, separators=(",", ":"))
    if draw(st.booleans()) and text.startswith('{"'):
        text = '{"version":1,' + text[1:]  # duplicate key: the last one wins
    if draw(st.integers(0, 9)) == 0:
        text = text[:draw(st.integers(0, len(text)))]
    return text


VALID_REASSIGNMENT = json.loads(format_reassignment({
    TopicPartition("foo", 0): [1, 2, 3], TopicPartition("foo", 1): [2, 3, 1], TopicPartition("bar", 0): [3],
}))
VALID_TOPICS = json.loads(format_topics_to_move(["foo", "bar"]))


@FUZZ
@given(text=mutated(VALID_REASSIGNMENT))
def test_mutated_reassignments(text: str) -> None:
    only_kreassign_errors(lambda: reassignment_then_checks(text))


@FUZZ
@given(text=mutated(VALID_TOPICS))
def test_mutated_topics(text: str) -> None:
    only_kreassign_errors(lambda: parse_topics_to_move(text))


def test_pathological_documents() -> None:
    for text in ["[" * 100_000, '{"a":' * 50_000, "9" * 10_000, '{"version":' + "1" * 5000 + "}",
                 '{"partitions":[' + '{"topic":"t","partition":0,"replicas":[1]},' * 3 + "]}",
                 "\ufeff{}", '{"version":1}\x00', '"\\ud800"', "-", "0" * 3]:
        for parse in TEXT_PARSERS:
            only_kreassign_errors(lambda: parse(text))


# ---- snapshots -------------------------------------------------------------------------------
def small_state() -> ClusterState:
    return ClusterState.from_arrays(
        brokers=[Broker(1, rack="a", host="h", port=9092), Broker(2), Broker(3, disk_bytes=10**9)],
        topic=["t", "t", "u"], partition=[0, 1, 0],
        replica_offsets=np.array([0, 2, 4, 7]), replica_ids=np.array([1, 2, 2, 3, 3, 1, 2]),
        leader=[1, -1, 3], size_bytes=[10, 20, 30], produce_bps=[1.0, 0.0, 2.5],
        captured_at="2024-01-01T00:00:00Z", cluster_id="c",
    )


with tempfile.TemporaryDirectory() as _scratch:
    write_snapshot(small_state(), Path(_scratch) / "s.json")
    write_snapshot(small_state(), Path(_scratch) / "s.parquet")
    OUR_JSON = (Path(_scratch) / "s.json").read_bytes()
    OUR_PARQUET = (Path(_scratch) / "s.parquet").read_bytes()
VALID_SNAPSHOT = snapshot_to_dict(small_state())


def read_bytes(data: bytes, name: str = "snapshot.json") -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / name
        path.write_bytes(data)
        only_kreassign_errors(lambda: read_snapshot(path))


@FUZZ_FILES
@given(data=st.binary(max_size=200) | json_tokens.map(str.encode))
def test_snapshot_random_bytes(data: bytes) -> None:
    read_bytes(data)


@FUZZ_FILES
@given(text=mutated(VALID_SNAPSHOT))
def test_snapshot_mutated_documents(text: str) -> None:
    read_bytes(text.encode())


@FUZZ_FILES
@given(cut=st.integers(0, len(OUR_JSON)), junk=st.binary(max_size=6))
def test_snapshot_in_our_layout_cut_or_spliced(cut: int, junk: bytes) -> None:
    read_bytes(OUR_JSON[:cut] + junk + OUR_JSON[cut:])
    read_bytes(OUR_JSON[:cut])


@FUZZ_FILES
@given(position=st.integers(0, len(OUR_PARQUET) - 1), byte=st.integers(0, 255),
       cut=st.integers(0, len(OUR_PARQUET)))
def test_snapshot_parquet_damaged(position: int, byte: int, cut: int) -> None:
    damaged = bytearray(OUR_PARQUET)
    damaged[position] = byte
    read_bytes(bytes(damaged), "s.parquet")
    read_bytes(OUR_PARQUET[:cut], "s.parquet")
