"""Clearing throttles at the end of a run, restoring what the operator had set before.

Kafka's tool DELETEs the three broker rates on every broker and both replica lists on the
plan's topics (reference §3.6). kreassign touches the same resources, but where the execution
journal recorded a value that existed before the run, it SETs that value back instead.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.config_readback import Confirm
from kreassign.cluster.port import ApiError, ClusterPort
from kreassign.execute.journal import Journal, journaled
from kreassign.execute.throttle_io import apply_configs, confirmed_step, restore_ops, restored_values


@dataclass(frozen=True)
class ClearResult:
    """What a clear did. `brokers`/`topics` are every resource it covered, in the order Kafka adds
    them to the sets it prints (`cluster.java_order` gives the printed order)."""

    brokers: tuple[int, ...]
    topics: tuple[str, ...]
    restored_brokers: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    """previous values SET back instead of deleted"""
    restored_topics: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    skipped: Mapping[int, ApiError] = field(default_factory=dict)
    """brokers that did not answer: their throttles are still in place (pending; never in
    `restored_brokers`)"""
    dry_run: bool = False
    retried: tuple[int, ...] = ()
    """brokers that did not answer at first and were restored by a later attempt of the same run"""
    unconfirmed: tuple[int, ...] = ()
    """brokers that took the change but had not applied it by the end of the wait (`Confirm`):
    for a moment they may still read back, and enforce, the run's rate"""

    @property
    def complete(self) -> bool:
        return not self.skipped

    def as_dict(self) -> dict[str, Any]:
        return {
            "brokers": list(self.brokers), "topics": list(self.topics),
            "restored": {"brokers": {str(b): dict(v) for b, v in self.restored_brokers.items()},
                         "topics": {t: dict(v) for t, v in self.restored_topics.items()}},
            "skipped_brokers": {str(b): e.message for b, e in self.skipped.items()},
            "pending_brokers": sorted(self.skipped), "retried_brokers": list(self.retried),
            "unconfirmed_brokers": list(self.unconfirmed), "complete": self.complete, "dry_run": self.dry_run,
        }

    @property
    def cleared_brokers(self) -> tuple[int, ...]:
        """The brokers whose throttles this clear did restore or delete (the skipped ones not)."""
        return tuple(b for b in self.brokers if b not in self.skipped)


def clear_throttles(port: ClusterPort, brokers: Iterable[int], topics: Iterable[str], *,
                    journal: Journal | None = None, dry_run: bool = False,
                    confirm: Confirm | None = None) -> ClearResult:
    """Clear (restore) throttles on these brokers and topics: brokers first, then topics, as Kafka.

    With a journal, recorded previous values are restored and the journal is closed ("finished")
    once every broker answered; brokers that did not answer stay "pending" in it for `resume`.
    With `confirm`, it then waits until every broker that answered reads its change back (as a
    run waits before its moves start), so a `throttle show` right after sees what it left;
    brokers still behind at the end of the wait are in `unconfirmed`.

    Raises:
        ClusterError: the cluster refused a change (already-applied changes stay applied and the
            journal records the failure).
    """
    broker_ids = tuple(dict.fromkeys(brokers))  # in the order given: Kafka prints them in its sets' order
    topic_names = tuple(dict.fromkeys(topics))
    broker_ops, topic_ops = restore_ops(
        broker_ids, topic_names,
        previous_brokers=journal.previous_brokers if journal else None,
        previous_topics=journal.previous_topics if journal else None)
    restored_b, restored_t = restored_values(broker_ops), restored_values(topic_ops)
    if dry_run:
        return ClearResult(broker_ids, topic_names, restored_b, restored_t, dry_run=True)
    if journal is not None:
        journal.state = "clearing"
    with journaled(journal, "clear-throttles", brokers=list(broker_ids), topics=list(topic_names)):
        skipped = dict(apply_configs(port, brokers=broker_ops).skipped)
        apply_configs(port, topics=topic_ops)
    unconfirmed = confirmed_step(journal, "confirm-broker-clear", port,
                                 {b: ops for b, ops in broker_ops.items() if b not in skipped}, confirm)
    if journal is not None:
        journal.pending_brokers = {b: dict(broker_ops[b]) for b in skipped}
        journal.record("clear-throttles", "done", skipped=sorted(skipped))
        journal.set_state("clearing" if skipped else "finished")
    # a broker that did not answer was not restored: never report it as such
    restored_b = {b: v for b, v in restored_b.items() if b not in skipped}
    return ClearResult(broker_ids, topic_names, restored_b, restored_t, skipped, unconfirmed=unconfirmed)


CLEAR_RETRY_S = 120.0
"""how long a run goes on retrying the brokers its clear could not reach (a broker restart takes
15-25 s on a loaded machine; a rolling restart restarts one broker at a time)"""


def clear_retrying(port: ClusterPort, brokers: Iterable[int], topics: Iterable[str], *,
                   journal: Journal | None, clock: Callable[[], float], sleep: Callable[[float], None],
                   retry_s: float = CLEAR_RETRY_S, interval_s: float = 2.0,
                   on_wait: Callable[[tuple[int, ...], float], None] = lambda brokers, left: None) -> ClearResult:
    """`clear_throttles`, then the brokers that did not answer again every `interval_s` for up
    to `retry_s` (a broker restarting comes back within that): each is restored exactly once it
    answers, and one still silent at the end stays pending in the journal (`resume` finishes it).
    `on_wait` hears which brokers it waits for and how long it still tries, at least every 30 s."""
    confirm = Confirm(clock, sleep)
    first = clear_throttles(port, brokers, topics, journal=journal, confirm=confirm)
    unconfirmed = list(first.unconfirmed)
    skipped = dict(first.skipped)
    restored = dict(first.restored_brokers)
    deadline = clock() + retry_s
    retried: list[int] = []
    while skipped and clock() < deadline:
        on_wait(tuple(sorted(skipped)), max(deadline - clock(), 0.0))
        sleep(min(interval_s, 30.0, max(deadline - clock(), 0.0)))
        again = clear_throttles(port, sorted(skipped), (), journal=journal, confirm=confirm)
        unconfirmed += again.unconfirmed
        retried += [b for b in sorted(skipped) if b not in again.skipped]
        restored.update(again.restored_brokers)
        skipped = dict(again.skipped)
    return ClearResult(first.brokers, first.topics, dict(sorted(restored.items())), first.restored_topics,
                       skipped, retried=tuple(retried), unconfirmed=tuple(sorted(set(unconfirmed))))
