"""Java properties files, read as `java.util.Properties.load` reads them (continuation lines,
escapes, `=`/`:`/whitespace separators, UTF-8 with a Latin-1 fallback): the format of Kafka's
`--command-config`."""
from __future__ import annotations

import re

from kreassign.cluster.errors import PATH_CLIP, InputError, clip
from kreassign.cluster.files import SMALL_LIMIT, read_bytes

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"


def _logical_lines(text: str) -> list[str]:
    """Join natural lines ending in an odd number of backslashes, as java.util.Properties does."""
    lines: list[str] = []
    current: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        if current is None:
            stripped = natural.lstrip(_WHITESPACE)
            if not stripped or stripped[0] in "#!":
                continue
        else:
            stripped = natural.lstrip(_WHITESPACE)
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        continues = trailing % 2 == 1
        piece = stripped[:-1] if continues else stripped
        current = piece if current is None else current + piece
        if not continues:
            lines.append(current)
            current = None
    if current is not None:
        lines.append(current)
    return lines


def _unescape(raw: str, source: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 == len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2:i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise InputError(f"{source}: malformed \\uXXXX escape '\\u{digits}'")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, *, source: str = "properties") -> dict[str, str]:
    """Parse Java properties text: `#`/`!` comments, `=`/`:`/space separators, `\\` line
    continuations and escapes. Later keys win, as in Java.

    Raises:
        InputError: a malformed `\\uXXXX` escape.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key, source)] = _unescape(value, source)
    return props


def read_properties(path: str) -> dict[str, str]:
    """Read a properties file (UTF-8, falling back to Latin-1 like Java's Properties.load).

    Raises:
        InputError: the file is missing or unreadable.
    """
    try:
        data = read_bytes(path, limit=SMALL_LIMIT)
    except FileNotFoundError:
        raise InputError(f"--command-config file {clip(path, PATH_CLIP)} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"--command-config {clip(path, PATH_CLIP)} is a directory, not a properties file") from None
    except PermissionError:
        raise InputError(f"--command-config file {clip(path, PATH_CLIP)} is not readable (permission denied)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the --command-config file {clip(path, PATH_CLIP)}: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, source=path)
