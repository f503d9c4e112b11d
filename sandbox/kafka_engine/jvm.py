"""Starting and ending the JVMs of a local Kafka cluster so that none outlives the process that
started it.

Each JVM runs in a process group of its own (a terminal's Ctrl-C reaches the parent, which stops
the brokers in order) and asks the kernel to kill it when its parent dies (Linux's
PR_SET_PDEATHSIG): a parent that exits without stopping them, even by kill -9, takes them with it.
The death signal belongs to the parent *thread* that forked, so JVMs are started from the thread
that lives as long as the cluster (the main thread in the daemon and in tests).
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> None:
    """Ask the kernel to kill this process when `parent` dies: the `preexec_fn` (run in the
    child between fork and exec) of every JVM started here, and of the side-by-side tests' own."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def spawn(argv: Sequence[str], *, log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in its own process group, its output appended to `log`, killed with its parent."""
    parent = os.getpid()
    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, close_fds=True, process_group=0,
                                preexec_fn=lambda: die_with(parent))


def end(procs: Sequence[subprocess.Popen[bytes]], *, grace_s: float) -> None:
    """SIGTERM every process (a broker then shuts down in order: controlled shutdown, logs
    flushed), wait up to `grace_s`, then SIGKILL their process groups."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in live:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in live:
        if p.poll() is None:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def signal_process(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send `sig` to one JVM's process group (SIGSTOP and SIGCONT for a broker that hangs)."""
    if proc.poll() is None:
        _signal_group(proc, sig)
