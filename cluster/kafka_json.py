"""Kafka's reassignment and topics-to-move JSON, read and written exactly as Kafka's tool does.

Kafka parses these files with Jackson and decodes them with `DecodeJson`; operators keep the
files in source control and feed them to either tool, so the messages for bad input and the bytes
of the output match Kafka 4.4 (reference/kafka-reassign-tool.md §2, §5). Jackson's syntax errors
are imitated from Python's JSON error positions: Kafka 4.4's wording and line/column (its Jackson
2.21 points at the offending character; Kafka 3.9's Jackson 2.16 one column further on), not every
corner.

Where Kafka reports several duplicates in Java HashSet order, we report them sorted.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kreassign.cluster.errors import AdminCommandFailed, InputError
from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica

ANY_LOG_DIR = "any"
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_MAX_NUMBER_LENGTH = 1000  # Jackson's StreamReadConstraints default
_MAX_NESTING_DEPTH = 1000
_SOURCE = "[Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled)"
_VALID_VALUES = "(JSON String, Number, Array, Object or token 'null', 'true' or 'false')"


class _Missing:
    """Jackson's MissingNode: what a blank document parses to; prints as nothing."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


@dataclass(frozen=True)
class ParsedReassignment:
    """A reassignment file as Kafka's parser returns it.

    `entries` keeps file order and duplicates (validation reports them); an entry's `log_dirs`
    is None when every dir is "any". `replica_log_dirs` holds only the replicas given an
    explicit log dir, later entries overriding earlier ones.
    """

    entries: tuple[PartitionTarget, ...]
    replica_log_dirs: dict[TopicPartitionReplica, str] = field(default_factory=dict)

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Target replicas by partition (a later duplicate wins, as in Kafka's map)."""
        return {e.tp: e.replicas for e in self.entries}


# ---- reading ---------------------------------------------------------------------------------
def parse_topics_to_move(text: str) -> list[str]:
    """Parse a topics-to-move file (`{"topics":[{"topic":"foo"}],"version":1}`), in file order.

    Raises:
        AdminCommandFailed: with Kafka's message for invalid JSON, a bad field or duplicates.
    """
    try:
        if text == "":
            raise _JsonSyntaxError("The input string shouldn't be empty")
        root = _parse_json(text)
    except _JsonSyntaxError:
        raise AdminCommandFailed("The input string is not a valid JSON") from None
    _check_version(_as_object(root))
    topics = _get(_as_object(root), "topics")
    result = [] if topics is MISSING else [
        _to_string(_field(_as_object(item), "topic")) for item in _as_array(topics)
    ]
    dups = _duplicates(result)
    if dups:
        raise AdminCommandFailed(
            f"List of topics to reassign contains duplicate entries: {_java_list(sorted(dups))}"
        )
    return result


def parse_reassignment(text: str) -> ParsedReassignment:
    """Parse a reassignment file without deduplicating, like Kafka's parsePartitionReassignmentData.

    Raises:
        AdminCommandFailed: with Kafka's message for invalid JSON, a bad or missing field, an
            unsupported version, or a log_dirs list whose length differs from replicas.
    """
    if text == "":  # Jackson's JsonParseException, with its location (Kafka 3.9 and 4.x)
        raise AdminCommandFailed("The input string shouldn't be empty\n at [Source: UNKNOWN; byte offset: #UNKNOWN]")
    try:
        root = _parse_json(text)
    except _JsonSyntaxError as exc:
        raise AdminCommandFailed(str(exc)) from None
    _check_version(_as_object(root))
    partitions = _get(_as_object(root), "partitions")
    if partitions is MISSING:
        return ParsedReassignment(entries=())
    entries: list[PartitionTarget] = []
    log_dirs_of: dict[TopicPartitionReplica, str] = {}
    for item in _as_array(partitions):
        fields = _as_object(item)
        topic = _to_string(_field(fields, "topic"))
        partition = _to_int(_field(fields, "partition"))
        replicas = tuple(_to_int(r) for r in _to_list(_field(fields, "replicas")))
        raw_dirs = _get(fields, "log_dirs")
        dirs = ((ANY_LOG_DIR,) * len(replicas) if raw_dirs is MISSING
                else tuple(_to_string(d) for d in _to_list(raw_dirs)))
        if len(dirs) != len(replicas):
            raise AdminCommandFailed(
                f"Size of replicas list {_java_list(replicas)} is different from size of log dirs "
                f"list {_java_list(dirs)} for partition {topic}-{partition}"
            )
        for broker, log_dir in zip(replicas, dirs):
            if log_dir != ANY_LOG_DIR:
                log_dirs_of[TopicPartitionReplica(topic, partition, broker)] = log_dir
        explicit = any(d != ANY_LOG_DIR for d in dirs)
        entries.append(PartitionTarget(topic, partition, replicas, dirs if explicit else None))
    return ParsedReassignment(entries=tuple(entries), replica_log_dirs=log_dirs_of)


def validate_execute_entries(parsed: ParsedReassignment) -> None:
    """The checks `--execute` makes after parsing (reference §5 step 3), in Kafka's order.

    Raises:
        AdminCommandFailed: no entries, an empty replica list, a partition listed twice, or a
            broker listed twice in one replica list.
    """
    if not parsed.entries:
        raise AdminCommandFailed("Partition reassignment list cannot be empty")
    if any(not e.replicas for e in parsed.entries):
        raise AdminCommandFailed("Partition replica list cannot be empty")
    dup_parts = _duplicates([e.tp for e in parsed.entries])
    if dup_parts:
        raise AdminCommandFailed("Partition reassignment contains duplicate topic partitions: "
                                 + ",".join(str(tp) for tp in sorted(dup_parts)))
    repeated = [
        f"{e.tp} contains multiple entries for {','.join(str(b) for b in sorted(dups))}"
        for e in parsed.entries if (dups := _duplicates(e.replicas))
    ]
    if repeated:
        raise AdminCommandFailed(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated)
        )


_JAVA_INT = re.compile(r"[+-]?\d+")  # Unicode digits, as Java's Character.digit accepts


def parse_broker_list(text: str) -> list[int]:
    """Parse `--broker-list` like Java's `split(",")` and `Integer.parseInt`.

    A trailing comma is tolerated (Java drops trailing empty strings); spaces are not.

    Raises:
        AdminCommandFailed: `For input string: " 2"` for a bad id, or duplicate ids.
    """
    parts = text.split(",")
    if text:
        while parts and parts[-1] == "":
            parts.pop()
    brokers = []
    for part in parts:
        value = int(part) if _JAVA_INT.fullmatch(part) and len(part) <= 4000 else None
        if value is None or not _INT_MIN <= value <= _INT_MAX:
            raise AdminCommandFailed(f'For input string: "{part}"')
        brokers.append(value)
    dups = _duplicates(brokers)
    if dups:
        raise AdminCommandFailed(f"Broker list contains duplicate entries: {_java_list(sorted(dups))}")
    return brokers


# ---- writing ---------------------------------------------------------------------------------
def format_reassignment(
    targets: Iterable[PartitionTarget] | Mapping[TopicPartition, Sequence[int]],
) -> str:
    """Kafka's compact reassignment JSON, sorted by topic (UTF-16 order) then partition.

    `log_dirs` is always present, "any" where a target gives no dir.

    Raises:
        InputError: a partition appears twice among `targets`.
    """
    if isinstance(targets, Mapping):
        items = [PartitionTarget(tp.topic, tp.partition, tuple(r)) for tp, r in targets.items()]
    else:
        items = list(targets)
    items.sort(key=lambda t: (_utf16_key(t.topic), t.partition))
    for a, b in zip(items, items[1:]):
        if a.topic == b.topic and a.partition == b.partition:
            raise InputError(f"partition {a.tp} is listed more than once in the reassignment")
    quoted: dict[str, str] = {}
    parts = []
    for t in items:
        topic = quoted.get(t.topic) or quoted.setdefault(t.topic, _json_string(t.topic))
        replicas = ",".join(str(int(r)) for r in t.replicas)
        dirs = ",".join(_json_string(d) for d in t.dirs())
        parts.append(f'{{"topic":{topic},"partition":{int(t.partition)},'
                     f'"replicas":[{replicas}],"log_dirs":[{dirs}]}}')
    return '{"version":1,"partitions":[' + ",".join(parts) + "]}"


def with_log_dirs(assignment: Mapping[TopicPartition, Sequence[int]],
                  dirs: Mapping[TopicPartitionReplica, str]) -> list[PartitionTarget]:
    """An assignment as reassignment entries naming each replica's log dir ("any" where `dirs`
    has none), as Kafka 4.2+ prints the current assignment."""
    out = []
    for tp, replicas in assignment.items():
        named = tuple(dirs.get(TopicPartitionReplica(tp.topic, tp.partition, b), ANY_LOG_DIR) for b in replicas)
        out.append(PartitionTarget(tp.topic, tp.partition, tuple(replicas),
                                   None if all(d == ANY_LOG_DIR for d in named) else named))
    return out


def format_topics_to_move(topics: Iterable[str]) -> str:
    """A compact topics-to-move JSON, topics in the given order."""
    body = ",".join('{"topic":' + _json_string(t) + "}" for t in topics)
    return '{"topics":[' + body + '],"version":1}'


def _utf16_key(text: str) -> bytes:
    """Sort key equal to Java's String.compareTo order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
                 ord('"'): '\\"', ord("\\"): "\\\\"})
_ESCAPES.update({i: f"\\u{i:04X}" for i in range(0xD800, 0xE000)})  # lone surrogates


def _json_string(text: str) -> str:
    """A JSON string as Jackson writes it: non-ASCII kept, control characters escaped."""
    return '"' + text.translate(_ESCAPES) + '"'


# ---- Jackson-style decoding ------------------------------------------------------------------
def _check_version(root: dict[str, Any]) -> None:
    version = _get(root, "version")
    number = 1 if version is MISSING else _to_int(version)
    if number != 1:
        raise AdminCommandFailed(f"Not supported version field value {number}")


def _get(obj: dict[str, Any], name: str) -> Any:
    return obj.get(name, MISSING)


def _field(obj: dict[str, Any], name: str) -> Any:
    value = obj.get(name, MISSING)
    if value is MISSING:
        raise AdminCommandFailed(f"No such field exists: `{name}`")
    return value


def _as_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AdminCommandFailed(f"Expected JSON object, received {_node_text(value)}")
    return value


def _as_array(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise AdminCommandFailed(f"Expected JSON array, received {_node_text(value)}")
    return value


def _to_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise AdminCommandFailed(f"Expected `JSON array` value, received {_node_text(value)}")
    return value


def _to_int(value: Any) -> int:
    if type(value) is not int or not _INT_MIN <= value <= _INT_MAX:
        raise AdminCommandFailed(f"Expected `Integer` value, received {_node_text(value)}")
    return value


def _to_string(value: Any) -> str:
    if not isinstance(value, str):
        raise AdminCommandFailed(f"Expected `String` value, received {_node_text(value)}")
    return value


def _node_text(value: Any) -> str:
    """Jackson's JsonNode.toString(): compact JSON, doubles printed as Java prints them.

    Iterative, so a deeply nested value cannot overflow the stack while we report it.
    """
    parts: list[str] = []
    todo: list[tuple[bool, Any]] = [(False, value)]
    while todo:
        literal, item = todo.pop()
        if literal:
            parts.append(item)
        elif isinstance(item, (list, dict)):
            pairs = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            seq: list[tuple[bool, Any]] = []
            for key, child in pairs:
                if seq:
                    seq.append((True, ","))
                if key is not None:
                    seq.append((True, _json_string(key) + ":"))
                seq.append((False, child))
            closing = ("{", "}") if isinstance(item, dict) else ("[", "]")
            todo.append((True, closing[1]))
            todo.extend(reversed(seq))
            todo.append((True, closing[0]))
        else:
            parts.append(_scalar_text(item))
    return "".join(parts)


def _scalar_text(value: Any) -> str:
    if value is MISSING:
        return ""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    return _json_string(str(value))


def _java_double(value: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else `1.0E10` style."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exponent + len(text) - 1}"


def _java_list(values: Iterable[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _duplicates(values: Iterable[Any]) -> set[Any]:
    seen: set[Any] = set()
    dups: set[Any] = set()
    for value in values:
        (dups if value in seen else seen).add(value)
    return dups


# ---- Jackson-style parsing -------------------------------------------------------------------
class _JsonSyntaxError(Exception):
    """The document is not JSON; the message imitates Jackson's."""


class _NonStandardToken(Exception):
    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _reject_constant(token: str) -> Any:
    raise _NonStandardToken(token)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _parse_json(text: str) -> Any:
    """Parse the first JSON value of `text` as Jackson's readTree does (trailing text ignored).

    Returns MISSING for a blank document. Raises _JsonSyntaxError with a Jackson-like message.
    """
    start = _WHITESPACE.match(text, 0)
    assert start is not None
    if start.end() == len(text):
        return MISSING
    try:
        value, _ = _DECODER.raw_decode(text, start.end())
    except json.JSONDecodeError as exc:
        raise _JsonSyntaxError(_jackson_message(text, exc.msg, exc.pos)) from None
    except _NonStandardToken as exc:
        pos = _find_token(text, exc.token, start.end())
        raise _JsonSyntaxError(
            f"Non-standard token '{exc.token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` "
            f"to allow{_location(text, pos + len(exc.token))}"
        ) from None
    except RecursionError:
        # Python's decoder stops near its recursion limit, Jackson at 1000 levels.
        raise _JsonSyntaxError(
            f"Document nesting depth exceeds the maximum allowed ({_MAX_NESTING_DEPTH}, from "
            "`StreamReadConstraints.getMaxNestingDepth()`)"
        ) from None
    except ValueError:
        # int() refuses numbers of more than 4300 digits; Jackson refuses more than 1000.
        raise _JsonSyntaxError(
            f"Number value length exceeds the maximum allowed ({_MAX_NUMBER_LENGTH}, from "
            "`StreamReadConstraints.getMaxNumberLength()`)"
        ) from None
    return value


def _find_token(text: str, token: str, start: int) -> int:
    match = re.compile(r"(?<![\w\"])-?" + re.escape(token.lstrip("-"))).search(text, start)
    return match.start() if match else start


_CONTAINERS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _open_containers(text: str, pos: int) -> list[tuple[str, int]]:
    """The brackets still open at `pos`, innermost last, with their offsets."""
    stack: list[tuple[str, int]] = []
    for match in _CONTAINERS.finditer(text, 0, pos):
        token = match.group()
        if token in "[{":
            stack.append((token, match.start()))
        elif token in "]}" and stack:
            stack.pop()
    return stack


def _char_desc(ch: str) -> str:
    code = ord(ch)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"(CTRL-CHAR, code {code})"
    if code > 255:
        return f"'{ch}' (code {code} / 0x{code:x})"
    return f"'{ch}' (code {code})"


def _where(text: str, pos: int) -> str:
    """Jackson's location of offset `pos`: line and column counted from 1."""
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{_SOURCE}; line: {line}, column: {column}]"


def _location(text: str, pos: int) -> str:
    """The suffix Jackson adds to a syntax error; `pos` is just past the offending input."""
    return "\n at " + _where(text, pos)


def _jackson_message(text: str, msg: str, pos: int) -> str:
    stack = _open_containers(text, pos)
    kind = "Object" if stack and stack[-1][0] == "{" else "Array"
    if msg.startswith("Unterminated string"):
        return ("Unexpected end-of-input: was expecting closing quote for a string value"
                + _location(text, len(text)))
    if pos >= len(text):
        if not stack:
            return "Unexpected end-of-input" + _location(text, len(text))
        marker = _where(text, stack[-1][1])
        return (f"Unexpected end-of-input: expected close marker for {kind} "
                f"(start marker at {marker}){_location(text, len(text))}")
    ch = text[pos]
    here = _location(text, pos)  # Kafka 4.4's Jackson (2.21) points at the offending character itself
    if msg.startswith("Illegal trailing comma"):  # Python 3.13+ reports the comma itself
        closer = _WHITESPACE.match(text, pos + 1)
        pos = closer.end() if closer else pos + 1
        if pos >= len(text):
            return "Unexpected end-of-input" + _location(text, len(text))
        ch, here = text[pos], _location(text, pos)
        msg = "Expecting property name" if ch == "}" else "Expecting value"
    if ch == "/":
        return (f"Unexpected character ({_char_desc(ch)}): maybe a (non-standard) comment? (not recognized as one "
                f"since Feature 'ALLOW_COMMENTS' not enabled for parser){here}")
    if msg.startswith("Invalid control character"):
        return (f"Illegal unquoted character ({_char_desc(ch)}): has to be escaped using "
                f"backslash to be included in string value{here}")
    if msg.startswith("Invalid \\escape"):
        escaped = text[pos + 1:pos + 2] or " "
        return f"Unrecognized character escape {_char_desc(escaped)}{_location(text, pos + 1)}"
    if msg.startswith("Invalid \\uXXXX"):
        digits = text[pos + 2:pos + 6]
        bad = next((i for i, c in enumerate(digits) if c not in "0123456789abcdefABCDEF"), 0)
        bad_ch = digits[bad] if digits else " "
        return (f"Unexpected character ({_char_desc(bad_ch)}): expected a hex-digit for "
                f"character escape sequence{_location(text, pos + 2 + bad)}")
    if msg.startswith("Expecting property name"):
        return (f"Unexpected character ({_char_desc(ch)}): was expecting double-quote to start "
                f"field name{here}")
    if msg.startswith("Expecting ':'"):
        return (f"Unexpected character ({_char_desc(ch)}): was expecting a colon to separate "
                f"field name and value{here}")
    if msg.startswith("Expecting ','"):
        number = re.search(r"-?\d+$", text[max(0, pos - 40):pos])
        if number and ch.isdigit() and number.group().lstrip("-") == "0":
            return f"Invalid numeric value: Leading zeroes not allowed{here}"
        if number and ch in ".eE":
            follow = text[pos + 1:pos + 2] or " "
            what = "Decimal point" if ch == "." else "Exponent indicator"
            return (f"Unexpected character ({_char_desc(follow)}) in numeric value: {what} not "
                    f"followed by a digit{here}")
        return (f"Unexpected character ({_char_desc(ch)}): was expecting comma to separate "
                f"{kind} entries{here}")
    if ch == "-":
        follow = text[pos + 1:pos + 2] or " "
        return (f"Unexpected character ({_char_desc(follow)}) in numeric value: expected digit "
                f"(0-9) to follow minus sign, for valid numeric value{_location(text, pos + 1)}")
    if ch.isalpha() or ch in "_$":
        token = re.match(r"[\w$]*", text[pos:pos + 256])
        word = token.group() if token else ch
        return f"Unrecognized token '{word}': was expecting {_VALID_VALUES}{here}"
    return f"Unexpected character ({_char_desc(ch)}): expected a valid value {_VALID_VALUES}{here}"
