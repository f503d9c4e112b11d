"""DeleteTopics (API key 20) as a KRaft controller answers it, and what deleting a topic removes.

The request (`ControllerApis.deleteTopics`, `ReplicationControlManager`): topics are named by
name (v1-5) or by name or id (v6+). An entry with neither, or with both, and a name or id given
twice, are INVALID_REQUEST; ids are resolved first (unknown: UNKNOWN_TOPIC_ID), then authorized
(DELETE on the topic; a principal that may not DESCRIBE it is not told its name); names are
authorized, then looked up (unknown: UNKNOWN_TOPIC_OR_PARTITION), and a name whose id was also
given is INVALID_REQUEST. A `timeout_ms` of 0 or less is a deadline already passed when the
controller would look the topics up: every entry gets REQUEST_TIMED_OUT and nothing is deleted.

Deleting a topic (the RemoveTopicRecord and how brokers and the group coordinator apply it)
removes its partitions with any reassignment in flight and its dynamic configs (the engine), its
segment files, high watermarks and log-dir moves (the data plane, whose one log per partition
stands for every replica's), the groups' committed offsets for its partitions
(`OffsetMetadataManager.onPartitionsDeleted`) and its per-topic BrokerTopicMetrics
(`BrokerTopicStats.removeMetrics`; the all-topics meters keep counting). Requests parked on its
partitions then complete with UNKNOWN_TOPIC_OR_PARTITION (`handlers_data`). A topic of the same
name may be created at once, fresh and empty, with a new id.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from kreassign.sandbox import codes
from kreassign.sandbox.acl import TOPIC_AUTHORIZATION_FAILED, TOPIC_MESSAGE, AclOperation, Principal, allowed
from kreassign.sandbox.dataplane import DataPlane
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.groups import GroupCoordinator
from kreassign.sandbox.wire import ZERO_UUID

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."  # Errors.UNKNOWN_TOPIC_OR_PARTITION
UNKNOWN_ID_MESSAGE = "This server does not host this topic ID."  # Errors.UNKNOWN_TOPIC_ID
K = TypeVar("K")


@dataclass(frozen=True)
class TopicResult:
    """One entry of a DeleteTopics response."""

    name: str | None
    topic_id: uuid.UUID
    code: int
    message: str | None = None


def delete_topics(engine: Engine, entries: Sequence[tuple[str | None, uuid.UUID]], timeout_ms: int,
                  principal: Principal | None, *, data: DataPlane | None = None,
                  groups: GroupCoordinator | None = None) -> list[TopicResult]:
    """Answer a DeleteTopics request given as (name or None, id or the zero id) entries, deleting
    what it may (see the module docstring). Results come in Kafka's order: malformed entries,
    duplicates, refused or unknown topics, then the deleted ones (Kafka then shuffles them)."""
    out: list[TopicResult] = []
    names: dict[str, None] = {}  # insertion-ordered sets
    ids: dict[uuid.UUID, None] = {}
    dup_names: dict[str, None] = {}
    dup_ids: dict[uuid.UUID, None] = {}
    for name, topic_id in entries:
        if name is None and topic_id == ZERO_UUID:
            out.append(TopicResult(None, ZERO_UUID, codes.INVALID_REQUEST, "Neither topic name nor id were specified."))
        elif name is None:
            _add(ids, dup_ids, topic_id)
        elif topic_id == ZERO_UUID:
            _add(names, dup_names, name)
        else:
            out.append(TopicResult(name, topic_id, codes.INVALID_REQUEST,
                                   "You may not specify both topic name and topic id."))
    out += [TopicResult(n, ZERO_UUID, codes.INVALID_REQUEST, "Duplicate topic name.") for n in dup_names]
    out += [TopicResult(None, i, codes.INVALID_REQUEST, "Duplicate topic id.") for i in dup_ids]
    if timeout_ms <= 0 and (names or ids):
        return [TopicResult(name, topic_id, codes.REQUEST_TIMED_OUT) for name, topic_id in entries]
    may_describe = allowed(principal, AclOperation.DESCRIBE)
    may_delete = allowed(principal, AclOperation.DELETE)
    by_id = {t.topic_id: t.name for t in engine.topics.values()}
    doomed: dict[uuid.UUID, str] = {}
    for topic_id in ids:
        name = by_id.get(topic_id)
        if name is None:
            out.append(TopicResult(None, topic_id, codes.UNKNOWN_TOPIC_ID, UNKNOWN_ID_MESSAGE))
        elif not may_delete:
            out.append(TopicResult(name if may_describe else None, topic_id, TOPIC_AUTHORIZATION_FAILED,
                                   TOPIC_MESSAGE))
        else:
            doomed[topic_id] = name
    for name in names:
        topic = engine.topics.get(name)
        if not may_describe or (topic is not None and not may_delete):
            out.append(TopicResult(name, ZERO_UUID, TOPIC_AUTHORIZATION_FAILED, TOPIC_MESSAGE))
        elif topic is None:
            out.append(TopicResult(name, ZERO_UUID, codes.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE))
        elif topic.topic_id in dup_ids or topic.topic_id in doomed:
            dup_ids[topic.topic_id] = None
            doomed.pop(topic.topic_id, None)
            out.append(TopicResult(name, topic.topic_id, codes.INVALID_REQUEST,
                                   "The provided topic name maps to an ID that was already supplied."))
        else:
            doomed[topic.topic_id] = name
    for topic_id, name in doomed.items():
        remove_topic(engine, name, data=data, groups=groups)
        out.append(TopicResult(name, topic_id, codes.NONE))
    return out


def remove_topic(engine: Engine, name: str, *, data: DataPlane | None = None,
                 groups: GroupCoordinator | None = None) -> None:
    """Delete one existing topic everywhere the sandbox keeps something of it."""
    topic = engine.delete_topic(name)
    indexes = [p.index for p in topic.partitions]
    engine.traffic.forget_topic(name)
    if data is not None:
        data.delete_topic(name, indexes)
    if groups is not None:
        groups.forget_partitions(name, indexes)


def _add(seen: dict[K, None], dups: dict[K, None], key: K) -> None:
    """Kafka's way of collecting names and ids: one given twice moves to the duplicates."""
    if key in dups or key in seen:
        dups[key] = None
        seen.pop(key, None)
    else:
        seen[key] = None
