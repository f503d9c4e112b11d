"""Request handlers: thin translations between kafka-python message objects and the engine.

`dispatch` is called with the engine lock held; it returns the response object for the
request's version. Every broker serves the controller's APIs, as KRaft brokers forward them to
the quorum; BROKER config resources must name the receiving broker (broker-semantics §4.4 item 7, §6).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kreassign.sandbox import codes
from kreassign.sandbox.context import Context
from kreassign.sandbox.handlers_admin import ADMIN_HANDLERS
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
            code = codes.UNKNOWN_TOPIC_OR_PARTITION if name is not None else codes.UNKNOWN_TOPIC_ID
            topics.append(T(version=v, error_code=code, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False,
                            partitions=[]))
            continue
        parts = [P(version=v, **_partition_view(ctx, p)) for p in topic.partitions]
        topics.append(T(version=v, error_code=codes.NONE, name=topic.name, topic_id=topic.topic_id,
                        is_internal=topic.name in INTERNAL_TOPICS, partitions=parts))
    return R(version=v, throttle_time_ms=0, brokers=brokers, cluster_id=eng.cluster_id,
             controller_id=eng.reported_controller(), topics=topics, error_code=codes.NONE)


MISMATCHED_ENDPOINT_MESSAGE = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                               "type CONTROLLER")


def describe_cluster(ctx: Context, v: int, req: Any) -> Any:
    R = response_class(60)
    eng = ctx.engine
    if v >= 1 and req.endpoint_type == 2:  # the controllers' own listener, which brokers are not
        return R(version=v, throttle_time_ms=0, error_code=codes.MISMATCHED_ENDPOINT_TYPE,
                 error_message=MISMATCHED_ENDPOINT_MESSAGE, endpoint_type=1, cluster_id="", controller_id=-1,
                 brokers=[])
    include_fenced = v >= 2 and bool(req.include_fenced_brokers)
    brokers = [R.DescribeClusterBroker(version=v, broker_id=b.id, host=ctx.host, port=ctx.ports[b.id],
                                       rack=b.rack, is_fenced=not b.alive)
               for b in eng.brokers.values() if b.alive or include_fenced]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, error_message=None, endpoint_type=1,
             cluster_id=eng.cluster_id, controller_id=eng.reported_controller(), brokers=brokers)


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
            parts.append(P(version=v, eligible_leader_replicas=[], last_known_elr=[], **_partition_view(ctx, p)))
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
    eng = ctx.engine
    out = []
    seen = [t.name for t in req.topics]
    dups = {n for n in seen if seen.count(n) > 1}
    validate_only = bool(getattr(req, "validate_only", False))
    code: int
    msg: str | None
    for t in req.topics:
        if t.name in dups:
            code, msg = codes.INVALID_REQUEST, ("Create topics request from client contains multiple entries "
                                                f"for the following topics: {', '.join(sorted(dups))}")
        else:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            code, msg = eng.create_topic(t.name, t.num_partitions, t.replication_factor, assignments=assignments,
                                         configs={c.name: c.value for c in t.configs}, validate_only=validate_only)
        out.append(_created(ctx, v, t, code, msg, validate_only))
    return R(version=v, throttle_time_ms=0, topics=out)


def _created(ctx: Context, v: int, t: Any, code: int, msg: str | None, validate_only: bool) -> Any:
    """One CreateTopics result: from v5 on, a created (or validated) topic's shape and configs,
    which Kafka also reports for a request that only validates."""
    T = response_class(19).CreatableTopicResult
    C = T.CreatableTopicConfigs
    eng = ctx.engine
    topic = eng.topics.get(t.name) if code == codes.NONE and not validate_only else None
    if code != codes.NONE:
        shape = (-1, -1)
    elif topic is not None:
        shape = (len(topic.partitions), len(topic.partitions[0].replicas) if topic.partitions else -1)
    elif t.assignments:
        shape = (len(t.assignments), len(t.assignments[0].broker_ids))
    else:
        shape = (1 if t.num_partitions == -1 else t.num_partitions, 1 if t.replication_factor == -1
                 else t.replication_factor)
    configs = []
    if code == codes.NONE:
        overrides = {c.name: c.value for c in t.configs} if topic is None else {}  # a created topic has its own
        for e in eng.configs.describe_topic(t.name if topic is not None else "", None, ctx.broker_id):
            value, source = (overrides[e.name], codes.ConfigSource.DYNAMIC_TOPIC_CONFIG) if e.name in overrides \
                else (e.value, e.source)
            configs.append(C(version=v, name=e.name, value=value, read_only=e.read_only, config_source=int(source),
                             is_sensitive=e.sensitive))
    # a validated topic gets an id of its own too, as the controller draws one before it validates
    topic_id = topic.topic_id if topic else uuid.uuid4() if code == codes.NONE else ZERO_UUID
    return T(version=v, name=t.name, topic_id=topic_id, error_code=code,
             error_message=msg, topic_config_error_code=0, num_partitions=shape[0], replication_factor=shape[1],
             configs=configs)


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
