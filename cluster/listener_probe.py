"""What a broker port speaks, found by asking it directly: TLS or not, SASL or not.

Used only to explain a failed connection, when kafka-python's own error cannot tell (a plaintext
client on a TLS or SASL port just sees the socket close). Two short probes, each bounded by
`timeout_s`: a TLS handshake that accepts any certificate (does the port speak TLS?), then a
SaslHandshake v1 as the first request (a SASL listener answers with its mechanisms, any other
with ILLEGAL_SASL_STATE, as Kafka's authenticator and KafkaApis do).
"""
from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass

from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

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


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data
