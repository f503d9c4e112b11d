"""`throttle show|set|clear` as library calls over the cluster port, journaled.

* `read_throttle_view` reads the effective rates of brokers and the throttled-replica lists of
  topics, plus the reassignments in flight (which brokers and replicas they involve).
* `plan_throttle_set` works out a rate change on a running move: rates on the involved brokers
  (or chosen ones) and the topic lists recomputed from the in-flight reassignments by Kafka's
  rules (`throttle.configs`). `apply_throttle_change` applies it and records it in the open
  execution journal (or a new one), values found before included, so a clear restores them.
* `clear_all_throttles` restores what each open journal recorded (through `clear`, the one
  clear implementation) and deletes the rest, as Kafka's tool does.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kreassign.cluster.authorization import ALTER_CONFIGS, require_cluster_operations
from kreassign.cluster.config_readback import Confirm
from kreassign.cluster.errors import InputError
from kreassign.cluster.model import PartitionTarget, Reassignment, TopicPartition
from kreassign.cluster.port import ApiError, ClusterPort, ConfigEntry
from kreassign.throttle.configs import (
    ALL_REPLICAS,
    BROKER_THROTTLE_KEYS,
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    TOPIC_THROTTLE_KEYS,
    compute_move_map,
    parse_throttled_replicas,
    rate_configs,
    reassigning_brokers,
    throttle_plan,
)
from kreassign.throttle.rates import Rates, config_rate
from kreassign.execute.errors import StillMoving
from kreassign.execute.journal import Journal, JournalStore
from kreassign.execute.clear import CLEAR_RETRY_S, ClearResult, clear_retrying, clear_throttles
from kreassign.execute.throttle_io import (
    Confirm,
    ThrottleSnapshot,
    apply_configs,
    confirmed_step,
    inherit_previous,
    journaled_step,
    read_throttles,
    restore_ops,
    restored_values,
)

@dataclass(frozen=True)
class BrokerThrottle:
    """A broker's effective throttle rates (None: unthrottled) and where each value comes from."""

    broker: int
    leader_rate: int | None = None
    follower_rate: int | None = None
    log_dir_rate: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    involved: bool = False
    """the broker takes part in a reassignment in flight"""

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "leader_rate": self.leader_rate, "follower_rate": self.follower_rate,
                "log_dir_rate": self.log_dir_rate, "sources": dict(self.sources), "involved": self.involved}


@dataclass(frozen=True)
class TopicThrottle:
    """A topic's throttled-replica lists, as set (empty string: not set)."""

    topic: str
    leader_replicas: str = ""
    follower_replicas: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "leader_replicas": self.leader_replicas,
                "follower_replicas": self.follower_replicas}


def _parsed_list(value: str) -> Any:
    """A throttled-replica list as a set of (partition, broker), or ALL_REPLICAS; an unreadable
    one covers nothing."""
    try:
        return parse_throttled_replicas(value)
    except InputError:
        return frozenset()


@dataclass(frozen=True)
class ThrottleView:
    """Throttles in the cluster now, and the reassignments they apply to."""

    brokers: tuple[BrokerThrottle, ...]
    topics: tuple[TopicThrottle, ...]
    in_flight: Mapping[TopicPartition, Reassignment] = field(default_factory=dict)
    unreadable: Mapping[int, ApiError] = field(default_factory=dict)

    def broker(self, broker_id: int) -> BrokerThrottle:
        return next((b for b in self.brokers if b.broker == broker_id), BrokerThrottle(broker_id))

    @cached_property
    def _lists(self) -> dict[str, tuple[Any, Any]]:
        """Each topic's lists parsed once: a paced run asks for every move at every poll (parsing
        a 24k-partition plan's lists per question made a poll cost seconds of CPU)."""
        return {t.topic: (_parsed_list(t.leader_replicas), _parsed_list(t.follower_replicas)) for t in self.topics}

    def _throttled(self, side: int, tp: TopicPartition, broker: int) -> bool:
        lists = self._lists.get(tp.topic)
        if lists is None:
            return False
        parsed = lists[side]
        return bool(parsed == ALL_REPLICAS or (tp.partition, broker) in parsed)

    def leader_throttled(self, tp: TopicPartition, broker: int) -> bool:
        return self._throttled(0, tp, broker)

    def follower_throttled(self, tp: TopicPartition, broker: int) -> bool:
        return self._throttled(1, tp, broker)

    def to_dict(self) -> dict[str, Any]:
        return {"brokers": [b.to_dict() for b in self.brokers], "topics": [t.to_dict() for t in self.topics],
                "reassignments_in_flight": len(self.in_flight),
                "unreachable_brokers": {str(b): e.message for b, e in sorted(self.unreadable.items())}}


def read_throttle_view(port: ClusterPort, *, brokers: Iterable[int] | None = None,
                       topics: Iterable[str] | None = None, all_topics: bool = False,
                       in_flight: Mapping[TopicPartition, Reassignment] | None = None) -> ThrottleView:
    """Read rates and lists.

    Args:
        brokers: brokers to read (default: every live broker).
        topics: topics to read; by default the topics of the reassignments in flight, or every
            topic with `all_topics` (for `throttle show`). Topics without lists are left out.
        in_flight: the reassignments, if the caller has just read them.
    """
    running = dict(port.list_reassignments() if in_flight is None else in_flight)
    if brokers is None:
        # every registered broker, the fenced (down) ones and those of the moves too: a broker
        # that is down is named as not answering, never silently left out with its throttles
        info = port.describe_brokers()
        brokers = {b.id for b in info.brokers} | set(info.fenced) | {b for r in running.values() for b in r.replicas}
    broker_ids = sorted(set(brokers))
    if topics is not None:
        topic_names = sorted(set(topics))
    elif all_topics:
        topic_names = sorted({p.topic for p in port.describe_topics()})
    else:
        topic_names = sorted({tp.topic for tp in running})
    involved = set(reassigning_brokers(compute_move_map({}, [], running)))
    configs = port.describe_broker_configs(broker_ids, BROKER_THROTTLE_KEYS) if broker_ids else None
    out_brokers = []
    for b in broker_ids:
        if configs is not None and b in configs.errors:
            continue  # reported in `unreadable`: its values are unknown, not unset
        entries = configs.configs.get(b, {}) if configs is not None else {}
        rates = Rates.from_configs(entries)
        out_brokers.append(BrokerThrottle(
            b, rates.leader, rates.follower, rates.log_dir,
            {k: e.source for k, e in sorted(entries.items()) if config_rate(e) is not None}, b in involved))
    topic_configs = port.describe_topic_configs(topic_names, TOPIC_THROTTLE_KEYS) if topic_names else None
    out_topics = []
    for t in topic_names:
        entries = topic_configs.configs.get(t, {}) if topic_configs is not None else {}
        leader = (entries.get(LEADER_REPLICAS) or ConfigEntry(None, "DEFAULT_CONFIG")).value or ""
        follower = (entries.get(FOLLOWER_REPLICAS) or ConfigEntry(None, "DEFAULT_CONFIG")).value or ""
        if leader or follower:
            out_topics.append(TopicThrottle(t, leader, follower))
    unreadable = dict(configs.errors) if configs is not None else {}
    return ThrottleView(tuple(out_brokers), tuple(out_topics), running, unreadable)


# ---- set --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThrottleSetRequest:
    """Rates to set (None leaves a side as it is) on the involved brokers or on `brokers`."""

    leader_rate: int | None = None
    follower_rate: int | None = None
    brokers: tuple[int, ...] | None = None
    per_broker: Mapping[int, tuple[int | None, int | None]] | None = None
    """(leader, follower) per broker, overriding the two rates above (auto-throttle)"""
    update_lists: bool = True
    """recompute the topic lists from the reassignments in flight"""


@dataclass(frozen=True)
class ThrottleChange:
    """The configs a `throttle set` SETs, and the values they replace."""

    broker_ops: Mapping[int, Mapping[str, str]]
    topic_ops: Mapping[str, Mapping[str, str]]
    previous: ThrottleSnapshot
    in_flight: Mapping[TopicPartition, Reassignment]
    cluster_id: str | None

    def is_empty(self) -> bool:
        return not self.broker_ops and not self.topic_ops

    def to_dict(self) -> dict[str, Any]:
        return {"brokers": {str(b): dict(v) for b, v in sorted(self.broker_ops.items())},
                "topics": {t: dict(v) for t, v in sorted(self.topic_ops.items())},
                "previous": {"brokers": {str(b): v for b, v in sorted(self.previous.brokers.items())},
                             "topics": dict(self.previous.topics)},
                "reassignments_in_flight": len(self.in_flight)}


def plan_throttle_set(port: ClusterPort, request: ThrottleSetRequest) -> ThrottleChange:
    """Work out a throttle change on the running moves; changes nothing.

    Raises:
        InputError: no rate given, a negative rate, an unknown broker, or nothing moves and
            no broker was named.
    """
    if request.leader_rate is None and request.follower_rate is None and not request.per_broker:
        raise InputError("give --throttle, --leader-rate or --follower-rate")
    Rates(request.leader_rate, request.follower_rate)  # the one validity check
    info = port.describe_brokers()
    live = {b.id for b in info.brokers}
    in_flight = port.list_reassignments()
    move_map = compute_move_map({}, [], in_flight)
    if request.per_broker:
        targets = sorted(request.per_broker)
    elif request.brokers is not None:
        targets = sorted(request.brokers)
    else:
        targets = list(reassigning_brokers(move_map))
        if not targets:
            raise InputError("no reassignment is running, so no broker is involved: name the brokers "
                             "to throttle with --brokers 1,2,3")
    unknown = sorted(set(targets) - live)
    if unknown:
        raise InputError(f"broker {unknown[0]} is not a live broker of this cluster "
                         f"(live: {','.join(map(str, sorted(live)))})")
    broker_ops: dict[int, dict[str, str]] = {}
    for b in targets:
        ops = rate_configs(*(request.per_broker or {}).get(b, (request.leader_rate, request.follower_rate)))
        if ops:
            broker_ops[b] = ops
    topic_ops: dict[str, dict[str, str]] = {}
    if request.update_lists and in_flight:
        lists = throttle_plan(move_map, rate=0).topic_configs
        topic_ops = {t: dict(v) for t, v in lists.items()}
    previous = read_throttles(port, broker_ops, topic_ops)
    return ThrottleChange(broker_ops, topic_ops, previous, in_flight, info.cluster_id)


@dataclass(frozen=True)
class ThrottleSetResult:
    change: ThrottleChange
    brokers: tuple[int, ...] = ()
    topics: tuple[str, ...] = ()
    skipped: Mapping[int, ApiError] = field(default_factory=dict)
    journal_path: Path | None = None
    dry_run: bool = False
    unconfirmed: tuple[int, ...] = ()
    """brokers that took the change but had not applied it by the end of the `Confirm` wait"""

    def to_dict(self) -> dict[str, Any]:
        return {**self.change.to_dict(), "applied_brokers": list(self.brokers), "applied_topics": list(self.topics),
                "skipped_brokers": {str(b): e.message for b, e in sorted(self.skipped.items())},
                "unconfirmed_brokers": list(self.unconfirmed),
                "journal": str(self.journal_path) if self.journal_path else None, "dry_run": self.dry_run}


def _in_flight_targets(in_flight: Mapping[TopicPartition, Reassignment]) -> list[PartitionTarget]:
    return [PartitionTarget(tp.topic, tp.partition, r.target) for tp, r in sorted(in_flight.items())]


def journal_for_change(store: JournalStore, change: ThrottleChange, command: str,
                       journal: Journal | None = None) -> Journal:
    """`journal` (the run's own, held open by its caller), else the open journal of this cluster
    (the newest), with the values this change replaces recorded where it has none; or a new
    journal for the reassignments in flight. A change while moves run never joins a standing
    throttle's journal (`Journal.standing`): it ends with the moves, the standing one does not."""
    opened = [j for j in store.journals(change.cluster_id, open_only=True) if not (change.in_flight and j.standing)]
    if journal is not None or opened:
        journal = journal if journal is not None else opened[0]
        previous = inherit_previous(change.previous, opened)
        journal.remember_previous(previous.brokers, previous.topics, change.previous.unreadable)
        return journal
    state = "submitted" if change.in_flight else "running"
    return store.create(
        cluster_id=change.cluster_id, targets=_in_flight_targets(change.in_flight), command=command,
        state=state, original={tp: r.original for tp, r in change.in_flight.items()},
        previous_brokers=dict(change.previous.brokers), previous_topics=dict(change.previous.topics),
        unreadable_brokers=sorted(change.previous.unreadable), submitted=sorted(change.in_flight))


def apply_throttle_change(port: ClusterPort, change: ThrottleChange, *, store: JournalStore | None,
                          command: str = "throttle set", dry_run: bool = False,
                          journal: Journal | None = None, confirm: Confirm | None = None) -> ThrottleSetResult:
    """Apply a change (topic lists first, then rates, as Kafka does), journaled: in `journal` when
    the caller holds its run's journal open (a paced watch's auto-throttle writes through the same
    handle as its waves), else as `journal_for_change` finds one. With `confirm`, it returns once
    the brokers read their new rates back (or its wait is over: `unconfirmed`), so a `throttle
    show` right after reads the new values.

    Raises:
        NotAuthorized: the login may not change configs (checked before any change).
        ClusterError: the cluster refused the change (the journal records the failure).
    """
    if dry_run or change.is_empty():
        return ThrottleSetResult(change, dry_run=dry_run)
    require_cluster_operations(port.describe_brokers(), {ALTER_CONFIGS: "to change the throttles"})
    journal = journal_for_change(store, change, command, journal) if store is not None else None
    if journal is not None:
        journal.plan_configs(change.broker_ops, change.topic_ops)
    topics = journaled_step(journal, f"{command}: topic lists", lambda: apply_configs(port, topics=change.topic_ops),
                            topics=sorted(change.topic_ops)) if change.topic_ops else None
    brokers = journaled_step(journal, f"{command}: rates", lambda: apply_configs(port, brokers=change.broker_ops),
                             brokers={str(b): dict(v) for b, v in sorted(change.broker_ops.items())}) \
        if change.broker_ops else None
    unconfirmed = confirmed_step(journal, f"{command}: confirm", port,
                                 {b: change.broker_ops[b] for b in brokers.brokers} if brokers else {}, confirm)
    return ThrottleSetResult(change, brokers.brokers if brokers else (), topics.topics if topics else (),
                             dict(brokers.skipped) if brokers else {}, journal.path if journal else None,
                             unconfirmed=unconfirmed)


# ---- clear ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThrottleClearResult:
    """Every clear made: one per open journal (restoring its recorded values) and one for the rest."""

    clears: tuple[ClearResult, ...] = ()
    journals: tuple[Path, ...] = ()
    in_flight: int = 0
    dry_run: bool = False

    @property
    def complete(self) -> bool:
        return all(c.complete for c in self.clears)

    def to_dict(self) -> dict[str, Any]:
        return {"clears": [c.as_dict() for c in self.clears], "journals": [str(p) for p in self.journals],
                "reassignments_in_flight": self.in_flight, "complete": self.complete, "dry_run": self.dry_run}


def journal_resources(journal: Journal, live: Iterable[int]) -> tuple[set[int], set[str]]:
    """The brokers and topics a run's clear covers: Kafka's (every live broker and the plan's
    topics) plus every resource the run set."""
    brokers = set(live) | {b for t in journal.targets for b in t.replicas} | set(journal.planned_brokers)
    brokers |= set(journal.applied_brokers) | set(journal.pending_brokers)
    topics = {t.topic for t in journal.targets} | set(journal.planned_topics) | set(journal.applied_topics)
    return brokers, topics


def clear_all_throttles(port: ClusterPort, *, store: JournalStore | None, brokers: Iterable[int] | None = None,
                        topics: Iterable[str] | None = None, force: bool = False,
                        dry_run: bool = False, leftover_topics: Iterable[str] | None = None,
                        foreign: bool = True, retry: Retry | None = None,
                        skip: Iterable[Path] = ()) -> ThrottleClearResult:
    """Clear throttles, restoring values recorded by open journals.

    Without `brokers`/`topics`, each open journal of the cluster is cleared and closed (its
    recorded values SET back), then, with `foreign`, every other live broker loses its rates and
    every other topic with throttle lists loses them (only those of `leftover_topics`, if given:
    a finished run clears its own topics, as Kafka's verify does). Without `foreign` what no
    journal recorded (an operator's own throttle) stays as it is. With `brokers`/`topics`, only
    those are cleared (restored where a journal knows the earlier value) and journals stay open.
    With `retry`, a journal's brokers that do not answer are tried again (`clear_retrying`).
    Journals in `skip` (runs interrupted before their plan was done) are left open, their
    throttles in place.

    Raises:
        StillMoving: reassignments are running and `force` is False.
        ClusterError: the cluster refused a change.
    """
    in_flight = port.list_reassignments()
    if in_flight and not force and not dry_run:
        raise StillMoving(f"{len(in_flight)} reassignment(s) are still running; clearing the throttles now lets "
                          "them copy unthrottled. Wait for them (kreassign watch), or add --force to clear anyway.")
    info = port.describe_brokers()
    if not dry_run:
        require_cluster_operations(info, {ALTER_CONFIGS: "to clear the throttles"})
    live = sorted(b.id for b in info.brokers)
    skipped_paths = set(skip)
    journals = [j for j in store.journals(info.cluster_id, open_only=True)
                if j.path not in skipped_paths] if store is not None else []
    if brokers is not None or topics is not None:
        return _clear_some(port, journals, brokers, topics, len(in_flight), dry_run)
    clears: list[ClearResult] = []
    covered_b: set[int] = set()
    covered_t: set[str] = set()
    for journal in journals:
        jb, jt = journal_resources(journal, live)
        if retry is not None and not dry_run:
            clears.append(clear_retrying(port, jb, jt, journal=journal, clock=retry.clock, sleep=retry.sleep,
                                         retry_s=retry.retry_s, interval_s=retry.interval_s, on_wait=retry.on_wait))
        else:
            clears.append(clear_throttles(port, jb, jt, journal=journal, dry_run=dry_run))
        covered_b |= jb
        covered_t |= jt
    if not foreign:
        return ThrottleClearResult(tuple(clears), tuple(j.path for j in journals), len(in_flight), dry_run)
    rest_b = set(live) - covered_b
    wanted = None if leftover_topics is None else sorted(set(leftover_topics) - covered_t)
    listed = read_throttle_view(port, brokers=[], topics=wanted, all_topics=wanted is None,
                                in_flight=in_flight).topics if wanted != [] else ()
    rest_t = {t.topic for t in listed} - covered_t
    if rest_b or rest_t:
        clears.append(clear_throttles(port, rest_b, rest_t, dry_run=dry_run,
                                      confirm=Confirm(retry.clock, retry.sleep) if retry is not None else None))
    return ThrottleClearResult(tuple(clears), tuple(j.path for j in journals), len(in_flight), dry_run)


@dataclass(frozen=True)
class Retry:
    """How a run retries the brokers its clear could not reach (`clear_retrying`)."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    retry_s: float = CLEAR_RETRY_S
    interval_s: float = 2.0
    on_wait: Callable[[tuple[int, ...], float], None] = lambda brokers, left: None


def _clear_some(port: ClusterPort, journals: list[Journal], brokers: Iterable[int] | None,
                topics: Iterable[str] | None, in_flight: int, dry_run: bool) -> ThrottleClearResult:
    broker_ids = sorted(set(brokers or ()))
    topic_names = sorted(set(topics or ()))
    previous_b: dict[int, dict[str, str | None]] = {}
    previous_t: dict[str, dict[str, str | None]] = {}
    for journal in reversed(journals):  # oldest first: its values predate the later runs
        for b, keys in journal.previous_brokers.items():
            previous_b.setdefault(b, dict(keys))
        for t, keys in journal.previous_topics.items():
            previous_t.setdefault(t, dict(keys))
    broker_ops, topic_ops = restore_ops(broker_ids, topic_names, previous_brokers=previous_b,
                                        previous_topics=previous_t)
    skipped: dict[int, ApiError] = {}
    if not dry_run:
        for journal in journals:
            journal.record("throttle clear", "intent", brokers=broker_ids, topics=topic_names)
        skipped = dict(apply_configs(port, brokers=broker_ops).skipped)
        apply_configs(port, topics=topic_ops)
        for journal in journals:
            journal.record("throttle clear", "done", skipped=sorted(skipped))
    clear = ClearResult(tuple(broker_ids), tuple(topic_names), restored_values(broker_ops),
                        restored_values(topic_ops), skipped, dry_run=dry_run)
    return ThrottleClearResult((clear,), tuple(j.path for j in journals), in_flight, dry_run)


__all__ = [
    "BROKER_THROTTLE_KEYS", "TOPIC_THROTTLE_KEYS", "BrokerThrottle", "StillMoving", "ThrottleChange",
    "ThrottleClearResult", "ThrottleSetRequest", "ThrottleSetResult", "ThrottleView", "TopicThrottle",
    "apply_throttle_change", "clear_all_throttles", "journal_for_change", "journal_resources",
    "plan_throttle_set", "read_throttle_view",
]
