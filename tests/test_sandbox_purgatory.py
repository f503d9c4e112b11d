"""Delayed operations and request timings, without a server."""
from __future__ import annotations

from kreassign.sandbox.purgatory import Delayed, Purgatory
from kreassign.sandbox.timings import RequestTiming, RequestTimings


def test_ready_expired_and_waiting_operations() -> None:
    flag = {"ready": False}
    ready = Delayed(0.0, 5.0, lambda now: flag["ready"], lambda now, expired: ("ready", now, expired),
                    lambda now: 2.0)
    expiring = Delayed(0.0, 1.0, lambda now: False, lambda now, expired: ("expired", now, expired))
    p = Purgatory()
    p.park(ready)
    p.park(expiring)
    assert p.next_wake(0.0) == 1.0
    assert p.poke(0.5) == []
    assert p.poke(1.0) == [(expiring, ("expired", 1.0, True))]
    assert p.next_wake(1.0) == 2.0
    flag["ready"] = True
    assert p.poke(1.5) == [(ready, ("ready", 1.5, False))]
    assert len(p) == 0 and p.next_wake(1.5) is None


def test_a_failing_operation_is_handed_back_and_does_not_strand_others() -> None:
    def boom(now: float, expired: bool) -> None:
        raise RuntimeError("bad")

    broken = Delayed(0.0, 1.0, lambda now: True, boom)
    fine = Delayed(0.0, 1.0, lambda now: True, lambda now, expired: "ok")
    p = Purgatory()
    p.park(broken)
    p.park(fine)
    (first, error), second = p.poke(0.0)
    assert first is broken and isinstance(error, RuntimeError)
    assert second == (fine, "ok")
    p.park(fine)
    p.cancel(fine)
    assert len(p) == 0


def test_timings_keep_recent_records_and_sums() -> None:
    t = RequestTimings(keep=2)
    for remote in (0.0, 500.0, 10.0):
        t.add(RequestTiming("FetchConsumer", 12, "c", 1, 0.1, 1.0, remote, 0.0))
    t.add(RequestTiming("Produce", 9, "c", 1, 0.1, 2.0, 10.0, 100.0))
    assert [x.request for x in t.recent] == ["FetchConsumer", "Produce"]
    assert t.count == {"FetchConsumer": 3, "Produce": 1}
    assert t.total_ms["FetchConsumer"]["remote"] == 510.0
    assert t.total_ms["Produce"]["throttle"] == 100.0
    assert [x.remote_ms for x in t.of("FetchConsumer")] == [10.0]
