"""Every security mode of the sandbox end to end, over TCP.

kreassign's execute, throttle set, verify, watch, throttle clear and snapshot run with
`--command-config` files the sandbox wrote; kafka-python and confluent-kafka (librdkafka) talk to
the same listeners with their own settings, so the TLS and SASL spoken are Kafka's, not a
private dialect. A describe-only login is refused before anything changes, the codes on the wire
are Kafka's, a failed connection says why, and no secret shows up in any output, log, journal,
snapshot or state file. One sandbox per mode, shared by the module's tests in order.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kafka.errors as Errors
import pytest
import trustme
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from kreassign.cli.runtime import Runtime
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import AdminTimeouts, load_client_config
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.topics import INTERNAL_TOPICS
from kreassign.sandbox.clock import ManualClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.security import SERVER_KEY_FILE, Security, User, build_security, write_client_properties
from kreassign.sandbox.topics import TopicSpec
from kreassign.throttle.configs import FOLLOWER_RATE, LEADER_RATE
from test_throttle_cmd import Ran, invoke
from test_watch_e2e import events, plan_moving_second_replica, rates

confluent_admin = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.e2e
MB = 1_000_000
ADMIN = User("ops", "0ps-Adm1n-S3cret", admin=True)
VIEWER = User("viewer", "v1ewer-Only-S3cret")
MODES = [("tls", None), ("sasl_plaintext", "PLAIN"), ("sasl_plaintext", "SCRAM-SHA-256"),
         ("sasl_ssl", "SCRAM-SHA-512")]


@dataclass
class Secured:
    """A sandbox in one security mode and what its clients need."""

    sb: SandboxCluster
    security: Security
    home: Path
    admin_props: Path
    viewer_props: Path | None
    printed: list[str] = field(default_factory=list)
    """Everything kreassign printed in this mode, for the secrets check."""

    def cli(self, props: Path, *args: str) -> Ran:
        journal = () if args[0] == "snapshot" else ("--journal-dir", str(self.home / "journal"))
        ran = invoke(None, *args, "--bootstrap-server", self.sb.bootstrap, "--command-config", str(props), *journal,
                     runtime=Runtime(clock=lambda: self.sb.now, sleep=self.sb.advance))
        self.printed.append(ran.output)
        return ran

    def kafka_python(self, user: User | None, **extra: Any) -> Any:
        kwargs: dict[str, Any] = {"bootstrap_servers": self.sb.bootstrap, "request_timeout_ms": 5000,
                                  "security_protocol": self.security.protocol, **extra}
        if self.security.tls:
            kwargs["ssl_cafile"] = str(self.home / "ca.pem")
        if user is not None:
            kwargs.update(sasl_mechanism=self.security.mechanism, sasl_plain_username=user.name,
                          sasl_plain_password=user.password)
        return KafkaAdminClient(**kwargs)

    def librdkafka(self, user: User | None, **extra: Any) -> Any:
        conf: dict[str, Any] = {"bootstrap.servers": self.sb.bootstrap,
                                "security.protocol": self.security.protocol.lower(), **extra}
        if self.security.tls:
            conf["ssl.ca.location"] = str(self.home / "ca.pem")
        if user is not None:
            conf.update({"sasl.mechanism": self.security.mechanism, "sasl.username": user.name,
                         "sasl.password": user.password})
        return confluent_admin.AdminClient(conf)


@pytest.fixture(scope="module", params=MODES, ids=lambda m: "-".join(x for x in m if x))
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    mode, mechanism = request.param
    home = tmp_path_factory.mktemp(mode)
    users = (ADMIN, VIEWER) if mode.startswith("sasl") else ()
    security = build_security(mode, mechanism, users, home)
    sb = SandboxCluster(brokers=4, racks=0, topics=[TopicSpec("t", 4, 2, 20 * MB, 50_000.0, 0.2)],
                        clock=ManualClock(), seed=7, security=security, state_dir=home / "state").start()
    paths = write_client_properties(security, users, sb.bootstrap, home)
    yield Secured(sb, security, home, paths[0], paths[1] if len(paths) > 1 else None)
    sb.stop()


@pytest.fixture
def admin(secured: Secured) -> Iterator[KafkaAdmin]:
    config = load_client_config(str(secured.admin_props))
    with KafkaAdmin.connect(dataclasses.replace(config, timeouts=AdminTimeouts(5.0, 10.0, connect_timeout_s=5.0))) \
            as client:
        yield client


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

    started = secured.cli(props, "execute", "-f", str(plan), "--throttle", "5MB/s")
    assert started.exit_code == 0, started.output
    assert rates(admin)[1] == {LEADER_RATE: "5000000", FOLLOWER_RATE: "5000000"}
    changed = secured.cli(props, "throttle", "set", "--rate", "2MB/s")
    assert changed.exit_code == 0, changed.output
    assert rates(admin)[1] == {LEADER_RATE: "2000000", FOLLOWER_RATE: "2000000"}
    progress = secured.cli(props, "verify", "-f", str(plan))
    assert progress.exit_code == 0 and "is still in progress" in progress.stdout, progress.output

    watched = secured.cli(props, "watch", "--interval", "5s", "--stop-after", "30m", "--output", "json")
    assert watched.exit_code == 0, watched.output[-2000:]
    assert events(watched)[-1]["event"] == "complete"
    done = secured.cli(props, "verify", "-f", str(plan))
    assert done.exit_code == 0 and "is completed" in done.stdout, done.output
    cleared = secured.cli(props, "throttle", "clear")
    assert cleared.exit_code == 0, cleared.output
    assert rates(admin) == {1: {}, 2: {}, 3: {}, 4: {}}

    snapshot = tmp_path / "snap.json"
    taken = secured.cli(props, "snapshot", "-f", str(snapshot))
    assert taken.exit_code == 0, taken.output
    saved = json.loads(snapshot.read_text())
    assert {TopicPartition(p["topic"], p["partition"]): tuple(p["replicas"])
            for p in saved["partitions"] if p["topic"] == "t"} == targets

    journals = sorted((secured.home / "journal").rglob("*.json"))
    assert journals and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in journals)
    secured.sb.save()
    files = [p for p in (secured.home / "state").rglob("*") if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    state = [p.read_bytes().decode(errors="replace") for p in files]
    assert_no_secret(secured, *secured.printed, caplog.text, snapshot.read_text(),
                     *(p.read_text() for p in journals), *state)


def test_independent_clients_speak_the_same_protocol(secured: Secured) -> None:
    user = ADMIN if secured.security.sasl else None
    kp = secured.kafka_python(user)
    try:
        assert kp.describe_cluster()["controller_id"] in secured.sb.ports
        result = kp.alter_configs([ConfigResource(ConfigResourceType.BROKER, "2", {
            LEADER_RATE: (AlterConfigOp.SET, "4000000")})], incremental=True, raise_on_unknown=False)
        assert result == {"broker": {"2": "OK"}}
        kp.create_topics([NewTopic("doomed", 1, 1)])
    finally:
        kp.close()
    rd = secured.librdkafka(user)
    assert rd.delete_topics(["doomed"], operation_timeout=5)["doomed"].result(timeout=10) is None
    assert set(rd.list_topics(timeout=10).topics) - INTERNAL_TOPICS == {"t"}
    (future,) = rd.describe_configs([confluent_admin.ConfigResource("broker", "2")]).values()
    assert future.result(timeout=10)[LEADER_RATE].value == "4000000"
    (future,) = rd.incremental_alter_configs([confluent_admin.ConfigResource("broker", "2", incremental_configs=[
        confluent_admin.ConfigEntry(LEADER_RATE, None,
                                    incremental_operation=confluent_admin.AlterConfigOpType.DELETE)])]).values()
    future.result(timeout=10)
    (future,) = rd.describe_configs([confluent_admin.ConfigResource("broker", "2")]).values()
    assert LEADER_RATE not in {k for k, e in future.result(timeout=10).items() if e.value}


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
    assert secured.cli(props, "throttle", "set", "--rate", "1MB/s", "--brokers", "1").exit_code == 1
    assert rates(admin) == {1: {}, 2: {}, 3: {}, 4: {}}
    assert admin.list_reassignments() == {}
    assert {p.tp: p.replicas for p in admin.describe_topics(["t"])} == before
    topic = admin.describe_topic_configs(["t"]).configs["t"]
    assert not topic["leader.replication.throttled.replicas"].value
    described = secured.cli(props, "throttle", "show")
    assert described.exit_code == 0, described.output

    started = secured.cli(secured.admin_props, "execute", "-f", str(plan), "--throttle", "5MB/s")
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
    assert rates(admin) == {1: {}, 2: {}, 3: {}, 4: {}} and not admin.list_reassignments()
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
            "broker": {"1": "[Error 31] ClusterAuthorizationFailedError: Cluster authorization failed."},
            "topic": {"t": "[Error 29] TopicAuthorizationFailedError: Topic authorization failed."}}
        with pytest.raises(Errors.ClusterAuthorizationFailedError):
            kp.alter_partition_reassignments({KafkaTopicPartition("t", 0): [1, 2]})
        # DELETE on the topic, checked after the lookup: a missing topic is reported as missing
        assert kp.delete_topics(["t", "nope"], raise_errors=False)["topics"] == [
            {"name": "t", "topic_id": None, "error_code": 29, "error_message": "Topic authorization failed."},
            {"name": "nope", "topic_id": None, "error_code": 3,
             "error_message": "This server does not host this topic-partition."}]
    finally:
        kp.close()
    rd = secured.librdkafka(VIEWER)
    (future,) = rd.delete_topics(["t"], operation_timeout=5).values()
    with pytest.raises(Exception) as refused:
        future.result(timeout=10)
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    assert set(rd.list_topics(timeout=10).topics) - INTERNAL_TOPICS == {"t"}
    (future,) = rd.incremental_alter_configs([confluent_admin.ConfigResource("broker", "1", incremental_configs=[
        confluent_admin.ConfigEntry(LEADER_RATE, "1", incremental_operation=confluent_admin.AlterConfigOpType.SET)])
    ]).values()
    with pytest.raises(Exception) as refused:
        future.result(timeout=10)
    assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"

    seen: list[tuple[int, str]] = []
    wrong = secured.librdkafka(User(ADMIN.name, "not-the-password"), error_cb=lambda e: seen.append((e.code(), e.str())))
    for _ in range(10):  # polls until librdkafka reports the refused login (at most 10s)
        if wrong.poll(1) and seen:
            break
    assert seen and seen[0][0] == -169 and "SASL authentication error: Authentication failed" in seen[0][1]


def test_wrong_settings_are_told_apart(secured: Secured, tmp_path: Path) -> None:
    """Each misconfiguration gets its own one-line reason (kreassign's mapping, then the probe),
    also from a slow broker."""
    server = secured.sb.bootstrap.split(",")[0]
    props = secured.admin_props.read_text()

    def connect(text: str, timeout: str = "10s") -> Ran:
        # A refused login or certificate ends the connect at once, so a long timeout costs nothing
        # and leaves a loaded machine room; a closed socket is retried until the timeout.
        path = tmp_path / "wrong.properties"
        path.write_text(text)
        return secured.cli(path, "throttle", "show", "--request-timeout", timeout)

    plain = connect(f"bootstrap.servers={secured.sb.bootstrap}\n", "2s")
    if secured.security.tls:
        speaks = "TLS with SASL" if secured.security.sasl else "TLS"
        other_ca = tmp_path / "other-ca.pem"
        trustme.CA().cert_pem.write_to_path(str(other_ca))
        untrusted = connect(props.replace(str(secured.home / "ca.pem"), str(other_ca)))
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
        # A slow broker: each attempt is still closed after ApiVersions, but kafka-python gives the
        # last one only the time left, so it times out; that must not change the diagnosis.
        secured.sb.delay_responses(0.3, api="ApiVersions")
        try:
            slow = connect(f"bootstrap.servers={secured.sb.bootstrap}\n", "2s")
        finally:
            secured.sb.release_responses()
        assert (slow.exit_code, slow.stderr) == (plain.exit_code, plain.stderr)
    if secured.security.sasl:
        bad = connect(props.replace(ADMIN.password, "not-the-password"))
        assert bad.exit_code == 5 and bad.stderr.startswith(
            f"Error: SASL authentication failed at {server} ({secured.security.mechanism}): Authentication failed")
    assert_no_secret(secured, *secured.printed)


def test_tls_client_on_a_plaintext_port(sandbox: SandboxCluster, tmp_path: Path) -> None:
    build_security("tls", None, (), tmp_path)
    props = tmp_path / "tls.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={tmp_path / 'ca.pem'}\n")
    ran = invoke(None, "throttle", "show", "--bootstrap-server", sandbox.bootstrap, "--command-config", str(props),
                 "--request-timeout", "1s")
    server = sandbox.bootstrap.split(",")[0]
    assert ran.exit_code == 5
    assert ran.stderr.strip() == (
        f"Error: TLS handshake with {server} failed: the port does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT "
        "listener?), but security.protocol is SSL. Set security.protocol to what the listener speaks.")


@pytest.mark.slow
def test_daemon_prints_no_secret_and_keeps_its_files_private(tmp_path: Path) -> None:
    state = tmp_path / "sandbox"
    env = {**os.environ, "COLUMNS": "160"}

    def kreassign(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kreassign.cli.main", *args], capture_output=True, text=True,
                              timeout=60, check=False, env=env)

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
        assert json.loads(status.stdout)["extra"] == {"security_protocol": "SASL_SSL",
                                                      "sasl_mechanism": "SCRAM-SHA-256", "kafka_version": "4.4.0"}
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
