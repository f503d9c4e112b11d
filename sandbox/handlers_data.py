"""Handlers for the data path: Produce, Fetch, ListOffsets, InitProducerId, OffsetForLeaderEpoch.

A handler returns a response, `NoResponse` (Produce with acks=0), or a `Delayed` operation
for the server to park: acks=all produces wait until the high watermark passes their last
offset (DelayedProduce), fetches until `min_bytes` are readable below the high watermark
(DelayedFetch), both at most their timeout (broker-semantics Part B §4.2-4.3).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kreassign.sandbox import codes
from kreassign.sandbox.batches import InvalidRecords, parse_batches
from kreassign.sandbox.client_quota_hook import ANONYMOUS
from kreassign.sandbox.log import Appended, SequenceError
from kreassign.sandbox.purgatory import Delayed
from kreassign.sandbox.state import PartitionState
from kreassign.sandbox.wire import APIS, ZERO_UUID

if TYPE_CHECKING:
    from kreassign.sandbox.context import Context



@dataclass(frozen=True)
class NoResponse:
    """Produce with acks=0 gets no answer, but a quota throttle still mutes the connection."""

    throttle_time_ms: int = 0

FETCH_SESSION_ID_NOT_FOUND = 70
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def _resp(key: int) -> Any:
    return APIS[key][1]


def _topic_name(ctx: Context, name: str | None, topic_id: uuid.UUID | None) -> str | None:
    if topic_id is not None and topic_id != ZERO_UUID:
        return next((t.name for t in ctx.engine.topics.values() if t.topic_id == topic_id), None)
    return name


def _fetched_partition(ctx: Context, w: _FetchWant) -> PartitionState | None:
    """The wanted partition now; None once its topic is gone, or was created again under the
    name when the fetch named it by id."""
    topic = ctx.engine.topics.get(w.topic)
    if topic is None or (w.topic_id not in (None, ZERO_UUID) and topic.topic_id != w.topic_id):
        return None
    return ctx.engine.partition(w.topic, w.index)


def _leader_check(ctx: Context, p: PartitionState | None, current_epoch: int = -1) -> int:
    """Kafka's order: the client's leader epoch first, then leadership of this broker."""
    if p is None:
        return codes.UNKNOWN_TOPIC_OR_PARTITION
    if current_epoch >= 0:
        if current_epoch < p.leader_epoch:
            return codes.FENCED_LEADER_EPOCH
        if current_epoch > p.leader_epoch:
            return codes.UNKNOWN_LEADER_EPOCH
    if p.leader != ctx.broker_id:
        return codes.NOT_LEADER_OR_FOLLOWER
    return codes.NONE


def _new_leader(ctx: Context, p: PartitionState | None, code: int) -> int | None:
    """KIP-951: the live leader to name in a NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answer."""
    if p is None or code not in (codes.NOT_LEADER_OR_FOLLOWER, codes.FENCED_LEADER_EPOCH):
        return None
    b = ctx.engine.brokers.get(p.leader)
    return p.leader if b is not None and b.alive and p.leader != ctx.broker_id else None


def _endpoints(ctx: Context, cls: Any, v: int, leaders: set[int]) -> list[Any]:
    return [cls(version=v, node_id=b, host=ctx.host, port=ctx.ports[b], rack=ctx.engine.brokers[b].rack)
            for b in sorted(leaders)]


# ---- Produce --------------------------------------------------------------------------------------
@dataclass
class _Produced:
    topic: str
    topic_id: uuid.UUID | None
    index: int
    partition: PartitionState | None
    code: int
    message: str | None = None
    appended: Appended | None = None
    nbytes: int = 0


def produce(ctx: Context, v: int, req: Any) -> Any:
    data = ctx.data
    assert data is not None
    now = ctx.now
    results: list[_Produced] = []
    for t in req.topic_data:
        topic_id = getattr(t, "topic_id", None) if v >= 13 else None
        name = _topic_name(ctx, getattr(t, "name", None), topic_id)
        for pd in t.partition_data:
            p = ctx.engine.partition(name, pd.index) if name is not None else None
            r = _Produced(name or "", topic_id, pd.index, p, codes.NONE)
            results.append(r)
            if req.acks not in (-1, 0, 1):
                r.code = codes.INVALID_REQUIRED_ACKS
            elif req.transactional_id is not None:
                r.code, r.message = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "The sandbox has no transactions"
            elif p is None:
                r.code = codes.UNKNOWN_TOPIC_ID if topic_id is not None else codes.UNKNOWN_TOPIC_OR_PARTITION
            elif (code := _leader_check(ctx, p)) != codes.NONE:
                r.code = code
            elif req.acks == -1 and len(p.isr) < data.min_insync_replicas(p.topic):
                r.code, r.message = codes.NOT_ENOUGH_REPLICAS, (
                    f"The size of the current ISR {p.isr} is insufficient to satisfy the min.isr requirement "
                    f"of {data.min_insync_replicas(p.topic)} for partition {p.topic}-{p.index}")
            else:
                _append(ctx, p, pd.records, r)
    produced = sum(r.nbytes for r in results)

    def deleted(r: _Produced) -> bool:
        """Its topic was deleted (maybe created again) while the request waited."""
        return r.partition is not None and ctx.engine.partition(r.topic, r.index) is not r.partition

    def waiting(now: float) -> list[_Produced]:
        """Appended partitions still led here whose high watermark has not passed the batch."""
        return [r for r in results if r.appended is not None and r.code == codes.NONE
                and r.partition is not None and not deleted(r) and r.partition.leader == ctx.broker_id
                and data.high_watermark(r.partition, now) <= r.appended.last_offset]

    def unacknowledged(now: float) -> set[int]:
        """Still waiting, or no longer led here (Kafka answers NOT_LEADER_OR_FOLLOWER for those)."""
        moved = {id(r) for r in results if r.appended is not None and r.code == codes.NONE
                 and r.partition is not None and not deleted(r) and r.partition.leader != ctx.broker_id}
        return moved | {id(r) for r in waiting(now)}

    def build(now: float, expired: bool) -> Any:
        for r in results:
            if r.code == codes.NONE and deleted(r):  # DelayedProduce finds no partition any more
                r.code, r.appended = codes.UNKNOWN_TOPIC_OR_PARTITION, None
        late = unacknowledged(now) if req.acks == -1 else set()
        throttle = ctx.quotas.produce_throttle_ms(ctx.client_id, ANONYMOUS, produced, now)
        return _produce_response(v, results, late, ctx, throttle)

    if req.acks == 0:
        return NoResponse(ctx.quotas.produce_throttle_ms(ctx.client_id, ANONYMOUS, produced, now))
    if req.acks == -1 and waiting(now):
        def wake(now: float) -> float | None:
            times = [t for r in waiting(now) if r.partition is not None
                     if (t := data.next_hw_change(r.partition, now)) is not None]
            return min(times) if times else None
        return Delayed(now, now + max(req.timeout_ms, 0) / 1000.0, lambda now: not waiting(now), build, wake)
    return build(now, False)


def _append(ctx: Context, p: PartitionState, records: bytes | None, r: _Produced) -> None:
    data = ctx.data
    assert data is not None
    try:
        headers = parse_batches(records or b"")
        limit = data.max_message_bytes(p.topic)
        if any(h.size > limit for h in headers):
            r.code, r.message = codes.MESSAGE_TOO_LARGE, f"A record batch is larger than max.message.bytes={limit}"
            return
        r.appended = data.append(p, records or b"", headers, ctx.now)
        r.nbytes = len(records or b"")
        ctx.engine.traffic.produced(ctx.broker_id, p.topic, r.nbytes, sum(h.last_offset_delta + 1 for h in headers),
                                    p.isr)
    except InvalidRecords as exc:
        r.code, r.message = exc.code, str(exc)
    except SequenceError as exc:
        r.code, r.message = exc.code, str(exc)


def _produce_response(v: int, results: list[_Produced], late: set[int], ctx: Context, throttle: int) -> Any:
    R = _resp(0)
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    data = ctx.data
    assert data is not None
    by_topic: dict[tuple[str, uuid.UUID | None], list[Any]] = {}
    leaders: set[int] = set()
    for r in results:
        code, msg = r.code, r.message
        if code == codes.NONE and id(r) in late:
            p = r.partition
            if p is not None and p.leader != ctx.broker_id:
                code, msg = codes.NOT_LEADER_OR_FOLLOWER, None
            else:
                code, msg = codes.REQUEST_TIMED_OUT, None
        ok = code == codes.NONE and r.appended is not None
        log_start = data.log(r.partition).log_start if r.partition is not None and ok else -1
        extra = {}
        leader = _new_leader(ctx, r.partition, code) if v >= 10 else None
        if leader is not None and r.partition is not None:
            extra["current_leader"] = P.LeaderIdAndEpoch(version=v, leader_id=leader,
                                                         leader_epoch=r.partition.leader_epoch)
            leaders.add(leader)
        by_topic.setdefault((r.topic, r.topic_id), []).append(P(
            version=v, index=r.index, error_code=code, base_offset=r.appended.base_offset if ok and r.appended else -1,
            log_append_time_ms=-1, log_start_offset=log_start, record_errors=[], error_message=msg, **extra))
    topics = [T(version=v, name=name, topic_id=tid or ZERO_UUID, partition_responses=parts)
              for (name, tid), parts in by_topic.items()]
    return R(version=v, responses=topics, throttle_time_ms=throttle,
             node_endpoints=_endpoints(ctx, R.NodeEndpoint, v, leaders))


# ---- Fetch ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _FetchWant:
    topic: str
    topic_id: uuid.UUID | None
    index: int
    offset: int
    max_bytes: int
    current_epoch: int


def fetch(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(1)
    session_id = getattr(req, "session_id", 0) if v >= 7 else 0
    if session_id != 0:
        return R(version=v, throttle_time_ms=0, error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    wants: list[_FetchWant] = []
    for t in req.topics:
        topic_id = getattr(t, "topic_id", None) if v >= 13 else None
        name = _topic_name(ctx, getattr(t, "topic", None), topic_id) or ""
        for fp in t.partitions:
            wants.append(_FetchWant(name, topic_id, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                                    getattr(fp, "current_leader_epoch", -1) if v >= 9 else -1))
    max_bytes = getattr(req, "max_bytes", 0x7FFFFFFF) if v >= 3 else 0x7FFFFFFF
    consumer = replica_id(req, v) < 0
    now = ctx.now
    readable, failed = _readable(ctx, wants, now)
    if req.max_wait_ms <= 0 or not wants or failed or readable >= req.min_bytes:
        return _fetch_response(ctx, v, wants, max_bytes, now, consumer)

    def ready(now: float) -> bool:
        readable, failed = _readable(ctx, wants, now)
        return failed or readable >= req.min_bytes

    def wake(now: float) -> float | None:
        data = ctx.data
        assert data is not None
        times = [t for w in wants if (p := _fetched_partition(ctx, w)) is not None
                 if (t := data.next_hw_change(p, now)) is not None]
        return min(times) if times else None

    return Delayed(now, now + req.max_wait_ms / 1000.0, ready,
                   lambda now, expired: _fetch_response(ctx, v, wants, max_bytes, now, consumer), wake)


def replica_id(req: Any, v: int) -> int:
    """The fetching replica (-1 for consumers; in ReplicaState from v15)."""
    if v >= 15:
        state = getattr(req, "replica_state", None)
        return int(state.replica_id) if state is not None else -1
    return int(getattr(req, "replica_id", -1))


def _readable(ctx: Context, wants: list[_FetchWant], now: float) -> tuple[int, bool]:
    """Bytes readable below the high watermark for the fetch (each partition at most its own
    limit, as DelayedFetch counts them), and whether a partition now answers with an error."""
    data = ctx.data
    assert data is not None
    total = 0
    for w in wants:
        p = _fetched_partition(ctx, w)
        if _leader_check(ctx, p, w.current_epoch) != codes.NONE:
            return total, True
        assert p is not None
        log = data.log(p)
        hw = data.high_watermark(p, now)
        if w.offset > log.leo or w.offset < log.log_start:
            return total, True
        total += min(log.readable_bytes(w.offset, hw), w.max_bytes)
    return total, False


def _fetch_response(ctx: Context, v: int, wants: list[_FetchWant], max_bytes: int, now: float,
                    consumer: bool) -> Any:
    R = _resp(1)
    T = R.FetchableTopicResponse
    P = T.PartitionData
    data = ctx.data
    assert data is not None
    budget = max_bytes
    by_topic: dict[tuple[str, uuid.UUID | None], list[Any]] = {}
    leaders: set[int] = set()
    moved = 0
    for w in wants:
        p = _fetched_partition(ctx, w)
        code = _leader_check(ctx, p, w.current_epoch)
        if p is None and w.topic_id is not None:
            code = codes.UNKNOWN_TOPIC_ID
        hw = lso = start = -1
        records = b""
        if code == codes.NONE and p is not None:
            log = data.log(p)
            hw = lso = data.high_watermark(p, now)
            start = log.log_start
            if w.offset > log.leo or w.offset < start:
                code = codes.OFFSET_OUT_OF_RANGE
            elif budget > 0 and w.offset < hw:
                # KIP-74: only the first partition with data may exceed the limits with one batch
                records = log.read(w.offset, min(w.max_bytes, budget), hw, at_least_one=moved == 0)
                budget -= len(records)
                moved += len(records)
        extra = {}
        leader = _new_leader(ctx, p, code) if v >= 12 else None
        if leader is not None and p is not None:
            extra["current_leader"] = P.LeaderIdAndEpoch(version=v, leader_id=leader, leader_epoch=p.leader_epoch)
            leaders.add(leader)
        by_topic.setdefault((w.topic, w.topic_id), []).append(P(
            version=v, partition_index=w.index, error_code=code, high_watermark=hw, last_stable_offset=lso,
            log_start_offset=start, aborted_transactions=None, preferred_read_replica=-1, records=records, **extra))
    throttle = ctx.quotas.fetch_throttle_ms(ctx.client_id, ANONYMOUS, moved, now) if consumer else 0
    if consumer and throttle == 0:
        for (name, _), parts in by_topic.items():
            ctx.engine.traffic.fetched(ctx.broker_id, name, sum(len(x.records or b"") for x in parts))
    if throttle > 0:
        return R(version=v, throttle_time_ms=throttle, error_code=codes.NONE, session_id=0, responses=[])
    topics = [T(version=v, topic=name, topic_id=tid or ZERO_UUID, partitions=parts)
              for (name, tid), parts in by_topic.items()]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, session_id=0, responses=topics,
             node_endpoints=_endpoints(ctx, R.NodeEndpoint, v, leaders) if v >= 16 else [])


# ---- ListOffsets, InitProducerId, OffsetForLeaderEpoch ------------------------------------------------
def list_offsets(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(2)
    T = R.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    data = ctx.data
    assert data is not None
    topics = []
    for t in req.topics:
        parts = []
        for lp in t.partitions:
            p = ctx.engine.partition(t.name, lp.partition_index)
            code = _leader_check(ctx, p, getattr(lp, "current_leader_epoch", -1) if v >= 4 else -1)
            ts, offset, epoch = -1, -1, -1
            if code == codes.NONE and p is not None:
                ts, offset, epoch = _offset_for(data.log(p), data.high_watermark(p, ctx.now), lp.timestamp,
                                                p.leader_epoch)
            parts.append(P(version=v, partition_index=lp.partition_index, error_code=code, old_style_offsets=[],
                           timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(T(version=v, name=t.name, partitions=parts))
    return R(version=v, throttle_time_ms=0, topics=topics)


def _offset_for(log: Any, hw: int, timestamp: int, leader_epoch: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) answering one ListOffsets partition (consumer view: up to the HW)."""
    if timestamp == LATEST:
        return -1, hw, leader_epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start, leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    found = log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= hw:
        return -1, -1, -1
    return found[1], found[0], leader_epoch


def init_producer_id(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(22)
    data = ctx.data
    assert data is not None
    if req.transactional_id is not None:
        return R(version=v, throttle_time_ms=0, error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                 producer_id=-1, producer_epoch=-1)
    known = getattr(req, "producer_id", -1) if v >= 3 else -1
    if known >= 0:
        epoch = int(getattr(req, "producer_epoch", -1)) + 1
        return R(version=v, throttle_time_ms=0, error_code=codes.NONE, producer_id=known, producer_epoch=epoch)
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, producer_id=data.allocate_producer_id(),
             producer_epoch=0)


def offset_for_leader_epoch(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(23)
    T = R.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    data = ctx.data
    assert data is not None
    topics = []
    for t in req.topics:
        parts = []
        for op in t.partitions:
            p = ctx.engine.partition(t.topic, op.partition)
            code = _leader_check(ctx, p, op.current_leader_epoch)
            epoch, end = -1, -1
            if code == codes.NONE and p is not None:
                log = data.log(p)
                if op.leader_epoch >= p.leader_epoch:
                    epoch, end = p.leader_epoch, log.leo
                else:
                    epoch, end = log.end_offset_for_epoch(op.leader_epoch)
            parts.append(P(version=v, error_code=code, partition=op.partition, leader_epoch=epoch, end_offset=end))
        topics.append(T(version=v, topic=t.topic, partitions=parts))
    return R(version=v, throttle_time_ms=0, topics=topics)


DATA_HANDLERS: dict[int, Callable[[Context, int, Any], Any]] = {
    0: produce, 1: fetch, 2: list_offsets, 22: init_producer_id, 23: offset_for_leader_epoch,
}
