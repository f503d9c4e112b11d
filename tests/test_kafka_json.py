"""Kafka's reassignment and topics-to-move JSON: parsing, validation messages and exact output."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.errors import AdminCommandFailed, InputError
from kreassign.cluster.kafka_json import (
    ParsedReassignment,
    format_reassignment,
    format_topics_to_move,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    validate_execute_entries,
)
from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica


def error_of(func, text: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(AdminCommandFailed) as info:
        func(text)
    return str(info.value)


# ---- topics to move (reference §2.1) ---------------------------------------------------------
def test_topics_in_file_order() -> None:
    text = '{"topics": [{"topic": "foo"}, {"topic": "foo1", "extra": 1}], "version": 1}'
    assert parse_topics_to_move(text) == ["foo", "foo1"]


def test_topics_field_missing_gives_empty_list() -> None:
    reassignment = '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1]}]}'
    assert parse_topics_to_move(reassignment) == []


@pytest.mark.parametrize(("text", "message"), [
    ("", "The input string is not a valid JSON"),
    ("{not json", "The input string is not a valid JSON"),
    ("[1,2]", "Expected JSON object, received [1,2]"),
    ("null", "Expected JSON object, received null"),
    ('{"version": "1"}', 'Expected `Integer` value, received "1"'),
    ('{"version": 2, "topics": []}', "Not supported version field value 2"),
    ('{"topics": [{"name": "foo"}]}', "No such field exists: `topic`"),
    ('{"topics": [{"topic": 7}]}', "Expected `String` value, received 7"),
    ('{"topics": [{"topic": null}]}', "Expected `String` value, received null"),
    ('{"topics": {"topic": "foo"}}', 'Expected JSON array, received {"topic":"foo"}'),
    ('{"topics": ["foo"]}', 'Expected JSON object, received "foo"'),
    ('{"topics": [{"topic": "foo"}, {"topic": "foo"}]}',
     "List of topics to reassign contains duplicate entries: [foo]"),
    ('{"topics": [{"topic": "b"}, {"topic": "a"}, {"topic": "b"}, {"topic": "a"}]}',
     "List of topics to reassign contains duplicate entries: [a, b]"),
])
def test_topics_errors(text: str, message: str) -> None:
    assert error_of(parse_topics_to_move, text) == message


# ---- reassignment file (reference §2.2) ------------------------------------------------------
def test_reassignment_keeps_order_duplicates_and_explicit_dirs() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "foo", "partition": 1, "replicas": [1, 2, 3], "log_dirs": ["any", "/d2", "any"]},
        {"topic": "bar", "partition": 0, "replicas": [4]},
        {"topic": "foo", "partition": 1, "replicas": [3, 2], "log_dirs": ["any", "any"]},
    ]})
    parsed = parse_reassignment(text)
    assert parsed.entries == (
        PartitionTarget("foo", 1, (1, 2, 3), ("any", "/d2", "any")),
        PartitionTarget("bar", 0, (4,)),
        PartitionTarget("foo", 1, (3, 2)),
    )
    assert parsed.replica_log_dirs == {TopicPartitionReplica("foo", 1, 2): "/d2"}
    assert parsed.assignment() == {TopicPartition("foo", 1): (3, 2), TopicPartition("bar", 0): (4,)}


def test_duplicate_keys_last_wins_and_trailing_text_is_ignored() -> None:
    text = ('{"partitions":[{"topic":"a","partition":0,"replicas":[1]}],'
            '"partitions":[{"topic":"b","partition":2,"replicas":[3],"replicas":[4]}]} trailing')
    assert parse_reassignment(text).entries == (PartitionTarget("b", 2, (4,)),)


def test_partitions_field_missing_gives_no_entries() -> None:
    assert parse_reassignment('{"version":1}') == ParsedReassignment(entries=())


@pytest.mark.parametrize(("text", "message"), [
    ("", "The input string shouldn't be empty\n at [Source: UNKNOWN; byte offset: #UNKNOWN]"),
    ("  \n", "Expected JSON object, received "),
    ('{"version":1.0}', "Expected `Integer` value, received 1.0"),
    ('{"version":3}', "Not supported version field value 3"),
    ('{"partitions":{}}', "Expected JSON array, received {}"),
    ('{"partitions":[[]]}', "Expected JSON object, received []"),
    ('{"partitions":[{"partition":0,"replicas":[1]}]}', "No such field exists: `topic`"),
    ('{"partitions":[{"topic":"foo","replicas":[1]}]}', "No such field exists: `partition`"),
    ('{"partitions":[{"topic":"foo","partition":0}]}', "No such field exists: `replicas`"),
    ('{"partitions":[{"topic":1,"partition":0,"replicas":[1]}]}',
     "Expected `String` value, received 1"),
    ('{"partitions":[{"topic":"foo","partition":1.0,"replicas":[1]}]}',
     "Expected `Integer` value, received 1.0"),
    ('{"partitions":[{"topic":"foo","partition":"1","replicas":[1]}]}',
     'Expected `Integer` value, received "1"'),
    ('{"partitions":[{"topic":"foo","partition":2147483648,"replicas":[1]}]}',
     "Expected `Integer` value, received 2147483648"),
    ('{"partitions":[{"topic":"foo","partition":true,"replicas":[1]}]}',
     "Expected `Integer` value, received true"),
    ('{"partitions":[{"topic":"foo","partition":1e3,"replicas":[1]}]}',
     "Expected `Integer` value, received 1000.0"),
    ('{"partitions":[{"topic":"foo","partition":1e21,"replicas":[1]}]}',
     "Expected `Integer` value, received 1.0E21"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":"1,2"}]}',
     'Expected `JSON array` value, received "1,2"'),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,-2147483649]}]}',
     "Expected `Integer` value, received -2147483649"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":null}]}',
     "Expected `JSON array` value, received null"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":[1]}]}',
     "Expected `String` value, received 1"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition foo-0"),
])
def test_reassignment_errors(text: str, message: str) -> None:
    assert error_of(parse_reassignment, text) == message


def test_first_bad_entry_stops_parsing_before_later_checks() -> None:
    text = ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["x"]},'
            '{"topic":"b","partition":"bad","replicas":[1]}]}')
    assert error_of(parse_reassignment, text).startswith("Size of replicas list [1, 2]")


@pytest.mark.parametrize(("text", "first_line", "line", "column"), [
    # as Kafka 4.4's tool prints them (its Jackson 2.21 points at the offending character; the
    # side-by-side tests run them through the real tool, tests/side_by_side_scenarios.py)
    ("{invalid_json",
     "Unexpected character ('i' (code 105)): was expecting double-quote to start field name", 1, 2),
    ('{"a":1,}',
     "Unexpected character ('}' (code 125)): was expecting double-quote to start field name", 1, 8),
    ('{"a" 1}',
     "Unexpected character ('1' (code 49)): was expecting a colon to separate field name and value",
     1, 6),
    ('{"a":1\n "b":2}',
     "Unexpected character ('\"' (code 34)): was expecting comma to separate Object entries", 2, 2),
    ("[1 2]", "Unexpected character ('2' (code 50)): was expecting comma to separate Array entries",
     1, 4),
    ("[1,]", "Unexpected character (']' (code 93)): expected a valid value (JSON String, Number, Array, Object "
     "or token 'null', 'true' or 'false')", 1, 4),
    ('{"a":tru}', "Unrecognized token 'tru': was expecting (JSON String, Number, Array, Object or "
     "token 'null', 'true' or 'false')", 1, 6),
    ('{"a":NaN}',
     "Non-standard token 'NaN': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow", 1, 9),
    ('{"a":01}', "Invalid numeric value: Leading zeroes not allowed", 1, 7),
    ('{"a":1.}', "Unexpected character ('}' (code 125)) in numeric value: Decimal point not followed by a digit",
     1, 7),
    ('{"a":-x}', "Unexpected character ('x' (code 120)) in numeric value: expected digit (0-9) to follow minus "
     "sign, for valid numeric value", 1, 7),
    ('{"a":"x', "Unexpected end-of-input: was expecting closing quote for a string value", 1, 8),
    ('{"a":"\\q"}', "Unrecognized character escape 'q' (code 113)", 1, 8),
    ('{"a":"\t"}', "Illegal unquoted character ((CTRL-CHAR, code 9)): has to be escaped using "
     "backslash to be included in string value", 1, 7),
    ('{"version":1 /* one */}', "Unexpected character ('/' (code 47)): maybe a (non-standard) comment? (not "
     "recognized as one since Feature 'ALLOW_COMMENTS' not enabled for parser)", 1, 14),
])
def test_syntax_errors_read_like_jackson(text: str, first_line: str, line: int, column: int) -> None:
    message = error_of(parse_reassignment, text)
    head, where = message.split("\n")
    assert head == first_line
    assert where.endswith(f"; line: {line}, column: {column}]")
    assert where.startswith(" at [Source: ")


def test_unclosed_object_names_where_it_started() -> None:
    message = error_of(parse_reassignment, '{"partitions":[\n  {"topic":"a"')
    assert message.startswith("Unexpected end-of-input: expected close marker for Object "
                              "(start marker at [Source: ")
    assert "line: 2, column: 3])" in message


def test_deep_nesting_and_huge_numbers_are_input_errors() -> None:
    assert "nesting depth" in error_of(parse_reassignment, "[" * 100_000)
    assert "Number value length" in error_of(parse_reassignment, '{"version":' + "9" * 5000 + "}")


# ---- --execute checks (reference §5 step 3) --------------------------------------------------
def entries(*targets: tuple[str, int, tuple[int, ...]]) -> ParsedReassignment:
    return ParsedReassignment(entries=tuple(PartitionTarget(t, p, r) for t, p, r in targets))


@pytest.mark.parametrize(("parsed", "message"), [
    (entries(), "Partition reassignment list cannot be empty"),
    (entries(("foo", 0, (1,)), ("foo", 1, ())), "Partition replica list cannot be empty"),
    (entries(("foo", 0, (1,)), ("foo", 0, (2,))),
     "Partition reassignment contains duplicate topic partitions: foo-0"),
    (entries(("foo", 1, (1,)), ("bar", 0, (1,)), ("foo", 1, (2,)), ("bar", 0, (2,))),
     "Partition reassignment contains duplicate topic partitions: bar-0,foo-1"),
    (entries(("foo", 0, (0, 1, 0))),
     "Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 0"),
    (entries(("foo", 0, (3, 1, 3, 1)), ("bar", 2, (5, 5))),
     "Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries "
     "for 1,3. bar-2 contains multiple entries for 5"),
])
def test_execute_validation(parsed: ParsedReassignment, message: str) -> None:
    with pytest.raises(AdminCommandFailed) as info:
        validate_execute_entries(parsed)
    assert str(info.value) == message


def test_execute_validation_order_empty_replicas_before_duplicates() -> None:
    with pytest.raises(AdminCommandFailed, match="replica list cannot be empty"):
        validate_execute_entries(entries(("foo", 0, (1, 1)), ("foo", 0, ())))


def test_valid_entries_pass() -> None:
    validate_execute_entries(entries(("foo", 0, (1, 2)), ("foo", 1, (2, 1))))


# ---- --broker-list (reference §1.3, §4.1) ----------------------------------------------------
@pytest.mark.parametrize(("text", "brokers"), [
    ("1,2,3", [1, 2, 3]), ("3,1,", [3, 1]), ("+4,-1", [4, -1]), (",", []), ("2147483647", [2**31 - 1]),
])
def test_broker_list(text: str, brokers: list[int]) -> None:
    assert parse_broker_list(text) == brokers


@pytest.mark.parametrize(("text", "message"), [
    ("1, 2", 'For input string: " 2"'),
    (",1", 'For input string: ""'),
    ("", 'For input string: ""'),
    ("1,,2", 'For input string: ""'),
    ("0x10", 'For input string: "0x10"'),
    ("2147483648", 'For input string: "2147483648"'),
    ("1_000", 'For input string: "1_000"'),
    ("1,1,2", "Broker list contains duplicate entries: [1]"),
    ("5,2,3,2,5", "Broker list contains duplicate entries: [2, 5]"),
])
def test_broker_list_errors(text: str, message: str) -> None:
    assert error_of(parse_broker_list, text) == message


# ---- output (reference §2.2 serialisation) ---------------------------------------------------
def test_format_matches_kafka_bytes() -> None:
    text = format_reassignment({TopicPartition("foo", 1): [4, 5, 6], TopicPartition("bar", 0): [7, 8]})
    assert text == ('{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[7,8],'
                    '"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[4,5,6],'
                    '"log_dirs":["any","any","any"]}]}')


def test_format_sorts_partitions_numerically_and_keeps_dirs() -> None:
    text = format_reassignment([
        PartitionTarget("t", 10, (1, 2), ("any", "/logs/b")),
        PartitionTarget("t", 2, (3,)),
    ])
    assert text == ('{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[3],'
                    '"log_dirs":["any"]},{"topic":"t","partition":10,"replicas":[1,2],'
                    '"log_dirs":["any","/logs/b"]}]}')


def test_format_sorts_topics_by_utf16_code_units_like_java() -> None:
    # U+1F600 is a surrogate pair (0xD83D...), which Java sorts before U+FF61.
    text = format_reassignment({TopicPartition("\uff61", 0): [1], TopicPartition("\U0001f600", 0): [1],
                                TopicPartition("Z", 0): [1], TopicPartition("a", 0): [1]})
    order = [p["topic"] for p in json.loads(text)["partitions"]]
    assert order == ["Z", "a", "\U0001f600", "\uff61"]


def test_format_escapes_like_jackson() -> None:
    text = format_reassignment({TopicPartition('q"\\\x01\né/', 0): [1]})
    assert '"topic":"q\\"\\\\\\u0001\\né/"' in text


def test_format_empty_and_duplicates() -> None:
    assert format_reassignment({}) == '{"version":1,"partitions":[]}'
    with pytest.raises(InputError, match="foo-0 is listed more than once"):
        format_reassignment([PartitionTarget("foo", 0, (1,)), PartitionTarget("foo", 0, (2,))])


def test_format_topics_to_move_round_trips() -> None:
    text = format_topics_to_move(["foo", "bar"])
    assert text == '{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}'
    assert parse_topics_to_move(text) == ["foo", "bar"]


# ---- properties ------------------------------------------------------------------------------
topics = st.text(min_size=1, max_size=12)
targets = st.dictionaries(
    st.tuples(topics, st.integers(0, 2**31 - 1)).map(lambda t: TopicPartition(*t)),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
    max_size=20,
)


@given(targets)
def test_format_then_parse_round_trips(assignment: dict[TopicPartition, list[int]]) -> None:
    parsed = parse_reassignment(format_reassignment(assignment))
    assert parsed.assignment() == {tp: tuple(r) for tp, r in assignment.items()}
    assert parsed.replica_log_dirs == {}
    assert format_reassignment(parsed.entries) == format_reassignment(assignment)


@given(targets)
def test_format_order_is_java_compare_to_order(assignment: dict[TopicPartition, list[int]]) -> None:
    listed = [(p["topic"], p["partition"])
              for p in json.loads(format_reassignment(assignment))["partitions"]]

    def java_key(tp: tuple[str, int]) -> tuple[list[int], int]:
        units = tp[0].encode("utf-16-le", "surrogatepass")
        return [int.from_bytes(units[i:i + 2], "little") for i in range(0, len(units), 2)], tp[1]

    assert listed == sorted(listed, key=java_key)


@given(st.lists(st.tuples(st.integers(0, 5), st.text(max_size=4).filter(lambda d: d != "any")),
                min_size=1, max_size=4, unique_by=lambda x: x[0]))
def test_explicit_log_dirs_round_trip(replicas_dirs: list[tuple[int, str]]) -> None:
    target = PartitionTarget("t", 0, tuple(r for r, _ in replicas_dirs), tuple(d for _, d in replicas_dirs))
    parsed = parse_reassignment(format_reassignment([target]))
    assert parsed.entries == (target,)
    assert parsed.replica_log_dirs == {TopicPartitionReplica("t", 0, r): d for r, d in replicas_dirs}


@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=8, unique=True))
def test_broker_list_round_trips(brokers: list[int]) -> None:
    assert parse_broker_list(",".join(map(str, brokers))) == brokers
