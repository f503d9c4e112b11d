"""One writer per cluster: the execution lock taken by `execute`, `resume` and `abort`.

Two layers, because the journal is a local file and kreassign may run on several hosts:

* a local lock file (`<journal dir>/<cluster>/.execution.lock`, `flock`) for processes on this
  host. The kernel drops the lock when its process dies (kill -9 included), so being able to
  take it proves that no process on this host still runs: that is the "pid gone" proof.
* a marker on the cluster itself: the metadata of an offset committed by the consumer group
  `kreassign.execution.lock` on partition 0 of `__consumer_offsets` (`ClusterPort.write_markers`).
  It holds the owner: host, pid, command, journal, start time, a lease end, a random token and
  the lock format version. A commit is answered by the group's coordinator, and every later
  OffsetFetch reads what it stored. (A custom dynamic broker config, the first design, cannot
  serve: a real broker stores it but reports its value as sensitive, that is, never.)

Kafka has no compare-and-swap for committed offsets, so the marker is taken with Fischer's timed mutual
exclusion: read it (free, or its owner proven dead), write our record, wait `settle_s`, read it
again and own it only if our token is still there. Two contenders that both saw it free both
write; each waits longer than the other's read-to-write gap before re-reading, so both re-reads
see the same (last) record and only one proceeds. The protocol is safe as long as a writer's
read-to-write time stays below `settle_s`, so a contender whose own read-to-write took longer
gives up instead of trusting its read.

The owner renews the lease at every step (`check`): it re-reads the marker, stops when its token
is gone (another process took over after the lease expired: the stale writer must not go on)
or when `abort` asked it to stop (`kreassign.execution.stop` holds its token), and writes a new
lease end when half of it is used. Leases compare wall clocks across hosts: keep them in sync
(NTP); the default lease (120 s) is far above usual skew.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO

from kreassign.cluster.authorization import LOCK_ACLS
from kreassign.cluster.errors import ClusterError, JournalError, clip
from kreassign.cluster.port import ClusterPort
from kreassign.cluster.processes import pid_alive
from kreassign.execute.errors import ExecutionLocked, LockLost, StopRequested
from kreassign.execute.lock_owner import Owner

_log = logging.getLogger(__name__)

LOCK_KEY = "kreassign.execution.lock"
STOP_KEY = "kreassign.execution.stop"
RATES_KEY = "kreassign.execution.rates"
"""a rate change for the running run (`throttle set` during a run), and the run's answer"""
DEFAULT_LEASE_S = 120.0
DEFAULT_SETTLE_S = 1.0
ENV_SETTLE = "KREASSIGN_LOCK_SETTLE_S"
"""overrides the settle wait: a test suite whose clusters answer in microseconds sets it to 0"""


def default_settle_s() -> float:
    try:
        value = float(os.environ.get(ENV_SETTLE, DEFAULT_SETTLE_S))
    except ValueError:
        return DEFAULT_SETTLE_S
    return value if 0 <= value < 3600 else DEFAULT_SETTLE_S


@dataclass(frozen=True)
class LockConfig:
    """How runs take the execution lock (tests inject the clocks and the identity)."""

    wall: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    lease_s: float = DEFAULT_LEASE_S
    settle_s: float = field(default_factory=default_settle_s)
    host: str | None = None
    pid: int | None = None
    alive: Callable[[int], bool] | None = None

    def lock(self, port: ClusterPort, folder: Path, *, command: str, journal_id: str) -> ExecutionLock:
        return ExecutionLock(port, folder, command=command, journal_id=journal_id, wall=self.wall, sleep=self.sleep,
                             lease_s=self.lease_s, settle_s=self.settle_s, host=self.host, pid=self.pid,
                             alive=self.alive or pid_alive)




@dataclass(frozen=True)
class RateRequest:
    """`throttle set` during a run asks the run's owner to change its rates (the owner is the
    journal's one writer): held in the marker `kreassign.execution.rates`, addressed to the
    owner's token. The owner applies it at its next poll and writes its answer over it."""

    token: str
    """the owner it is addressed to"""
    id: str
    leader_rate: int | None
    follower_rate: int | None
    brokers: tuple[int, ...] | None
    """only these brokers (None: the run's rates for every broker of the plan)"""
    by: str
    state: str = "asked"
    """asked, applied (the owner's answer), refused"""
    applied: tuple[int, ...] = ()
    """brokers whose rates the owner changed at once (the later waves' brokers get them when they start)"""
    pending: tuple[int, ...] = ()
    """brokers that did not answer: the owner sets them when they are back"""
    message: str = ""

    def to_value(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_value(cls, value: str | None) -> RateRequest | None:
        if not value:
            return None
        try:
            data = json.loads(value)
            brokers = data.get("brokers")
            return cls(str(data["token"]), str(data["id"]), _opt_int(data.get("leader_rate")),
                       _opt_int(data.get("follower_rate")),
                       None if brokers is None else tuple(int(b) for b in brokers), str(data.get("by", "")),
                       str(data.get("state", "asked")), tuple(int(b) for b in data.get("applied", ())),
                       tuple(int(b) for b in data.get("pending", ())), str(data.get("message", "")))
        except (ValueError, KeyError, TypeError):
            return None


def _opt_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


class ExecutionLock:
    """The execution lock of one cluster, as held by this process.

    Args:
        port: the cluster (holds the marker).
        folder: the cluster's journal folder (holds the local lock file).
        journal_id: the plan's journal id, `<cluster>/<plan hash>`.
        wall: the wall clock (seconds since the epoch) for leases; sleep: waits (injected in tests).
    """

    def __init__(self, port: ClusterPort, folder: Path, *, command: str, journal_id: str,
                 wall: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 lease_s: float = DEFAULT_LEASE_S, settle_s: float = DEFAULT_SETTLE_S,
                 host: str | None = None, pid: int | None = None,
                 alive: Callable[[int], bool] = pid_alive) -> None:
        self.port, self.folder, self.command, self.journal_id = port, folder, command, journal_id
        self.wall, self.sleep, self.lease_s, self.settle_s = wall, sleep, lease_s, settle_s
        self.host = host or socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.alive = alive
        self.owner: Owner | None = None
        self.asked_rates: RateRequest | None = None
        """a rate change addressed to this run, seen by `check` and not yet taken"""
        self._answered: set[str] = set()
        self.took_over: Owner | None = None
        """the dead owner this run took the lock from, if any"""
        self._file: IO[str] | None = None

    # ---- reading --------------------------------------------------------------------------------
    def read(self) -> tuple[Owner | None, str | None]:
        """The marker's owner and the stop request (a token), as the cluster has them now."""
        values = self.port.read_markers([LOCK_KEY, STOP_KEY])
        return Owner.from_value(values.get(LOCK_KEY)), values.get(STOP_KEY)

    def dead(self, owner: Owner) -> bool:
        """Proven dead: on this host, its process is gone (we hold the local lock, and the pid
        does not run); elsewhere, its lease has expired."""
        if owner.host == self.host:
            return not self.alive(owner.pid)
        return self.wall() >= owner.lease_until

    # ---- taking and giving back -------------------------------------------------------------------
    def acquire(self, *, force: bool = False, take_over_same_journal: bool = True) -> ExecutionLock:
        """Take the lock, or raise ExecutionLocked naming the owner.

        A dead owner's lock is taken over when `force`, or when it ran the same journal and
        `take_over_same_journal` (resume, abort, and the same execute run again continue its
        work). A live owner is never overridden, `force` or not.
        """
        self._lock_local()
        try:
            written: str | None = None
            for _ in range(3):
                start = self.wall()
                current, _stop = self.read()
                if current is not None and current.token != written:
                    if not self.dead(current):
                        raise ExecutionLocked(self._held_message(current), current)
                    if not (force or (take_over_same_journal and current.journal == self.journal_id)):
                        raise ExecutionLocked(
                            f"the execution lock of this cluster is held by {current.describe()}, which is no longer "
                            "running (" + ("its process is gone" if current.host == self.host else "its lease expired")
                            + "); its journal may still be open. Finish it first (`kreassign resume` or "
                            "`kreassign abort` with that journal), or take the lock with --force", current)
                    self.took_over = current
                now = self.wall()
                mine = Owner(self.host, self.pid, self.command, self.journal_id, now, now + self.lease_s,
                             secrets.token_hex(8))
                self._write(mine)
                written = mine.token
                if self.settle_s > 0 and self.wall() - start > self.settle_s / 2:
                    continue  # too slow to trust our read: another writer may have come between
                self.sleep(self.settle_s)
                after, _stop = self.read()
                if after is None or after.token != mine.token:
                    raise ExecutionLocked(self._held_message(after) if after is not None else
                                          "another kreassign took the execution lock of this cluster at the same time "
                                          "and gave it up again; run the command again", after)
                self.owner = mine
                return self
            raise ExecutionLocked("the cluster answered too slowly to take the execution lock safely "
                                  f"(more than {self.settle_s / 2:g}s between reading and writing it); try again")
        except BaseException:
            self._unlock_local()
            raise

    def check(self) -> None:
        """At every step of the run: stop if the lock was lost or abort asked to stop; renew the lease."""
        if self.owner is None:
            return
        try:
            values = self.port.read_markers([LOCK_KEY, STOP_KEY, RATES_KEY])
        except ClusterError:
            # The marker's coordinator is moving (its broker stopped or restarts). No one can take
            # the lock before our lease ends, so the run goes on while a quarter of it is left,
            # and reads (and renews) it again at the next step.
            if self.owner.lease_until - self.wall() > self.lease_s / 4:
                return
            raise
        current, stop = Owner.from_value(values.get(LOCK_KEY)), values.get(STOP_KEY)
        asked = RateRequest.from_value(values.get(RATES_KEY))
        if (asked is not None and asked.state == "asked" and asked.token == self.owner.token
                and asked.id not in self._answered):
            self.asked_rates = asked
        if current is None or current.token != self.owner.token:
            by = f" by {current.describe()}" if current is not None else ""
            raise LockLost(f"this run lost the execution lock of the cluster (its lease expired and it was "
                           f"taken over{by}); it stopped without changing anything more")
        if stop == self.owner.token:
            raise StopRequested("`kreassign abort` asked this run to stop: nothing more is submitted; the abort "
                                "cancels the moves and restores the throttles")
        if self.owner.lease_until - self.wall() < self.lease_s / 2:
            renewed = replace(self.owner, lease_until=self.wall() + self.lease_s)
            self._write(renewed)
            self.owner = renewed

    def release(self) -> None:
        """Give the lock back (only if it is still ours) and clear a stop request addressed to us."""
        try:
            for attempt in range(3):
                # a coordinator that moved (its broker restarted) answers again after a moment
                try:
                    self._give_back()
                    break
                except ClusterError as exc:
                    if attempt < 2:
                        self.sleep(1.0)
                    elif self.owner is not None:
                        # the lease expires on its own; same-host runs see the local lock free
                        until = time.strftime("%H:%M:%S", time.localtime(self.owner.lease_until))
                        _log.warning("Warning: could not give the execution lock back (%s); other hosts see the "
                                     "cluster locked until its lease ends at %s.", exc, until)
        finally:
            self.owner = None
            self._unlock_local()

    def _give_back(self) -> None:
        if self.owner is None:
            return
        current, stop = self.read()
        ops: dict[str, str | None] = {}
        if current is not None and current.token == self.owner.token:
            ops[LOCK_KEY] = None
        if stop is not None and stop == self.owner.token:
            ops[STOP_KEY] = None
        if ops:
            error = self.port.write_markers(ops)
            if error is not None:
                raise ClusterError(f"could not give the execution lock back: {error.message}")

    def __enter__(self) -> ExecutionLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ---- rate changes through the run -----------------------------------------------------------------
    def take_rates(self) -> RateRequest | None:
        """The owner's side: a rate change asked since the last poll (once)."""
        asked, self.asked_rates = self.asked_rates, None
        if asked is not None:
            self._answered.add(asked.id)  # the checks while it is applied see it again: take it once
        return asked

    def answer_rates(self, asked: RateRequest, *, applied: tuple[int, ...], pending: tuple[int, ...],
                     message: str, refused: bool = False) -> None:
        self._answered.add(asked.id)
        answer = replace(asked, state="refused" if refused else "applied", applied=applied, pending=pending,
                         message=message)
        self.port.write_markers({RATES_KEY: answer.to_value()})

    def ask_rates(self, owner: Owner, leader_rate: int | None, follower_rate: int | None,
                  brokers: tuple[int, ...] | None) -> RateRequest:
        """The asking side (`throttle set`): address a rate change to the running `owner`."""
        waiting = RateRequest.from_value(self.port.read_markers([RATES_KEY]).get(RATES_KEY))
        if waiting is not None and waiting.state == "asked" and waiting.token == owner.token:
            raise ExecutionLocked(f"another rate change ({waiting.by}) is waiting for {owner.describe()} to take it; "
                                  "run throttle set again once it is done", owner)
        asked = RateRequest(owner.token, secrets.token_hex(8), leader_rate, follower_rate, brokers,
                            f"{self.host} pid {self.pid}")
        error = self.port.write_markers({RATES_KEY: asked.to_value()})
        if error is not None:
            raise ClusterError(f"could not pass the rate change to the running kreassign: {error.message}")
        return asked

    def await_answer(self, asked: RateRequest, owner: Owner, timeout_s: float,
                     poll_s: float = 1.0) -> RateRequest | None:
        """Wait for the owner's answer to `asked`; None when it did not answer in time or gave the
        lock back first. The marker is cleared either way (a late owner then finds nothing)."""
        waited = 0.0
        try:
            while True:
                values = self.port.read_markers([LOCK_KEY, RATES_KEY])
                seen = RateRequest.from_value(values.get(RATES_KEY))
                if seen is not None and seen.id == asked.id and seen.state != "asked":
                    return seen
                current = Owner.from_value(values.get(LOCK_KEY))
                if current is None or current.token != owner.token or waited >= timeout_s:
                    return None
                self.sleep(poll_s)
                waited += poll_s
        finally:
            self.port.write_markers({RATES_KEY: None})

    # ---- asking a live owner to stop -------------------------------------------------------------------
    def request_stop(self, owner: Owner) -> None:
        error = self.port.write_markers({STOP_KEY: owner.token})
        if error is not None:
            raise ClusterError(f"could not ask the running kreassign to stop: {error.message}")

    def wait_released(self, owner: Owner, timeout_s: float, poll_s: float = 1.0) -> bool:
        """Wait until `owner` gave the lock back or is proven dead; False on timeout."""
        waited = 0.0
        while True:
            current, _stop = self.read()
            if current is None or current.token != owner.token:
                return True
            if owner.host == self.host and not self.alive(owner.pid):
                return True
            if owner.host != self.host and self.wall() >= current.lease_until:
                return True
            if waited >= timeout_s:
                return False
            self.sleep(poll_s)
            waited += poll_s

    # ---- internals ---------------------------------------------------------------------------------
    def _held_message(self, owner: Owner) -> str:
        if owner.host == self.host:
            proof = "its process is running on this host"
        else:
            left = max(0.0, owner.lease_until - self.wall())
            proof = f"its lease runs {left:.0f}s more; --force works only once it has expired"
        return (f"another run holds the execution lock of this cluster: {owner.describe()}; {proof}. "
                "Wait for it, or stop it with `kreassign abort` on its journal")

    def _write(self, owner: Owner) -> None:
        error = self.port.write_markers({LOCK_KEY: owner.to_value()})
        if error is not None:
            raise ClusterError(f"could not write the execution lock (an offset of the consumer group {LOCK_KEY}): "
                               f"{error.message}. kreassign needs {LOCK_ACLS} for it; nothing was changed")

    @property
    def _path(self) -> Path:
        return self.folder / ".execution.lock"

    def _lock_local(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self._path, "a+", encoding="utf-8")
        except (OSError, ValueError) as exc:
            raise JournalError(f"cannot create the lock file {clip(self._path)}: {getattr(exc, 'strerror', None) or exc}; "
                               "give a writable "
                               "journal directory with --journal-dir or $KREASSIGN_JOURNAL_DIR") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            owner = Owner.from_value(holder) if holder else None
            try:
                marked, _stop = self.read()
            except ClusterError:
                marked = None
            if marked is not None and marked.host == self.host:
                owner = marked  # the cluster's record carries the token `abort` needs
            raise ExecutionLocked(self._held_message(owner) if owner is not None else
                                  "another kreassign on this host holds the execution lock of this cluster "
                                  f"({self._path}); wait for it, or stop it with `kreassign abort`", owner) from None
        handle.seek(0)
        handle.truncate()
        handle.write(Owner(self.host, self.pid, self.command, self.journal_id, self.wall(), float("inf"),
                           "local").to_value())
        handle.flush()
        self._file = handle

    def _unlock_local(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the flock
            self._file = None
