"""Handlers for configs, reassignments, elections, topic deletion and log dirs (see `handlers` for the rules)."""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kreassign.sandbox import codes
from kreassign.sandbox.codes import ResourceType
from kreassign.sandbox.configs import ConfigEntry, Result
from kreassign.sandbox.topic_deletion import ZERO_UUID
from kreassign.sandbox.topic_deletion import delete_topics as delete_topics_of
from kreassign.sandbox.wire import APIS

if TYPE_CHECKING:
    from kreassign.sandbox.context import Context

def _resp(key: int) -> Any:
    return APIS[key][1]


def _wanted(items: Sequence[Any] | None, name_attr: str, parts_attr: str) -> dict[str, list[int]] | None:
    if items is None:
        return None
    out: dict[str, list[int]] = defaultdict(list)
    for t in items:
        out[getattr(t, name_attr)].extend(getattr(t, parts_attr))
    return dict(out)


# ---- configs ------------------------------------------------------------------------------------
def _broker_target(ctx: Context, name: str, *, describe: bool) -> tuple[int | None, Result]:
    """Resolve a BROKER resource name: (None = cluster default | own id, error)."""
    if name == "":
        return None, (codes.NONE, None)
    try:
        broker_id = int(name)
    except ValueError:
        return None, (codes.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
    if broker_id != ctx.broker_id:
        suffix = " or empty string" if describe else ""
        return None, (codes.INVALID_REQUEST,
                      f"Unexpected broker id, expected {ctx.broker_id}{suffix}, but received {name}")
    return broker_id, (codes.NONE, None)


def _topic_missing(name: str) -> Result:
    if name == "":
        return codes.INVALID_REQUEST, "Default topic resources are not allowed."
    return codes.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."


def describe_configs(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(32)
    Res = R.DescribeConfigsResult
    Ent = Res.DescribeConfigsResourceResult
    Syn = Ent.DescribeConfigsSynonym
    eng = ctx.engine
    synonyms = v >= 1 and bool(req.include_synonyms)
    results = []
    for r in req.resources:
        keys = r.configuration_keys
        entries: list[ConfigEntry] = []
        # Kafka's message is empty, not null, on success and for a missing topic
        code, msg = codes.NONE, ""
        if r.resource_type == ResourceType.TOPIC:
            if r.resource_name in eng.topics:
                entries = eng.configs.describe_topic(r.resource_name, keys, ctx.broker_id)
            else:
                code, msg = _topic_missing(r.resource_name)
                if code == codes.UNKNOWN_TOPIC_OR_PARTITION:
                    msg = ""
        elif r.resource_type == ResourceType.BROKER:
            broker_id, (code, msg) = _broker_target(ctx, r.resource_name, describe=True)
            if code == codes.NONE:
                msg = ""
                static = eng.static_broker_configs(broker_id) if broker_id is not None else {}
                entries = eng.configs.describe_broker(broker_id, static, keys)
        elif r.resource_type == ResourceType.CLIENT_METRICS:
            entries = eng.client_metrics.describe(r.resource_name, keys)
        else:
            code, msg = codes.INVALID_REQUEST, f"Unsupported resource type: {r.resource_type}"
        configs = [Ent(version=v, name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
                       is_default=e.is_default, is_sensitive=e.sensitive, config_type=int(e.type), documentation=None,
                       synonyms=[Syn(version=v, name=n, value=val, source=int(s)) for n, val, s in e.synonyms]
                       if synonyms else [])
                   for e in entries]
        results.append(Res(version=v, error_code=code, error_message=msg, resource_type=r.resource_type,
                           resource_name=r.resource_name, configs=configs))
    return R(version=v, throttle_time_ms=0, results=results)


def _alter_configs(ctx: Context, v: int, req: Any, incremental: bool) -> Any:
    R = _resp(44 if incremental else 33)
    Out = R.AlterConfigsResourceResponse
    eng = ctx.engine
    seen = Counter((r.resource_type, r.resource_name) for r in req.resources)
    validate_only = bool(req.validate_only)
    out = []
    changed = False
    code: int
    msg: str | None
    for r in req.resources:
        names = [c.name for c in r.configs]
        if seen[(r.resource_type, r.resource_name)] > 1:
            code, msg = codes.INVALID_REQUEST, "Duplicate resource."
        elif len(set(names)) != len(names):
            code, msg = codes.INVALID_REQUEST, "Error due to duplicate config keys"
        elif r.resource_type == ResourceType.TOPIC:
            if r.resource_name not in eng.topics:
                code, msg = _topic_missing(r.resource_name)
            elif incremental:
                code, msg = eng.configs.incremental_alter_topic(
                    r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs], validate_only)
            else:
                code, msg = eng.configs.alter_topic(r.resource_name, [(c.name, c.value) for c in r.configs],
                                                    validate_only)
        elif r.resource_type == ResourceType.BROKER:
            broker_id, (code, msg) = _broker_target(ctx, r.resource_name, describe=False)
            if code == codes.NONE:
                if incremental:
                    code, msg = eng.configs.incremental_alter_broker(
                        broker_id, [(c.name, c.config_operation, c.value) for c in r.configs], validate_only)
                else:
                    code, msg = eng.configs.alter_broker(broker_id, [(c.name, c.value) for c in r.configs],
                                                         validate_only)
        elif r.resource_type == ResourceType.CLIENT_METRICS and incremental:
            code, msg = eng.client_metrics.alter(
                r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs], validate_only)
        else:
            code, msg = codes.INVALID_REQUEST, f"Unsupported resource type: {r.resource_type}"
        changed = changed or (code == codes.NONE and not validate_only)
        out.append(Out(version=v, error_code=code, error_message=msg, resource_type=r.resource_type,
                       resource_name=r.resource_name))
    if changed:
        eng.config_changed()
    return R(version=v, throttle_time_ms=0, responses=out)


def incremental_alter_configs(ctx: Context, v: int, req: Any) -> Any:
    return _alter_configs(ctx, v, req, incremental=True)


def alter_configs(ctx: Context, v: int, req: Any) -> Any:
    return _alter_configs(ctx, v, req, incremental=False)


# ---- reassignments and elections (controller) ----------------------------------------------------
def alter_partition_reassignments(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(45)
    T = R.ReassignableTopicResponse
    P = T.ReassignablePartitionResponse
    allow = bool(getattr(req, "allow_replication_factor_change", True)) if v >= 1 else True
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, msg = ctx.engine.alter_reassignment(t.name, p.partition_index, p.replicas, allow_rf_change=allow)
            parts.append(P(version=v, partition_index=p.partition_index, error_code=code, error_message=msg))
        topics.append(T(version=v, name=t.name, partitions=parts))
    return R(version=v, throttle_time_ms=0, allow_replication_factor_change=allow, error_code=codes.NONE,
             error_message=None, responses=topics)


def list_partition_reassignments(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(46)
    T = R.OngoingTopicReassignment
    P = T.OngoingPartitionReassignment
    grouped: dict[str, list[Any]] = defaultdict(list)
    for topic, index, replicas, adding, removing in ctx.engine.list_reassignments(
            _wanted(req.topics, "name", "partition_indexes")):
        grouped[topic].append(P(version=v, partition_index=index, replicas=replicas, adding_replicas=adding,
                                removing_replicas=removing))
    topics = [T(version=v, name=name, partitions=parts) for name, parts in grouped.items()]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, error_message=None, topics=topics)


def elect_leaders(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(43)
    T = R.ReplicaElectionResult
    P = T.PartitionResult
    election = int(req.election_type) if v >= 1 else 0
    wanted = _wanted(req.topic_partitions, "topic", "partitions")
    grouped: dict[str, list[Any]] = defaultdict(list)
    if wanted is None:  # every topic is answered for, even one whose partitions all needed no election
        grouped.update({name: [] for name in ctx.engine.topics})
    for topic, index, code, msg in ctx.engine.elect_leaders(election, wanted):
        grouped[topic].append(P(version=v, partition_id=index, error_code=code, error_message=msg))
    results = [T(version=v, topic=t, partition_result=parts) for t, parts in grouped.items()]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, replica_election_results=results)


# ---- topics (controller) ---------------------------------------------------------------------------
def delete_topics(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(20)
    Res = R.DeletableTopicResult
    # kafka-python decodes the zero id (no id given) as None
    entries = ([(t.name, t.topic_id or ZERO_UUID) for t in req.topics] if v >= 6
               else [(name, ZERO_UUID) for name in req.topic_names])
    results = delete_topics_of(ctx.engine, entries, req.timeout_ms, ctx.principal, data=ctx.data, groups=ctx.groups)
    return R(version=v, throttle_time_ms=0, responses=[
        Res(version=v, name=r.name, topic_id=r.topic_id, error_code=r.code, error_message=r.message)
        for r in results])


# ---- log dirs ---------------------------------------------------------------------------------------
def describe_log_dirs(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(35)
    D = R.DescribeLogDirsResult
    T = D.DescribeLogDirsTopic
    P = T.DescribeLogDirsPartition
    eng = ctx.engine
    data = ctx.data
    wanted = _wanted(req.topics, "topic", "partitions")
    results = []
    futures = list(data.log_dir_moves.moves.values()) if data is not None else []
    for log_dir, replicas in eng.describe_log_dirs(ctx.broker_id, wanted).items():
        grouped: dict[str, list[Any]] = defaultdict(list)
        used = 0
        for r in replicas:
            grouped[r.topic].append(P(version=v, partition_index=r.partition, partition_size=r.size,
                                      offset_lag=_replica_lag(ctx, r.topic, r.partition), is_future_key=False))
            used += r.size
        for f in futures:
            if f.broker == ctx.broker_id and f.target_dir == log_dir and (
                    wanted is None or f.index in wanted.get(f.topic, ())):
                grouped[f.topic].append(P(version=v, partition_index=f.index, partition_size=int(f.copied),
                                          offset_lag=_future_lag(ctx, f), is_future_key=True))
                used += int(f.copied)
        if wanted is not None:
            used = eng.used_bytes(ctx.broker_id, log_dir) + sum(
                int(f.copied) for f in futures if f.broker == ctx.broker_id and f.target_dir == log_dir)
        results.append(D(version=v, error_code=codes.NONE, log_dir=log_dir,
                         topics=[T(version=v, name=t, partitions=ps) for t, ps in grouped.items()],
                         total_bytes=eng.disk_bytes, usable_bytes=max(eng.disk_bytes - used, 0), is_cordoned=False))
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, results=results)


def _replica_lag(ctx: Context, topic: str, index: int) -> int:
    """Kafka's offset lag of a current replica: the high watermark minus its log end offset."""
    data = ctx.data
    p = ctx.engine.partition(topic, index)
    if data is None or p is None or data.existing(p) is None:
        return 0
    return max(data.high_watermark(p, ctx.now) - data.replica_leo(p, ctx.broker_id, ctx.now), 0)


def _future_lag(ctx: Context, f: Any) -> int:
    """Offsets the future replica still lacks behind the current one (Kafka's offset lag)."""
    data = ctx.data
    p = ctx.engine.partition(f.topic, f.index)
    if data is None or p is None:
        return 0
    log = data.log(p)
    current = data.replica_leo(p, f.broker, ctx.now)
    return max(current - log.offset_at_bytes(f.copied), 0)


def alter_replica_log_dirs(ctx: Context, v: int, req: Any) -> Any:
    R = _resp(34)
    T = R.AlterReplicaLogDirTopicResult
    P = T.AlterReplicaLogDirPartitionResult
    assert ctx.data is not None
    grouped: dict[str, list[Any]] = defaultdict(list)
    for d in req.dirs:
        for t in d.topics:
            for i in t.partitions:
                code = ctx.data.log_dir_moves.start(ctx.broker_id, d.path, t.name, i)
                grouped[t.name].append(P(version=v, partition_index=i, error_code=code))
    return R(version=v, throttle_time_ms=0,
             results=[T(version=v, topic_name=t, partitions=ps) for t, ps in grouped.items()])


LISTABLE = (ResourceType.BROKER_LOGGER, ResourceType.BROKER, ResourceType.TOPIC, ResourceType.CLIENT_METRICS,
            ResourceType.GROUP)


def list_config_resources(ctx: Context, v: int, req: Any) -> Any:
    """ListConfigResources: at v0 (KIP-714's ListClientMetricsResources) the client-metrics
    subscriptions; from v1 on (Kafka 4.1+) the resources of the asked types, every type when none
    is given. Group configs are not modelled, so GROUP lists nothing."""
    R = _resp(74)
    wanted = set(getattr(req, "resource_types", None) or LISTABLE) if v >= 1 else {ResourceType.CLIENT_METRICS}
    if not wanted <= set(LISTABLE):
        return R(version=v, throttle_time_ms=0, error_code=codes.UNSUPPORTED_VERSION, config_resources=[])
    eng = ctx.engine
    names: dict[ResourceType, list[str]] = {
        ResourceType.BROKER_LOGGER: [str(b) for b in eng.brokers], ResourceType.BROKER: [str(b) for b in eng.brokers],
        ResourceType.TOPIC: list(eng.topics), ResourceType.CLIENT_METRICS: eng.client_metrics.names(),
        ResourceType.GROUP: []}
    items = [R.ConfigResource(version=v, resource_name=n, resource_type=int(kind))
             for kind in LISTABLE if kind in wanted for n in names[kind]]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, config_resources=items)


ADMIN_HANDLERS: dict[int, Callable[[Context, int, Any], Any]] = {
    74: list_config_resources,
    32: describe_configs, 33: alter_configs, 44: incremental_alter_configs, 45: alter_partition_reassignments,
    46: list_partition_reassignments, 43: elect_leaders, 35: describe_log_dirs, 34: alter_replica_log_dirs,
    20: delete_topics,
}
