"""Run the real entry point in-process and capture what a user would see."""
from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kreassign.cli.main import main

SAMPLE = Path(__file__).resolve().parent.parent / "demo" / "sample-snapshot.json"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def run_cli(args: Sequence[str]) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return Run(code, out.getvalue(), err.getvalue())
