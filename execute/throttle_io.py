"""Reading, applying and restoring throttle configs through the cluster port.

Shared by execute, verify, cancel, resume and abort. A broker that does not answer is skipped
and reported (`ApplyOutcome.skipped`) instead of failing the whole change, because one dead
broker must not block throttles everywhere else (KAFKA-13392). Any other per-resource error
(authorisation, invalid value) fails the change: callers roll back and report it.

`apply_throttles` is the one sequence that sets a run's throttles, for the plain and the paced
executor: Kafka's order, each step journaled (`journaled_step`), then (given a `Confirm`) a wait
until each broker reads its new rates back (`confirm_broker_configs`): the controller accepts a
change before the brokers apply it (a broker applies a dynamic config when it replays the metadata
record, seconds later on a loaded machine), and a move submitted in between copies unthrottled.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from kreassign.cluster.config_readback import CONFIRM_POLL_S, CONFIRM_WAIT_S, Confirm, confirm_broker_configs, own_values
from kreassign.cluster.errors import ClusterError
from kreassign.cluster.port import (
    BROKER_THROTTLE_KEYS,
    TOPIC_THROTTLE_KEYS,
    UNKNOWN_TOPIC_OR_PARTITION,
    ApiError,
    ClusterPort,
    ConfigEntry,
)
from kreassign.execute.errors import ConfigsRefused
from kreassign.execute.journal import BrokerConfigs, Journal, TopicConfigs, journaled

R = TypeVar("R", int, str)


@dataclass(frozen=True)
class ThrottleSnapshot:
    """Throttle values found on brokers and topics: value, or None when the key is unset."""

    brokers: BrokerConfigs = field(default_factory=dict)
    topics: TopicConfigs = field(default_factory=dict)
    unreadable: Mapping[int, ApiError] = field(default_factory=dict)
    """brokers that did not answer (their values are unknown)"""


def read_throttles(port: ClusterPort, brokers: Iterable[int], topics: Iterable[str]) -> ThrottleSnapshot:
    """The per-resource throttle values on these brokers and topics, before anything changes.

    Raises:
        ClusterError: the topics' configs could not be read (brokers that do not answer are
            reported in `unreadable` instead).
    """
    broker_ids = sorted(set(brokers))
    topic_names = sorted(set(topics))
    broker_result = port.describe_broker_configs(broker_ids, BROKER_THROTTLE_KEYS) if broker_ids else None
    topic_result = port.describe_topic_configs(topic_names, TOPIC_THROTTLE_KEYS) if topic_names else None
    snapshot_brokers: BrokerConfigs = {}
    unreadable: dict[int, ApiError] = {}
    if broker_result is not None:
        for b in broker_ids:
            error = broker_result.errors.get(b)
            if error is not None:
                if not error.unreachable:
                    raise ClusterError(f"cannot read the throttle configs of broker {b}: {error}")
                unreadable[b] = error
            else:
                snapshot_brokers[b] = own_values(broker_result.configs.get(b, {}), BROKER_THROTTLE_KEYS)
    snapshot_topics: TopicConfigs = {}
    if topic_result is not None:
        for t in topic_names:
            error = topic_result.errors.get(t)
            if error is not None:
                raise ClusterError(f"cannot read the throttle configs of topic {t}: {error}")
            snapshot_topics[t] = own_values(topic_result.configs.get(t, {}), TOPIC_THROTTLE_KEYS)
    return ThrottleSnapshot(brokers=snapshot_brokers, topics=snapshot_topics, unreadable=unreadable)


def inherit_previous(snapshot: ThrottleSnapshot, others: Iterable[Journal]) -> ThrottleSnapshot:
    """Replace values that another open run set with the values that run found before it.

    Without this, a second plan executed while the first still runs would record the first
    plan's throttle as "the operator's value" and restore it forever after both finish. A
    standing throttle (`Journal.standing`) is the operator's value: a run restores it.
    """
    brokers = {b: dict(v) for b, v in snapshot.brokers.items()}
    topics = {t: dict(v) for t, v in snapshot.topics.items()}
    for journal in (j for j in others if not j.standing):
        for b, keys in brokers.items():
            for key, value in keys.items():
                if value is not None and journal.planned_brokers.get(b, {}).get(key) == value:
                    keys[key] = journal.previous_brokers.get(b, {}).get(key)
        for t, keys in topics.items():
            for key, value in keys.items():
                if value is not None and journal.planned_topics.get(t, {}).get(key) == value:
                    keys[key] = journal.previous_topics.get(t, {}).get(key)
    return ThrottleSnapshot(brokers=brokers, topics=topics, unreadable=snapshot.unreadable)


@dataclass(frozen=True)
class ApplyOutcome:
    """What an IncrementalAlterConfigs did: applied resources and skipped (unreachable) brokers."""

    brokers: tuple[int, ...] = ()
    topics: tuple[str, ...] = ()
    skipped: Mapping[int, ApiError] = field(default_factory=dict)
    unconfirmed: tuple[int, ...] = ()
    """brokers that accepted the change but had not applied it by the end of the `Confirm` wait"""


def confirmed_step(journal: Journal | None, name: str, port: ClusterPort,
                   ops: Mapping[int, Mapping[str, str | None]], confirm: Confirm | None) -> tuple[int, ...]:
    """`confirm_broker_configs` as a journaled step (done, with the brokers that had not applied
    the change by the end of the wait, and how long it waited); without a `Confirm`, nothing is read."""
    if confirm is None or not any(ops.values()):
        return ()
    start = confirm.clock()
    unconfirmed = confirm_broker_configs(port, ops, confirm)
    if journal is not None:
        journal.record(name, "done", brokers=sorted(b for b, o in ops.items() if o),
                       unconfirmed=list(unconfirmed), wait_s=confirm.wait_s,
                       waited_s=round(confirm.clock() - start, 3))
    return unconfirmed


def apply_configs(port: ClusterPort, *, brokers: Mapping[int, Mapping[str, str | None]] | None = None,
                  topics: Mapping[str, Mapping[str, str | None]] | None = None) -> ApplyOutcome:
    """SET/DELETE throttle keys; brokers that do not answer are skipped and reported.

    Raises:
        ClusterError: the request failed as a whole.
        ConfigsRefused: a resource refused the change for a reason other than being unreachable
            (the message names every such resource; the others applied it).
    """
    broker_ops = {b: dict(ops) for b, ops in (brokers or {}).items() if ops}
    topic_ops = {t: dict(ops) for t, ops in (topics or {}).items() if ops}
    if not broker_ops and not topic_ops:
        return ApplyOutcome()
    result = port.incremental_alter_configs(broker_ops or None, topic_ops or None)
    skipped = {b: e for b, e in result.brokers.items() if e is not None and e.unreachable}
    # a deleted topic has no throttle left to delete (Kafka's --verify fails on it after clearing the rest)
    gone = {f"topic {t}" for t, e in result.topics.items()
            if e is not None and e.code == UNKNOWN_TOPIC_OR_PARTITION and not any(topic_ops[t].values())}
    failures = [(what, e) for what, e in result.failures() if not e.unreachable and what not in gone]
    if failures:
        detail = "; ".join(f"{what}: {e.message}" for what, e in failures)
        raise ConfigsRefused(f"the cluster refused the throttle change ({detail})",
                             [b for b, e in result.brokers.items() if e is not None and not e.unreachable],
                             [t for t, e in result.topics.items() if e is not None and f"topic {t}" not in gone])
    return ApplyOutcome(brokers=tuple(sorted(b for b in broker_ops if b not in skipped)),
                        topics=tuple(sorted(topic_ops)), skipped=skipped)


def restore_ops(brokers: Iterable[int], topics: Iterable[str], *,
                previous_brokers: Mapping[int, Mapping[str, str | None]] | None = None,
                previous_topics: Mapping[str, Mapping[str, str | None]] | None = None,
                ) -> tuple[dict[int, dict[str, str | None]], dict[str, dict[str, str | None]]]:
    """The changes that clear throttles: each key goes back to its recorded previous value, and
    is deleted where nothing was recorded (what Kafka's tool always does)."""
    known_b = previous_brokers or {}
    known_t = previous_topics or {}
    broker_ops = {b: {k: known_b.get(b, {}).get(k) for k in BROKER_THROTTLE_KEYS} for b in sorted(set(brokers))}
    topic_ops = {t: {k: known_t.get(t, {}).get(k) for k in TOPIC_THROTTLE_KEYS} for t in sorted(set(topics))}
    return broker_ops, topic_ops


def restored_values(ops: Mapping[R, Mapping[str, str | None]]) -> dict[R, dict[str, str]]:
    """The keys a restore SETs back (rather than deletes), per resource; resources with none are left out."""
    return {r: {k: v for k, v in keys.items() if v is not None}
            for r, keys in ops.items() if any(v is not None for v in keys.values())}


def journaled_step(journal: Journal | None, name: str, run: Callable[[], ApplyOutcome], **detail: Any) -> ApplyOutcome:
    """Apply a config change as a journaled step: what was applied, and brokers skipped because
    they did not answer (kept pending in the journal for `resume`)."""
    with journaled(journal, name, **detail):
        outcome = run()
    if journal is not None:
        journal.applied_brokers = sorted(set(journal.applied_brokers) | set(outcome.brokers))
        journal.applied_topics = sorted(set(journal.applied_topics) | set(outcome.topics))
        for b in outcome.skipped:
            journal.pending_brokers.setdefault(b, {}).update(journal.planned_brokers.get(b, {}))
        journal.record(name, "done", skipped=sorted(outcome.skipped))
    return outcome


@dataclass(frozen=True)
class ThrottleSteps:
    """The journal's names of the three throttle steps of one apply."""

    topics: str = "set-topic-throttles"
    brokers: str = "set-broker-throttles"
    log_dirs: str = "set-log-dir-throttles"
    confirm: str = "confirm-broker-throttles"

    @classmethod
    def wave(cls, number: int) -> ThrottleSteps:
        return cls(f"wave {number}: topic throttles", f"wave {number}: broker throttles",
                   f"wave {number}: log-dir throttles", f"wave {number}: confirm broker throttles")


ThrottleEventKind = Literal["topic-throttles-set", "broker-throttles-set", "log-dir-throttles-set",
                            "throttles-unconfirmed"]


def apply_throttles(port: ClusterPort, journal: Journal | None, *, topics: TopicConfigs | None,
                    brokers: BrokerConfigs | None, log_dirs: BrokerConfigs | None = None,
                    steps: ThrottleSteps = ThrottleSteps(), confirm: Confirm | None = None,
                    notify: Callable[[ThrottleEventKind, ApplyOutcome], None] = lambda kind, out: None,
                    ) -> ApplyOutcome:
    """The one sequence that sets a run's throttles, for the plain and the paced executor alike:
    Kafka's order (the topics' throttled-replica lists, then the brokers' inter-broker rates,
    then their log-dir rates), each a journaled step (`journaled_step`: intent, then done with
    the brokers that did not answer kept pending). A side given as None is not touched.

    With `confirm`, it then waits until every broker that took a rate reads it back
    (`confirmed_step`), so the moves submitted next start throttled; brokers that had not applied
    it by the end of the wait are in `unconfirmed` (and heard by `notify`): the run goes on.
    Topic lists are not read back: the port reads a topic's configs from whichever broker the
    client picks, not from the leaders and followers concerned. A broker replays the metadata
    log in order, so one that reads its new rate back has applied the lists set before it.

    Raises:
        ClusterError, ConfigsRefused: a change failed (the journal records it; the caller rolls back).
    """
    applied_topics: tuple[str, ...] = ()
    applied_brokers: set[int] = set()
    skipped: dict[int, ApiError] = {}
    set_ops: dict[int, dict[str, str | None]] = {}
    if topics is not None:
        out = journaled_step(journal, steps.topics, lambda: apply_configs(port, topics=topics),
                             topics=sorted(topics))
        applied_topics = out.topics
        notify("topic-throttles-set", out)
    for name, ops, kind in ((steps.brokers, brokers, "broker-throttles-set"),
                            (steps.log_dirs, log_dirs, "log-dir-throttles-set")):
        if ops is None:
            continue
        out = journaled_step(journal, name, lambda ops=ops: apply_configs(port, brokers=ops), brokers=sorted(ops))
        applied_brokers |= set(out.brokers)
        skipped.update(out.skipped)
        for b in out.brokers:
            set_ops.setdefault(b, {}).update(ops[b])
        notify(kind, out)  # type: ignore[arg-type]
    brokers_set = tuple(sorted(applied_brokers - set(skipped)))
    unconfirmed = confirmed_step(journal, steps.confirm, port, {b: set_ops[b] for b in brokers_set}, confirm)
    outcome = ApplyOutcome(brokers=brokers_set, topics=applied_topics, skipped=skipped, unconfirmed=unconfirmed)
    if unconfirmed:
        notify("throttles-unconfirmed", outcome)
    return outcome
