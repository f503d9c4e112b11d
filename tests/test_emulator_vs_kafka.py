"""The emulator checked against the broker it imitates (issue 24, item 5).

Every scenario runs on both engines: a fresh emulator told which release it imitates
(`SandboxCluster(kafka_version=...)`) and the session's real KRaft cluster of that release, for
every release of the matrix (`kafka_matrix`). Requests are raw (kafka-python's protocol classes
over `rawclient.roundtrip`), so nothing a client library would smooth over is lost, and the two
answers are compared field by field after `differential.normalise`. A difference must be listed
in ALLOWED, with the reason it cannot or need not match; an unlisted one fails the test, and so
does an entry that no longer matches anything in a scenario that ran. The real broker is the
reference: where the emulator drifted, the emulator was changed (sandbox/, kafka_profiles).

On real Kafka a change is applied by the controller and reaches each broker a moment later, so
after one the tests create a marker topic and wait until every broker knows it (`Pair.barrier`):
brokers apply metadata in order, so they have applied the change too.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest, DescribeTopicPartitionsRequest,
    ElectLeadersRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from kreassign.sandbox.configs import BROKER_CONFIGS, TIME_SCALE_KEY, TOPIC_CONFIGS
from kreassign.sandbox.wire import APIS

from differential import Allowed, Judge, api_versions_v99, ask, outcome, until
from live import BROKERS, LOG_DIRS, RACKS, RUN_RATE, EmulatorLive, KafkaLive

pytestmark = pytest.mark.e2e

RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
         "replica.alter.log.dirs.io.max.bytes.per.second")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
CUSTOM = "kreassign.custom.key"
OFFSETS = "__consumer_offsets"
HELD_BYTES = 3 * 1024 * 1024
"""more than one throttled fetch (1 MiB) takes: under a 1 B/s throttle the move stays in flight"""

_ALL = "|".join
UNSERVED = {
    21: "DeleteRecords", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups", 47: "OffsetDelete", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 55: "DescribeQuorum", 57: "UpdateFeatures", 61: "DescribeProducers",
    64: "UnregisterBroker", 65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch",
    79: "ShareAcknowledge", 80: "AddRaftVoter", 81: "RemoveRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets", 93: "(new in 4.4)",
    94: "(new in 4.4)",
}
"""APIs a real broker advertises that the emulator does not serve (a client asking gets its
connection closed): transactions, ACL and SCRAM admin, delegation tokens, quorum and feature
admin, share and streams groups, the KIP-848 consumer protocol, record deletion and partition
creation. kreassign never sends them; its demo and tests need none of them."""
KIP_896_MINIMUMS = (0, 1, 2, 8, 9, 19, 20, 23, 32, 34, 35)
"""APIs whose oldest versions Kafka 4.0 removed (KIP-896): 3.9 still serves them"""

ALLOWED: tuple[Allowed, ...] = (
    # ---- ApiVersions ---------------------------------------------------------------------------
    Allowed("ApiVersions", rf"\.api_keys\[api_key=({_ALL(map(str, UNSERVED))})\]", "not served by the emulator "
            "(UNSERVED lists them)", emulator_absent=True),
    Allowed("ApiVersions", rf"\.api_keys\[api_key=({_ALL(map(str, KIP_896_MINIMUMS))})\]\.min_version",
            "versions KIP-896 removed in 4.0: kafka-python 3.0.12's message classes (Kafka 4's schemas) cannot "
            "encode them, so the emulator serves 3.9's APIs from 4.0's minimums; only clients older than Kafka "
            "2.1 send them", releases=("3.9.2",)),
    Allowed("ApiVersions", r"\.api_keys\[api_key=0\]\.min_version", "Kafka 4 still advertises Produce v0-v2 (for old "
            "librdkafka builds, KAFKA-18659); kafka-python 3.0.12 has no schema below v3", releases=("4.4.0",)),
    Allowed("ApiVersions*", r"\.api_keys\[api_key=18\]\.max_version",
            "ApiVersions v5 is newer than kafka-python 3.0.12's schemas", releases=("4.4.0",)),
    Allowed("ApiVersions", r"\.(supported_features|finalized_features|finalized_features_epoch|zk_migration_ready)",
            "feature levels (KIP-584: metadata.version, ...): the emulator has none; clients use them only for "
            "features kreassign does not touch"),
    Allowed("outcome DescribeConfigs v0", "", "served by 3.9, removed by KIP-896; kafka-python 3.0.12 cannot "
            "encode it (see the ApiVersions minimums)", releases=("3.9.2",)),
    # ---- configs the emulator does not model -----------------------------------------------------
    Allowed("create ok*", r"\.topics\[name=[^\]]+\]\.configs\[name=(?!({})\]).*".format(
            _ALL(k.replace(".", r"\.") for k in TOPIC_CONFIGS)), "topic configs the emulator does not act on "
            "(TOPIC_CONFIGS lists those it models)", emulator_absent=True),
    Allowed("describe topic all", r"\.results\[resource=2/[^\]]+\]\.configs\[name=(?!({})\]).*".format(
            _ALL(k.replace(".", r"\.") for k in TOPIC_CONFIGS)), "topic configs the emulator does not act on",
            emulator_absent=True),
    Allowed("describe broker all", r"\.results\[resource=4/1\]\.configs\[name=(?!({})\]).*".format(
            _ALL(k.replace(".", r"\.") for k in BROKER_CONFIGS)), "broker configs the emulator does not model "
            "(BROKER_CONFIGS lists those it does)", emulator_absent=True),
    Allowed("describe broker all", rf"\.results\[resource=4/1\]\.configs\[name={TIME_SCALE_KEY}\]",
            "the emulator's own read-only config: sandbox seconds per wall second, which `watch` reads"),
    Allowed("describe broker all", r"\.results\[resource=4/1\]\.configs\[name=(num\.io\.threads|num\.network\.threads)\]"
            r"\.(value|config_source|synonyms)", "the test cluster sets them in server.properties "
            "(node_config.SMALL_CLUSTER_SETTINGS: two cores); the emulator keeps Kafka's defaults"),
    Allowed("describe broker all", r"\.results\[resource=4/1\]\.configs\[name=log\.dirs\]\.(value|synonyms)",
            "paths on this machine"),
    # ---- placement and internal topics --------------------------------------------------------------
    Allowed("metadata cluster", rf"\.topics\[name={OFFSETS}\]\.partitions",
            "offsets.topic.num.partitions: 5 on the test cluster (SMALL_CLUSTER_SETTINGS), Kafka's default 50 "
            "on the emulator"),
)


class Pair:
    """The real cluster and an emulator of the same release, asked the same things."""

    def __init__(self, release: str, kafka: KafkaLive, emulator: EmulatorLive) -> None:
        self.release = release
        self.kafka = kafka
        self.emulator = emulator
        self.judge = Judge(release, ALLOWED)
        self.names: set[str] = set()
        """the topics this test made (and __consumer_offsets once it asked for a coordinator)"""

    def ports(self, broker: int) -> tuple[int, int]:
        return self.kafka.cluster.ports[broker], self.emulator.sandbox.ports[broker]

    def live(self) -> tuple[set[int], set[int]]:
        real = {b for b in self.kafka.cluster.pids() if b != 0}
        with self.emulator.sandbox.locked() as engine:
            emulated = {b for b, s in engine.brokers.items() if s.alive}
        return real, emulated

    def max_version(self, api_key: int) -> int:
        return self.emulator.sandbox.ranges[api_key][1]

    def ask(self, request: Any, version: int, broker: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
        real, emulated = self.ports(broker)
        return ask(real, request, version), ask(emulated, request, version)

    def same(self, scenario: str, request: Any, version: int, *, broker: int = 1,
             view: Callable[[dict[str, Any]], Any] | None = None) -> tuple[Any, Any]:
        real, emulated = self.ask(request, version, broker)
        if view is not None:
            real, emulated = view(real), view(emulated)
        self.judge.compare(scenario, real, emulated, self.live())
        return real, emulated

    def compare(self, scenario: str, real: Any, emulated: Any) -> None:
        self.judge.compare(scenario, real, emulated, self.live())

    def topic(self, assignment: Mapping[int, Sequence[int]]) -> str:
        name = f"d-{uuid.uuid4().hex[:8]}"
        self.kafka.topic(assignment=assignment, name=name)
        self.emulator.topic(assignment=assignment, name=name)
        self.names.add(name)
        return name

    def barrier(self) -> None:
        """Every real broker has applied what the controller committed so far (see the docstring)."""
        self.topic({0: [1]})

    def ours(self, items: list[Any], key: str) -> list[Any]:
        """The entries of a cluster-wide listing that this test made (other tests share the cluster)."""
        return [i for i in items if i[key] in self.names]


@pytest.fixture
def pair(kafka_matrix: Any, sandbox_factory: Callable[..., Any]) -> Iterator[Pair]:
    release = kafka_matrix.dist.version
    # the KIP-714 receiver on, as on the real clusters (kreassign's, sandbox/kafka_engine/telemetry):
    # both then offer the telemetry APIs
    emulator = EmulatorLive(sandbox_factory(brokers=BROKERS, racks=RACKS, topics=(), log_dirs=LOG_DIRS,
                                            kafka_version=release, telemetry=True))
    kafka = KafkaLive(kafka_matrix)
    try:
        yield Pair(release, kafka, emulator)
    finally:
        kafka.reset()


# ---- requests ------------------------------------------------------------------------------------
def reassign(topic: str, targets: Mapping[int, Sequence[int] | None], *, allow_rf_change: bool = True) -> Any:
    A = AlterPartitionReassignmentsRequest
    return A(timeout_ms=30000, allow_replication_factor_change=allow_rf_change, topics=[A.ReassignableTopic(
        name=topic, partitions=[A.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=r)
                                for p, r in targets.items()])])


def list_moves(wanted: Mapping[str, Sequence[int]] | None = None) -> Any:
    L = ListPartitionReassignmentsRequest
    return L(timeout_ms=30000, topics=None if wanted is None else [
        L.ListPartitionReassignmentsTopics(name=t, partition_indexes=list(p)) for t, p in wanted.items()])


def create(name: str, partitions: int = -1, rf: int = -1, *, assignment: Mapping[int, Sequence[int]] | None = None,
           configs: Mapping[str, str] | None = None) -> Any:
    C = CreateTopicsRequest
    T = C.CreatableTopic
    return C(timeout_ms=30000, validate_only=True, topics=[T(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                     for p, b in (assignment or {}).items()],
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])])


def alter_configs(resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]]) -> Any:
    I = IncrementalAlterConfigsRequest
    return I(validate_only=False, resources=[I.AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=[
            I.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])


def describe_configs(resource_type: int, name: str, keys: Sequence[str] | None, *, synonyms: bool = True) -> Any:
    D = DescribeConfigsRequest
    return D(include_synonyms=synonyms, include_documentation=False, resources=[
        D.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                  configuration_keys=None if keys is None else list(keys))])


def elect(election: int, wanted: Mapping[str, Sequence[int]] | None) -> Any:
    E = ElectLeadersRequest
    return E(election_type=election, timeout_ms=30000, topic_partitions=None if wanted is None else [
        E.TopicPartitions(topic=t, partitions=list(p)) for t, p in wanted.items()])


def metadata(*names: str, topic_id: uuid.UUID | None = None) -> Any:
    M = MetadataRequest
    wanted = [M.MetadataRequestTopic(name=n, topic_id=None) for n in names]
    if topic_id is not None:
        wanted.append(M.MetadataRequestTopic(name=None, topic_id=topic_id))
    return M(topics=wanted or None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def move_log_dir(path: str, topic: str, partitions: Sequence[int]) -> Any:
    A = AlterReplicaLogDirsRequest
    return A(dirs=[A.AlterReplicaLogDir(path=path, topics=[
        A.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=topic, partitions=list(partitions))])])


def any_dir(answer: dict[str, Any]) -> dict[str, Any]:
    """DescribeLogDirs with the replicas merged over the dirs: which dir a new replica lands in is
    Kafka's choice by the dirs' partition counts, which on the shared cluster depend on history."""
    replicas = {f"{t['name']}-{p['partition_index']}": p for d in answer["results"] for t in d["topics"]
                for p in t["partitions"]}
    return {**answer, "results": [{**d, "topics": []} for d in answer["results"]], "replicas": replicas}


SET, DELETE, APPEND = 0, 1, 2
TOPIC, BROKER = 2, 4


# ---- scenarios -----------------------------------------------------------------------------------
def test_api_versions_are_the_releases(pair: Pair) -> None:
    real_versions, _ = pair.same("ApiVersions", ApiVersionsRequest(client_software_name="kreassign-tests",
                                                                   client_software_version="1"), 3)
    # KIP-714: a broker offers its telemetry APIs only with a ClientTelemetry reporter; the test
    # clusters run kreassign's receiver (sandbox/kafka_engine/telemetry), as the emulator serves them
    assert {71, 72} <= {k["api_key"] for k in real_versions["api_keys"]}
    real, emulated = pair.ports(1)
    pair.compare("ApiVersions v99", api_versions_v99(real), api_versions_v99(emulated))
    # KIP-896 removed DescribeConfigs v0 in 4.0; a version past any release's newest is closed on
    for scenario, key, version in (("outcome DescribeConfigs v0", 32, 0), ("outcome DescribeConfigs v9", 32, 9),
                                   ("outcome an unknown API", 99, 0)):
        pair.compare(scenario, outcome(real, key, version), outcome(emulated, key, version))
    assert set(APIS) - {71, 72} <= set(pair.emulator.sandbox.ranges)
    pair.judge.verdict()


def test_bad_requests_get_the_brokers_errors(pair: Pair) -> None:
    t = pair.topic({0: [1, 2, 3], 1: [2, 3, 4]})
    for scenario, targets in (("reassign an unknown broker", {0: [1, 2, 9]}),
                              ("reassign a broker twice", {0: [1, 2, 2]}),
                              ("reassign to no replicas", {0: []}), ("reassign a negative id", {0: [1, -1, 3]}),
                              ("reassign an unknown partition", {7: [1, 2, 3]}),
                              ("cancel with none in flight", {0: None}), ("reassign to the same replicas", {1: [2, 3, 4]})):
        pair.same(scenario, reassign(t, targets), 0)
    pair.same("reassign an unknown topic", reassign("no-such-topic", {0: [1, 2, 3]}), 0)
    pair.same("cancel an unknown topic", reassign("no-such-topic", {0: None}), 0)
    if pair.max_version(45) >= 1:
        pair.same("reassign with the replication factor fixed", reassign(t, {0: [1, 2, 3, 4]}, allow_rf_change=False), 1)

    created = pair.max_version(19)
    for scenario, request in (
            ("create an existing topic", create(t, 1, 1)), ("create with too many replicas", create("x-rf", 1, 9)),
            ("create no partitions", create("x-zero", 0, 1)),
            ("create an unknown config", create("x-cfg", 1, 1, configs={"nonsense.key": "1"})),
            ("create a bad config value", create("x-cfg", 1, 1, configs={"retention.ms": "abc"})),
            ("create a bad throttled-replicas list", create("x-cfg", 1, 1, configs={LISTS[0]: "0-1, 2"})),
            ("create on an unknown broker", create("x-asg", assignment={0: [1, 9]})),
            ("create on a broker twice", create("x-asg", assignment={0: [1, 1]})),
            ("create an empty name", create("", 1, 1)), ("create the name .", create(".", 1, 1)),
            ("create a long name", create("a" * 250, 1, 1)), ("create a name with a slash", create("bad/name", 1, 1)),
            ("create ok", create("x-ok", 2, 2)), ("create ok with a config", create("x-ok", 1, 1, configs={
                "retention.ms": "1000", LISTS[1]: "*"})),
            ("create ok with an assignment", create("x-ok", assignment={0: [3, 1], 1: [1, 2]}))):
        pair.same(scenario, request, created)

    for scenario, broker, ops in (
            ("set a negative rate", "1", [(RATES[0], SET, "-5")]), ("set a rate that is no number", "1", [(RATES[0], SET, "fast")]),
            ("set another broker's rate", "2", [(RATES[0], SET, "5")]), ("set broker x", "x", [(RATES[0], SET, "5")]),
            ("append to a rate", "1", [(RATES[0], APPEND, "5")]), ("set broker.id", "1", [("broker.id", SET, "7")]),
            ("set num.replica.fetchers to no number", "1", [("num.replica.fetchers", SET, "many")])):
        pair.same(scenario, alter_configs(BROKER, broker, ops), 1)
    for scenario, topic, ops in (
            ("set a list on an unknown topic", "no-such-topic", [(LISTS[0], SET, "*")]),
            ("set an unknown topic config", t, [("nonsense.key", SET, "1")]),
            ("set a bad throttled-replicas list", t, [(LISTS[0], SET, "0-1,2")]),
            ("append to a non-list topic config", t, [("retention.ms", APPEND, "5")])):
        pair.same(scenario, alter_configs(TOPIC, topic, ops), 1)
    pair.same("describe another broker", describe_configs(BROKER, "3", RATES), 4)
    pair.same("describe an unknown topic", describe_configs(TOPIC, "no-such-topic", LISTS), 4)

    pair.same("elect on an unknown topic", elect(0, {"no-such-topic": [0]}), 2)
    pair.same("elect on an unknown partition", elect(0, {t: [5]}), 2)
    pair.same("elect the preferred leader in place", elect(0, {t: [0]}), 2)
    pair.same("elect unclean with a live leader", elect(1, {t: [1]}), 2)
    pair.same("elect everywhere", elect(0, None), 2,
              view=lambda d: {**d, "replica_election_results": pair.ours(d["replica_election_results"], "topic")})
    D = DeleteTopicsRequest
    pair.same("delete an unknown topic", D(timeout_ms=30000, topics=[D.DeleteTopicState(name="no-such-topic",
                                                                                       topic_id=None)]), 6)
    pair.same("delete an unknown topic id", D(timeout_ms=30000, topics=[D.DeleteTopicState(name=None,
                                                                                          topic_id=uuid.uuid4())]), 6)
    pair.same("delete an unknown topic v4", D(timeout_ms=30000, topic_names=["no-such-topic"]), 4)

    L = DescribeLogDirsRequest
    pair.same("describe log dirs", L(topics=[L.DescribableLogDirTopic(topic=t, partitions=[0, 1, 7])]), 4,
              view=any_dir)
    pair.same("describe log dirs of an unknown topic", L(topics=[L.DescribableLogDirTopic(
        topic="no-such-topic", partitions=[0])]), 4, view=any_dir)
    real_dirs, emulated_dirs = pair.ask(L(topics=None), 4)
    second = [sorted(r["log_dir"] for r in d["results"])[1] for d in (real_dirs, emulated_dirs)]
    for scenario, topic, parts in (("move to a dir: unknown topic", "no-such-topic", [0]),
                                   ("move to a dir: unknown partition", t, [9]),
                                   ("move to a dir: a replica elsewhere and one here", t, [1, 0])):
        pair.compare(scenario, *(ask(port, move_log_dir(path, topic, parts), 2)
                                 for port, path in zip(pair.ports(1), second)))
    pair.same("move to an unknown dir", move_log_dir("/no/such/dir", t, [0]), 2)

    pair.same("metadata of an unknown topic", metadata("no-such-topic"), pair.max_version(3))
    pair.same("metadata of an unknown topic id", metadata(topic_id=uuid.uuid4()), pair.max_version(3))
    pair.same("describe cluster at the controller endpoint", DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=2), 1)
    P = DescribeTopicPartitionsRequest
    pair.same("describe topic partitions of an unknown topic", P(topics=[P.TopicRequest(name="no-such-topic")],
                                                                 response_partition_limit=2000, cursor=None), 0)
    pair.same("describe topic partitions a page at a time", P(topics=[P.TopicRequest(name=t)],
                                                              response_partition_limit=1, cursor=None), 0)
    if pair.max_version(74) >= 1:
        R = ListConfigResourcesRequest
        pair.same("list config resources of an unknown type", R(resource_types=[1]), 1)
        pair.same("list topic and broker config resources", R(resource_types=[2, 4]), 1, view=lambda d: [
            r for r in d["config_resources"] if r["resource_type"] != 2 or r["resource_name"] in pair.names])
    pair.judge.verdict()


def test_throttle_configs_are_described_alike(pair: Pair) -> None:
    t = pair.topic({0: [1, 2, 3]})
    pair.same("describe rates before any is set", describe_configs(BROKER, "1", RATES), 4)
    pair.same("describe topic lists before any is set", describe_configs(TOPIC, t, LISTS), 4)
    changes = [(alter_configs(BROKER, "1", [*((k, SET, "1000000") for k in RATES), (CUSTOM, SET, "hello")]), 1),
               (alter_configs(BROKER, "", [(RATES[0], SET, "2000000"), (CUSTOM + ".default", SET, "x")]), 1),
               (alter_configs(TOPIC, t, [(LISTS[0], SET, "0:1, 0:2"), (LISTS[1], SET, "*")]), 1)]
    keys = [*RATES, CUSTOM, CUSTOM + ".default"]
    undo = [(alter_configs(BROKER, "1", [*((k, DELETE, None) for k in RATES), (CUSTOM, DELETE, None)]), 1),
            (alter_configs(BROKER, "", [(RATES[0], DELETE, None), (CUSTOM + ".default", DELETE, None)]), 1),
            (alter_configs(TOPIC, t, [(k, DELETE, None) for k in LISTS]), 1)]
    try:
        for number, (request, version) in enumerate(changes):
            pair.same(f"set throttle configs {number}", request, version)
        pair.barrier()
        pair.same("describe rates and custom keys", describe_configs(BROKER, "1", keys), 4)
        pair.same("describe rates without synonyms", describe_configs(BROKER, "1", keys, synonyms=False), 4)
        pair.same("describe a broker with only the default rate", describe_configs(BROKER, "2", keys), 4, broker=2)
        pair.same("describe the cluster default", describe_configs(BROKER, "", None), 4)
        pair.same("describe topic lists", describe_configs(TOPIC, t, LISTS), 4)
        pair.same("append to a topic list", alter_configs(TOPIC, t, [(LISTS[0], APPEND, "0:3")]), 1)
        pair.barrier()
        pair.same("describe topic all", describe_configs(TOPIC, t, None), 4)
        pair.same("describe broker all", describe_configs(BROKER, "1", None), 4)
    finally:
        for request, version in undo:
            pair.ask(request, version)
    pair.barrier()
    pair.same("describe rates once deleted", describe_configs(BROKER, "1", keys), 4)
    pair.same("describe topic lists once deleted", describe_configs(TOPIC, t, LISTS), 4)
    pair.judge.verdict()


def _hold(pair: Pair, topic: str) -> None:
    """A 1 B/s throttle on every broker and the topic's replicas, and data in partition 0."""
    for side in (pair.kafka, pair.emulator):
        side.produce(topic, 0, HELD_BYTES)
    for b in pair.kafka.brokers:
        pair.ask(alter_configs(BROKER, str(b), [(RATES[0], SET, "1"), (RATES[1], SET, "1")]), 1, broker=b)
    pair.ask(alter_configs(TOPIC, topic, [(LISTS[0], SET, "0:1,0:2,0:3"), (LISTS[1], SET, "0:4,0:5")]), 1)
    pair.barrier()


def _run(pair: Pair, done: Callable[[dict[str, Any]], bool], what: str) -> None:
    """Lift the throttles and let both clusters copy until `done(metadata of the topic)` holds."""
    for b in pair.kafka.brokers:
        pair.ask(alter_configs(BROKER, str(b), [(RATES[0], SET, str(RUN_RATE)), (RATES[1], SET, str(RUN_RATE))]),
                 1, broker=b)
    real, emulated = pair.ports(1)
    until(lambda: done(ask(real, metadata(*sorted(pair.names - {OFFSETS})), pair.max_version(3))), what)
    for _ in range(360):
        if done(ask(emulated, metadata(*sorted(pair.names - {OFFSETS})), pair.max_version(3))):
            break
        pair.emulator.advance(10)
    else:
        raise AssertionError(f"the emulator never got there: {what}")


def _partition(answer: dict[str, Any], topic: str, index: int) -> dict[str, Any]:
    found = next(t for t in answer["topics"] if t["name"] == topic)
    return next(p for p in found["partitions"] if p["partition_index"] == index)


def test_reassignment_states_match(pair: Pair) -> None:
    t = pair.topic({0: [1, 2, 3], 1: [2, 3, 4]})
    _hold(pair, t)
    moves = lambda d: {**d, "topics": pair.ours(d["topics"], "name")}  # noqa: E731
    md = pair.max_version(3)
    pair.same("start two moves", reassign(t, {0: [4, 5, 1], 1: [3, 4, 5]}), 0)
    real, emulated = pair.ports(1)
    until(lambda: not any(p["partition_index"] == 1 for x in moves(ask(real, list_moves(), 0))["topics"]
                          for p in x["partitions"]), "the unthrottled move of an empty partition completes")
    pair.barrier()
    pair.emulator.advance(5)
    pair.same("moves in flight", list_moves(), 0, view=moves)
    pair.same("metadata during a move", metadata(t), md)
    pair.same("list some partitions", list_moves({t: [0, 1, 9], "no-such-topic": [0]}), 0)
    pair.same("retarget a move in flight", reassign(t, {0: [4, 1, 2]}), 0)
    pair.barrier()
    pair.same("moves after the retarget", list_moves(), 0, view=moves)
    pair.same("metadata after the retarget", metadata(t), md)
    pair.same("cancel after the retarget", reassign(t, {0: None}), 0)
    pair.barrier()
    pair.same("moves after the cancel", list_moves(), 0, view=moves)
    pair.same("metadata after the cancel", metadata(t), md)

    pair.same("start the move again", reassign(t, {0: [4, 5, 1]}), 0)
    pair.same("retarget it again", reassign(t, {0: [4, 1, 2]}), 0)
    # 4.x completes only once the adding replicas (5 among them, also removing) are in the ISR
    # without the removing ones: never. 3.9 completes once the target is in the ISR.
    _run(pair, lambda d: sorted(_partition(d, t, 0)["isr_nodes"]) == sorted(_partition(d, t, 0)["replica_nodes"]),
         "every replica of the retargeted partition is in its ISR")
    pair.barrier()
    pair.same("moves once every replica caught up", list_moves(), 0, view=moves)
    pair.same("metadata once every replica caught up", metadata(t), md)
    pair.judge.verdict()


def test_metadata_and_a_stopped_broker(pair: Pair) -> None:
    coordinator = FindCoordinatorRequest(key_type=0, coordinator_keys=["kreassign-diff"])
    for port in pair.ports(1):
        ask(port, coordinator, 4)  # creates __consumer_offsets where it does not exist yet
    real, emulated = pair.ports(1)
    pair.names.add(OFFSETS)

    def offsets_ready(port: int) -> bool:
        topic = ask(port, metadata(OFFSETS), pair.max_version(3))["topics"][0]
        return topic["error_code"] == 0 and all(p["leader_id"] >= 0 for p in topic["partitions"])

    until(lambda: offsets_ready(real), "__consumer_offsets has leaders")
    assert offsets_ready(emulated)
    t = pair.topic({0: [5, 1, 2], 1: [1, 5, 3], 2: [2, 3, 4]})

    def cluster_view(d: dict[str, Any]) -> dict[str, Any]:
        topics = pair.ours(d["topics"], "name")
        for topic in topics:
            if topic["name"] == OFFSETS:  # placement differs (KRaft's striped placer vs the emulator's)
                parts = topic["partitions"]
                topic["partitions"] = len(parts)
                topic["replication_factors"] = sorted({len(p["replica_nodes"]) for p in parts})
                topic["leaders_in_sync"] = all(p["leader_id"] in p["isr_nodes"] for p in parts)
        return {**d, "topics": topics}

    pair.same("metadata cluster", MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False),
              pair.max_version(3), view=cluster_view)
    describe = DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1,
                                      include_fenced_brokers=True)
    pair.same("describe cluster", describe, pair.max_version(60))
    pair.kafka.stop_broker(5)
    pair.emulator.stop_broker(5)
    until(lambda: all(5 not in p["isr_nodes"] for p in ask(real, metadata(t), pair.max_version(3))["topics"][0][
        "partitions"]) and 5 not in [b["node_id"] for b in ask(real, metadata(t), pair.max_version(3))["brokers"]],
        "broker 1 sees broker 5 gone")
    pair.same("metadata with a broker stopped", metadata(t), pair.max_version(3))
    pair.same("describe cluster with a broker stopped", describe, pair.max_version(60))
    pair.same("moves with a broker stopped", list_moves({t: [0, 1, 2]}), 0)
    pair.judge.verdict()
