"""Request handlers: thin translations between kafka-python message objects and the engine.

`dispatch` is called with the engine lock held; it returns the response object for the
request's version. Controller APIs answer NOT_CONTROLLER on other brokers, BROKER config
resources must name the receiving broker (broker-semantics §4.4 item 7, §6).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kreassign.sandbox import codes
from kreassign.sandbox.context import Context
from kreassign.sandbox.handlers_admin import ADMIN_HANDLERS, NOT_CONTROLLER_MESSAGE
from kreassign.sandbox.handlers_data import DATA_HANDLERS
from kreassign.sandbox.handlers_groups import GROUP_HANDLERS
from kreassign.sandbox.handlers_quotas import QUOTA_HANDLERS
from kreassign.sandbox.handlers_telemetry import TELEMETRY_HANDLERS
from kreassign.sandbox.state import NO_LEADER
from kreassign.sandbox.topics import INTERNAL_TOPICS
from kreassign.sandbox.wire import APIS, ZERO_UUID



def dispatch(ctx: Context, api_key: int, version: int, request: Any) -> Any:
    handler = (HANDLERS.get(api_key) or DATA_HANDLERS.get(api_key) or GROUP_HANDLERS.get(api_key)
               or QUOTA_HANDLERS.get(api_key) or TELEMETRY_HANDLERS.get(api_key) or ADMIN_HANDLERS[api_key])
    return handler(ctx, version, request)


def response_class(api_key: int) -> Any:
    return APIS[api_key][1]


def api_versions(ctx: Context, v: int, req: Any) -> Any:
    R = response_class(18)
    keys = [R.ApiVersion(version=v, api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ctx.ranges.items())]
    return R(version=v, error_code=codes.NONE, api_keys=keys, throttle_time_ms=0)


def _partition_view(ctx: Context, p: Any) -> dict[str, Any]:
    eng = ctx.engine
    leader = p.leader if p.leader != NO_LEADER and eng._alive(p.leader) else NO_LEADER
    return {
        "error_code": codes.NONE if leader != NO_LEADER else codes.LEADER_NOT_AVAILABLE,
        "partition_index": p.index, "leader_id": leader, "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas), "isr_nodes": list(p.isr),
        "offline_replicas": [r for r in p.replicas if not eng._alive(r)],
    }


def metadata(ctx: Context, v: int, req: Any) -> Any:
    R = response_class(3)
    T = R.MetadataResponseTopic
    P = T.MetadataResponsePartition
    eng = ctx.engine
    brokers = [R.MetadataResponseBroker(version=v, node_id=b.id, host=ctx.host, port=ctx.ports[b.id], rack=b.rack)
               for b in eng.alive_brokers()]
    wanted = req.topics
    if wanted is None or (v == 0 and not wanted):
        names: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in eng.topics]
    else:
        names = [(t.name, getattr(t, "topic_id", None)) for t in wanted]
    by_id = {t.topic_id: t for t in eng.topics.values()}
    topics = []
    for name, topic_id in names:
        topic = eng.topics.get(name) if name is not None else by_id.get(topic_id) if topic_id is not None else None
        if topic is None:
            topics.append(T(version=v, error_code=codes.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                            topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=[]))
            continue
        parts = [P(version=v, **_partition_view(ctx, p)) for p in topic.partitions]
        topics.append(T(version=v, error_code=codes.NONE, name=topic.name, topic_id=topic.topic_id,
                        is_internal=topic.name in INTERNAL_TOPICS, partitions=parts))
    return R(version=v, throttle_time_ms=0, brokers=brokers, cluster_id=eng.cluster_id,
             controller_id=eng.controller_id, topics=topics, error_code=codes.NONE)


def describe_cluster(ctx: Context, v: int, req: Any) -> Any:
    R = response_class(60)
    eng = ctx.engine
    include_fenced = v >= 2 and bool(req.include_fenced_brokers)
    brokers = [R.DescribeClusterBroker(version=v, broker_id=b.id, host=ctx.host, port=ctx.ports[b.id],
                                       rack=b.rack, is_fenced=not b.alive)
               for b in eng.brokers.values() if b.alive or include_fenced]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, error_message=None, endpoint_type=1,
             cluster_id=eng.cluster_id, controller_id=eng.controller_id, brokers=brokers)


def describe_topic_partitions(ctx: Context, v: int, req: Any) -> Any:
    R = response_class(75)
    T = R.DescribeTopicPartitionsResponseTopic
    P = T.DescribeTopicPartitionsResponsePartition
    eng = ctx.engine
    names = sorted(t.name for t in req.topics) if req.topics else sorted(eng.topics)
    cursor = req.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(int(req.response_partition_limit), 1)
    topics, next_cursor = [], None
    for ti, name in enumerate(names):
        topic = eng.topics.get(name)
        if topic is None:
            topics.append(T(version=v, error_code=codes.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[]))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts = []
        for p in topic.partitions[start:]:
            if budget == 0:
                next_cursor = R.Cursor(version=v, topic_name=name, partition_index=p.index)
                break
            parts.append(P(version=v, eligible_leader_replicas=None, last_known_elr=None, **_partition_view(ctx, p)))
            budget -= 1
        topics.append(T(version=v, error_code=codes.NONE, name=name, topic_id=topic.topic_id,
                        is_internal=name in INTERNAL_TOPICS, partitions=parts))
        if next_cursor is None and budget == 0 and ti + 1 < len(names):
            next_cursor = R.Cursor(version=v, topic_name=names[ti + 1], partition_index=0)
        if next_cursor is not None:
            break
    return R(version=v, throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def create_topics(ctx: Context, v: int, req: Any) -> Any:
    R = response_class(19)
    T = R.CreatableTopicResult
    eng = ctx.engine
    out = []
    seen = [t.name for t in req.topics]
    dups = {n for n in seen if seen.count(n) > 1}
    code: int
    msg: str | None
    for t in req.topics:
        if not ctx.is_controller:
            code, msg = codes.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE
        elif t.name in dups:
            code, msg = codes.INVALID_REQUEST, ("Create topics request from client contains multiple entries "
                                                f"for the following topics: {', '.join(sorted(dups))}")
        else:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            code, msg = eng.create_topic(t.name, t.num_partitions, t.replication_factor, assignments=assignments,
                                         configs={c.name: c.value for c in t.configs},
                                         validate_only=bool(getattr(req, "validate_only", False)))
        topic = eng.topics.get(t.name) if code == codes.NONE else None
        out.append(T(version=v, name=t.name, topic_id=topic.topic_id if topic else ZERO_UUID, error_code=code,
                     error_message=msg,
                     num_partitions=len(topic.partitions) if topic else -1,
                     replication_factor=len(topic.partitions[0].replicas) if topic and topic.partitions else -1,
                     configs=None))
    return R(version=v, throttle_time_ms=0, topics=out)


HANDLERS: dict[int, Callable[[Context, int, Any], Any]] = {
    18: api_versions, 3: metadata, 60: describe_cluster, 75: describe_topic_partitions, 19: create_topics,
}


def overwrite_errors(response: Any, code: int, message: str | None, *, per_item: bool = False) -> None:
    """Fault injection: set the response's top-level error code (if its schema has one at this
    version and `per_item` is False), else every nested error code, to `code`."""
    if not per_item and _has_field(response, "error_code") and _top_level_error_in_version(response):
        response.error_code = code
        if _has_field(response, "error_message"):
            response.error_message = message
        return
    _overwrite_nested(response, code, message)


def _has_field(obj: Any, name: str) -> bool:
    return any(f.name == name for f in getattr(getattr(obj, "_struct", None), "_fields", ()))


def _top_level_error_in_version(response: Any) -> bool:
    field = next(f for f in response._struct._fields if f.name == "error_code")
    return bool(field.for_version_q(response.API_VERSION))


def _overwrite_nested(obj: Any, code: int, message: str | None) -> None:
    for f in getattr(getattr(obj, "_struct", None), "_fields", ()):
        value = getattr(obj, f.name, None)
        if isinstance(value, list):
            for item in value:
                if _has_field(item, "error_code"):
                    item.error_code = code
                    if _has_field(item, "error_message"):
                        item.error_message = message
                _overwrite_nested(item, code, message)
