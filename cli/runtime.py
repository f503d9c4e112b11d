"""What every live command needs at run time: the cluster connection, the journal store, the
clock, and the files named on the command line.

Tests inject the connection, the clock, the sleeper and the time of day through `Runtime`,
passed as click's `obj`; without it the real ones are used.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from kreassign.cluster.kafka_json import ParsedReassignment
    from kreassign.cluster.model import ClusterState
    from kreassign.cluster.port import ClusterPort
    from kreassign.execute.journal import JournalStore
    from kreassign.execute.lock import LockConfig
    from kreassign.execute.run import RunControl

Connect = Callable[[str | None, str | None, float | None], AbstractContextManager["ClusterPort"]]


@dataclass
class Runtime:
    """What tests inject (as click's `obj`): the connection, the clock, the sleeper, the time of day."""

    connect: Connect | None = None
    clock: Callable[[], float] | None = None
    sleep: Callable[[float], None] | None = None
    now: Callable[[], datetime] | None = None
    lock: LockConfig | None = None
    """how runs take the cluster's execution lock (its clocks and identity)"""


def runtime() -> Runtime:
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Runtime) if ctx is not None else None
    return obj if obj is not None else Runtime()


def timing() -> tuple[Callable[[], float], Callable[[float], None]]:
    """The clock and the sleeper of a loop: the injected ones, else the real ones."""
    import time

    rt = runtime()
    return rt.clock or time.monotonic, rt.sleep or time.sleep


def run_control(force: bool = False) -> RunControl:
    """The lock settings and clocks of a run that writes (execute, resume, abort)."""
    from kreassign.execute.lock import LockConfig
    from kreassign.execute.run import RunControl

    rt = runtime()
    clock, sleep = timing()
    # The lock's settle wait must not advance an injected clock (tests of the lock inject their own).
    default = LockConfig(sleep=lambda seconds: None) if rt.sleep is not None else LockConfig()
    return RunControl(lock=rt.lock or default, force=force, clock=clock, sleep=sleep)


def open_port(bootstrap: str | None, command_config: str | None, request_timeout_s: float | None,
              warn: Callable[[str], None] | None = None) -> AbstractContextManager[ClusterPort]:
    """Connect to the cluster through the admin adapter; warnings go to `warn` (default: stderr)."""
    from kreassign.cluster.admin import open_admin
    from kreassign.cluster.errors import InputError

    if not bootstrap:
        raise InputError("no cluster given: use --bootstrap-server HOST:PORT (or set KREASSIGN_BOOTSTRAP_SERVER)")
    return open_admin(bootstrap, command_config=command_config, timeout_s=request_timeout_s,
                      warn=warn or (lambda line: click.echo(f"Warning: {line}", err=True)),
                      waiting=lambda line: click.echo(f"Waiting: {line}", err=True))


def connect(bootstrap: str | None, command_config: str | None,
            request_timeout_s: float | None) -> AbstractContextManager[ClusterPort]:
    """The injected connection if a test gave one, else a real one (`open_port`)."""
    rt = runtime()
    if rt.connect is not None:
        return rt.connect(bootstrap, command_config, request_timeout_s)
    return open_port(bootstrap, command_config, request_timeout_s)


def load_state(bootstrap_server: str | None, snapshot: str | None, command_config: str | None,
               request_timeout: float | None, sample: float | None, *, with_sizes: bool = True) -> ClusterState:
    """The cluster state from `--bootstrap-server` (write rates sampled for `--sample`, default
    a short sample) or `--snapshot`; notes about what could not be measured go to stderr."""
    from kreassign.cli.options import DEFAULT_SAMPLE_S
    from kreassign.cluster.source import load_cluster_state

    clock, sleep = timing()
    live = bool(bootstrap_server) and not snapshot
    seconds = (DEFAULT_SAMPLE_S if sample is None else sample) if live else 0.0
    return load_cluster_state(bootstrap_server=bootstrap_server, snapshot=snapshot, command_config=command_config,
                              timeout_s=request_timeout, with_sizes=with_sizes, sample_s=seconds, clock=clock,
                              sleep=sleep, warn=lambda line: click.echo(f"Note: {line}", err=True))


def journal_store(journal_dir: str | None) -> JournalStore:
    from kreassign.execute.journal import JournalStore

    return JournalStore(journal_dir)


def read_text(path: str) -> str:
    """Read a JSON file given on the command line (bounded, `cluster.files`). A file that is not
    there or cannot be opened is Kafka's `Error: Unable to read file <path>` (3.9 and 4.x alike);
    other failures name the reason."""
    import errno

    from kreassign.cluster.errors import PATH_CLIP, AdminCommandFailed, clip
    from kreassign.cluster.files import PLAN_LIMIT
    from kreassign.cluster.files import read_text as read_bounded

    try:
        return read_bounded(path, limit=PLAN_LIMIT)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise AdminCommandFailed(f"Unable to read file {path}") from None  # Kafka prints it whole
    except OSError as exc:
        if exc.errno == errno.EILSEQ:
            raise AdminCommandFailed(f"{clip(path, PATH_CLIP)} is not a UTF-8 text file ({exc.strerror})") from None
        raise AdminCommandFailed(f"{clip(path, PATH_CLIP)} ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise AdminCommandFailed(f"{clip(path, PATH_CLIP)} ({exc})") from None


def write_text(path: str, text: str) -> None:
    """Write a file named on the command line; a missing directory or a permission problem is
    one clear line, not a traceback."""
    from kreassign.cluster.errors import PATH_CLIP, InputError, clip

    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except (OSError, ValueError) as exc:
        hint = " (create the directory first)" if isinstance(exc, FileNotFoundError) else ""
        why = getattr(exc, "strerror", None) or exc
        raise InputError(f"cannot write {clip(path, PATH_CLIP)}: {why}{hint}") from None


def read_plan(path: str) -> ParsedReassignment:
    """A reassignment JSON file named on the command line, parsed and validated as Kafka does."""
    from kreassign.cluster.kafka_json import parse_reassignment

    return parse_reassignment(read_text(path))
