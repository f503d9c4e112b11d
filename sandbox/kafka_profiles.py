"""Which Apache Kafka release the emulator imitates: the API versions its brokers advertise and
the few controller and config rules that changed between the releases of the tested matrix.

Every entry was read from a real broker of that release (a 1-controller, 5-broker KRaft cluster,
as `kafka_engine` starts it) and is checked against it again by tests/test_emulator_vs_kafka.py,
so a table here cannot drift from the release it names. docs/emulator-fidelity.md says what the
emulator matches and what it does not.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kreassign.cluster.errors import InputError

Completion = Literal["target_in_isr", "adding_in_isr"]


@dataclass(frozen=True)
class KafkaProfile:
    """What one Kafka release does where the emulator must know the release."""

    release: str
    api_versions: Mapping[int, tuple[int, int]]
    """ApiVersions as the release's brokers advertise them, for the APIs the emulator serves (the
    emulator clips them to what kafka-python 3.0.12's message classes can encode: `wire`)"""
    completion: Completion
    """when the controller completes a reassignment (PartitionReassignmentReplicas): 3.9 once the
    ISR, without the removing replicas, holds every target replica; 4.x once it holds every adding
    replica (and the whole target when fewer replicas are added than removed), so a retarget that
    drops a replica still being added never completes there"""
    throttle_rates_read_only: bool
    """DescribeConfigs' read_only for the throttle rates: true on 3.9, false on 4.x"""
    java_messages: bool
    """config errors list keys as Java does (`[broker.id]`); 3.9's Scala code printed `Set(broker.id)`"""
    cordoned_log_dirs: bool
    """an unreachable replication factor also blames brokers whose log dirs are all cordoned (4.x)"""
    cluster_min_insync: bool
    """the storage format writes a cluster-wide min.insync.replicas=1 (eligible leader replicas on)"""
    unknown_list_op_error: bool
    """APPEND/SUBTRACT of a broker config Kafka does not know: INVALID_CONFIG (4.x); 3.9 fails with
    UNKNOWN_SERVER_ERROR and no message"""
    log_dirs_type_list: bool
    """log.dirs is described as a LIST (4.x); 3.9 calls it a STRING"""
    broker_id_defaults: bool
    """node.id and process.roles have defaults (-1 and empty) that DescribeConfigs lists as
    synonyms (3.9); 4.x requires both"""
    list_config_resources: bool
    """ListConfigResources v1 lists every config resource type (4.x); 3.9 has only v0, which lists
    client-metrics subscriptions"""


_UNCHANGED = {  # the same on 3.9.2 and 4.4.0
    10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 16: (0, 5), 17: (0, 1), 33: (0, 2), 36: (0, 2),
    43: (0, 2), 44: (0, 1), 46: (0, 0), 48: (0, 1), 49: (0, 1), 71: (0, 0), 72: (0, 0), 75: (0, 0),
}

KAFKA_4_4 = KafkaProfile(
    release="4.4.0",
    api_versions={
        **_UNCHANGED,
        0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 15: (0, 6), 18: (0, 5), 19: (2, 7),
        20: (1, 6), 22: (0, 5), 23: (2, 4), 32: (1, 4), 34: (1, 2), 35: (1, 5), 45: (0, 1), 60: (0, 2), 74: (0, 1),
    },
    completion="adding_in_isr", throttle_rates_read_only=False, java_messages=True, cordoned_log_dirs=True,
    cluster_min_insync=True, unknown_list_op_error=True, log_dirs_type_list=True, broker_id_defaults=False,
    list_config_resources=True,
)

KAFKA_3_9 = KafkaProfile(
    release="3.9.2",
    api_versions={
        **_UNCHANGED,
        0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 15: (0, 5), 18: (0, 4), 19: (0, 7),
        20: (0, 6), 22: (0, 5), 23: (0, 4), 32: (0, 4), 34: (0, 2), 35: (0, 4), 45: (0, 0), 60: (0, 1), 74: (0, 0),
    },
    completion="target_in_isr", throttle_rates_read_only=True, java_messages=False, cordoned_log_dirs=False,
    cluster_min_insync=False, unknown_list_op_error=False, log_dirs_type_list=False, broker_id_defaults=True,
    list_config_resources=False,
)

PROFILES: dict[str, KafkaProfile] = {p.release: p for p in (KAFKA_4_4, KAFKA_3_9)}
DEFAULT_PROFILE = KAFKA_4_4


def profile(release: str | None) -> KafkaProfile:
    """The profile of a Kafka release (None: the default, the newest one).

    Raises:
        InputError: the emulator has no profile of that release.
    """
    if release is None:
        return DEFAULT_PROFILE
    found = PROFILES.get(release)
    if found is None:
        known = ", ".join(PROFILES)
        raise InputError(f"the emulator imitates Kafka {known}, not {release}: pick one of those, or run "
                         f"--engine kafka --kafka-version {release} for real brokers")
    return found
