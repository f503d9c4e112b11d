"""Simple ACLs: an admin user may do everything, any other user may describe but not change.

Refusals carry the codes and messages a real broker (Kafka 3.9 and 4.4, StandardAuthorizer)
sends: AlterPartitionReassignments and ElectLeaders need ALTER on the CLUSTER and fail as a
whole with CLUSTER_AUTHORIZATION_FAILED ("Request <request> needs ALTER permission.", from the
controller the broker forwarded them to); config changes need ALTER_CONFIGS, refused per
resource (BROKER: CLUSTER_AUTHORIZATION_FAILED without a message, TOPIC:
TOPIC_AUTHORIZATION_FAILED with the error's default message); AlterReplicaLogDirs needs ALTER on the CLUSTER per partition;
CreateTopics needs CREATE per topic; DeleteTopics needs DELETE per topic, checked by
`topic_deletion` (with `allowed`) because Kafka looks topics up before refusing them;
AlterClientQuotas needs ALTER_CONFIGS on the CLUSTER. Describe APIs (Metadata, DescribeCluster,
DescribeConfigs, DescribeLogDirs, ListPartitionReassignments, DescribeClientQuotas) are allowed,
and so are the data and group APIs. Connections that did not authenticate (plaintext and TLS-only listeners) act as Kafka without an authorizer: everything is allowed.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kreassign.sandbox.wire import APIS, ZERO_UUID

TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_MESSAGE = "Topic authorization failed."
CLUSTER_MESSAGE = "Cluster authorization failed."
BROKER_RESOURCE = 4


class AclOperation(IntEnum):
    """Kafka's AclOperation codes; authorized-operations fields are bit sets of them."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


# What a user without the admin flag may do: describe, and read and write records (the data path
# is not what these ACLs guard).
NOT_ADMIN = frozenset({AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.READ, AclOperation.WRITE})
# What Kafka's AclEntry.supportedOperations lists for each resource type (the tokens'
# operations belong to USER resources: a super user's cluster operations are these seven).
CLUSTER_OPERATIONS = (AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
                      AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE)
TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS)
METADATA = 3
DESCRIBE_CLUSTER = 60
DESCRIBE_TOPIC_PARTITIONS = 75


@dataclass(frozen=True)
class Principal:
    """Who sent a request: `User:<name>`; `admin` users pass every check."""

    name: str
    admin: bool = False

    def __str__(self) -> str:
        return f"User:{self.name}"

    def allows(self, operation: AclOperation) -> bool:
        return self.admin or operation in NOT_ADMIN


def allowed(principal: Principal | None, operation: AclOperation) -> bool:
    """Whether `principal` may do `operation` (None: a listener without logins allows everything)."""
    return principal is None or principal.allows(operation)


def _allowed(principal: Principal | None, supported: tuple[AclOperation, ...]) -> set[int]:
    """An authorized-operations field: the bit numbers kafka-python's BitField encodes."""
    return {int(op) for op in supported if allowed(principal, op)}


def report_operations(principal: Principal | None, api_key: int, version: int, request: Any, response: Any) -> None:
    """Fill the authorized-operations fields a client asked for (KIP-430): DescribeCluster's,
    and Metadata's cluster (v8-10) and per-topic ones; DescribeTopicPartitions always reports
    every topic's, even a missing one's (KIP-966)."""
    if api_key == DESCRIBE_CLUSTER and request.include_cluster_authorized_operations:
        response.authorized_operations = _allowed(principal, CLUSTER_OPERATIONS)
    elif api_key == METADATA and version >= 8:
        if version <= 10 and request.include_cluster_authorized_operations:
            response.authorized_operations = _allowed(principal, CLUSTER_OPERATIONS)
        if request.include_topic_authorized_operations:
            for topic in response.topics:
                if topic.error_code == 0:
                    topic.authorized_operations = _allowed(principal, TOPIC_OPERATIONS)
    elif api_key == DESCRIBE_TOPIC_PARTITIONS:  # a plain int32 bit set in this schema
        bits = sum(1 << op for op in _allowed(principal, TOPIC_OPERATIONS))
        for topic in response.topics:
            topic.topic_authorized_operations = bits


def refusal(principal: Principal | None, api_key: int, version: int, request: Any) -> Any | None:
    """Kafka's answer when `principal` may not do what `request` asks, or None to serve it."""
    if principal is None or principal.admin:
        return None
    build = _REFUSALS.get(api_key)
    return None if build is None else build(principal, version, request)


def _resp(api_key: int) -> Any:
    return APIS[api_key][1]


def _reassignments(principal: Principal, v: int, req: Any) -> Any:
    R = _resp(45)
    T, message = R.ReassignableTopicResponse, _cluster_request_message("AlterPartitionReassignments", principal)
    topics = [T(version=v, name=t.name, partitions=[
        T.ReassignablePartitionResponse(version=v, partition_index=p.partition_index,
                                        error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message)
        for p in t.partitions]) for t in req.topics]
    return R(version=v, throttle_time_ms=0, allow_replication_factor_change=True,
             error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message, responses=topics)


def _elect_leaders(principal: Principal, v: int, req: Any) -> Any:
    R = _resp(43)
    T = R.ReplicaElectionResult
    message = _cluster_request_message("ElectLeaders", principal)
    results = [T(version=v, topic=t.topic, partition_result=[
        T.PartitionResult(version=v, partition_id=i, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message)
        for i in t.partitions]) for t in req.topic_partitions or []]
    return R(version=v, throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, replica_election_results=results)


def _alter_configs(principal: Principal, v: int, req: Any, api_key: int) -> Any:
    R = _resp(api_key)
    Out = R.AlterConfigsResourceResponse
    out = []
    for r in req.resources:
        broker = r.resource_type == BROKER_RESOURCE
        out.append(Out(version=v, error_code=CLUSTER_AUTHORIZATION_FAILED if broker else TOPIC_AUTHORIZATION_FAILED,
                       error_message=None if broker else TOPIC_MESSAGE, resource_type=r.resource_type,
                       resource_name=r.resource_name))
    return R(version=v, throttle_time_ms=0, responses=out)


def _log_dirs(principal: Principal, v: int, req: Any) -> Any:
    R = _resp(34)
    T = R.AlterReplicaLogDirTopicResult
    by_topic: dict[str, list[int]] = {}
    for d in req.dirs:
        for t in d.topics:
            by_topic.setdefault(t.name, []).extend(t.partitions)
    return R(version=v, throttle_time_ms=0, results=[
        T(version=v, topic_name=name, partitions=[
            T.AlterReplicaLogDirPartitionResult(version=v, partition_index=i, error_code=CLUSTER_AUTHORIZATION_FAILED)
            for i in parts]) for name, parts in by_topic.items()])


def _create_topics(principal: Principal, v: int, req: Any) -> Any:
    R = _resp(19)
    T = R.CreatableTopicResult
    return R(version=v, throttle_time_ms=0, topics=[
        T(version=v, name=t.name, topic_id=ZERO_UUID, error_code=TOPIC_AUTHORIZATION_FAILED,
          error_message="Authorization failed.", num_partitions=-1, replication_factor=-1, configs=None)
        for t in req.topics])


def _client_quotas(principal: Principal, v: int, req: Any) -> Any:
    R = _resp(49)
    E = R.EntryData
    return R(version=v, throttle_time_ms=0, entries=[
        E(version=v, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_MESSAGE, entity=[
            E.EntityData(version=v, entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def _cluster_request_message(api: str, principal: Principal) -> str:
    # The controller prints the forwarded request object here (Java's toString: processor,
    # connection id, session, listener, buffer, envelope), which only the shape can follow.
    return (f"Request Request(api={api}, principal={principal}, listenerName=ListenerName(CONTROLLER), "
            "securityProtocol=PLAINTEXT) needs ALTER permission.")


_REFUSALS: dict[int, Any] = {
    45: _reassignments,
    43: _elect_leaders,
    44: lambda p, v, r: _alter_configs(p, v, r, 44),
    33: lambda p, v, r: _alter_configs(p, v, r, 33),
    34: _log_dirs,
    19: _create_topics,
    49: _client_quotas,
}
