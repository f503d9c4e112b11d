"""`KafkaCluster`: a real Apache Kafka KRaft cluster on 127.0.0.1, one controller and N brokers,
each a JVM of its own, for `kreassign sandbox start --engine kafka` and the live tests.

    with KafkaCluster(locate(None, "4.4.0"), brokers=5, racks=2) as kafka:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
        kafka.stop_broker(3)     # controlled shutdown, as an operator's restart does
        kafka.start_broker(3)    # same ports, same data

With a state dir the cluster keeps its data, cluster id and ports there and starts again from
them; without one it lives in a temporary folder removed on stop. Brokers stop before the
controller (a broker whose controller is gone waits minutes for its controlled shutdown).
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kreassign.cluster.errors import ClusterError, ClusterUnreachable, InputError
from kreassign.cluster.model import TopicPartition
from kreassign.sandbox.errors import PortTaken
from kreassign.sandbox.kafka_engine import jvm
from kreassign.sandbox.kafka_engine.data import PartitionLoad, Writer, create_topics, fill, plan_topics, scaled_defaults
from kreassign.sandbox.kafka_engine.dist import (
    CLIENT_TELEMETRY_CLASS,
    CLIENT_TELEMETRY_PORT,
    JMX_EXPORTER_RULES,
    KafkaDist,
    client_telemetry_jar,
    find_java_for,
    jmx_exporter_jar,
)
from kreassign.sandbox.kafka_engine.link import ReplicationLinks
from kreassign.sandbox.kafka_engine.secured import KEYSTORE_FILE, KafkaLogin, apply_logins, client_listener, keystore_pem
from kreassign.sandbox.kafka_engine.node_config import (
    CONTROLLER_ID,
    LOOPBACK,
    Layout,
    Listener,
    format_command,
    jvm_flags,
    log4j1_properties,
    log4j2_properties,
    properties,
)
from kreassign.sandbox.private_files import write_private
from kreassign.sandbox.security import Security
from kreassign.sandbox.topics import TopicSpec, check_shape, rack_names

STATE_FILE = "kafka.json"
DEFAULT_BROKERS = 5
DEFAULT_LOG_DIRS = 3
DEFAULT_HEAP = "512m"
CONTROLLER_HEAP = "256m"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports the OS has free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 (Kafka's Uuid.toString), never
    starting with '-' (Kafka's randomUuid avoids those: they read as command-line flags)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


JMX_REPORTER = "org.apache.kafka.common.metrics.JmxReporter"
"""the reporter behind every Kafka-metrics MBean (and so the JMX exporter's quota series)"""


@dataclass
class _Node:
    node_id: int
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None


class KafkaCluster:
    """A local KRaft cluster of real Kafka brokers.

    Args:
        dist: the Kafka jars (`dist.locate`).
        brokers: number of brokers (ids 1..N); the controller is node 0.
        racks: racks rack-1..rack-R assigned in turn (0: none), as the emulator does.
        log_dirs: log dirs per broker (JBOD), for AlterReplicaLogDirs moves.
        topics: topic specs to create (None: the emulator's demo set at a hundredth of its sizes
            and rates; () none). Sizes are filled with real records; rates are kept by a
            background producer while the cluster runs.
        state_dir: where data, ports and the cluster id are kept (None: a temporary folder).
        fresh: start over even if the state dir holds a cluster.
        port_base: broker i listens on port_base+i-1, the controller on port_base+N (0: free ports).
        heap: each broker's heap; the controller gets CONTROLLER_HEAP.
        security: the client listener's security (`sandbox.security.build_security`; default
            PLAINTEXT). Secured, the brokers replicate over an internal PLAINTEXT listener.
        logins: the SASL logins (`secured.KafkaLogin`), put on the cluster at every start.
        overrides: broker settings that replace the defaults (node_config).
        start_timeout_s: how long start() waits for every broker to register.
        metrics_port: serve each broker's metrics in Prometheus' format (the JMX exporter's java
            agent with the rules of jmx_exporter.yaml) on 127.0.0.1, broker i on
            metrics_port + i - 1 (0: free ports; None: no metrics), and the KIP-714 metrics clients
            push to it (kreassign's client-telemetry receiver, telemetry/, as a metric.reporters
            plugin) on metrics_port + N + i - 1, under the emulator's names.
        network_bps: each broker's replication link, each direction (`link.ReplicationLinks`:
            followers fetch through a process-local link that carries no more; None: loopback).
    """

    def __init__(self, dist: KafkaDist, *, brokers: int = DEFAULT_BROKERS, racks: int = 2,
                 log_dirs: int = DEFAULT_LOG_DIRS, topics: Sequence[TopicSpec] | None = (),
                 state_dir: str | os.PathLike[str] | None = None, fresh: bool = False, port_base: int = 0,
                 heap: str = DEFAULT_HEAP, security: Security | None = None, logins: Sequence[KafkaLogin] = (),
                 overrides: Mapping[str, str] | None = None, seed: int = 0, start_timeout_s: float = 120.0,
                 metrics_port: int | None = None, network_bps: float | None = None) -> None:
        check_shape(brokers, racks, log_dirs)
        if network_bps is not None and network_bps <= 0:
            raise InputError("--network must be a positive rate")
        self.network_bps = network_bps
        if port_base and not 1024 <= port_base <= 65535 - (2 if network_bps is None else 3) * brokers - 1:
            raise InputError(f"--port-base {port_base} leaves no room for {brokers} brokers below 65536")
        self.dist = dist
        self.java = find_java_for(dist.min_java)
        self.heap = heap
        self.seed = seed
        self.start_timeout_s = start_timeout_s
        self.settings = security or Security()
        self.logins = tuple(logins)
        self.topic_specs = scaled_defaults() if topics is None else tuple(topics)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if state_dir is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="kreassign-kafka-")
            self.state_dir = Path(self._scratch.name)
        else:
            self.state_dir = Path(state_dir).resolve()  # the JVMs run in it and read their files by path
        self.state_dir.mkdir(parents=True, exist_ok=True)
        saved = self._saved() if not fresh else None
        if saved is not None and saved.get("version") != dist.version:
            raise InputError(f"{self.state_dir} holds a Kafka {saved.get('version')} cluster, not {dist.version}: "
                             "start it with that version, or with --fresh to start over")
        self.fresh = saved is None
        self._previous_logins: list[str] = list(saved.get("logins", ())) if saved is not None else []
        client = client_listener(self.settings, self.logins, self.state_dir / "config" / KEYSTORE_FILE)
        if saved is not None:
            self.cluster_id = str(saved["cluster_id"])
            self.layout = Layout(racks={int(b): r for b, r in saved["racks"].items()},
                                 ports={int(b): int(p) for b, p in saved["ports"].items()},
                                 controller_port=int(saved["controller_port"]),
                                 data_dir=self.state_dir / "data", log_dirs=int(saved["log_dirs"]),
                                 internal_ports={int(b): int(p) for b, p in saved.get("internal_ports", {}).items()},
                                 client=client, overrides=dict(overrides or {}))
            if (client.secured or network_bps is not None) and not self.layout.internal_ports:  # not before
                self.layout = replace(self.layout, internal_ports=dict(zip(self.layout.brokers,
                                                                           free_ports(len(self.layout.brokers)))))
            if network_bps is not None:  # the links' ports of an earlier start, or new ones
                saved_links = {int(b): int(p) for b, p in saved.get("link_ports", {}).items()}
                self.layout = replace(self.layout, link_ports=saved_links or dict(
                    zip(self.layout.brokers, free_ports(len(self.layout.brokers)))))
        else:
            self.cluster_id = new_cluster_id()
            self.layout = self._new_layout(rack_names(brokers, racks), log_dirs, port_base, client, overrides or {},
                                           links=network_bps is not None)
        self._links: ReplicationLinks | None = None
        self._agent = jmx_exporter_jar() if metrics_port is not None else None
        brokers_now = self.layout.brokers
        self._receiver = client_telemetry_jar() if metrics_port is not None else None
        n = len(brokers_now)
        ports = ([] if metrics_port is None else [metrics_port + i for i in range(2 * n)] if metrics_port else
                 free_ports(2 * n))
        self._metrics_ports: dict[int, int] = dict(zip(brokers_now, ports[:n]))
        self._telemetry_ports: dict[int, int] = dict(zip(brokers_now, ports[n:]))
        self.topics: dict[str, dict[int, PartitionLoad]] = {}
        self._nodes: dict[int, _Node] = {}
        self._writer: Writer | None = None
        self._started = False

    # ---- layout and files ----------------------------------------------------------------------
    def _saved(self) -> dict[str, Any] | None:
        path = self.state_dir / STATE_FILE
        if not path.is_file():
            return None
        try:
            saved: dict[str, Any] = json.loads(path.read_text())
            return saved
        except ValueError as exc:
            raise InputError(f"{path} is damaged ({exc}); start with --fresh to start over") from None

    @staticmethod
    def _new_layout(racks: dict[int, str | None], log_dirs: int, port_base: int, client: Listener,
                    overrides: Mapping[str, str], *, links: bool) -> Layout:
        """Ports from port_base on: the client listeners, the controller, the internal listeners
        (secured or with links), the links."""
        n = len(racks)
        wanted = n + 1 + (n if client.secured or links else 0) + (n if links else 0)
        ports = [port_base + i for i in range(wanted)] if port_base else free_ports(wanted)
        brokers = sorted(racks)
        internal = ports[n + 1:2 * n + 1] if client.secured or links else []
        return Layout(racks=racks, ports=dict(zip(brokers, ports[:n])), controller_port=ports[n],
                      data_dir=Path(), log_dirs=log_dirs, internal_ports=dict(zip(brokers, internal)),
                      link_ports=dict(zip(brokers, ports[2 * n + 1:])) if links else {},
                      client=client, overrides=dict(overrides))

    def _write_files(self) -> None:
        self.layout = replace(self.layout, data_dir=self.state_dir / "data")
        config = self.state_dir / "config"
        config.mkdir(parents=True, exist_ok=True)
        if self.settings.tls:
            assert self.settings.tls_dir is not None
            write_private(config / KEYSTORE_FILE, keystore_pem(self.settings.tls_dir))
        for node in [CONTROLLER_ID, *self.layout.brokers]:
            name = "controller" if node == CONTROLLER_ID else f"broker-{node}"
            props = config / f"{name}.properties"
            receiver = self._receiver is not None and node in self._telemetry_ports
            # JmxReporter stays listed: Kafka 4 no longer adds it itself (KIP-830), and without it the
            # JMX exporter loses every Kafka-metrics sensor (the replication quotas' byte-rate)
            extra = (f"metric.reporters={JMX_REPORTER},{CLIENT_TELEMETRY_CLASS}\n"
                     f"{CLIENT_TELEMETRY_PORT}={self._telemetry_ports[node]}\n" if receiver else "")
            write_private(props, properties(self.layout, node) + extra)  # may hold SASL passwords
            logs = self.state_dir / "logs" / name
            logs.mkdir(parents=True, exist_ok=True)
            log_config = config / (f"{name}.log4j2.properties" if self.dist.log4j2 else f"{name}.log4j.properties")
            render = log4j2_properties if self.dist.log4j2 else log4j1_properties
            log_config.write_text(render(logs / "server.log"))
            heap = CONTROLLER_HEAP if node == CONTROLLER_ID else self.heap
            agent = ([f"-javaagent:{self._agent}={LOOPBACK}:{self._metrics_ports[node]}:{JMX_EXPORTER_RULES}"]
                     if self._agent is not None and node in self._metrics_ports else [])
            argv = [self.java, *jvm_flags(heap=heap, log_config=log_config, log4j2=self.dist.log4j2, logs_dir=logs),
                    *agent, "-cp", self.dist.classpath + (f"{os.pathsep}{self._receiver}" if receiver else ""),
                    "kafka.Kafka", str(props)]
            self._nodes[node] = _Node(node, argv, logs / "stdout.log")

    def _record(self) -> None:
        state = {"version": self.dist.version, "cluster_id": self.cluster_id,
                 "racks": {str(b): r for b, r in self.layout.racks.items()},
                 "ports": {str(b): p for b, p in self.layout.ports.items()},
                 "internal_ports": {str(b): p for b, p in self.layout.internal_ports.items()},
                 "link_ports": {str(b): p for b, p in self.layout.link_ports.items()},
                 "controller_port": self.layout.controller_port, "log_dirs": self.layout.log_dirs,
                 "topics": sorted(self.topics), "logins": sorted(login.name for login in self.logins)}
        write_private(self.state_dir / STATE_FILE, json.dumps(state, indent=1))

    def _format(self) -> None:
        """StorageTool format of every node, in parallel (each is a JVM start)."""
        for node in self._nodes.values():
            for d in self.layout.log_dir_paths(node.node_id):
                if d.exists():
                    shutil.rmtree(d)
        config = self.state_dir / "config"
        running = []
        for node in self._nodes.values():
            name = "controller" if node.node_id == CONTROLLER_ID else f"broker-{node.node_id}"
            argv = format_command(self.dist.classpath, self.java, self.cluster_id, config / f"{name}.properties")
            running.append((node, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True)))
        for node, proc in running:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                lines = [l for l in out.splitlines() if l.strip()]
                raise InputError(f"Kafka's StorageTool could not format node {node.node_id}: "
                                 f"{lines[-1] if lines else 'no output'}")

    # ---- life cycle ----------------------------------------------------------------------------
    def start(self) -> KafkaCluster:
        """Format (a new cluster), start the controller then the brokers, wait until every broker
        has registered, create and fill the topics (a new cluster) and start their writer.

        Raises:
            InputError: a port is taken, or a node failed to start (with its log's last lines).
            ClusterUnreachable: the brokers did not all register within start_timeout_s.
        """
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self._check_ports()
        self._write_files()
        if self.fresh:
            self._format()
        self._started = True
        self._start_links()
        self._spawn(CONTROLLER_ID)
        for b in self.layout.brokers:
            self._spawn(b)
        self.wait_ready(self.layout.brokers)
        if self.settings.sasl or self._previous_logins:
            apply_logins([self.internal_port(b) for b in self.brokers], self.logins, self._previous_logins,
                         acls=self.layout.client.authorizer, timeout_s=self.start_timeout_s)
        if self.fresh:
            self.topics = plan_topics(self.topic_specs, self.layout.racks, self.seed)
            with self.admin() as port:
                create_topics(port, self.topics)
            fill(self.internal_bootstrap, self.sizes())
        else:
            self.topics = {}
        self._record()
        rates = {TopicPartition(t, p): load.produce_bps for t, parts in self.topics.items() for p, load in parts.items()}
        self._writer = Writer(self.internal_bootstrap, rates).start()

    def _start_links(self) -> None:
        """The replication links (`--network`), before any broker advertises them."""
        if self.network_bps is None:
            return
        try:
            self._links = ReplicationLinks(self.layout.internal_ports, self.layout.link_ports, self.network_bps).start()
        except OSError as exc:  # taken since _check_ports looked
            raise PortTaken(f"a replication link could not listen on 127.0.0.1 ({exc.strerror}): start again "
                            "with --fresh (new free ports) or another --port-base") from None

    def _check_ports(self) -> None:
        taken = [p for p in [*self.layout.ports.values(), *self.layout.internal_ports.values(),
                             *self.layout.link_ports.values(), *self._metrics_ports.values(),
                             *self._telemetry_ports.values(), self.layout.controller_port] if port_in_use(p)]
        if taken:
            raise InputError(f"port{'s' if len(taken) > 1 else ''} {', '.join(map(str, taken))} on 127.0.0.1 "
                             f"{'are' if len(taken) > 1 else 'is'} in use: stop what listens there, or start with "
                             "--fresh (new free ports) or another --port-base")

    def _spawn(self, node_id: int) -> None:
        node = self._nodes[node_id]
        node.proc = jvm.spawn(node.argv, log=node.log, cwd=self.state_dir)

    def wait_ready(self, brokers: Iterable[int], *, timeout_s: float | None = None) -> None:
        """Wait until `brokers` are registered and unfenced (in the metadata a client sees).

        Raises:
            InputError: a node exited (its log's last lines say why).
            ClusterUnreachable: not all registered in time.
        """
        wanted = set(brokers)
        deadline = time.monotonic() + (timeout_s or self.start_timeout_s)
        seen: set[int] = set()
        while time.monotonic() < deadline:
            self._check_alive()
            seen = self._registered()
            if wanted <= seen:
                return
            time.sleep(0.25)
        raise ClusterUnreachable(f"Kafka brokers {sorted(wanted - seen)} did not register within "
                                 f"{timeout_s or self.start_timeout_s:.0f}s; see the logs under {self.state_dir / 'logs'} "
                                 "(a busy machine starts JVMs slowly: give more time with --start-timeout)")

    def _registered(self) -> set[int]:
        """Broker ids in the metadata of the first broker that answers (empty if none does)."""
        from kafka.protocol.metadata import MetadataRequest

        from kreassign.sandbox.rawclient import roundtrip

        for b in self.layout.brokers:
            node = self._nodes[b]
            if node.proc is None or node.proc.poll() is not None:
                continue
            try:
                response = roundtrip(self.internal_port(b), MetadataRequest(topics=[], allow_auto_topic_creation=False), 4)
            except (OSError, ValueError, EOFError):
                continue
            return {int(broker.node_id) for broker in response.brokers}
        return set()

    def _check_alive(self) -> None:
        for node in self._nodes.values():
            if node.proc is not None and node.proc.poll() is not None:
                who = "the controller" if node.node_id == CONTROLLER_ID else f"broker {node.node_id}"
                lines = self._log_tail(node)
                taken = next((line for line in lines if "Address already in use" in line), None)
                if taken is not None:
                    raise PortTaken(f"{who} exited during start-up (code {node.proc.returncode}): a port is in use "
                                    f"({taken.strip()[-160:]}); see {node.log.parent}")
                raise InputError(f"{who} exited during start-up (code {node.proc.returncode}): {self._why(node, lines)}")

    @staticmethod
    def _log_tail(node: _Node) -> list[str]:
        lines: list[str] = []
        for path in (node.log, node.log.with_name("server.log")):
            with contextlib.suppress(OSError):
                lines += path.read_text(errors="replace").splitlines()[-200:]
        return lines

    @staticmethod
    def _why(node: _Node, lines: list[str]) -> str:
        """The most telling line of a node's logs."""
        errors = [l for l in lines if not l.lstrip().startswith("at ") and (
            " ERROR " in l or "Exception" in l or "Error:" in l)]
        fatal = [l for l in errors if "Exception" in l and ":" in l]
        last = (fatal or errors or lines or ["no output"])[-1].strip()
        return f"{last[:300]}; see {node.log.parent}"

    def stop(self) -> None:
        """Stop the writer, then the brokers (controlled shutdown), then the controller."""
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        brokers = [n.proc for i, n in self._nodes.items() if i != CONTROLLER_ID and n.proc is not None]
        jvm.end(brokers, grace_s=30.0)
        controller = self._nodes.get(CONTROLLER_ID)
        if controller is not None and controller.proc is not None:
            jvm.end([controller.proc], grace_s=15.0)
        if self._links is not None:
            self._links.stop()
            self._links = None
        self._started = False
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> KafkaCluster:
        return self.start() if not self._started else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- steering ------------------------------------------------------------------------------
    def stop_broker(self, broker: int, *, kill: bool = False) -> None:
        """Stop one broker: a controlled shutdown (SIGTERM), or kill -9 with `kill`."""
        node = self._broker(broker)
        if node.proc is None or node.proc.poll() is not None:
            return
        if kill:
            jvm.signal_process(node.proc, signal.SIGKILL)
            node.proc.wait()
        else:
            jvm.end([node.proc], grace_s=60.0)

    def start_broker(self, broker: int, *, wait: bool = True) -> None:
        """Start a stopped broker again, on its ports and data."""
        node = self._broker(broker)
        if node.proc is not None and node.proc.poll() is None:
            return
        self._spawn(broker)
        if wait:
            self.wait_ready([broker])

    def pause_broker(self, broker: int) -> None:
        """SIGSTOP: the broker holds its connections but answers nothing (a hung JVM)."""
        node = self._broker(broker)
        if node.proc is not None:
            jvm.signal_process(node.proc, signal.SIGSTOP)

    def resume_broker(self, broker: int) -> None:
        node = self._broker(broker)
        if node.proc is not None:
            jvm.signal_process(node.proc, signal.SIGCONT)

    def pause_controller(self) -> None:
        """SIGSTOP the KRaft controller: brokers still answer what they know (metadata, configs),
        and every request they forward to it (reassignments, config changes) waits. Resume it
        within broker.session.timeout.ms (9 s), or it fences the brokers whose heartbeats it missed."""
        node = self._nodes[CONTROLLER_ID]
        if node.proc is not None:
            jvm.signal_process(node.proc, signal.SIGSTOP)

    def resume_controller(self) -> None:
        node = self._nodes[CONTROLLER_ID]
        if node.proc is not None:
            jvm.signal_process(node.proc, signal.SIGCONT)

    def _broker(self, broker: int) -> _Node:
        if broker not in self.layout.racks:
            raise InputError(f"broker {broker} is not in this cluster (brokers {self.layout.brokers})")
        return self._nodes[broker]

    # ---- what clients need ---------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return self.layout.bootstrap

    @property
    def brokers(self) -> list[int]:
        return self.layout.brokers

    @property
    def ports(self) -> dict[int, int]:
        return dict(self.layout.ports)

    @property
    def metrics_ports(self) -> dict[int, int]:
        """Each broker's Prometheus port (the JMX exporter's agent; empty without metrics_port)."""
        return dict(self._metrics_ports)

    @property
    def telemetry_ports(self) -> dict[int, int]:
        """Each broker's KIP-714 client-telemetry /metrics port (empty without metrics_port)."""
        return dict(self._telemetry_ports)

    @property
    def security(self) -> Security:
        """The client listener's security, as the emulator reports its own."""
        return self.settings

    def internal_port(self, broker: int) -> int:
        """The PLAINTEXT port of a broker (its client port unless the client listener is secured)."""
        return self.layout.internal_ports[broker] if self.layout.client.secured else self.layout.ports[broker]

    @property
    def links(self) -> ReplicationLinks | None:
        """The brokers' replication links (None: they replicate over loopback)."""
        return self._links

    @property
    def internal_bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{self.internal_port(b)}" for b in self.brokers)

    def sizes(self) -> dict[TopicPartition, int]:
        return {TopicPartition(t, p): load.size_bytes for t, parts in self.topics.items() for p, load in parts.items()}

    def pids(self) -> dict[int, int]:
        """node id -> pid of its JVM, for the nodes that run."""
        return {i: n.proc.pid for i, n in self._nodes.items() if n.proc is not None and n.proc.poll() is None}

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        """The cluster port over the brokers' PLAINTEXT listener."""
        from kreassign.cluster.admin import open_admin

        with open_admin(self.internal_bootstrap, timeout_s=30.0) as port:
            yield port

    def summary(self) -> dict[str, Any]:
        return {"engine": "kafka", "version": self.dist.version, "brokers": len(self.brokers),
                "topics": len(self.topics), "partitions": sum(len(p) for p in self.topics.values()),
                "controller": f"{LOOPBACK}:{self.layout.controller_port}",
                **({"network_bps": self.network_bps} if self.network_bps is not None else {})}
