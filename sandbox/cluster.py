"""`SandboxCluster`: the Python API that starts, steers and stops a sandbox cluster.

    with SandboxCluster(brokers=6, racks=3, clock=ManualClock(), seed=1) as sb:
        admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap)
        ...
        sb.advance(30)             # 30 sandbox seconds, in fixed ticks
        sb.stop_broker(3)          # listener closes, replicas leave the ISR
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kreassign.cluster.errors import InputError
from kreassign.sandbox.client_quota_hook import ClientQuotaHook
from kreassign.sandbox.client_state import ClientState
from kreassign.sandbox.clock import Clock, ManualClock, ScaledClock
from kreassign.sandbox.dataplane import DataPlane
from kreassign.sandbox.engine import DEFAULT_NETWORK_BPS, Engine
from kreassign.sandbox.faults import Faults, Rule, api_key
from kreassign.sandbox.fetch import FetchConfig
from kreassign.sandbox.kafka_profiles import profile
from kreassign.sandbox.private_files import write_private
from kreassign.sandbox.prometheus import MetricsEndpoints, Sources
from kreassign.sandbox.security import Security
from kreassign.sandbox.server import SandboxServer
from kreassign.sandbox.telemetry import TelemetryReceiver
from kreassign.sandbox.timings import RequestTimings
from kreassign.sandbox.topics import DEFAULT_TOPICS, TopicSpec, check_shape, rack_names, spec_names_unique
from kreassign.sandbox.wire import advertised_versions

STATE_FILE = "state.json"
LOGS_DIR = "logs"


class SandboxCluster:
    """A local multi-broker cluster speaking the Kafka protocol, with an accelerated replication model.

    Args:
        brokers: number of brokers (ids 1..N).
        racks: number of racks (0 = no rack information).
        topics: topics to create at start-up; None gives the demo default set.
        speed: sandbox seconds per wall second when no clock is given.
        clock: a `ManualClock` for tests (time moves only through `advance`), or a `ScaledClock`.
        seed: seed for sizes, rates, assignments and ids.
        port_base: first port (broker i listens on port_base + i - 1); 0 = any free ports.
        state_dir: where the state is saved (and restored from on start).
        network_bps: per-broker network capacity that bounds unthrottled copying.
        tick: the fixed step of simulated time, in sandbox seconds.
        describe_cluster_v0_only: advertise only DescribeCluster v0, as Kafka 2.8-3.6 did.
        fetch: follower fetch limits (default: Kafka's; a saved state keeps its own unless given).
        security: TLS and SASL for every listener (default: plaintext, no authentication).
        client_quotas: the KIP-13 quota manager Produce and Fetch consult (default: the sandbox's own,
            which AlterClientQuotas configures).
        log_dirs: log dirs per broker (a saved state keeps its own).
        default_client_quotas: `<default>` client-id quotas set at start, e.g. {"producer_byte_rate": 1e6}.
        telemetry: run the KIP-714 telemetry receiver (`self.telemetry`) and advertise APIs 71 and 72.
        metrics_port: serve each broker's Prometheus `/metrics` (`prometheus.py`) on 127.0.0.1,
            broker i on metrics_port + i - 1 (0: free ports; None: no endpoints).
        kafka_version: the Apache Kafka release to imitate (`kafka_profiles`: its ApiVersions and
            the controller and config rules that changed between releases); None: the newest.

    Consumer groups and client quota configs are saved next to the state (groups.json,
    client_quotas.json) and restored with it.

    Records that clients produce live in segment files under `<state_dir>/logs` (a temporary
    directory, removed on stop, without a state dir).

    Every broker reports the time scale (sandbox seconds per wall second: the speed of a scaled
    clock, 1 with a manual one) as the read-only config `kreassign.sandbox.time.scale`.
    """

    def __init__(self, brokers: int = 6, racks: int = 3, topics: Sequence[TopicSpec] | None = None, *,
                 speed: float = 60.0, clock: Clock | None = None, seed: int = 0, port_base: int = 0,
                 state_dir: str | os.PathLike[str] | None = None, network_bps: float = DEFAULT_NETWORK_BPS,
                 tick: float = 0.1, describe_cluster_v0_only: bool = False,
                 fresh: bool = False, fetch: FetchConfig | None = None,
                 client_quotas: ClientQuotaHook | None = None, log_dirs: int = 1,
                 default_client_quotas: Mapping[str, float] | None = None, telemetry: bool = False,
                 metrics_port: int | None = None, security: Security | None = None,
                 kafka_version: str | None = None) -> None:
        check_shape(brokers, racks, log_dirs)
        if port_base and not 1024 <= port_base <= 65535 - brokers:
            raise InputError(f"--port-base {port_base} leaves no room for {brokers} brokers below 65536")
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.clock: Clock = clock if clock is not None else ScaledClock(speed)
        self.lock = threading.RLock()
        self.faults = Faults()
        self.kafka = profile(kafka_version)
        self.ranges = advertised_versions(self.kafka, describe_cluster_v0_only=describe_cluster_v0_only,
                                          telemetry=telemetry)
        saved = self.state_path if self.state_path is not None and self.state_path.exists() and not fresh else None
        if saved is not None:
            self.engine = _load(saved)
            self.engine.imitate(self.kafka)
        else:
            specs = list(DEFAULT_TOPICS if topics is None else topics)
            spec_names_unique(specs)
            for s in specs:
                if s.replication_factor > brokers:
                    raise InputError(f"topic {s.name} wants {s.replication_factor} replicas but the sandbox has "
                                     f"only {brokers} brokers")
            self.engine = Engine(rack_names(brokers, racks), seed=seed, tick=tick, network_bps=network_bps,
                                 log_dirs_per_broker=log_dirs, fetch=fetch, kafka=self.kafka)
            self.engine.add_topics(specs)
        if fetch is not None:
            self.engine.set_fetch(fetch)
        self.engine.time_scale = self.clock.speed if isinstance(self.clock, ScaledClock) else 1.0
        self.clock.reset(self.engine.now)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if self.state_dir is not None:
            logs = self.state_dir / LOGS_DIR
            if saved is None and logs.exists():
                shutil.rmtree(logs)  # a fresh state must not resurrect old records
        else:
            self._scratch = tempfile.TemporaryDirectory(prefix="kreassign-sandbox-")
            logs = Path(self._scratch.name)
        self.data = DataPlane(self.engine, logs)
        self.clients = ClientState.load(self.state_dir if saved is not None else None, self.engine.now,
                                        default_client_quotas)
        self.telemetry = TelemetryReceiver(self.engine.client_metrics) if telemetry else None
        ports = {b: (port_base + i if port_base else 0) for i, b in enumerate(self.engine.brokers)}
        self.security = security or Security()
        self.server = SandboxServer(self.engine, self.lock, clock=self.clock, faults=self.faults, ranges=self.ranges,
                                    ports=ports, on_save=self.save if self.state_dir is not None else None,
                                    data=self.data, quotas=client_quotas,
                                    broker_quotas=None if client_quotas is not None else self.clients.quotas.for_broker,
                                    groups=self.clients.groups, quota_configs=self.clients.quotas.configs,
                                    telemetry=self.telemetry, security=self.security)
        self.metrics = None if metrics_port is None else MetricsEndpoints(
            Sources(self.lock, self.engine, self.server.timings,
                    None if client_quotas is not None else self.clients.quotas, self.telemetry),
            list(self.engine.brokers), metrics_port)
        self._running = False

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> SandboxCluster:
        """Open every live broker's listener and start the ticker; returns self."""
        if not self._running:
            try:
                self.server.start()
            except OSError as exc:
                raise InputError(f"cannot listen on 127.0.0.1 ({exc.strerror}); pick another --port-base "
                                 "or leave it at 0 for free ports") from exc
            if self.metrics is not None:
                try:
                    self.metrics.start()
                except OSError as exc:
                    self.server.stop()
                    raise InputError(f"cannot serve metrics on 127.0.0.1 ({exc.strerror}); pick another "
                                     "--metrics-port or 0 for free ports") from exc
            self._running = True
        return self

    def stop(self) -> None:
        """Close every listener, stop the ticker and save the state (with a state dir)."""
        if self._running:
            if self.metrics is not None:
                self.metrics.stop()
            self.server.stop()
            self._running = False
            if self.state_dir is not None:
                self.save()
        with self.lock:
            self.data.close()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> SandboxCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def ports(self) -> dict[int, int]:
        return self.server.ports

    @property
    def metrics_ports(self) -> dict[int, int]:
        """Each broker's Prometheus port (empty without --metrics-port)."""
        return self.metrics.ports if self.metrics is not None else {}

    @property
    def timings(self) -> RequestTimings:
        """Per-request queue/local/remote/throttle times the brokers recorded (`timings.py`)."""
        return self.server.timings

    @property
    def bootstrap(self) -> str:
        """`127.0.0.1:p1,127.0.0.1:p2,...` for the live brokers."""
        with self.lock:
            alive = [b for b, s in self.engine.brokers.items() if s.alive]
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in alive)

    @property
    def state_path(self) -> Path | None:
        return self.state_dir / STATE_FILE if self.state_dir is not None else None

    # ---- time -------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Move sandbox time forward by `seconds` (deterministic with a ManualClock)."""
        self.clock.advance(seconds)
        with self.lock:
            self.engine.run_until(self.clock.now() if isinstance(self.clock, ManualClock)
                                  else self.engine.now + seconds)
            self.data.tick(self.engine.now)
        self.server.notify()

    def catch_up(self) -> None:
        """Run the engine up to the clock's time now, as the ticker would on its next beat (tests
        that drive a `ScaledClock` from an injected monotonic clock call this after moving it)."""
        with self.lock:
            self.engine.run_until(self.clock.now())
            self.data.tick(self.engine.now)
        self.server.notify()

    @property
    def now(self) -> float:
        with self.lock:
            return self.engine.now

    def clock_status(self) -> dict[str, Any] | None:
        """How well a scaled clock keeps its speed (`ClockKeeper.status`: the speed asked, the
        speed kept over the last seconds, the sandbox seconds given up to the engine's lag); None
        on a manual clock."""
        keeper = self.server.keeper
        return keeper.status() if keeper is not None else None

    @contextlib.contextmanager
    def locked(self) -> Iterator[Engine]:
        """The engine, with the lock held: read or change state without racing the server."""
        with self.lock:
            yield self.engine

    # ---- faults -------------------------------------------------------------------------------
    def stop_broker(self, broker_id: int, *, kill: bool = False) -> None:
        """Stop a broker: its listener and connections close, it leaves metadata and every ISR
        (a controlled shutdown). With `kill` its process dies instead (kill -9): it stays in
        metadata, a leader and in its ISRs until its session times out (9 s of sandbox time)."""
        self._known(broker_id)
        with self.lock:
            if kill:
                self.engine.kill_broker(broker_id)
            else:
                self.engine.stop_broker(broker_id)
        if self._running:
            self.server.call(self.server.close_listener(broker_id))
            self.server.notify()  # a smaller ISR may complete parked produces and fetches

    def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker on its old port; its replicas catch up and rejoin the ISR."""
        self._known(broker_id)
        if self._running:
            self.server.call(self.server.open_listener(broker_id))
        with self.lock:
            self.engine.start_broker(broker_id)

    def delay_responses(self, seconds: float | None = None, *, api: int | str | None = None,
                        broker: int | None = None, count: int | None = None) -> None:
        """Hold matching responses for `seconds` of wall time (None: until `release_responses`)."""
        self.faults.add(Rule("delay", api_key(api), broker, count, seconds=seconds))

    def release_responses(self) -> None:
        """Send every held response now and stop delaying."""
        self.faults.clear("delay")
        if self._running:
            self.server.call(self.server.release())

    def drop_connections(self, broker: int | None = None) -> None:
        """Close every open client connection (to one broker or all) right now."""
        if self._running:
            self.server.call(self.server.drop_connections(broker))

    def drop_requests(self, api: int | str | None = None, *, broker: int | None = None, count: int | None = 1) -> None:
        """Close the connection instead of answering the next `count` matching requests."""
        self.faults.add(Rule("drop", api_key(api), broker, count))

    def inject_error(self, api: int | str, code: int, *, broker: int | None = None, count: int | None = None,
                     message: str | None = None, per_item: bool = False) -> None:
        """Answer matching requests with `code`: in the top-level error field when the response
        has one (unless `per_item`), else in every topic/partition/resource result."""
        self.faults.add(Rule("error", api_key(api), broker, count, code=code, message=message, per_item=per_item))

    def clear_faults(self) -> None:
        self.faults.clear()
        if self._running:
            self.server.call(self.server.release())

    def _known(self, broker_id: int) -> None:
        if broker_id not in self.engine.brokers:
            raise InputError(f"broker {broker_id} is not part of the sandbox (brokers: "
                             f"{', '.join(map(str, self.engine.brokers))})")

    # ---- state --------------------------------------------------------------------------------
    def save(self) -> Path:
        """Write the state (topics, assignments, sizes, configs, moves) as JSON; returns the path."""
        path = self.state_path
        if path is None:
            raise InputError("this sandbox has no state dir; start it with --state-dir to save its state")
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            data = self.engine.to_json()
            self.data.checkpoint()
            clients = self.clients.snapshot()
        ClientState.write(path.parent, clients)
        tmp = path.with_suffix(".tmp")
        write_private(tmp, json.dumps(data, separators=(",", ":")))
        os.replace(tmp, path)
        return path

    def summary(self) -> dict[str, Any]:
        with self.lock:
            e = self.engine
            return {"brokers": len(e.brokers), "alive": sum(b.alive for b in e.brokers.values()),
                    "topics": len(e.topics), "partitions": len(e.rows),
                    "reassigning": sum(p.reassigning for p in e.rows), "bytes": int(e.log_end.sum()),
                    "sandbox_seconds": round(e.now, 3), "kafka_version": self.kafka.release}


def _load(path: Path) -> Engine:
    try:
        return Engine.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read the sandbox state {path}: {exc}; delete it or start with --fresh") from exc
