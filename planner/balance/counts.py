"""The replica-count phase of the balanced planner, move by move (after `bulk.py`'s vectorised
first pass): replicas go from brokers above their count target to brokers below it."""
from __future__ import annotations

from kreassign.planner.balance.engine import SCAN, TOP_SINKS, Heap, Layout


def balance_counts(layout: Layout, aim: float | None, keep_disk: bool, relax_topic: bool) -> None:
    """Move replicas from brokers above their count target to brokers below it.

    The replica moved is the one whose size best fits both brokers' byte gaps (source to
    `aim` times its target, sink to its target), so bytes balance along the way; with no
    `aim` (bytes are not a goal) the smallest replica goes.
    """
    t = layout.targets
    assert t is not None
    stamps = [0] * layout.nb
    src = Heap(stamps)
    heaps = [Heap(stamps) for _ in range(max(layout.racks, 1))]
    for b in range(layout.nb):
        ex = layout.count[b] - t.count[b]
        if ex > 0 and layout.lists[b]:
            src.push(_src_key(layout, b), b)
        elif ex < 0 and layout.recv[b]:
            heaps[layout.rack[b]].push(layout.sink_key(b), b)
    while True:
        s = src.pop()
        if s < 0:
            return
        done = _count_move(layout, s, heaps, aim, keep_disk, relax_topic)
        if done < 0:
            continue
        stamps[s] += 1
        stamps[done] += 1
        if layout.count[s] > t.count[s]:
            src.push(_src_key(layout, s), s)
        if layout.count[done] < t.count[done]:
            heaps[layout.rack[done]].push(layout.sink_key(done), done)

def _count_move(layout: Layout, s: int, heaps: list[Heap], aim: float | None, keep_disk: bool,
                relax_topic: bool) -> int:
    """One replica from s to the best sink that can take one; returns the sink or -1.

    Tries a short scan near the best-fitting size on the top sinks, then deeper sinks, then
    every replica of s; a lower-ranked topic cap is relaxed last."""
    full = len(layout.lists[s])
    relax = relax_topic and layout.topic_on
    attempts = [(1, SCAN, True), (4 * TOP_SINKS, SCAN, True)]
    if relax:
        attempts.append((TOP_SINKS, SCAN, False))
    attempts.append((TOP_SINKS, full, True))
    if relax:
        attempts.append((4 * TOP_SINKS, full, False))
    for depth, scan, topic_check in attempts:
        layout.topic_check = layout.topic_on and topic_check
        try:
            for d in layout.candidate_sinks(heaps, s, depth):
                want = 0.0 if aim is None else _count_move_size(layout, s, d, aim)
                p = layout.pick(s, d, want, limit=scan)
                if p >= 0 and (not keep_disk or layout.disk_ok(p, s, d)):
                    layout.move(p, s, d)
                    return d
        finally:
            layout.topic_check = layout.topic_on
    return -1

def _src_key(layout: Layout, b: int) -> tuple[float, ...]:
    t = layout.targets
    assert t is not None
    return (-(layout.count[b] - t.count[b]), -(layout.bytes[b] - t.bytes[b]) / layout.tscale, layout.tb[b])

def _count_move_size(layout: Layout, s: int, d: int, aim: float) -> float:
    t = layout.targets
    assert t is not None
    ex = max(layout.count[s] - t.count[s], 1)
    de = max(t.count[d] - layout.count[d], 1)
    to_d = (t.bytes[d] - layout.bytes[d]) / de
    if ex >= len(layout.lists[s]):
        # A source that must give every replica (a removed broker) sheds its bytes anyway:
        # capping the size at its mean would leave its big replicas for the last sinks.
        return max(0.0, to_d)
    from_s = (layout.bytes[s] - t.bytes[s] * aim) / ex
    return max(0.0, min(from_s, to_d))
