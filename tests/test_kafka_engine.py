"""The kafka engine of the sandbox: its configuration files and jar lookup (pure, no JVM), and a
real cluster started the way users start it (`sandbox start --engine kafka --daemon`), which must
not outlive its parent."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kreassign.cluster.errors import InputError
from kreassign.cluster.processes import pid_alive
from kreassign.sandbox.kafka_engine import dist
from kreassign.sandbox.errors import PortTaken
from kreassign.sandbox.kafka_engine.cluster import KafkaCluster, _Node, new_cluster_id
from kreassign.sandbox.kafka_engine.node_config import CONTROLLER_ID, Layout, Listener, properties

from cli_helpers import KREASSIGN, Kreassign

LAYOUT = Layout(racks={1: "rack-1", 2: "rack-2", 3: None}, ports={1: 9001, 2: 9002, 3: 9003},
                controller_port=9100, data_dir=Path("/data"), log_dirs=2)


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_broker_properties_keep_kafkas_replication_defaults_and_name_the_controller() -> None:
    props = parse(properties(LAYOUT, 2))
    assert props["node.id"] == "2" and props["process.roles"] == "broker"
    assert props["controller.quorum.voters"] == "0@127.0.0.1:9100"
    assert props["listeners"] == props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9002"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert props["broker.rack"] == "rack-2"
    assert props["log.dirs"] == "/data/broker-2/data-0,/data/broker-2/data-1"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["log.cleaner.dedupe.buffer.size"] == "2097152"
    # the throttles under test behave as on an operator's cluster: no replication setting is changed
    assert not [k for k in props if k.startswith(("replica.", "replication.quota", "num.replica"))]
    assert "broker.rack" not in parse(properties(LAYOUT, 3))


def test_controller_properties_and_overrides_that_are_not_the_controllers() -> None:
    layout = Layout(**{**LAYOUT.__dict__, "overrides": {"replica.fetch.max.bytes": "65536",
                                                        "listeners": "PLAINTEXT://127.0.0.1:1"}})
    props = parse(properties(layout, CONTROLLER_ID))
    assert props["process.roles"] == "controller" and props["node.id"] == "0"
    assert props["listeners"] == "CONTROLLER://127.0.0.1:9100"
    assert props["log.dirs"] == "/data/controller/metadata"
    assert props["replica.fetch.max.bytes"] == "65536"
    assert parse(properties(layout, 1))["listeners"] == "PLAINTEXT://127.0.0.1:1"


def test_a_secured_client_listener_keeps_brokers_on_an_internal_plaintext_one() -> None:
    client = Listener("SASL_SSL", "SCRAM-SHA-512", ssl={"ssl.keystore.type": "PEM"}, super_users=("admin",),
                      authorizer=True)
    layout = Layout(**{**LAYOUT.__dict__, "client": client, "internal_ports": {1: 9201, 2: 9202, 3: 9203}})
    props = parse(properties(layout, 1))
    assert props["listeners"] == "EXTERNAL://127.0.0.1:9001,INTERNAL://127.0.0.1:9201"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL"
    assert props["listener.name.external.ssl.keystore.type"] == "PEM"
    assert props["listener.name.external.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["super.users"] == "User:ANONYMOUS;User:admin"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert parse(properties(layout, CONTROLLER_ID))["authorizer.class.name"] == props["authorizer.class.name"]


def test_replication_links_take_the_inter_broker_listener_clients_keep_theirs() -> None:
    layout = Layout(**{**LAYOUT.__dict__, "internal_ports": {1: 9201, 2: 9202, 3: 9203},
                       "link_ports": {1: 9301, 2: 9302, 3: 9303}})
    props = parse(properties(layout, 2))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9002,INTERNAL://127.0.0.1:9202"
    # followers find a leader where it advertises its inter-broker listener: at its link
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9002,INTERNAL://127.0.0.1:9302"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"


def test_versions_are_checked() -> None:
    assert dist.check_version("3.9.2") == "3.9.2"
    with pytest.raises(InputError, match="not a Kafka release"):
        dist.check_version("4.1")
    with pytest.raises(InputError, match="too old"):
        dist.check_version("3.8.1")
    assert dist.java_needed("4.0.0") == 17 and dist.java_needed("3.9.2") == 11


def test_kafka_home_is_an_unpacked_distribution(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no libs/ folder"):
        dist.from_kafka_home(tmp_path)
    (tmp_path / "libs").mkdir()
    with pytest.raises(InputError, match="found none"):
        dist.from_kafka_home(tmp_path)
    for jar in ("kafka_2.13-4.1.2.jar", "kafka-clients-4.1.2.jar", "log4j-slf4j-impl-2.25.3.jar"):
        (tmp_path / "libs" / jar).touch()
    found = dist.from_kafka_home(tmp_path)
    assert (found.version, found.libs, found.log4j2) == ("4.1.2", tmp_path / "libs", True)
    with pytest.raises(InputError, match="not the --kafka-version 4.0.0"):
        dist.locate(tmp_path, "4.0.0")


def test_unfetched_jars_say_how_to_fetch_them(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"run `make kafka` \(or `kreassign sandbox fetch-kafka --kafka-version 4.0.2`\)"):
        dist.cached("4.0.2", tmp_path)


def test_fetch_without_maven_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match=r"Maven \(mvn\) is needed"):
        dist.fetch("4.0.2", tmp_path)


def test_a_missing_java_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match=r"Java 17\+ is needed to run Kafka and JAVA_HOME=.* has no bin/java"):
        dist.find_java_for(17)


def test_cluster_ids_are_kafkas_shape() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200 and all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_start_refuses_emulator_only_options_and_a_taken_port(tmp_path: Path, kafka_cluster: Any,
                                                              kreassign: Kreassign) -> None:
    refused = kreassign.run("sandbox", "start", "--engine", "kafka", "--speed", "2", "--client-quota",
                            "producer_byte_rate=1MB/s", "--network", "1MB/s")
    assert refused.code == 1
    assert refused.err.startswith("Error: --speed, --client-quota: only the emulator has these options")
    taken = kafka_cluster.ports[1]
    busy = kreassign.run("sandbox", "start", "--engine", "kafka", "--brokers", "1", "--port-base", str(taken),
                         "--state-dir", str(tmp_path / "sb"))
    # The fixture's next port may be taken too (its nodes' ports are often consecutive): the message then
    # names every taken port, and must name this one.
    named = re.search(r"Error: ports? ([\d, ]+) on 127\.0\.0\.1 (is|are) in use: stop what listens there", busy.err)
    assert busy.code == 1 and named and str(taken) in named.group(1).split(", "), busy.err
    assert len(busy.err.strip().splitlines()) == 1


def jvm_pids(state_dir: Path) -> dict[str, int]:
    info = json.loads((state_dir / "sandbox.json").read_text())
    assert info["engine"] == "kafka"
    return {k: int(v) for k, v in info["extra"]["pids"].items()}


def kreassign(*argv: str) -> subprocess.CompletedProcess[str]:
    return KREASSIGN.subprocess(*argv, timeout=240)


def wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if pid_alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if pid_alive(p)]


@pytest.mark.kafka
@pytest.mark.slow
def test_daemon_status_stop_and_no_jvm_outlives_a_killed_parent(tmp_path: Path) -> None:
    state = tmp_path / "sandbox"
    started = kreassign("sandbox", "start", "--engine", "kafka", "--daemon", "--brokers", "2", "--racks", "2",
                        "--log-dirs", "2", "--topics", "orders:2:2:100kB", "--network", "50MB/s",
                        "--state-dir", str(state))
    assert started.returncode == 0, started.stderr
    assert "2 brokers, replicating over 50.0 MB/s links" in started.stderr
    bootstrap = started.stdout.strip()
    status = kreassign("sandbox", "status", "--state-dir", str(state), "-o", "json")
    info = json.loads(status.stdout)
    assert info["running"] and info["engine"] == "kafka" and info["bootstrap"] == bootstrap
    assert info["extra"]["network_bps"] == 50e6
    assert info["extra"]["kafka_version"] == dist.MATRIX[0]
    pids = jvm_pids(state)
    assert sorted(pids) == ["0", "1", "2"] and all(pid_alive(p) for p in pids.values())
    listed = kreassign("snapshot", "--bootstrap-server", bootstrap, "-f", str(tmp_path / "s.json"), "--sample", "0")
    assert listed.returncode == 0, listed.stderr
    snap = json.loads((tmp_path / "s.json").read_text())
    assert [b["rack"] for b in snap["brokers"]] == ["rack-1", "rack-2"]
    assert {p["topic"] for p in snap["partitions"]} == {"orders"}
    assert all(p["size_bytes"] >= 100_000 for p in snap["partitions"])

    stopped = kreassign("sandbox", "stop", "--state-dir", str(state))
    assert stopped.returncode == 0 and "Stopped the sandbox" in stopped.stderr
    assert wait_gone(list(pids.values())) == []

    # started again from its state dir: same ports, same data; then its parent is killed
    again = kreassign("sandbox", "start", "--engine", "kafka", "--daemon", "--state-dir", str(state))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == bootstrap
    # without --network this time: the brokers replicate over loopback again
    assert "network_bps" not in json.loads(kreassign("sandbox", "status", "--state-dir", str(state),
                                                     "-o", "json").stdout)["extra"]
    pids = jvm_pids(state)
    daemon = json.loads((state / "sandbox.json").read_text())["pid"]
    os.kill(daemon, signal.SIGKILL)
    assert wait_gone([daemon, *pids.values()]) == []
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", int(bootstrap.split(",")[0].rsplit(":", 1)[1]))) != 0


@pytest.mark.kafka
@pytest.mark.slow
def test_a_secured_daemon_keeps_no_scram_password_and_a_restart_takes_the_new_logins(tmp_path: Path) -> None:
    """SASL_PLAINTEXT with SCRAM-SHA-256 on one real broker, through the daemon: no file of the
    state dir but the client properties holds a password; started again from its state dir with
    other --user options, a login no longer named is refused and loses its ACLs, a new one works;
    started a third time with TLS alone, a client that trusts the CA may change configs (no
    authorizer, as the emulator's TLS-only listener) and no login is left."""
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType, ResourceType

    state = tmp_path / "sandbox"

    def start(*users: str, security: tuple[str, ...] = ("sasl_plaintext", "--sasl-mechanism", "SCRAM-SHA-256")
              ) -> subprocess.CompletedProcess[str]:
        return KREASSIGN.subprocess(
            "sandbox", "start", "--engine", "kafka", "--daemon", "--brokers", "1", "--racks", "0", "--log-dirs", "1",
            "--topics", "none", "--heap", "256m", "--start-timeout", "400s", "--state-dir", str(state), "--security",
            *security, *(a for u in users for a in ("--user", u)), timeout=600)

    def show(user: str, *more: str) -> subprocess.CompletedProcess[str]:
        props = state / (f"client-{user}.properties" if user else "client.properties")
        return kreassign("throttle", *(more or ("show",)), "--bootstrap-server", bootstrap, "--command-config",
                         str(props), "--request-timeout", "30s", "--journal-dir", str(tmp_path / "journal"))

    first = start("ops:0ps-First:admin", "gone:g0ne-First")
    try:
        assert first.returncode == 0, first.stderr
        bootstrap = first.stdout.strip()
        status = json.loads(kreassign("sandbox", "status", "--state-dir", str(state), "-o", "json").stdout)
        assert status["extra"]["security_protocol"] == "SASL_PLAINTEXT"
        assert status["extra"]["sasl_mechanism"] == "SCRAM-SHA-256"
        assert show("gone").returncode == 0
        kept = [p for p in state.rglob("*") if p.is_file() and not p.name.startswith("client-")]
        assert (state / "options.json") in kept and (state / "config" / "broker-1.properties") in kept
        for path in kept:
            text = path.read_bytes().decode(errors="replace")
            assert "0ps-First" not in text and "g0ne-First" not in text, path
    finally:
        assert kreassign("sandbox", "stop", "--state-dir", str(state)).returncode == 0
    gone_login = (state / "client-gone.properties").read_text()

    second = start("ops:0ps-Second:admin", "newbie:n3wbie")
    try:
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == bootstrap
        assert show("newbie").returncode == 0 and show("ops").returncode == 0
        (state / "client-gone.properties").write_text(gone_login)
        refused = show("gone")
        assert refused.returncode == 5 and refused.stderr.startswith(
            f"Error: SASL authentication failed at {bootstrap} (SCRAM-SHA-256): Authentication failed"), refused.stderr
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="ops",
                                 sasl_plain_password="0ps-Second", request_timeout_ms=30000)
        try:
            acls, _ = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                    ResourcePatternFilter(ResourceType.ANY, None,
                                                                          ACLResourcePatternType.ANY)))
        finally:
            admin.close()
        assert {a.principal for a in acls} == {"User:newbie"}
    finally:
        assert kreassign("sandbox", "stop", "--state-dir", str(state)).returncode == 0

    third = start(security=("tls",))
    try:
        assert third.returncode == 0, third.stderr
        assert third.stdout.strip() == bootstrap and f"# {state / 'client.properties'}\n" in third.stderr
        changed = show("", "set", "--throttle", "1MB/s", "--brokers", "1")
        assert changed.returncode == 0, changed.stderr
        assert show("", "clear").returncode == 0
        assert json.loads((state / "kafka.json").read_text())["logins"] == []
    finally:
        assert kreassign("sandbox", "stop", "--state-dir", str(state)).returncode == 0


def fake_maven(calls: list[list[str]], out_option: str, jar: str, content: bytes
               ) -> Callable[[Sequence[str]], subprocess.CompletedProcess[str]]:
    """A Maven that leaves `jar` in the folder its `out_option` names, recording its calls."""
    def maven(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        out = Path(next(a for a in argv if a.startswith(f"{out_option}=")).split("=", 1)[1])
        out.mkdir(parents=True, exist_ok=True)
        (out / jar).write_bytes(content)
        return subprocess.CompletedProcess(list(argv), 0, "", "")
    return maven


def test_the_jmx_exporter_agent_is_fetched_by_its_pom_once(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    maven = fake_maven(calls, "-DoutputDirectory", dist.JMX_EXPORTER_JAR, b"agent")

    with pytest.raises(InputError, match=r"JMX exporter 1.0.1 is not fetched yet: run `make kafka`"):
        dist.jmx_exporter_jar(tmp_path)
    jar = dist.fetch_jmx_exporter(tmp_path, run=maven)
    assert jar == tmp_path / "jmx-exporter" / "1.0.1" / "jmx_prometheus_javaagent-1.0.1.jar" == dist.jmx_exporter_jar(tmp_path)
    assert jar.read_bytes() == b"agent"
    assert calls[0][calls[0].index("-f") + 1] == str(dist.JMX_EXPORTER_POM)
    assert "-Djmx.exporter.version=1.0.1" in calls[0]
    dist.fetch_jmx_exporter(tmp_path, run=maven)
    assert len(calls) == 1  # cached: Maven is not asked again
    assert dist.JMX_EXPORTER_RULES.is_file() and dist.JMX_EXPORTER_POM.is_file()


def test_the_client_telemetry_receiver_is_built_outside_the_source_once_per_source(tmp_path: Path) -> None:
    source = tmp_path / "telemetry"
    shutil.copytree(dist.CLIENT_TELEMETRY_SOURCE, source, ignore=shutil.ignore_patterns("target"))
    calls: list[list[str]] = []
    maven = fake_maven(calls, "-Dkreassign.build.dir", dist.CLIENT_TELEMETRY_JAR, b"receiver")

    cache = tmp_path / "cache"
    with pytest.raises(InputError, match=r"client-telemetry receiver for real brokers is not built yet: run `make kafka`"):
        dist.client_telemetry_jar(cache, source)
    jar = dist.build_client_telemetry(cache, source, run=maven)
    assert jar == dist.client_telemetry_jar(cache, source) and jar.read_bytes() == b"receiver"
    assert jar.parent.parent == cache / "client-telemetry" and calls[0][-1] == "package"
    assert calls[0][calls[0].index("-f") + 1] == str(source / "pom.xml")
    assert sorted(p.name for p in (cache / "client-telemetry").iterdir()) == [jar.parent.name]  # no scratch left
    assert sorted(p.name for p in source.iterdir()) == ["pom.xml", "src"]  # nothing built in the source tree
    dist.build_client_telemetry(cache, source, run=maven)
    assert len(calls) == 1  # cached: Maven is not asked again
    java = next(source.rglob("*.java"))
    java.write_text(java.read_text() + "\n// edited\n")
    with pytest.raises(InputError, match="not built yet"):
        dist.client_telemetry_jar(cache, source)  # an edited source is built again
    assert dist.build_client_telemetry(cache, source, run=maven) != jar and len(calls) == 2


def test_a_failed_receiver_build_says_why(tmp_path: Path) -> None:
    def maven(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 1, "[ERROR] COMPILATION ERROR : cannot find symbol\n", "")

    with pytest.raises(InputError, match="Maven could not build the KIP-714 client-telemetry receiver: COMPILATION "
                                         "ERROR : cannot find symbol"):
        dist.build_client_telemetry(tmp_path, run=maven)
    assert [p.name for p in (tmp_path / "client-telemetry").iterdir()] == []


@pytest.mark.parametrize("line, kind", [
    ("java.net.BindException: Address already in use", PortTaken),
    ("ERROR Exiting Kafka due to fatal exception: java.lang.OutOfMemoryError: Java heap space", InputError),
])
def test_a_node_that_dies_at_start_says_whether_a_port_was_taken(tmp_path: Path, line: str, kind: type) -> None:
    # a port taken between picking it free and the JVM binding it is worth a start on new ports
    # (the test pool's retry); any other death is not
    log = tmp_path / "node-1" / "stdout.log"
    log.parent.mkdir()
    log.write_text(f"starting\n{line}\n")
    proc = subprocess.Popen(["true"])
    proc.wait()
    cluster = object.__new__(KafkaCluster)
    cluster._nodes = {1: _Node(1, ["java"], log, proc)}
    with pytest.raises(InputError) as raised:
        cluster._check_alive()
    assert type(raised.value) is kind
    assert ("a port is in use" in str(raised.value)) == (kind is PortTaken)
    assert str(raised.value).startswith("broker 1 exited during start-up (code 0): ")

