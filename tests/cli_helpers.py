"""The one way tests run the CLI (`Kreassign`, the `kreassign` fixture of tests/conftest.py).

In process (`run`): what `kreassign.cli.main.main` does (the Kafka-compatible front door or the
subcommands, errors as one message and an exit code), with stdout and stderr captured and,
optionally, a `Runtime` injected (the connection, the journal store, the clock and the sleeper:
a fake cluster or a test's clock). In a subprocess (`subprocess`, `start`): `python -m
kreassign.cli.main`, for the runs whose point is a process of their own (kill -9 drills, daemons,
a second CLI at the same time, signals).
"""
from __future__ import annotations

import os
import subprocess as subprocesses
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from click.testing import CliRunner

SAMPLE = Path(__file__).resolve().parent.parent / "demo" / "sample-snapshot.json"
ENTRY = (sys.executable, "-m", "kreassign.cli.main")
"""the command line of the CLI in a process of its own"""


class Ran(NamedTuple):
    """What one in-process run printed and returned (`code, out, err = kreassign.run(...)`)."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def code(self) -> int:
        return self.exit_code

    @property
    def out(self) -> str:
        return self.stdout

    @property
    def err(self) -> str:
        return self.stderr


Run = Ran


class Kreassign:
    """Runs the CLI in process or in a subprocess (see the module's docstring)."""

    def run(self, *args: str, runtime: Any = None, connect: Any = None, columns: int | None = None,
            env: Mapping[str, str] | None = None) -> Ran:
        """Run in this process, as `main` does. `runtime`: a `kreassign.cli.runtime.Runtime` to
        inject; `connect`: a cluster port (a fake) every connection opens instead; `columns`: the
        terminal width help text wraps at; `env`: variables set for the run only."""
        from kreassign.cli.boundary import run_guarded
        from kreassign.cli.kafka_compat import run_kafka_style
        from kreassign.cli.main import cli, is_kafka_style
        from kreassign.cli.runtime import Runtime

        argv = list(args)
        obj = runtime
        if connect is not None:
            obj = Runtime(**{**vars(runtime or Runtime()), "connect": _connecting_to(connect)})
        variables = {**(env or {}), **({"COLUMNS": str(columns)} if columns else {})}
        with CliRunner(env=variables).isolation() as (out, err, _):
            if is_kafka_style(argv):
                code = run_kafka_style(argv)
            else:
                code = run_guarded(lambda: cli.main(args=argv, prog_name="kreassign", standalone_mode=False, obj=obj),
                                   debug="--debug" in argv)
            sys.stdout.flush()
            sys.stderr.flush()
            return Ran(int(code or 0), out.getvalue().decode(), err.getvalue().decode())

    def argv(self, *args: str) -> list[str]:
        """The command line of a run in a process of its own, for a launcher of the test's own
        (a JVM-style spawn that dies with the test, a log file)."""
        return [*ENTRY, *args]

    def subprocess(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300,
                   cwd: str | Path | None = None, input: str | None = None) -> subprocesses.CompletedProcess[str]:
        """Run in a process of its own to its end; `env` adds to this process's environment."""
        return subprocesses.run([*ENTRY, *args], capture_output=True, text=True, timeout=timeout, check=False,
                                env=_environment(env), cwd=cwd, input=input,
                                stdin=subprocesses.DEVNULL if input is None else None)

    def start(self, *args: str, env: Mapping[str, str] | None = None, **popen: Any) -> subprocesses.Popen[str]:
        """Start in a process of its own and return at once (stdout and stderr piped unless
        `popen` says otherwise)."""
        popen.setdefault("stdout", subprocesses.PIPE)
        popen.setdefault("stderr", subprocesses.PIPE)
        return subprocesses.Popen([*ENTRY, *args], text=True, env=_environment(env), **popen)


def _environment(extra: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if extra is None else {**os.environ, **extra}


def _connecting_to(port: Any) -> Callable[..., Any]:
    @contextmanager
    def connect(*_: Any) -> Iterator[Any]:
        yield port
    return connect


KREASSIGN = Kreassign()
"""the runner, for helpers outside a test function (tests take the `kreassign` fixture)"""
