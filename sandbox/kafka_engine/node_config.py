"""The files a local KRaft cluster's nodes start from: each node's server.properties and the
logging configuration. Pure: text in, text out.

One controller (node 0, the single Raft voter, the shape of Kafka's own
ReassignPartitionsCommandTest) and brokers 1..N on 127.0.0.1. Settings are Kafka's defaults
except where a laptop-sized cluster needs otherwise, each named below with its reason; the
replication and quota settings (replica.fetch.*, replication.quota.*) are never changed, so a
throttled copy here behaves as on an operator's cluster.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kreassign.sandbox.security import properties_escape

CONTROLLER_ID = 0
LOOPBACK = "127.0.0.1"

SMALL_CLUSTER_SETTINGS: dict[str, str] = {
    # two cores: Kafka's defaults (3 network, 8 io, 10 background threads) only add contention
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    # the log cleaner's dedupe buffer is on-heap (128 MiB by default): too much for a small heap;
    # it must stay above 1 MiB per cleaner thread (KafkaConfig)
    "log.cleaner.dedupe.buffer.size": "2097152",
    # 5 instead of 50 partitions: faster start, fewer files
    "offsets.topic.num.partitions": "5",
    # no 3 s wait before the first rebalance of a new group, no 30 s before log retention starts
    "group.initial.rebalance.delay.ms": "0",
    "log.initial.task.delay.ms": "100",
    # topics exist because a test or an operator created them, and leaders stay where a
    # reassignment put them (the preferred-leader balancer would move them under a test)
    "auto.create.topics.enable": "false",
    "auto.leader.rebalance.enable": "false",
}


@dataclass(frozen=True)
class Listener:
    """The listener clients use: its security protocol and, for SASL, the mechanism and the
    broker-side JAAS text (PLAIN keeps its users there; SCRAM keeps them in the metadata log)."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    jaas: str | None = None
    ssl: Mapping[str, str] = field(default_factory=dict)
    """ssl.* settings of the listener (PEM key store and trust store)"""
    super_users: tuple[str, ...] = ()
    """principals besides the brokers' own that the StandardAuthorizer lets do everything"""
    authorizer: bool = False
    """Kafka's StandardAuthorizer on (SASL listeners: logins have ACLs); off, every client may do
    everything, as on a broker without an authorizer"""

    @property
    def secured(self) -> bool:
        return self.protocol != "PLAINTEXT"


@dataclass(frozen=True)
class Layout:
    """Where every node of a local cluster listens and keeps its data."""

    racks: Mapping[int, str | None]
    """broker id -> rack (None: no broker.rack)"""
    ports: Mapping[int, int]
    """broker id -> the port clients connect to"""
    controller_port: int
    data_dir: Path
    log_dirs: int = 3
    internal_ports: Mapping[int, int] = field(default_factory=dict)
    """broker id -> the PLAINTEXT port brokers replicate over (only with a secured client listener
    or replication links)"""
    link_ports: Mapping[int, int] = field(default_factory=dict)
    """broker id -> the port of its replication link (`link.ReplicationLinks`), where it advertises
    its inter-broker listener so that followers fetch through the link (empty: no links)"""
    client: Listener = field(default_factory=Listener)
    overrides: Mapping[str, str] = field(default_factory=dict)
    """settings that replace the defaults above on every broker (tests, calibration runs)"""

    @property
    def brokers(self) -> list[int]:
        return sorted(self.racks)

    def node_dir(self, node: int) -> Path:
        return self.data_dir / ("controller" if node == CONTROLLER_ID else f"broker-{node}")

    def log_dir_paths(self, node: int) -> list[Path]:
        if node == CONTROLLER_ID:
            return [self.node_dir(node) / "metadata"]
        return [self.node_dir(node) / f"data-{i}" for i in range(self.log_dirs)]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{self.ports[b]}" for b in self.brokers)


def _replication_factor(brokers: int) -> str:
    return str(min(3, brokers))


def properties(layout: Layout, node: int) -> str:
    """server.properties of `node` (CONTROLLER_ID or a broker id)."""
    voters = f"{CONTROLLER_ID}@{LOOPBACK}:{layout.controller_port}"
    lines = {
        "node.id": str(node),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "log.dirs": ",".join(str(p) for p in layout.log_dir_paths(node)),
    }
    if node == CONTROLLER_ID:
        lines.update({
            "process.roles": "controller",
            "listeners": f"CONTROLLER://{LOOPBACK}:{layout.controller_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        })
        lines.update(_authorizer(layout))
        return _render(lines, layout.overrides, controller=True)
    client = layout.client
    protocol_map = {"CONTROLLER": "PLAINTEXT"}
    if client.secured:
        protocol_map.update({"INTERNAL": "PLAINTEXT", "EXTERNAL": client.protocol})
        listeners = {"EXTERNAL": layout.ports[node], "INTERNAL": layout.internal_ports[node]}
    elif layout.link_ports:
        protocol_map.update({"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"})
        listeners = {"PLAINTEXT": layout.ports[node], "INTERNAL": layout.internal_ports[node]}
    else:
        protocol_map["PLAINTEXT"] = "PLAINTEXT"
        listeners = {"PLAINTEXT": layout.ports[node]}
    inter_broker = "INTERNAL" if "INTERNAL" in listeners else "PLAINTEXT"
    # followers find a leader where it advertises its inter-broker listener: at its link, if any
    advertised = {**listeners, **({"INTERNAL": layout.link_ports[node]} if node in layout.link_ports else {})}
    bound = ",".join(f"{name}://{LOOPBACK}:{port}" for name, port in listeners.items())
    rf = _replication_factor(len(layout.racks))
    lines.update({
        "process.roles": "broker",
        "listeners": bound,
        "advertised.listeners": ",".join(f"{name}://{LOOPBACK}:{port}" for name, port in advertised.items()),
        "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocol_map.items()),
        "inter.broker.listener.name": inter_broker,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": "1",
        **SMALL_CLUSTER_SETTINGS,
    })
    rack = layout.racks[node]
    if rack is not None:
        lines["broker.rack"] = rack
    if client.secured:
        lines.update(_client_listener(client))
        lines.update(_authorizer(layout))
    return _render(lines, layout.overrides, controller=False)


def _client_listener(client: Listener) -> dict[str, str]:
    out: dict[str, str] = {}
    prefix = "listener.name.external."
    for key, value in client.ssl.items():
        out[prefix + key] = value
    if client.mechanism is not None:
        mech = client.mechanism.lower()
        out["sasl.enabled.mechanisms"] = client.mechanism
        out[f"{prefix}sasl.enabled.mechanisms"] = client.mechanism
        if client.jaas:
            out[f"{prefix}{mech}.sasl.jaas.config"] = client.jaas
    return out


def _authorizer(layout: Layout) -> dict[str, str]:
    """Kafka's StandardAuthorizer when clients must log in: the brokers and the controller talk
    PLAINTEXT among themselves (principal User:ANONYMOUS), so that principal is a super user, as
    are the listener's admin users."""
    if not layout.client.authorizer:
        return {}
    supers = ["User:ANONYMOUS", *(f"User:{u}" for u in layout.client.super_users)]
    return {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join(supers),
        "allow.everyone.if.no.acl.found": "false",
    }


def _render(lines: Mapping[str, str], overrides: Mapping[str, str], *, controller: bool) -> str:
    merged = dict(lines)
    for key, value in overrides.items():
        # a broker-side override must not reach the controller's file, whose listeners differ
        if controller and key in {"listeners", "advertised.listeners", "inter.broker.listener.name"}:
            continue
        merged[key] = value
    return "".join(f"{key}={properties_escape(value)}\n" for key, value in merged.items())


def log4j2_properties(log_file: Path, *, level: str = "INFO") -> str:
    """Log4j 2 configuration (Kafka 4.x) that writes the node's log to `log_file`."""
    return "\n".join([
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = FILE",
        f"appender.file.fileName = {log_file}",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        f"rootLogger.level = {level}",
        "rootLogger.appenderRef.file.ref = FILE",
        # per-request and per-partition state chatter: megabytes a minute, never read here
        "logger.request.name = kafka.request.logger",
        "logger.request.level = WARN",
        "logger.state.name = state.change.logger",
        "logger.state.level = WARN",
        "",
    ])


def log4j1_properties(log_file: Path, *, level: str = "INFO") -> str:
    """reload4j configuration (Kafka 3.9) that writes the node's log to `log_file`."""
    return "\n".join([
        f"log4j.rootLogger={level}, file",
        "log4j.appender.file=org.apache.log4j.FileAppender",
        f"log4j.appender.file.File={log_file}",
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
        "log4j.logger.kafka.request.logger=WARN",
        "log4j.logger.state.change.logger=WARN",
        "",
    ])


def jvm_flags(*, heap: str, log_config: Path, log4j2: bool, logs_dir: Path) -> list[str]:
    """The java flags of one node: a small fixed heap, G1 as kafka-run-class.sh sets it, and the
    logging configuration (Log4j 2 or reload4j, by the jars)."""
    logging = (f"-Dlog4j2.configurationFile={log_config}" if log4j2
               else f"-Dlog4j.configuration=file:{log_config}")
    return [f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true", f"-Dkafka.logs.dir={logs_dir}", logging]


def format_command(classpath: str, java: str, cluster_id: str, config: Path) -> list[str]:
    """StorageTool format of one node (static voters: the same command on 3.9 and 4.x)."""
    return [java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", classpath, "kafka.tools.StorageTool", "format",
            "-t", cluster_id, "-c", str(config)]
