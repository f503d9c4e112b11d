"""Every security mode end to end, over TCP, on the emulator and on real Apache Kafka.

kreassign's execute, throttle set, verify, watch, throttle clear and snapshot run with the
`--command-config` files `sandbox start` wrote; kafka-python and confluent-kafka (librdkafka)
talk to the same listeners with their own settings, so the TLS and SASL spoken are Kafka's, not a
private dialect. A describe-only login is refused before anything changes, with the same line on
both engines; the codes and messages on the wire are the real broker's; a failed connection says
why; and no secret shows up in any output, log, journal, snapshot or state file.

One cluster per mode, shared by the module's tests in order. The emulator runs every mode; real
Kafka runs SASL_SSL with SCRAM-SHA-512 (on the newest release of the matrix) and with PLAIN (on
the oldest), each a 3-broker cluster started by `kreassign sandbox start --engine kafka`, with
Kafka's StandardAuthorizer: the admin login a super user, the other one with DESCRIBE ACLs.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka.errors as Errors
import pytest
from cli_helpers import KREASSIGN, Kreassign, Ran
import trustme
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic

from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import AdminTimeouts, load_client_config
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.security import SERVER_KEY_FILE, User, build_security, client_properties
from kreassign.sandbox.topics import INTERNAL_TOPICS
from kreassign.throttle.configs import FOLLOWER_RATE, LEADER_RATE
from conftest_kafka import ENGINES, VERSIONS
from live import HOLD_RATE, RUN_RATE
from secured import ADMIN, VIEWER, RawConnection, Secured, emulator_secured, real_secured, sasl_tokens
from test_watch_e2e import events, plan_moving_second_replica, rates

confluent_admin = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.e2e
_MODES = [("emulator", "tls", None), ("emulator", "sasl_plaintext", "PLAIN"),
          ("emulator", "sasl_plaintext", "SCRAM-SHA-256"), ("emulator", "sasl_ssl", "SCRAM-SHA-512"),
          ("kafka", "sasl_ssl", "SCRAM-SHA-512"), ("kafka", "sasl_ssl", "PLAIN")]
MODES = [pytest.param(m, id="-".join(x for x in m if x), marks=[pytest.mark.kafka] if m[0] == "kafka" else [])
         for m in _MODES if m[0] in ENGINES]
REAL_VERSION = {"SCRAM-SHA-512": VERSIONS[0], "PLAIN": VERSIONS[-1]}
"""the Kafka release each real mode runs: both ends of the matrix"""
EMULATED = "4.4.0"
"""the release the emulator answers as"""
BROKER_CONFIG_REFUSAL = {"4.4.0": None, "3.9.2": "Cluster authorization failed."}
"""the message of a refused broker config change: Kafka 3.9 sends the error's default, 4.x none"""
CLUSTER_REFUSAL = {"4.4.0": r"Request Request\(.+\) needs ALTER permission\.",
                   "3.9.2": r"Request Request\(.+\) is not authorized\."}
"""a refused reassignment or election: the controller names the forwarded request (Java's or
Scala's toString) and, on 4.x, the operation"""


@pytest.fixture(scope="module", params=MODES)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    engine, mode, mechanism = request.param
    home = tmp_path_factory.mktemp(f"{engine}-{mode}")
    if engine == "emulator":
        yield from emulator_secured(mode, mechanism, home, EMULATED)
    else:
        yield from real_secured(mode, mechanism, REAL_VERSION[mechanism], home / "state")


@pytest.fixture
def admin(secured: Secured) -> Iterator[KafkaAdmin]:
    config = load_client_config(str(secured.admin_props))
    with KafkaAdmin.connect(dataclasses.replace(config, timeouts=AdminTimeouts(30.0, 30.0, connect_timeout_s=30.0))) \
            as client:
        yield client


def settled(read: Any, expected: Any, timeout_s: float = 10.0) -> Any:
    """`read()`, again for up to `timeout_s` until it equals `expected`: a broker applies a config
    change a moment after the controller accepted it (seconds on a loaded machine)."""
    deadline = time.monotonic() + timeout_s
    seen = read()
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = read()
    return seen


def no_rates(secured: Secured) -> dict[int, dict[str, str]]:
    return {b: {} for b in secured.brokers}


def secrets(secured: Secured) -> list[str]:
    """What must never be shown: passwords, JAAS lines, the server's private key."""
    found = [u.password for u in (ADMIN, VIEWER) if secured.security.sasl]
    found += [line for line in secured.admin_props.read_text().splitlines() if line.startswith("sasl.jaas")]
    if secured.security.tls:
        key = (secured.home / SERVER_KEY_FILE).read_text()
        found.append("".join(line for line in key.splitlines() if not line.startswith("-----"))[:40])
    return found


def assert_no_secret(secured: Secured, *texts: str) -> None:
    for secret in secrets(secured):
        for text in texts:
            assert secret not in text


def test_kreassign_commands_over_the_listener(secured: Secured, admin: KafkaAdmin, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    plan = tmp_path / "plan.json"
    targets = plan_moving_second_replica(admin, "t", plan)
    props = secured.admin_props

    started = secured.cli(props, "execute", "-f", str(plan), "--throttle", str(HOLD_RATE))
    assert started.exit_code == 0, started.output
    want = {LEADER_RATE: str(HOLD_RATE), FOLLOWER_RATE: str(HOLD_RATE)}
    assert settled(lambda: rates(admin)[1], want) == want
    changed = secured.cli(props, "throttle", "set", "--throttle", "2")
    assert changed.exit_code == 0, changed.output
    want = {LEADER_RATE: "2", FOLLOWER_RATE: "2"}
    assert settled(lambda: rates(admin)[1], want) == want
    progress = secured.cli(props, "verify", "-f", str(plan))
    assert progress.exit_code == 0 and "is still in progress" in progress.stdout, progress.output

    assert secured.cli(props, "throttle", "set", "--throttle", str(RUN_RATE)).exit_code == 0
    watched = secured.cli(props, "watch", "--interval", "1s", "--stop-after", "30m", "--output", "json")
    assert watched.exit_code == 0, watched.output[-2000:]
    assert events(watched)[-1]["event"] == "complete"
    done = secured.cli(props, "verify", "-f", str(plan))
    assert done.exit_code == 0 and "is completed" in done.stdout, done.output
    cleared = secured.cli(props, "throttle", "clear")
    assert cleared.exit_code == 0, cleared.output
    assert settled(lambda: rates(admin), no_rates(secured)) == no_rates(secured)

    snapshot = tmp_path / "snap.json"
    taken = secured.cli(props, "snapshot", "-f", str(snapshot))
    assert taken.exit_code == 0, taken.output
    saved = json.loads(snapshot.read_text())
    assert {TopicPartition(p["topic"], p["partition"]): tuple(p["replicas"])
            for p in saved["partitions"] if p["topic"] == "t"} == targets

    journals = sorted((secured.home / "journal").rglob("*.json"))
    assert journals and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in journals)
    private = secured.private_files()
    assert private and {str(p): stat.S_IMODE(p.stat().st_mode) for p in private} == dict.fromkeys(map(str, private), 0o600)
    state = secured.scanned_texts()
    assert_no_secret(secured, *secured.printed, caplog.text, snapshot.read_text(),
                     *(p.read_text() for p in journals), *state)


def test_independent_clients_speak_the_same_protocol(secured: Secured) -> None:
    user = ADMIN if secured.security.sasl else None
    kp = secured.kafka_python(user)
    try:
        assert kp.describe_cluster()["controller_id"] in secured.brokers
        result = kp.alter_configs([ConfigResource(ConfigResourceType.BROKER, "2", {
            LEADER_RATE: (AlterConfigOp.SET, "4000000")})], incremental=True, raise_on_unknown=False)
        assert result == {"broker": {"2": "OK"}}
        kp.create_topics([NewTopic("doomed", 1, 1)])
    finally:
        kp.close()
    rd = secured.librdkafka(user)
    assert rd.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(timeout=60) is None
    secured.eventually(lambda: set(rd.list_topics(timeout=30).topics) - INTERNAL_TOPICS, {"t"})

    def leader_rate() -> str | None:
        (future,) = rd.describe_configs([confluent_admin.ConfigResource("broker", "2")]).values()
        entry = future.result(timeout=30).get(LEADER_RATE)
        return entry.value if entry is not None else None

    secured.eventually(leader_rate, "4000000")
    (future,) = rd.incremental_alter_configs([confluent_admin.ConfigResource("broker", "2", incremental_configs=[
        confluent_admin.ConfigEntry(LEADER_RATE, None,
                                    incremental_operation=confluent_admin.AlterConfigOpType.DELETE)])]).values()
    future.result(timeout=30)
    secured.eventually(leader_rate, None)


def test_describe_only_login_is_refused_before_anything_changes(secured: Secured, admin: KafkaAdmin,
                                                                 tmp_path: Path) -> None:
    if secured.viewer_props is None:
        pytest.skip("a TLS-only listener has no logins: everyone may do everything, as Kafka without ACLs")
    plan = tmp_path / "plan.json"
    before = {p.tp: p.replicas for p in admin.describe_topics(["t"])}
    plan_moving_second_replica(admin, "t", plan)
    props = secured.viewer_props
    refused = secured.cli(props, "execute", "-f", str(plan), "--throttle", "5MB/s")
    assert refused.exit_code == 1
    assert refused.stderr.strip() == (
        "Error: Not authorized: the login in --command-config may not ALTER on the CLUSTER (to submit the "
        "reassignment); nor ALTER_CONFIGS on the CLUSTER (to set the throttles). Nothing was changed. Use a login "
        "with those ACLs.")
    paced = secured.cli(props, "execute", "-f", str(plan), "--throttle", "5MB/s", "--max-moves-per-broker", "1")
    assert paced.exit_code == 1 and paced.stderr == refused.stderr
    assert secured.cli(props, "throttle", "set", "--throttle", "1MB/s", "--brokers", "1").exit_code == 1
    assert settled(lambda: rates(admin), no_rates(secured)) == no_rates(secured)
    assert admin.list_reassignments() == {}
    assert {p.tp: p.replicas for p in admin.describe_topics(["t"])} == before
    topic = admin.describe_topic_configs(["t"]).configs["t"]
    assert not topic["leader.replication.throttled.replicas"].value
    assert admin.read_markers(["kreassign.execution.lock"]) == {}  # not even the lock was taken
    for reading in (("throttle", "show"), ("list",), ("snapshot", "-f", str(tmp_path / "snap.json"))):
        described = secured.cli(props, *reading)
        assert described.exit_code == 0, described.output

    started = secured.cli(secured.admin_props, "execute", "-f", str(plan), "--throttle", str(HOLD_RATE))
    assert started.exit_code == 0, started.output
    journal = re.search(r"Journal: (\S+)", started.stderr)
    assert journal is not None, started.stderr
    throttled = rates(admin)
    refused_abort = secured.cli(props, "abort", "--journal", journal.group(1))
    assert refused_abort.exit_code == 1 and "may not ALTER on the CLUSTER (to cancel the reassignment); nor " \
                                            "ALTER_CONFIGS on the CLUSTER (to restore the throttles)" in refused_abort.stderr
    assert rates(admin) == throttled and admin.list_reassignments()
    aborted = secured.cli(secured.admin_props, "abort", "--journal", journal.group(1))
    assert aborted.exit_code == 0, aborted.output
    assert settled(lambda: rates(admin), no_rates(secured)) == no_rates(secured)
    secured.eventually(admin.list_reassignments, {})
    secured.eventually(lambda: {p.tp: p.replicas for p in admin.describe_topics(["t"])}, before)
    assert_no_secret(secured, *secured.printed)


def test_kafka_error_codes_on_the_wire(secured: Secured) -> None:
    if not secured.security.sasl:
        pytest.skip("refusals need a login")
    kp = secured.kafka_python(VIEWER)
    try:
        assert sorted(kp.describe_cluster()["authorized_operations"]) == ["DESCRIBE", "DESCRIBE_CONFIGS"]
        result = kp.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, "1", {LEADER_RATE: (AlterConfigOp.SET, "1")}),
            ConfigResource(ConfigResourceType.TOPIC, "t", {"leader.replication.throttled.replicas": (
                AlterConfigOp.SET, "*")})], incremental=True, raise_on_unknown=False)
        assert result == {
            "broker": {"1": f"[Error 31] ClusterAuthorizationFailedError: {BROKER_CONFIG_REFUSAL[secured.kafka_version]}"},
            "topic": {"t": "[Error 29] TopicAuthorizationFailedError: Topic authorization failed."}}
        with pytest.raises(Errors.ClusterAuthorizationFailedError) as reassign:
            kp.alter_partition_reassignments({KafkaTopicPartition("t", 0): [1, 2]})
        assert re.search(f"error_message='{CLUSTER_REFUSAL[secured.kafka_version]}'", str(reassign.value))
        # DELETE on the topic, checked after the lookup: a missing topic is reported as missing
        # (Kafka 3.9 lists the missing one first, 4.x keeps the request's order)
        deleted = kp.delete_topics(["t", "nope"], raise_errors=False)["topics"]
        assert sorted(deleted, key=lambda t: t["name"], reverse=True) == [
            {"name": "t", "topic_id": None, "error_code": 29, "error_message": "Topic authorization failed."},
            {"name": "nope", "topic_id": None, "error_code": 3,
             "error_message": "This server does not host this topic-partition."}]
        assert kp.create_topics([NewTopic("refused", 1, 1)], raise_errors=False)["topics"][0]["error_code"] == 29
    finally:
        kp.close()
    rd = secured.librdkafka(VIEWER)
    (future,) = rd.delete_topics(["t"], operation_timeout=30).values()
    with pytest.raises(Exception) as refused:
        future.result(timeout=60)
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    assert set(rd.list_topics(timeout=30).topics) - INTERNAL_TOPICS == {"t"}
    (future,) = rd.incremental_alter_configs([confluent_admin.ConfigResource("broker", "1", incremental_configs=[
        confluent_admin.ConfigEntry(LEADER_RATE, "1", incremental_operation=confluent_admin.AlterConfigOpType.SET)])
    ]).values()
    with pytest.raises(Exception) as refused:
        future.result(timeout=30)
    assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"

    seen: list[tuple[int, str]] = []
    wrong = secured.librdkafka(User(ADMIN.name, "not-the-password"), error_cb=lambda e: seen.append((e.code(), e.str())))
    for _ in range(60):  # polls until librdkafka reports the refused login (at most 60s)
        if wrong.poll(1) and seen:
            break
    assert seen and seen[0][0] == -169 and "SASL authentication error: Authentication failed" in seen[0][1]


def test_what_a_login_without_admin_may_call(secured: Secured) -> None:
    """The APIs kreassign and an operator's tools use, as the describe-only login: describing is
    allowed, every change refused with the real broker's code (and message, where it sends one)."""
    if not secured.security.sasl:
        pytest.skip("refusals need a login")
    from kafka.protocol.admin import (
        AlterReplicaLogDirsRequest, DescribeClusterRequest, DescribeLogDirsRequest, ElectLeadersRequest,
        ListPartitionReassignmentsRequest,
    )
    from kafka.protocol.admin.client_quotas import (
        AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )
    from kafka.protocol.metadata import MetadataRequest

    with RawConnection(secured) as wire:
        wire.login(VIEWER, str(secured.security.mechanism))
        cluster = wire.send(DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
        assert (cluster.error_code, cluster.authorized_operations) == (0, {8, 10})  # DESCRIBE(_CONFIGS)
        metadata = wire.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=True), 12)
        # READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS: describe and produce and consume, nothing more
        assert [(t.error_code, t.authorized_operations) for t in metadata.topics] == [(0, {3, 4, 8, 10})]
        assert wire.send(ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None), 0).error_code == 0
        assert wire.send(DescribeLogDirsRequest(topics=None), 1).error_code == 0
        quotas = wire.send(DescribeClientQuotasRequest(components=[DescribeClientQuotasRequest.ComponentData(
            entity_type="client-id", match_type=2, match=None)], strict=False), 1, DescribeClientQuotasResponse)
        assert quotas.error_code == 0

        T = ElectLeadersRequest.TopicPartitions
        elect = wire.send(ElectLeadersRequest(election_type=0, topic_partitions=[T(topic="t", partitions=[0])],
                                              timeout_ms=30000), 2)
        assert elect.error_code == 31
        (result,) = [p for r in elect.replica_election_results for p in r.partition_result]
        assert result.error_code == 31 and re.fullmatch(CLUSTER_REFUSAL[secured.kafka_version], result.error_message)
        D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
        moved = wire.send(AlterReplicaLogDirsRequest(dirs=[D(path="/nowhere", topics=[
            D.AlterReplicaLogDirTopic(name="t", partitions=[0])])]), 2)
        assert [(p.partition_index, p.error_code) for r in moved.results for p in r.partitions] == [(0, 31)]
        E = AlterClientQuotasRequest.EntryData
        quota = wire.send(AlterClientQuotasRequest(validate_only=False, entries=[E(
            entity=[E.EntityData(entity_type="client-id", entity_name=None)],
            ops=[E.OpData(key="producer_byte_rate", value=1000.0, remove=False)])]), 1, AlterClientQuotasResponse)
        assert [(e.error_code, e.error_message) for e in quota.entries] == [(31, "Cluster authorization failed.")]


def test_sasl_on_the_wire(secured: Secured) -> None:
    """The SASL versions a broker advertises and serves: SaslHandshake v0 (then the tokens
    travel bare, and a refused one closes the connection without an answer) and v1 (then in
    SaslAuthenticate v0-2, whose success carries an empty message)."""
    if not secured.security.sasl:
        pytest.skip("no SASL on a TLS-only listener")
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    mechanism = str(secured.security.mechanism)
    with RawConnection(secured) as wire:
        versions = wire.send(ApiVersionsRequest(client_software_name="kreassign-tests",
                                                client_software_version="1"), 3)
        assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys if k.api_key in (17, 36)} == {
            17: (0, 1), 36: (0, 2)}
        assert wire.send(SaslHandshakeRequest(mechanism=mechanism), 1).error_code == 0
        answers = []
        for token in sasl_tokens(ADMIN, mechanism):
            answer = wire.send(SaslAuthenticateRequest(auth_bytes=token.send()), 2)
            answers.append((answer.error_code, answer.error_message))
            token.receive(bytes(answer.auth_bytes))
        assert answers == [(0, "")] * len(answers)

    with RawConnection(secured) as wire:
        handshake = wire.send(SaslHandshakeRequest(mechanism=mechanism), 0)
        assert (handshake.error_code, handshake.mechanisms) == (0, [mechanism])
        for token in sasl_tokens(ADMIN, mechanism):
            token.receive(wire.bare(token.send()))
        assert wire.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), 4).brokers
    with RawConnection(secured) as wire:
        wire.send(SaslHandshakeRequest(mechanism=mechanism), 0)
        wrong = sasl_tokens(User(ADMIN.name, "not-the-password"), mechanism)
        with pytest.raises(ConnectionError):
            for token in wrong:
                token.receive(wire.bare(token.send()))


def test_wrong_settings_are_told_apart(secured: Secured, tmp_path: Path) -> None:
    """Each misconfiguration gets its own one-line reason (kreassign's mapping, then the probe),
    also from a slow broker."""
    server = secured.bootstrap.split(",")[0]
    props = secured.admin_props.read_text()

    def connect(text: str, timeout: str = "30s") -> Ran:
        # A refused login or certificate ends the connect at once, so a long timeout costs nothing
        # and leaves a loaded machine room; a closed socket is retried until the timeout.
        path = tmp_path / "wrong.properties"
        path.write_text(text)
        return secured.cli(path, "throttle", "show", "--request-timeout", timeout)

    plain = connect(f"bootstrap.servers={secured.bootstrap}\n", "2s")
    if secured.security.tls:
        speaks = "TLS with SASL" if secured.security.sasl else "TLS"
        other_ca = tmp_path / "other-ca.pem"
        trustme.CA().cert_pem.write_to_path(str(other_ca))
        untrusted = connect(props.replace(str(secured.ca), str(other_ca)))
        assert untrusted.exit_code == 5
        assert untrusted.stderr.startswith(f"Error: TLS certificate of {server} rejected: unable to get local "
                                           "issuer certificate.")
    else:
        speaks = "SASL without TLS"
    mechanisms = f" (mechanisms: {secured.security.mechanism})" if secured.security.sasl else ""
    assert plain.exit_code == 5
    assert plain.stderr.startswith(f"Error: {server} speaks {speaks}{mechanisms}, but security.protocol is "
                                   f"PLAINTEXT: set security.protocol={secured.security.protocol}")
    if secured.security.sasl and not secured.security.tls:
        # A slow broker (fault injection, emulator only): each attempt is still closed after
        # ApiVersions, but kafka-python gives the last one only the time left, so it times out;
        # that must not change the diagnosis.
        secured.sb.delay_responses(0.3, api="ApiVersions")
        try:
            slow = connect(f"bootstrap.servers={secured.bootstrap}\n", "2s")
        finally:
            secured.sb.release_responses()
        assert (slow.exit_code, slow.stderr) == (plain.exit_code, plain.stderr)
    if secured.security.sasl:
        bad = connect(props.replace(ADMIN.password, "not-the-password"))
        assert bad.exit_code == 5 and bad.stderr.startswith(
            f"Error: SASL authentication failed at {server} ({secured.security.mechanism}): Authentication failed")
    assert_no_secret(secured, *secured.printed)


def test_tls_client_on_a_plaintext_port(live: Any, tmp_path: Path, kreassign: Kreassign) -> None:
    build_security("tls", None, (), tmp_path)
    props = tmp_path / "tls.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={tmp_path / 'ca.pem'}\n")
    ran = kreassign.run("throttle", "show", "--bootstrap-server", live.bootstrap, "--command-config", str(props),
                        "--request-timeout", "5s", columns=160)
    server = live.bootstrap.split(",")[0]
    assert ran.exit_code == 5
    assert ran.stderr.strip() == (
        f"Error: TLS handshake with {server} failed: the port does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT "
        "listener?), but security.protocol is SSL. Set security.protocol to what the listener speaks.")


@pytest.mark.slow
def test_daemon_prints_no_secret_and_keeps_its_files_private(tmp_path: Path) -> None:
    state = tmp_path / "sandbox"
    def kreassign(*args: str) -> subprocess.CompletedProcess[str]:
        return KREASSIGN.subprocess(*args, timeout=60, env={"COLUMNS": "160"})

    started = kreassign("sandbox", "start", "--daemon", "--state-dir", str(state), "--brokers", "3", "--speed", "1",
                        "--security", "sasl_ssl", "--sasl-mechanism", "SCRAM-SHA-256",
                        "--user", f"{ADMIN.name}:{ADMIN.password}:admin", "--user", f"{VIEWER.name}:{VIEWER.password}")
    try:
        assert started.returncode == 0, started.stderr
        props = state / f"client-{ADMIN.name}.properties"
        assert f"# {props} ({ADMIN.name}, admin)" in started.stderr
        assert 'password="********";' in started.stderr
        shown = kreassign("throttle", "show", "--bootstrap-server", started.stdout.strip(), "--command-config",
                          str(props), "--request-timeout", "10s")
        assert shown.returncode == 0, shown.stderr
        status = kreassign("sandbox", "status", "--state-dir", str(state), "-o", "json")
        extra = {k: v for k, v in json.loads(status.stdout)["extra"].items() if k != "clock"}  # its lag, once measured
        assert extra == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256", "kafka_version": "4.4.0"}
        assert "security:  SASL_SSL (SCRAM-SHA-256)\n" in kreassign("sandbox", "status", "--state-dir",
                                                                    str(state)).stdout
    finally:
        stopped = kreassign("sandbox", "stop", "--state-dir", str(state))
    assert stopped.returncode == 0
    private = ["options.json", "state.json", "sandbox.log", SERVER_KEY_FILE, props.name,
               f"client-{VIEWER.name}.properties"]
    assert all((state / name).is_file() for name in private)
    public = {"ca.pem", "server.pem"}  # certificates
    modes = {str(p.relative_to(state)): stat.S_IMODE(p.stat().st_mode) for p in state.rglob("*")
             if p.is_file() and p.name not in public}
    assert modes == dict.fromkeys(modes, 0o600)
    key = "".join(line for line in (state / SERVER_KEY_FILE).read_text().splitlines() if not line.startswith("-"))
    jaas = next(line for line in props.read_text().splitlines() if line.startswith("sasl.jaas"))
    written = [started.stdout, started.stderr, shown.stdout, shown.stderr, status.stdout, stopped.stderr,
               *((state / name).read_text() for name in ("options.json", "state.json", "sandbox.log"))]
    for secret in (ADMIN.password, VIEWER.password, jaas, key[:40]):
        assert not any(secret in text for text in written)


OPERATOR = User("operator", "0perat0r-S3cret")


def test_an_operator_with_the_documented_acls_moves_and_aborts(secured: Secured, admin: KafkaAdmin,
                                                                tmp_path: Path) -> None:
    """A login that is no super user, with exactly the ACLs docs/security.md lists for
    operators, runs execute and abort (the execution lock included); without the lock's group
    ACL it is told what is missing before anything changes. Real Kafka only: the emulator has no
    ACL APIs (its logins are admins or describe-only), and a PLAIN listener's users are fixed in
    its JAAS text, so the new login needs SCRAM."""
    if secured.engine != "kafka" or not str(secured.security.mechanism).startswith("SCRAM"):
        pytest.skip("needs Kafka's ACL APIs and a login added at run time (SCRAM)")
    from kafka.admin import (
        ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern,
        ResourcePatternFilter, ResourceType, UserScramCredentialUpsertion,
    )
    from kafka.protocol.admin import DescribeClusterRequest
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    mechanism = str(secured.security.mechanism)

    def acl(kind: ResourceType, name: str, operation: ACLOperation,
            pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL) -> ACL:
        return ACL(f"User:{OPERATOR.name}", "*", operation, ACLPermissionType.ALLOW, ResourcePattern(kind, name, pattern))

    lock_acl = acl(ResourceType.GROUP, "kreassign.execution.", ACLOperation.READ, ACLResourcePatternType.PREFIXED)
    documented = [acl(ResourceType.CLUSTER, "kafka-cluster", ACLOperation.ALTER),
                  acl(ResourceType.CLUSTER, "kafka-cluster", ACLOperation.ALTER_CONFIGS),
                  acl(ResourceType.TOPIC, "*", ACLOperation.DESCRIBE),
                  acl(ResourceType.TOPIC, "*", ACLOperation.ALTER_CONFIGS),
                  acl(ResourceType.TOPIC, "__consumer_offsets", ACLOperation.READ), lock_acl]
    kp = secured.kafka_python(ADMIN)
    try:
        assert kp.alter_user_scram_credentials([UserScramCredentialUpsertion(OPERATOR.name, mechanism,
                                                                             OPERATOR.password)]) == {OPERATOR.name: None}
        assert kp.create_acls(documented)["failed"] == []
    finally:
        kp.close()

    def everywhere(request: Any, version: int, read: Any, response: Any = None) -> list[Any]:
        """`read` of the answer of every broker to `request` as the operator (each broker learns
        logins and ACLs from the metadata log on its own)."""
        seen = []
        for server in secured.bootstrap.split(","):
            with RawConnection(secured, server) as wire:
                wire.login(OPERATOR, mechanism)
                seen.append(read(wire.send(request, version, response)))
        return seen

    # ALTER and ALTER_CONFIGS imply DESCRIBE and DESCRIBE_CONFIGS
    secured.eventually(lambda: everywhere(DescribeClusterRequest(include_cluster_authorized_operations=True), 0,
                                          lambda r: r.authorized_operations), [{7, 8, 10, 11}] * len(secured.brokers))
    props = tmp_path / "operator.properties"
    props.write_text(client_properties(secured.security, OPERATOR, secured.bootstrap))
    plan = tmp_path / "plan.json"
    before = {p.tp: p.replicas for p in admin.describe_topics(["t"])}
    plan_moving_second_replica(admin, "t", plan)

    started = secured.cli(props, "execute", "-f", str(plan), "--throttle", str(HOLD_RATE))
    assert started.exit_code == 0, started.output
    journal = re.search(r"Journal: (\S+)", started.stderr)
    assert journal is not None and admin.list_reassignments()
    aborted = secured.cli(props, "abort", "--journal", journal.group(1))
    assert aborted.exit_code == 0, aborted.output
    assert settled(lambda: rates(admin), no_rates(secured)) == no_rates(secured)
    secured.eventually(admin.list_reassignments, {})
    secured.eventually(lambda: {p.tp: p.replicas for p in admin.describe_topics(["t"])}, before)

    kp = secured.kafka_python(ADMIN)
    try:
        kp.delete_acls([ACLFilter(lock_acl.principal, "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                                  ResourcePatternFilter(ResourceType.GROUP, "kreassign.execution.",
                                                        ACLResourcePatternType.PREFIXED))])
    finally:
        kp.close()
    lock_group = FindCoordinatorRequest(key_type=0, coordinator_keys=["kreassign.execution.lock"])
    secured.eventually(lambda: everywhere(lock_group, 4, lambda r: r.coordinators[0].error_code,
                                          FindCoordinatorResponse), [30] * len(secured.brokers))
    refused = secured.cli(props, "execute", "-f", str(plan), "--throttle", str(HOLD_RATE))
    assert refused.exit_code == 1, refused.output
    assert refused.stderr.strip() == (
        "Error: Not authorized to read the execution lock (the offsets of the consumer group "
        "kreassign.execution.lock): GROUP_AUTHORIZATION_FAILED. kreassign needs READ on the consumer groups "
        "kreassign.execution.* and on the topic __consumer_offsets for it; nothing was changed.")
    assert settled(lambda: rates(admin), no_rates(secured)) == no_rates(secured)
    assert admin.list_reassignments() == {}

