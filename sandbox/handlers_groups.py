"""Handlers of the group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch (the classic protocol), ListGroups and DescribeGroups, over
`groups.GroupCoordinator`.

Every group has one coordinator broker (`groups.coordinator_for`); other brokers answer
NOT_COORDINATOR, so clients look it up again, as after a coordinator move in Kafka. JoinGroup
and a follower's SyncGroup wait in the purgatory until the group answers them.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kreassign.sandbox import codes
from kreassign.sandbox.groups import (
    OFFSETS_TOPIC_PARTITIONS, Committed, GroupCoordinator, GroupState, JoinResult, Member, SyncResult,
    coordinator_for,
)
from kreassign.sandbox.topics import OFFSETS_TOPIC, assign_replicas
from kreassign.sandbox.purgatory import Delayed
from kreassign.sandbox.wire import APIS, ZERO_UUID

if TYPE_CHECKING:
    from kreassign.sandbox.context import Context

GROUP_KEY = 0  # FindCoordinator key type (1, transactions, has no coordinator here)
CLASSIC = "classic"  # ListGroups v5 group type
CLIENT_HOST = "/127.0.0.1"  # every client of the sandbox connects over loopback


def _resp(api_key: int) -> Any:
    return APIS[api_key][1]


def _coordinator(ctx: Context) -> GroupCoordinator:
    assert ctx.groups is not None, "the sandbox runs without a group coordinator"
    return ctx.groups


def _coordinator_error(ctx: Context, group_id: str) -> int:
    """NOT_COORDINATOR unless this broker coordinates the group."""
    alive = [b.id for b in ctx.engine.alive_brokers()]
    return codes.NONE if coordinator_for(group_id, alive) == ctx.broker_id else codes.NOT_COORDINATOR


def _wait(ctx: Context, group_id: str, poll: Callable[[float], Any], fallback: Any, build: Callable[[Any], Any],
          patience: float) -> Delayed:
    """Park a request until `poll` has its answer (or `patience` sandbox seconds pass: `fallback`)."""
    box: list[Any] = []
    coordinator = _coordinator(ctx)

    def ready(now: float) -> bool:
        if not box and (result := poll(now)) is not None:
            box.append(result)
        return bool(box)

    def complete(now: float, expired: bool) -> Any:
        if not box:
            result = poll(now)
            box.append(result if result is not None else fallback)
        return build(box[0])

    return Delayed(ctx.now, ctx.now + patience, ready, complete, lambda now: coordinator.next_deadline(group_id, now))


# ---- FindCoordinator ------------------------------------------------------------------------------
def ensure_offsets_topic(ctx: Context) -> None:
    """Create `__consumer_offsets` as Kafka does when a group first asks for its coordinator:
    offsets.topic.num.partitions partitions at min(3, live brokers) replicas, compacted. Its
    assignment comes from a generator of its own, so the seeded layout of later topics is the
    same whether a group asked first or not."""
    engine = ctx.engine
    if OFFSETS_TOPIC in engine.topics:
        return
    live = {b.id: b.rack for b in engine.alive_brokers()}
    if not live:
        return
    plan = assign_replicas(live, OFFSETS_TOPIC_PARTITIONS, min(3, len(live)), np.random.default_rng(0))
    engine.create_topic(OFFSETS_TOPIC, assignments=dict(enumerate(plan)),
                        configs={"cleanup.policy": "compact", "compression.type": "producer",
                                 "segment.bytes": "104857600"})


def find_coordinator(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(10)
    key_type = int(getattr(req, "key_type", GROUP_KEY)) if v >= 1 else GROUP_KEY
    keys = list(req.coordinator_keys) if v >= 4 else [req.key]
    if key_type == GROUP_KEY:
        ensure_offsets_topic(ctx)
    alive = [b.id for b in ctx.engine.alive_brokers()]
    found = []
    for key in keys:
        node = coordinator_for(key, alive) if key_type == GROUP_KEY else None
        if node is None:
            message = "The sandbox has no transaction coordinator" if key_type != GROUP_KEY else None
            found.append((key, codes.COORDINATOR_NOT_AVAILABLE, message, -1, "", -1))
        else:
            found.append((key, codes.NONE, None, node, ctx.host, ctx.ports[node]))
    if v >= 4:
        coordinators = [R.Coordinator(version=v, key=k, error_code=e, error_message=m, node_id=n, host=h, port=p)
                        for k, e, m, n, h, p in found]
        return R(version=v, throttle_time_ms=0, coordinators=coordinators)
    _, e, m, n, h, p = found[0]
    return R(version=v, throttle_time_ms=0, error_code=e, error_message=m, node_id=n, host=h, port=p)


# ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup --------------------------------------------------
def join_group(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(11)

    def build(result: JoinResult) -> Any:
        members = [R.JoinGroupResponseMember(version=v, member_id=mid, group_instance_id=iid, metadata=meta)
                   for mid, iid, meta in result.members]
        name = result.protocol_name if result.protocol_name is not None or v >= 7 else ""
        return R(version=v, throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
                 protocol_type=result.protocol_type, protocol_name=name, leader=result.leader,
                 skip_assignment=False, member_id=result.member_id, members=members)

    code = _coordinator_error(ctx, req.group_id)
    if code != codes.NONE:
        return build(JoinResult(code, req.member_id))
    coordinator = _coordinator(ctx)
    rebalance_ms = int(req.rebalance_timeout_ms) if v >= 1 else int(req.session_timeout_ms)
    outcome = coordinator.join(
        req.group_id, req.member_id, ctx.client_id, getattr(req, "group_instance_id", None) if v >= 5 else None,
        int(req.session_timeout_ms), rebalance_ms, req.protocol_type,
        [(p.name, bytes(p.metadata)) for p in req.protocols], require_known_member_id=v >= 4, now=ctx.now)
    if isinstance(outcome, JoinResult):
        return build(outcome)
    member: Member = outcome
    return _wait(ctx, req.group_id, lambda now: coordinator.poll_join(req.group_id, member, now),
                 JoinResult(codes.REBALANCE_IN_PROGRESS, member.member_id), build,
                 2 * member.rebalance_timeout + member.session_timeout)


def sync_group(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(14)

    def build(result: SyncResult) -> Any:
        return R(version=v, throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                 protocol_name=result.protocol_name, assignment=result.assignment)

    code = _coordinator_error(ctx, req.group_id)
    if code != codes.NONE:
        return build(SyncResult(code))
    coordinator = _coordinator(ctx)
    outcome = coordinator.sync(
        req.group_id, req.member_id, int(req.generation_id), getattr(req, "protocol_type", None) if v >= 5 else None,
        getattr(req, "protocol_name", None) if v >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in req.assignments}, ctx.now)
    if isinstance(outcome, SyncResult):
        return build(outcome)
    member: Member = outcome
    return _wait(ctx, req.group_id, lambda now: coordinator.poll_sync(req.group_id, member, now),
                 SyncResult(codes.REBALANCE_IN_PROGRESS), build, member.rebalance_timeout + member.session_timeout)


def heartbeat(ctx: Context, v: int, req: Any) -> Any:
    code = _coordinator_error(ctx, req.group_id)
    if code == codes.NONE:
        code = _coordinator(ctx).heartbeat(req.group_id, req.member_id, int(req.generation_id), ctx.now)
    return _resp(12)(version=v, throttle_time_ms=0, error_code=code)


def leave_group(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(13)
    leaving = [(m.member_id, m.group_instance_id) for m in req.members] if v >= 3 else [(req.member_id, None)]
    code = _coordinator_error(ctx, req.group_id)
    if code != codes.NONE:
        return R(version=v, throttle_time_ms=0, error_code=code, members=[])
    errors = _coordinator(ctx).leave(req.group_id, [mid for mid, _ in leaving], ctx.now)
    if v < 3:
        return R(version=v, throttle_time_ms=0, error_code=errors[0], members=[])
    members = [R.MemberResponse(version=v, member_id=mid, group_instance_id=iid, error_code=e)
               for (mid, iid), e in zip(leaving, errors)]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, members=members)


# ---- OffsetCommit, OffsetFetch --------------------------------------------------------------------
def _topic_of(ctx: Context, name: str | None, topic_id: uuid.UUID | None) -> str | None:
    """The topic's name if it exists (by name, or by id from v10)."""
    if topic_id is not None and topic_id != ZERO_UUID:
        return next((t.name for t in ctx.engine.topics.values() if t.topic_id == topic_id), None)
    return name if name is not None and name in ctx.engine.topics else None


def offset_commit(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(8)
    T = R.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    code = _coordinator_error(ctx, req.group_id)
    coordinator = _coordinator(ctx)
    if code == codes.NONE:
        generation = int(req.generation_id_or_member_epoch) if v >= 1 else -1
        code = coordinator.commit_check(req.group_id, req.member_id if v >= 1 else "", generation, ctx.now)
    topics = []
    for t in req.topics:
        topic_id = t.topic_id if v >= 10 else None
        name = _topic_of(ctx, t.name if v < 10 else None, topic_id)
        parts = []
        for p in t.partitions:
            if code != codes.NONE:
                err = code
            elif name is None:
                err = codes.UNKNOWN_TOPIC_ID if v >= 10 else codes.UNKNOWN_TOPIC_OR_PARTITION
            elif ctx.engine.partition(name, p.partition_index) is None:
                err = codes.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = int(p.committed_leader_epoch) if v >= 6 else -1
                err = coordinator.store_offset(req.group_id, name, p.partition_index,
                                               Committed(int(p.committed_offset), epoch, p.committed_metadata or "",
                                                         ctx.now))
            parts.append(P(version=v, partition_index=p.partition_index, error_code=err))
        topics.append(T(version=v, name=t.name if v < 10 else None, topic_id=topic_id or ZERO_UUID, partitions=parts))
    return R(version=v, throttle_time_ms=0, topics=topics)


def offset_fetch(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(9)
    if v < 8:
        topics = None if req.topics is None else [(t.name, None, list(t.partition_indexes)) for t in req.topics]
        code, found = _fetch_group(ctx, req.group_id, topics, v)
        out_topics = []
        for name, _, parts in found:
            P = R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
            out_parts = [P(version=v, partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=m,
                           error_code=err)
                         for i, o, e, m, err in parts]
            out_topics.append(R.OffsetFetchResponseTopic(version=v, name=name, partitions=out_parts))
        return R(version=v, throttle_time_ms=0, topics=out_topics, error_code=code)
    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    groups = []
    for g in req.groups:
        topics = None if g.topics is None else [
            (t.name if v < 10 else None, t.topic_id if v >= 10 else None, list(t.partition_indexes))
            for t in g.topics]
        code, found = _fetch_group(ctx, g.group_id, topics, v)
        out_topics = [T(version=v, name=name, topic_id=tid or ZERO_UUID,
                        partitions=[P(version=v, partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                      metadata=m, error_code=err) for i, o, e, m, err in parts])
                      for name, tid, parts in found]
        groups.append(G(version=v, group_id=g.group_id, topics=out_topics, error_code=code))
    return R(version=v, throttle_time_ms=0, groups=groups)


Wanted = list[tuple[str | None, uuid.UUID | None, list[int]]]
Found = list[tuple[str | None, uuid.UUID | None, list[tuple[int, int, int, str, int]]]]


def _fetch_group(ctx: Context, group_id: str, topics: Wanted | None, v: int) -> tuple[int, Found]:
    """(group error, per topic: (name, id, [(partition, offset, leader epoch, metadata, error)]))."""
    code = _coordinator_error(ctx, group_id)
    if code != codes.NONE:
        return code, [] if topics is None else [(n, tid, [(i, -1, -1, "", code) for i in parts])
                                                for n, tid, parts in topics]
    coordinator = _coordinator(ctx)
    found: Found = []
    if topics is None:
        by_topic: dict[str, list[tuple[int, int, int, str, int]]] = {}
        for (name, index), c in coordinator.fetch_offsets(group_id, None, ctx.now).items():
            if c is not None:
                by_topic.setdefault(name, []).append((index, c.offset, c.leader_epoch, c.metadata, codes.NONE))
        for name, parts in by_topic.items():
            topic = ctx.engine.topics.get(name)
            found.append((name, topic.topic_id if topic is not None and v >= 10 else None, parts))
        return codes.NONE, found
    for name, topic_id, indexes in topics:
        resolved = _topic_of(ctx, name, topic_id) if topic_id is not None else name
        if resolved is None:
            found.append((name, topic_id, [(i, -1, -1, "", codes.UNKNOWN_TOPIC_ID) for i in indexes]))
            continue
        got = coordinator.fetch_offsets(group_id, [(resolved, i) for i in indexes], ctx.now)
        parts = []
        for i in indexes:
            c = got[(resolved, i)]
            parts.append((i, -1, -1, "", codes.NONE) if c is None
                         else (i, c.offset, c.leader_epoch, c.metadata, codes.NONE))
        found.append((name, topic_id, parts))
    return codes.NONE, found


# ---- ListGroups, DescribeGroups --------------------------------------------------------------------
def list_groups(ctx: Context, v: int, req: Any) -> Any:
    """The groups this broker coordinates (clients ask every broker)."""
    R = _resp(16)
    coordinator = _coordinator(ctx)
    states = {s.lower() for s in req.states_filter} if v >= 4 and req.states_filter else None
    types = {t.lower() for t in req.types_filter} if v >= 5 and req.types_filter else None
    listed = []
    for group_id in sorted(coordinator.groups):
        group = coordinator.group(group_id, ctx.now)
        if group is None or _coordinator_error(ctx, group_id) != codes.NONE:
            continue
        if (states is not None and group.state.value.lower() not in states) or \
                (types is not None and CLASSIC not in types):
            continue
        listed.append(R.ListedGroup(version=v, group_id=group_id, protocol_type=group.protocol_type or "",
                                    group_state=group.state.value, group_type=CLASSIC))
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, groups=listed)


def describe_groups(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(15)
    G = R.DescribedGroup
    M = G.DescribedGroupMember
    coordinator = _coordinator(ctx)
    out = []
    for group_id in req.groups:
        code = _coordinator_error(ctx, group_id)
        group = coordinator.group(group_id, ctx.now) if code == codes.NONE else None
        if group is None:
            missing = code == codes.NONE and v >= 6
            out.append(G(version=v, error_code=codes.GROUP_ID_NOT_FOUND if missing else code,
                         error_message=f"Group {group_id} not found." if missing else None, group_id=group_id,
                         group_state="Dead" if code == codes.NONE else "", protocol_type="", protocol_data="",
                         members=[]))
            continue
        stable = group.state is GroupState.STABLE
        members = [M(version=v, member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                     client_host=CLIENT_HOST,
                     member_metadata=m.metadata(group.protocol) if stable and group.protocol else b"",
                     member_assignment=m.assignment if stable else b"")
                   for m in group.members.values()]
        out.append(G(version=v, error_code=codes.NONE, error_message=None, group_id=group_id,
                     group_state=group.state.value, protocol_type=group.protocol_type or "",
                     protocol_data=group.protocol or "", members=members))
    return R(version=v, throttle_time_ms=0, groups=out)


GROUP_HANDLERS: dict[int, Callable[[Context, int, Any], Any]] = {
    10: find_coordinator, 11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group,
    8: offset_commit, 9: offset_fetch, 16: list_groups, 15: describe_groups,
}
