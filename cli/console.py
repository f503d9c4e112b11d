"""Consoles are made once at the CLI edge: data to stdout, everything else to stderr."""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


PIPE_WIDTH = 120
"""Width of tables written to a pipe or file, where no terminal limits the line length."""


def stdout_console() -> Console:
    """Decorated only when stdout is a terminal (piped output stays plain and wider)."""
    from rich.console import Console

    width = None if sys.stdout.isatty() else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


def stderr_console() -> Console:
    from rich.console import Console

    width = None if sys.stderr.isatty() else PIPE_WIDTH
    return Console(stderr=True, highlight=False, width=width)


def emit_json(data: Any) -> None:
    """Machine output: one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=_default) + "\n")


def emit_json_line(data: Any) -> None:
    """Machine output of a command that streams: one JSON document per line on stdout."""
    sys.stdout.write(json.dumps(data, sort_keys=False, default=_default) + "\n")
    sys.stdout.flush()


def _default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
