"""What a broker port speaks, found by asking it directly: TLS or not, SASL or not, and whether
it takes the login.

Used only to explain a failed connection, when kafka-python's own error cannot tell (a plaintext
client on a TLS or SASL port just sees the socket close). Two short probes, each bounded by
`timeout_s`: a TLS handshake that accepts any certificate (does the port speak TLS?), then a
SaslHandshake v1 as the first request (a SASL listener answers with its mechanisms, any other
with ILLEGAL_SASL_STATE, as Kafka's authenticator and KafkaApis do).

`probe_login` logs in by hand with the client settings, for when kafka-python lost the broker's
refusal: a broker closes the connection 100 ms after refusing a login
(connection.failed.authentication.delay.ms), and kafka-python drops what arrives together with
the end of the stream, so a client slower than that (a busy machine) sees only the close. This
probe trusts only what the settings trust: the credentials go nowhere kafka-python would not send
them.
"""
from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
)

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34


@dataclass(frozen=True)
class ListenerKind:
    """What the probes learnt; `sasl_mechanisms` is None when the port did not say."""

    tls: bool
    sasl_mechanisms: tuple[str, ...] | None

    @property
    def protocol(self) -> str | None:
        """Kafka's security.protocol for this listener, if both probes answered."""
        if self.sasl_mechanisms is None:
            return None
        sasl = bool(self.sasl_mechanisms)
        return {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                (True, True): "SASL_SSL"}[(self.tls, sasl)]


def split_server(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)


def probe_listener(server: str, *, timeout_s: float = 2.0, mechanism: str = "PLAIN") -> ListenerKind | None:
    """Probe `host:port`; None when it cannot be reached at all."""
    try:
        host, port = split_server(server)
        tls = _speaks_tls(host, port, timeout_s)
        mechanisms = _sasl_mechanisms(host, port, timeout_s, tls=tls, mechanism=mechanism)
    except (OSError, ValueError):
        return None
    return ListenerKind(tls, mechanisms)


def _speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    ctx = _trust_anything()
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname=host):
                return True
        except (ssl.SSLError, ConnectionError, socket.timeout):
            return False


def _trust_anything() -> ssl.SSLContext:
    # Only asks "is this TLS?": nothing is sent over it, so the certificate does not matter.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _sasl_mechanisms(host: str, port: int, timeout_s: float, *, tls: bool, mechanism: str) -> tuple[str, ...] | None:
    request = SaslHandshakeRequest(version=1, mechanism=mechanism)
    request.with_header(correlation_id=1, client_id="kreassign-probe")
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock = _trust_anything().wrap_socket(raw, server_hostname=host) if tls else raw
        try:
            sock.sendall(bytes(request.encode(header=True, framed=True)))
            size = struct.unpack(">i", _read(sock, 4))[0]
            payload = _read(sock, size)
        except (ConnectionError, socket.timeout, ssl.SSLError, struct.error):
            return None
        finally:
            if tls:
                sock.close()
    response = SaslHandshakeResponse.decode(payload, version=1, header=True)
    if response.error_code == ILLEGAL_SASL_STATE:
        return ()
    if response.error_code in (0, UNSUPPORTED_SASL_MECHANISM):
        return tuple(response.mechanisms)
    return None


def probe_login(server: str, client: Mapping[str, Any], *, timeout_s: float = 5.0) -> str | None:
    """Log in at `server` as the kafka-python settings `client` say (SASL_PLAINTEXT or SASL_SSL,
    PLAIN or SCRAM) and return the broker's refusal message; None when it took the login or the
    probe could not tell."""
    mechanism = str(client.get("sasl_mechanism", ""))
    user, password = str(client.get("sasl_plain_username", "")), str(client.get("sasl_plain_password", ""))
    if mechanism != "PLAIN" and not mechanism.startswith("SCRAM-"):
        return None
    try:
        host, port = split_server(server)
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            tls = str(client.get("security_protocol")) == "SASL_SSL"
            sock = _client_tls(client).wrap_socket(raw, server_hostname=host) if tls else raw
            try:
                return _login(sock, mechanism, user, password)
            finally:
                if tls:
                    sock.close()
    except (OSError, ValueError, struct.error):
        return None


def _client_tls(client: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context kafka-python builds from these settings: the same CA, host name check and
    client certificate."""
    ctx = ssl.create_default_context(cafile=client.get("ssl_cafile"))
    ctx.check_hostname = bool(client.get("ssl_check_hostname", True))
    if client.get("ssl_certfile"):
        ctx.load_cert_chain(client["ssl_certfile"], client.get("ssl_keyfile"), client.get("ssl_password"))
    return ctx


def _login(sock: socket.socket, mechanism: str, user: str, password: str) -> str | None:
    if _exchange(sock, SaslHandshakeRequest(version=1, mechanism=mechanism), 1, SaslHandshakeResponse).error_code:
        return None
    if mechanism == "PLAIN":
        tokens = [lambda: f"\0{user}\0{password}".encode()]
        answers = [lambda _: None]
    else:
        from scramp import ScramClient

        scram = ScramClient([mechanism], user, password)
        tokens = [lambda: scram.get_client_first().encode(), lambda: scram.get_client_final().encode()]
        answers = [lambda a: scram.set_server_first(a.decode()), lambda a: None]
    for i, (token, answer) in enumerate(zip(tokens, answers)):
        response = _exchange(sock, SaslAuthenticateRequest(version=1, auth_bytes=token()), 1,
                             SaslAuthenticateResponse, correlation_id=2 + i)
        if response.error_code:
            return str(response.error_message or "credentials refused")
        answer(bytes(response.auth_bytes))
    return None


def _exchange(sock: socket.socket, request: Any, version: int, response: Any, *, correlation_id: int = 1) -> Any:
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="kreassign-probe")
    sock.sendall(bytes(request.encode(header=True, framed=True)))
    size = struct.unpack(">i", _read(sock, 4))[0]
    return response.decode(_read(sock, size), version=version, header=True)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data
