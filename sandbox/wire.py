"""Framing and the API table: which kafka-python message classes serve which API key, and the
version ranges each broker advertises in ApiVersions."""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest, AlterConfigsResponse, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest,
    DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ElectLeadersRequest,
    ElectLeadersResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest, ListConfigResourcesResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
)
from kafka.protocol.admin.groups import (
    DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
)

ZERO_UUID = uuid.UUID(int=0)
"""the null topic id: a topic named by name, or none (KIP-516)"""

from kreassign.sandbox.kafka_profiles import DEFAULT_PROFILE, KafkaProfile
from kreassign.sandbox.telemetry_messages import (
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest, PushTelemetryResponse,
)

API_VERSIONS = 18
DESCRIBE_CLUSTER = 60
TELEMETRY_APIS = (71, 72)  # advertised only with the telemetry receiver on, as Kafka does
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

# api key -> (request class, response class)
APIS: dict[int, tuple[Any, Any]] = {
    cls_req.API_KEY: (cls_req, cls_resp)
    for cls_req, cls_resp in (
        (ApiVersionsRequest, ApiVersionsResponse),
        (MetadataRequest, MetadataResponse),
        (CreateTopicsRequest, CreateTopicsResponse),
        (DeleteTopicsRequest, DeleteTopicsResponse),
        (DescribeConfigsRequest, DescribeConfigsResponse),
        (AlterConfigsRequest, AlterConfigsResponse),
        (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
        (DescribeLogDirsRequest, DescribeLogDirsResponse),
        (ElectLeadersRequest, ElectLeadersResponse),
        (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
        (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
        (DescribeClusterRequest, DescribeClusterResponse),
        (DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse),
        (ListConfigResourcesRequest, ListConfigResourcesResponse),
        (ProduceRequest, ProduceResponse),
        (FetchRequest, FetchResponse),
        (ListOffsetsRequest, ListOffsetsResponse),
        (InitProducerIdRequest, InitProducerIdResponse),
        (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        (FindCoordinatorRequest, FindCoordinatorResponse),
        (JoinGroupRequest, JoinGroupResponse),
        (SyncGroupRequest, SyncGroupResponse),
        (HeartbeatRequest, HeartbeatResponse),
        (LeaveGroupRequest, LeaveGroupResponse),
        (OffsetCommitRequest, OffsetCommitResponse),
        (OffsetFetchRequest, OffsetFetchResponse),
        (ListGroupsRequest, ListGroupsResponse),
        (DescribeGroupsRequest, DescribeGroupsResponse),
        (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
        (AlterClientQuotasRequest, AlterClientQuotasResponse),
        (GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse),
        (PushTelemetryRequest, PushTelemetryResponse),
        (SaslHandshakeRequest, SaslHandshakeResponse),
        (SaslAuthenticateRequest, SaslAuthenticateResponse),
    )
}


def advertised_versions(kafka: KafkaProfile = DEFAULT_PROFILE, *, describe_cluster_v0_only: bool = False,
                        telemetry: bool = False) -> dict[int, tuple[int, int]]:
    """The ranges the imitated release advertises for every served API, within the JSON
    `validVersions` of kafka-python's classes (not `min_version`, which kafka-python forces to 0):
    versions those classes cannot encode are not served. The KIP-714 APIs only with a telemetry
    receiver (`ApiVersionManager.clientTelemetryEnabled`)."""
    ranges: dict[int, tuple[int, int]] = {}
    for key, (req, _) in APIS.items():
        if key in TELEMETRY_APIS and not telemetry:
            continue
        lo, hi = kafka.api_versions[key]
        ranges[key] = (max(lo, int(req._valid_versions[0])), min(hi, int(req._valid_versions[1])))
    if describe_cluster_v0_only:
        ranges[DESCRIBE_CLUSTER] = (0, 0)
    return ranges


@dataclass(frozen=True)
class RequestHead:
    api_key: int
    api_version: int
    correlation_id: int


def peek(payload: bytes) -> RequestHead:
    """The first 8 bytes are the same in every request header version."""
    key, version, corr = struct.unpack_from(">hhi", payload, 0)
    return RequestHead(key, version, corr)


def decode_request(payload: bytes, head: RequestHead) -> Any:
    request_cls = APIS[head.api_key][0]
    return request_cls.decode(payload, version=head.api_version, header=True)


def encode_response(response: Any, correlation_id: int) -> bytes:
    """Frame a response with the right header (ApiVersions always uses header v0)."""
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def unsupported_api_versions(correlation_id: int, ranges: dict[int, tuple[int, int]]) -> bytes:
    """KIP-511: an ApiVersions version we do not know gets a v0 body with error 35 and the range
    of ApiVersions alone, so that the client can retry with a version we speak."""
    from kreassign.sandbox.codes import UNSUPPORTED_VERSION

    lo, hi = ranges[API_VERSIONS]
    keys = [ApiVersionsResponse.ApiVersion(version=0, api_key=API_VERSIONS, min_version=lo, max_version=hi)]
    resp = ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION, api_keys=keys)
    return encode_response(resp, correlation_id)
