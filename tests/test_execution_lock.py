"""The execution lock's protocol: Fischer's timed mutual exclusion on a cluster config marker."""
from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from fake_cluster import FakeCluster
from kreassign.cluster.errors import ClusterError
from kreassign.execute.errors import ExecutionLocked, LockLost, StopRequested
from kreassign.execute.lock import LOCK_KEY, STOP_KEY, ExecutionLock
from kreassign.execute.lock_owner import Owner


class StaleFirstRead(FakeCluster):
    """Each contender's first read of the marker shows it free, as when both read before either wrote."""

    def __init__(self) -> None:
        super().__init__([1, 2])
        self.fresh_reads = 0

    def read_markers(self, keys: Iterable[str]) -> dict[str, str]:
        if self.fresh_reads < 2:
            self.fresh_reads += 1
            return {}
        return super().read_markers(keys)


def lock(port: FakeCluster, tmp_path: Path, pid: int, host: str, **kw: object) -> ExecutionLock:
    kw.setdefault("wall", lambda: 1000.0)
    kw.setdefault("sleep", lambda s: None)
    return ExecutionLock(port, tmp_path / host, command="execute", journal_id="c/p", host=host, pid=pid,
                         settle_s=1.0, alive=lambda p: True, **kw)  # type: ignore[arg-type]


def test_two_contenders_that_both_read_free_end_with_one_owner(tmp_path: Path) -> None:
    port = StaleFirstRead()
    second = lock(port, tmp_path, 2, "host-b")
    won: list[ExecutionLock] = []
    # A's settle wait is when B runs all of its acquire: B also read "free" and writes last.
    first = lock(port, tmp_path, 1, "host-a", sleep=lambda s: won.append(second.acquire()))
    with pytest.raises(ExecutionLocked, match="host host-b, pid 2"):
        first.acquire()
    assert won == [second] and second.owner is not None and first.owner is None
    assert Owner.from_value(port.markers[LOCK_KEY]) == second.owner


def test_a_writer_slower_than_half_the_settle_time_does_not_trust_its_read(tmp_path: Path) -> None:
    port = FakeCluster([1])
    now = [0.0]

    def wall() -> float:
        now[0] += 0.3  # every look at the clock is 0.3 s later: read-to-write takes 0.6 s > 0.5 s
        return now[0]

    slow = lock(port, tmp_path, 1, "host-a", wall=wall)
    with pytest.raises(ExecutionLocked, match="answered too slowly"):
        slow.acquire()
    assert slow.owner is None


def test_a_marker_kreassign_cannot_read_is_never_taken_over(tmp_path: Path) -> None:
    port = FakeCluster([1])
    port.markers[LOCK_KEY] = "garbage written by hand"
    with pytest.raises(ExecutionLocked, match="host unknown"):
        lock(port, tmp_path, 1, "host-a").acquire(force=True)


def test_the_owner_stops_when_asked_and_renews_its_lease(tmp_path: Path) -> None:
    port = FakeCluster([1])
    now = [1000.0]
    owner = lock(port, tmp_path, 1, "host-a", wall=lambda: now[0], lease_s=120.0).acquire()
    now[0] += 70  # more than half the lease used: the next check writes a new lease end
    owner.check()
    assert owner.owner is not None and owner.owner.lease_until == now[0] + 120
    port.markers[STOP_KEY] = owner.owner.token
    with pytest.raises(StopRequested):
        owner.check()
    owner.release()
    assert port.markers == {}


def test_a_stale_owner_stops_once_another_run_took_the_lock(tmp_path: Path) -> None:
    port = FakeCluster([1])
    owner = lock(port, tmp_path, 1, "host-a").acquire()
    port.markers[LOCK_KEY] = Owner("host-b", 9, "resume", "c/p", 0.0, 9e9, "other").to_value()
    with pytest.raises(LockLost, match="host host-b, pid 9"):
        owner.check()
    owner.release()
    assert LOCK_KEY in port.markers  # not ours to delete


class RefusingWrites(FakeCluster):
    """A cluster whose offsets coordinator stopped answering commits (a broker restart)."""

    def write_markers(self, ops: dict[str, str | None]) -> Any:
        if LOCK_KEY in ops and ops[LOCK_KEY] is None:
            raise ClusterError("Could not write the execution lock within 3s")
        return super().write_markers(ops)


def test_a_lock_that_cannot_be_given_back_is_said_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = RefusingWrites([1])
    waits: list[float] = []
    owner = lock(port, tmp_path, 1, "host-a", sleep=waits.append, lease_s=120.0).acquire()
    waits.clear()
    owner.release()
    assert waits == [1.0, 1.0] and LOCK_KEY in port.markers  # three tries, then the lease ends it
    assert caplog.messages == ["Warning: could not give the execution lock back (Could not write the execution "
                               "lock within 3s); other hosts see the cluster locked until its lease ends at "
                               + time.strftime("%H:%M:%S", time.localtime(1120.0)) + "."]
