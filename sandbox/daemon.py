"""Running the sandbox as a background process: options file, pid/ports file, start, stop, status.

`start_daemon` writes `options.json` into the state dir and launches
`python -m kreassign.sandbox.daemon STATE_DIR`, which starts the cluster, writes `sandbox.json`
(pid, ports, bootstrap) once every listener is up, and removes it again on a clean stop.

Two engines: the `emulator` (this package's own Kafka-protocol cluster, in accelerated time) and
`kafka` (real Apache Kafka brokers, `kafka_engine`), whose JVMs are the daemon's children and end
with it, even when the daemon is killed.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kreassign.cluster.errors import InputError, KreassignError
from kreassign.sandbox.client_quotas import parse_default_quota
from kreassign.sandbox.engine import DEFAULT_NETWORK_BPS
from kreassign.sandbox.fetch import FetchConfig
from kreassign.sandbox.private_files import PRIVATE, write_private
from kreassign.sandbox.security import Security
from kreassign.sandbox.topics import parse_topic_spec
from kreassign.cluster.processes import default_state_dir as shared_state_dir
from kreassign.cluster.processes import pid_alive

ENGINES = ("emulator", "kafka")
PID_FILE = "sandbox.json"
LOG_FILE = "sandbox.log"
OPTIONS_FILE = "options.json"


def default_state_dir() -> Path:
    return shared_state_dir("sandbox")


@dataclass(frozen=True)
class SandboxOptions:
    """Everything `kreassign sandbox start` accepts, in a form that survives a JSON round trip."""

    brokers: int = 6
    racks: int = 3
    topics: tuple[str, ...] | None = None
    speed: float = 60.0
    seed: int = 0
    port_base: int = 0
    network_bps: float | None = DEFAULT_NETWORK_BPS
    """each broker's network (emulator) or replication link (kafka; None: loopback)"""
    describe_cluster_v0_only: bool = False
    fresh: bool = False
    fetch_max_bytes: int = FetchConfig.partition_max_bytes
    fetch_response_max_bytes: int = FetchConfig.response_max_bytes
    num_replica_fetchers: int = FetchConfig.num_fetchers
    fetch_round_s: float = FetchConfig.round_s
    log_dirs: int = 1
    client_quotas: tuple[str, ...] = ()
    metrics_port: int | None = None  # Prometheus endpoints (and the emulator's KIP-714 receiver) when set
    security: dict[str, Any] | None = None
    """`Security.to_json()`: protocol, mechanism, stored credentials (no passwords), TLS dir."""
    engine: str = "emulator"
    kafka_home: str | None = None
    kafka_version: str | None = None
    """engine kafka: the fetched release to run; emulator: the release to imitate (kafka_profiles)"""
    heap: str = "512m"
    """each real broker's heap (engine kafka)"""
    start_timeout_s: float = 120.0
    """how long the kafka engine waits for its brokers to register"""
    logins: tuple[dict[str, Any], ...] = ()
    """the kafka engine's SASL logins (`KafkaLogin.to_json()`): what a real broker needs, PLAIN's
    passwords (Kafka keeps them in its JAAS config) or SCRAM's salted passwords; this file is 0600"""

    @property
    def fetch(self) -> FetchConfig:
        """The follower fetch limits (Kafka's replica.fetch.* configs), checked.

        Raises:
            InputError: a size or thread count below 1, or a negative fetch round.
        """
        try:
            return FetchConfig(self.fetch_max_bytes, self.fetch_response_max_bytes, self.num_replica_fetchers,
                               self.fetch_round_s)
        except ValueError as exc:
            raise InputError(f"{exc}: check the fetch options of the sandbox") from exc

    def build(self, state_dir: Path | None) -> Any:
        """The cluster this options file describes (not started): a `SandboxCluster`, or a
        `KafkaCluster` for the kafka engine."""
        specs = None if self.topics is None else [parse_topic_spec(t) for t in self.topics]
        if self.engine == "kafka":
            from kreassign.sandbox.kafka_engine.cluster import KafkaCluster
            from kreassign.sandbox.kafka_engine.dist import locate

            from kreassign.sandbox.kafka_engine.secured import KafkaLogin

            return KafkaCluster(locate(self.kafka_home, self.kafka_version), brokers=self.brokers, racks=self.racks,
                                log_dirs=self.log_dirs, topics=specs, state_dir=state_dir, fresh=self.fresh,
                                port_base=self.port_base, heap=self.heap, seed=self.seed,
                                overrides=self.kafka_overrides, security=Security.from_json(self.security),
                                start_timeout_s=self.start_timeout_s,
                                logins=[KafkaLogin.from_json(d) for d in self.logins], metrics_port=self.metrics_port,
                                network_bps=self.network_bps)
        from kreassign.sandbox.cluster import SandboxCluster

        return SandboxCluster(self.brokers, self.racks, specs, speed=self.speed, seed=self.seed,
                              port_base=self.port_base, state_dir=state_dir,
                              network_bps=DEFAULT_NETWORK_BPS if self.network_bps is None else self.network_bps,
                              describe_cluster_v0_only=self.describe_cluster_v0_only, fresh=self.fresh,
                              fetch=self.fetch, log_dirs=self.log_dirs,
                              default_client_quotas=self.default_client_quotas,
                              telemetry=self.metrics_port is not None, metrics_port=self.metrics_port,
                              security=Security.from_json(self.security), kafka_version=self.kafka_version)

    @property
    def kafka_overrides(self) -> dict[str, str]:
        """The emulator's fetch options as the real broker configs they stand for."""
        fetch = self.fetch
        return {"replica.fetch.max.bytes": str(fetch.partition_max_bytes),
                "replica.fetch.response.max.bytes": str(fetch.response_max_bytes),
                "num.replica.fetchers": str(fetch.num_fetchers)}

    @property
    def default_client_quotas(self) -> dict[str, float]:
        """`--client-quota KEY=RATE` as the `<default>` client-id quotas, checked.

        Raises:
            InputError: not KEY=RATE with a known key and a rate.
        """
        return {key: float(rate) for key, rate in map(parse_default_quota, self.client_quotas)}


@dataclass(frozen=True)
class DaemonInfo:
    """What `sandbox.json` records about a running sandbox."""

    pid: int
    bootstrap: str
    ports: dict[int, int]
    state_dir: str
    speed: float
    started_at: str
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    engine: str = "emulator"

    @classmethod
    def read(cls, path: Path) -> DaemonInfo:
        d = json.loads(path.read_text())
        return cls(int(d["pid"]), d["bootstrap"], {int(k): int(v) for k, v in d["ports"].items()}, d["state_dir"],
                   float(d["speed"]), d["started_at"], d.get("log", ""), d.get("extra", {}),
                   d.get("engine", "emulator"))

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        write_private(tmp, json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)


def metrics_extra(cluster: Any) -> dict[str, Any]:
    """What `sandbox.json` and `status` show about the Prometheus endpoints: `metrics` (the
    emulator's, with its KIP-714 receiver; a real broker's JMX exporter) and, on real brokers,
    `client_telemetry` (kreassign's KIP-714 receiver, an endpoint of its own)."""
    out: dict[str, Any] = {}
    for key, ports in (("metrics", cluster.metrics_ports), ("client_telemetry", getattr(cluster, "telemetry_ports", {}))):
        if ports:
            out[key] = {str(b): f"http://127.0.0.1:{p}/metrics" for b, p in sorted(ports.items())}
    return out


def kafka_extra(cluster: Any) -> dict[str, Any]:
    """What `sandbox.json` and `status` show about a real Kafka cluster."""
    summary = cluster.summary()
    if summary.get("engine") != "kafka":
        return {"kafka_version": summary["kafka_version"]}
    return {"kafka_version": summary["version"], "controller": summary["controller"],
            "kafka_jars": str(cluster.dist.libs), "pids": {str(k): v for k, v in cluster.pids().items()},
            **({"network_bps": summary["network_bps"]} if "network_bps" in summary else {})}


STATUS_EVERY_S = 2.0
"""how often a running emulator rewrites its clock's lag into sandbox.json (`sandbox status`)"""


def clock_extra(cluster: Any) -> dict[str, Any]:
    """What `sandbox.json` and `status` show about the emulator's clock (`ClockKeeper.status`)."""
    status = getattr(cluster, "clock_status", lambda: None)()
    return {"clock": status} if status is not None else {}


def serve(cluster: Any, stop: threading.Event, on_ready: Callable[[Any], None],
          on_beat: Callable[[Any], None] | None = None) -> None:
    """Start the cluster, call `on_ready`, then `on_beat` every STATUS_EVERY_S until `stop` is
    set (or Ctrl-C), then stop cleanly."""
    cluster.start()
    try:
        on_ready(cluster)
        while not stop.wait(STATUS_EVERY_S):
            if on_beat is not None:
                on_beat(cluster)
    finally:
        cluster.stop()


def read_status(state_dir: Path) -> DaemonInfo | None:
    """The running sandbox for this state dir, or None (a stale pid file is removed)."""
    path = state_dir / PID_FILE
    try:
        info = DaemonInfo.read(path)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError) as exc:
        raise InputError(f"{path} is damaged ({exc}); delete it if no sandbox is running") from exc
    if not pid_alive(info.pid):
        path.unlink(missing_ok=True)
        return None
    return info


def refuse_if_running(state_dir: Path) -> None:
    """Raises InputError when a sandbox already runs from `state_dir` (its files must stay)."""
    running = read_status(state_dir)
    if running is not None:
        raise InputError(f"a sandbox is already running from {state_dir} (pid {running.pid}, bootstrap "
                         f"{running.bootstrap}); stop it with: kreassign sandbox stop --state-dir {state_dir}")


def start_daemon(options: SandboxOptions, state_dir: Path, *, timeout: float | None = None) -> DaemonInfo:
    """Launch the sandbox in the background and wait until it listens.

    Raises:
        InputError: a sandbox already runs from this state dir, or the child failed to start.
    """
    refuse_if_running(state_dir)
    if timeout is None:  # real brokers format, start and fill their topics: a minute on 2 cores
        timeout = options.start_timeout_s + 60.0 if options.engine == "kafka" else 30.0
    state_dir.mkdir(parents=True, exist_ok=True)
    write_private(state_dir / OPTIONS_FILE, json.dumps(asdict(options)))
    log_path = state_dir / LOG_FILE
    with open(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE), "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kreassign.sandbox.daemon", str(state_dir)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InputError(f"the sandbox exited during start-up (code {proc.returncode}):\n"
                             f"{_tail(log_path)}\nfull log: {log_path}")
        try:
            info = DaemonInfo.read(state_dir / PID_FILE)
        except (FileNotFoundError, ValueError, KeyError):
            info = None
        if info is not None and info.pid == proc.pid:
            return info
        time.sleep(0.05)
    proc.terminate()
    raise InputError(f"the sandbox did not start within {timeout:.0f}s; see {log_path}")


def stop_daemon(state_dir: Path, *, timeout: float | None = None) -> DaemonInfo | None:
    """Stop the sandbox running from this state dir (SIGTERM, then SIGKILL); None if none runs.
    Real brokers get a minute for their controlled shutdown (a killed daemon takes its JVMs
    with it, but without one)."""
    info = read_status(state_dir)
    if info is None:
        return None
    if timeout is None:
        timeout = 60.0 if info.engine == "kafka" else 15.0
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(info.pid):
        if time.monotonic() > deadline:
            os.kill(info.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    (state_dir / PID_FILE).unlink(missing_ok=True)
    return info


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    """Child process entry point: `python -m kreassign.sandbox.daemon STATE_DIR`."""
    state_dir = Path(argv[0])
    raw = json.loads((state_dir / OPTIONS_FILE).read_text())
    raw["topics"] = tuple(raw["topics"]) if raw.get("topics") is not None else None
    raw["client_quotas"] = tuple(raw.get("client_quotas", ()))
    raw["logins"] = tuple(raw.get("logins", ()))
    options = SandboxOptions(**raw)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())

    written: list[DaemonInfo] = []

    def ready(cluster: Any) -> None:
        security = cluster.security
        extra = {} if security.protocol == "PLAINTEXT" else {"security_protocol": security.protocol,
                                                             "sasl_mechanism": security.mechanism}
        speed = 1.0 if options.engine == "kafka" else options.speed
        info = DaemonInfo(os.getpid(), cluster.bootstrap, cluster.ports, str(state_dir), speed,
                          dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                          str(state_dir / LOG_FILE), {**extra, **metrics_extra(cluster), **kafka_extra(cluster)},
                          options.engine)
        info.write(state_dir / PID_FILE)
        written.append(info)
        print(f"sandbox ready: {cluster.bootstrap}", flush=True)

    def beat(cluster: Any) -> None:
        clock = clock_extra(cluster)
        if written and clock:
            written[0].extra.update(clock)
            written[0].write(state_dir / PID_FILE)

    try:
        serve(options.build(state_dir), stop, ready, beat)
    except KreassignError as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        info_path = state_dir / PID_FILE
        try:
            if DaemonInfo.read(info_path).pid == os.getpid():
                info_path.unlink()
        except (FileNotFoundError, ValueError, KeyError):
            pass
    print("sandbox stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
