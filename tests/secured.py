"""Secured clusters for the security tests, one per mode, on the emulator or on real Apache Kafka,
behind one interface (`Secured`).

The emulator runs in-process on a manual clock. A real cluster is started the way an operator
starts one: `kreassign sandbox start --engine kafka --security ... --user ...` in the
foreground, as a child that dies with this process; its state dir holds the CA, the client
properties files the command wrote (the ones the tests use) and the brokers' files.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli_helpers import KREASSIGN, Ran
from kreassign.cli.runtime import Runtime
from kreassign.sandbox.rawclient import encode
from kreassign.sandbox.security import CA_FILE, SERVER_KEY_FILE, Security, User

MB = 1_000_000
ADMIN = User("ops", "0ps-Adm1n-S3cret", admin=True)
VIEWER = User("viewer", 'v1ewer "Only" S3cr\\et')  # a JAAS text must escape it
REAL_BROKERS = 3
REAL_PARTITION_BYTES = 4 * 1024 * 1024
"""each partition of the real cluster's topic: more than one throttled fetch (1 MiB), so a move
under a 1 B/s throttle stays in flight"""


@dataclass
class Secured:
    """A cluster in one security mode and what its clients need."""

    engine: str
    kafka_version: str
    """the release (the emulator: the one it answers as)"""
    bootstrap: str
    brokers: list[int]
    security: Security
    home: Path
    admin_props: Path
    viewer_props: Path | None
    runtime: Runtime
    sb: Any = None
    """the emulator (SandboxCluster), for what only it can do (fault injection, saving its state)"""
    printed: list[str] = field(default_factory=list)
    """Everything kreassign printed in this mode, for the secrets check."""

    @property
    def ca(self) -> Path:
        return self.home / CA_FILE

    def cli(self, props: Path, *args: str) -> Ran:
        journal = () if args[0] == "snapshot" else ("--journal-dir", str(self.home / "journal"))
        ran = KREASSIGN.run(*args, "--bootstrap-server", self.bootstrap, "--command-config", str(props), *journal,
                            runtime=self.runtime, columns=160)
        self.printed.append(ran.output)
        return ran

    def kafka_python(self, user: User | None, **extra: Any) -> Any:
        from kafka.admin import KafkaAdminClient

        kwargs: dict[str, Any] = {"bootstrap_servers": self.bootstrap, "request_timeout_ms": 30000,
                                  "security_protocol": self.security.protocol, **extra}
        if self.security.tls:
            kwargs["ssl_cafile"] = str(self.ca)
        if user is not None:
            kwargs.update(sasl_mechanism=self.security.mechanism, sasl_plain_username=user.name,
                          sasl_plain_password=user.password)
        return KafkaAdminClient(**kwargs)

    def librdkafka(self, user: User | None, **extra: Any) -> Any:
        from confluent_kafka.admin import AdminClient

        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap,
                                "security.protocol": self.security.protocol.lower(), **extra}
        if self.security.tls:
            conf["ssl.ca.location"] = str(self.ca)
        if user is not None:
            conf.update({"sasl.mechanism": self.security.mechanism, "sasl.username": user.name,
                         "sasl.password": user.password})
        return AdminClient(conf)

    def eventually(self, read: Callable[[], Any], expected: Any, *, timeout_s: float = 60.0) -> None:
        """`read()` equals `expected`: at once on the emulator (its answers change only with its
        clock), within `timeout_s` on real Kafka (a broker learns a change from the metadata log
        a moment after the controller took it)."""
        deadline = time.monotonic() + (timeout_s if self.engine == "kafka" else 0.0)
        while True:
            got = read()
            if got == expected or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        assert got == expected

    def private_files(self) -> list[Path]:
        """The files that hold a secret and must be 0600."""
        if self.engine == "emulator":
            self.sb.save()
            return [p for p in (self.home / "state").rglob("*") if p.is_file()]
        names = ["kafka.json", SERVER_KEY_FILE, self.admin_props.name]
        if self.viewer_props is not None:
            names.append(self.viewer_props.name)
        config = sorted((self.home / "config").glob("*.properties"))
        return [self.home / n for n in names] + [p for p in config if "log4j" not in p.name] + \
            [self.home / "config" / "server-keystore.pem"]

    def scanned_files(self) -> list[Path]:
        """Every file of the cluster's state that must hold no password: all but the client
        properties (they hold the login), the key files and, with PLAIN on real Kafka, the
        brokers' properties (Kafka's PlainLoginModule reads the passwords from its JAAS text)."""
        if self.engine == "emulator":
            return [p for p in (self.home / "state").rglob("*") if p.is_file()]
        keep = {self.admin_props, self.viewer_props, self.home / SERVER_KEY_FILE,
                self.home / "config" / "server-keystore.pem"}
        if self.security.mechanism == "PLAIN":
            keep |= {p for p in (self.home / "config").glob("broker-*.properties")}
        return [p for p in self.home.rglob("*") if p.is_file() and p not in keep]

    def scanned_texts(self) -> list[str]:
        """The text of every scanned file. A running broker writes its checkpoints to a `.tmp`
        file and renames it, so a file listed a moment ago may be gone: it held nothing new."""
        texts = []
        for path in self.scanned_files():
            try:
                texts.append(path.read_bytes().decode(errors="replace"))
            except FileNotFoundError:
                continue
        return texts


def emulator_secured(mode: str, mechanism: str | None, home: Path, kafka_version: str) -> Iterator[Secured]:
    from kreassign.sandbox.clock import ManualClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.security import build_security, write_client_properties
    from kreassign.sandbox.topics import TopicSpec

    users = (ADMIN, VIEWER) if mode.startswith("sasl") else ()
    security = build_security(mode, mechanism, users, home)
    sb = SandboxCluster(brokers=4, racks=0, topics=[TopicSpec("t", 4, 2, 20 * MB, 50_000.0, 0.2)],
                        clock=ManualClock(), seed=7, security=security, state_dir=home / "state").start()
    try:
        paths = write_client_properties(security, users, sb.bootstrap, home)
        yield Secured("emulator", kafka_version, sb.bootstrap, sorted(sb.ports), security, home, paths[0],
                      paths[1] if len(paths) > 1 else None, Runtime(clock=lambda: sb.now, sleep=sb.advance), sb)
    finally:
        sb.stop()


@dataclass
class RealStart:
    """A `kreassign sandbox start --engine kafka` running in the foreground."""

    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_real(mode: str, mechanism: str, version: str, home: Path, *, timeout_s: float = 540.0) -> RealStart:
    """Start a real secured cluster with the CLI (3 brokers, no topics) and wait until it serves.
    The CLI's JVMs die with it, and it dies with this process."""
    from kreassign.sandbox.kafka_engine import jvm

    argv = KREASSIGN.argv("sandbox", "start", "--engine", "kafka", "--kafka-version",
            version, "--brokers", str(REAL_BROKERS), "--racks", "0", "--topics", "none", "--heap", "384m", "--start-timeout", "400s",
            "--state-dir", str(home), "--security", mode, "--sasl-mechanism", mechanism,
            "--user", f"{ADMIN.name}:{ADMIN.password}:admin", "--user", f"{VIEWER.name}:{VIEWER.password}")
    home.mkdir(parents=True, exist_ok=True)
    log = home.parent / f"{home.name}-cli.log"
    started = RealStart(jvm.spawn(argv, log=log, cwd=home.parent), log)
    deadline = time.monotonic() + timeout_s
    while "Press Ctrl-C to stop." not in started.output:
        if started.proc.poll() is not None or time.monotonic() > deadline:
            stop_real(started)
            raise AssertionError(f"sandbox start --engine kafka did not come up:\n{started.output[-3000:]}")
        time.sleep(0.5)
    return started


def stop_real(started: RealStart) -> int:
    """Ctrl-C's signal to the CLI (it stops the brokers, then the controller) and its exit code."""
    if started.proc.poll() is None:
        started.proc.send_signal(signal.SIGTERM)
        try:
            started.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(started.proc.pid, signal.SIGKILL)
            started.proc.wait()
    return started.proc.returncode


def real_secured(mode: str, mechanism: str, version: str, home: Path) -> Iterator[Secured]:
    from kreassign.sandbox.security import PROTOCOLS

    started = start_real(mode, mechanism, version, home)
    try:
        bootstrap = next(line for line in started.output.splitlines() if line.startswith("127.0.0.1:"))
        # the settings it showed: each user's file, its role, the password masked
        for user, role in ((ADMIN, "admin"), (VIEWER, "describe only")):
            assert f"# {home / f'client-{user.name}.properties'} ({user.name}, {role})\n" in started.output
        assert started.output.count('password="********";') == 2
        saved = json.loads((home / "kafka.json").read_text())
        # the CLI made the TLS files; this only names the mode and where they are
        security = Security(PROTOCOLS[mode], mechanism, tls_dir=str(home))
        secured = Secured("kafka", version, bootstrap, sorted(int(b) for b in saved["ports"]), security, home,
                          home / f"client-{ADMIN.name}.properties", home / f"client-{VIEWER.name}.properties",
                          Runtime())
        secured.printed.append(started.output)
        internal = ",".join(f"127.0.0.1:{p}" for _, p in sorted(saved["internal_ports"].items()))
        _real_topic(secured, internal)
        yield secured
    finally:
        assert stop_real(started) == 0, started.output[-3000:]
        assert "Sandbox stopped." in started.output


def _real_topic(secured: Secured, internal_bootstrap: str) -> None:
    """Topic t: 4 partitions on brokers (1,2), (2,3), (3,1), (1,2), each REAL_PARTITION_BYTES,
    written through the brokers' internal listener."""
    from kreassign.cluster.admin import open_admin
    from live import write_records

    assignment = {p: [p % REAL_BROKERS + 1, (p + 1) % REAL_BROKERS + 1] for p in range(4)}
    with open_admin(secured.bootstrap, command_config=str(secured.admin_props), timeout_s=60.0) as admin:
        assert admin.create_topic("t", assignment) is None
    for p in assignment:
        write_records(internal_bootstrap, "t", p, REAL_PARTITION_BYTES, acks="all")


# ---- the wire, by hand -----------------------------------------------------------------------

class RawConnection:
    """One connection to a broker that speaks requests by hand (over TLS when the listener does),
    for what no client library sends: SaslHandshake v0 and its bare tokens, any API as a given
    login."""

    def __init__(self, secured: Secured, server: str | None = None) -> None:
        host, port = (server or secured.bootstrap.split(",")[0]).rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=30)
        if secured.security.tls:
            ctx = ssl.create_default_context(cafile=str(secured.ca))
            self.sock: socket.socket = ctx.wrap_socket(raw, server_hostname=host)
        else:
            self.sock = raw
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def send(self, request: Any, version: int, response: Any = None) -> Any:
        """Send `request` at `version` and decode its answer (of class `response`; default: the
        request's own name with Response)."""
        import kafka.protocol.admin as admin
        import kafka.protocol.metadata as metadata
        import kafka.protocol.sasl as sasl

        self.correlation += 1
        self.sock.sendall(encode(request, version, self.correlation))
        if response is None:
            name = type(request).__name__.replace("Request", "Response")
            response = next(getattr(m, name) for m in (admin, metadata, sasl) if hasattr(m, name))
        return response.decode(self.frame(), version=version, header=True)

    def bare(self, token: bytes) -> bytes:
        """A bare SASL token (after a v0 handshake) and the broker's bare answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self.frame()

    def login(self, user: User, mechanism: str) -> None:
        """SaslHandshake v1 and SaslAuthenticate v2 until the login completes."""
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        assert self.send(SaslHandshakeRequest(mechanism=mechanism), 1).error_code == 0
        for token in sasl_tokens(user, mechanism):
            answer = self.send(SaslAuthenticateRequest(auth_bytes=token.send()), 2)
            assert answer.error_code == 0, answer.error_message
            token.receive(bytes(answer.auth_bytes))


@dataclass
class _Token:
    send: Callable[[], bytes]
    receive: Callable[[bytes], None]


def sasl_tokens(user: User, mechanism: str) -> list[_Token]:
    """The client's side of a login, token by token (PLAIN: one; SCRAM: two, checking the
    server's signature)."""
    if mechanism == "PLAIN":
        return [_Token(lambda: f"\0{user.name}\0{user.password}".encode(), lambda answer: None)]
    from scramp import ScramClient

    client = ScramClient([mechanism], user.name, user.password)
    return [_Token(lambda: client.get_client_first().encode(), lambda a: client.set_server_first(a.decode())),
            _Token(lambda: client.get_client_final().encode(), lambda a: client.set_server_final(a.decode()))]
