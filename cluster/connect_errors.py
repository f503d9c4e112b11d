"""Why kreassign could not connect, in one line each: refused, no answer, TLS certificate
problem, TLS against a plaintext port or the reverse, SASL on a listener without it or the
reverse, an unknown mechanism, and refused credentials.

kafka-python retries its bootstrap until the connect timeout and then only says "Unable to
bootstrap"; the cause is the last connection error it logged that is not a timeout, if any
(`KafkaLogTap.last_error`: the deadline may cut the last attempt short). When
that error is ambiguous (the broker just closed the socket), the port is probed
(`listener_probe`) to learn what it speaks.
"""
from __future__ import annotations

import re
import ssl
from collections.abc import Callable

import kafka.errors as Errors

from kreassign.cluster.client_config import ClientConfig
from kreassign.cluster.errors import ClusterError, ClusterUnreachable, SecurityMismatch, clip
from kreassign.cluster.listener_probe import ListenerKind, probe_listener, probe_login

_VERIFY = re.compile(r"certificate verify failed: ([^(]+?)\s*\(")
_HOSTNAME = re.compile(r"Hostname mismatch[^(']*'?[^')]*'?|IP address mismatch[^(']*'?[^')]*'?")
_NOT_TLS = ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF_WHILE_READING", "EOF occurred in violation of protocol",
            "record layer failure", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST")
Prober = Callable[..., "ListenerKind | None"]
LoginProber = Callable[..., "str | None"]


def cannot_succeed(error: BaseException) -> bool:
    """Whether retrying the connection is pointless: the login or the certificate was refused,
    or the port speaks another protocol (a closed socket alone does not tell)."""
    if isinstance(error, (Errors.SaslAuthenticationFailedError, Errors.UnsupportedSaslMechanismError,
                          Errors.IllegalSaslStateError)):
        return True
    text = str(error)
    return "CERTIFICATE_VERIFY_FAILED" in text or ("Handshake failed" in text and any(m in text for m in _NOT_TLS))


def connect_failure(config: ClientConfig, error: BaseException | None, *,
                    probe: Prober = probe_listener, login: LoginProber = probe_login) -> ClusterError:
    """The error to raise when no bootstrap server could be used, with the likeliest cause."""
    servers = ",".join(config.bootstrap_servers)
    server = config.bootstrap_servers[0]
    protocol = config.security_protocol
    wait = f"{config.timeouts.connect_timeout_s:g}s"
    causes = _causes(error)
    text = " ".join(str(e) for e in causes)
    mechanism = str(config.client_kwargs.get("sasl_mechanism", ""))
    if isinstance(error, Errors.SaslAuthenticationFailedError):
        return _login_refused(server, mechanism, text.split("SaslAuthenticationFailedError: ")[-1].strip())
    if isinstance(error, Errors.UnsupportedSaslMechanismError):
        offered = _offered(probe, server, mechanism)
        return SecurityMismatch(f"{server} does not offer SASL mechanism {mechanism}{offered}: set "
                                "sasl.mechanism (and the matching login module in sasl.jaas.config) to one it offers.")
    if isinstance(error, Errors.IllegalSaslStateError):
        return SecurityMismatch(f"{server} does not use SASL on this port, but security.protocol is {protocol}: "
                                f"set security.protocol={'SSL' if protocol == 'SASL_SSL' else 'PLAINTEXT'} "
                                "(or use the broker's SASL listener port).")
    if "CERTIFICATE_VERIFY_FAILED" in text:
        hostname = _HOSTNAME.search(text)
        if hostname:
            return SecurityMismatch(f"TLS certificate of {server} rejected: {hostname.group(0).strip()}. Connect "
                                    "with a name the certificate lists, or set ssl.endpoint.identification."
                                    "algorithm= (empty) to skip the host name check.")
        reason = _VERIFY.search(text)
        why = reason.group(1).strip() if reason else "certificate verify failed"
        return SecurityMismatch(f"TLS certificate of {server} rejected: {why}. Check that ssl.truststore.location "
                                "holds the CA certificate that signed the broker's certificate.")
    if "Handshake failed" in text and any(marker in text for marker in _NOT_TLS):
        return SecurityMismatch(f"TLS handshake with {server} failed: the port does not speak TLS (a PLAINTEXT "
                                f"or SASL_PLAINTEXT listener?), but security.protocol is {protocol}. Set "
                                "security.protocol to what the listener speaks.")
    unreachable = f"Could not reach any broker at {servers} within {wait}"
    if any(isinstance(e, ssl.SSLError) for e in causes) or "Handshake failed" in text or "SSL" in text \
            or "certificate" in text.lower():
        return SecurityMismatch(f"{unreachable}: the TLS handshake failed ({clip(error, 200)}). Check the brokers' "
                                "certificates against ssl.truststore.* / ssl.ca.location and "
                                "ssl.endpoint.identification.algorithm in --command-config.")
    if "ECONNREFUSED" in text or "Connection refused" in text or any(isinstance(e, ConnectionRefusedError)
                                                                       for e in causes):
        return ClusterUnreachable(f"{unreachable}: connection refused. Check --bootstrap-server and that the "
                                  "brokers are running.")
    if isinstance(error, (Errors.RequestTimedOutError, Errors.KafkaTimeoutError)) and "bootstrap" not in text:
        return ClusterUnreachable(f"{unreachable}: {server} accepted the connection but did not answer (the "
                                  "broker is overloaded, or this is not a Kafka port; a slow broker needs a longer "
                                  "--request-timeout).")
    # A TLS listener closes the socket on a plaintext request, or first answers with a TLS alert
    # record, which reads as an absurd frame length (0x15030300...: seen on Kafka 3.9.2).
    closed = isinstance(error, Errors.KafkaConnectionError) and "disconnected" in text
    if closed or any(isinstance(e, Errors.InvalidReceiveError) for e in causes):
        mismatch = _mismatch(probe(server, mechanism=mechanism or "PLAIN"), server, protocol)
        if mismatch is not None:
            return mismatch
        # the broker may have refused the login and closed before kafka-python read why
        refused = login(server, config.client_kwargs) if protocol.startswith("SASL_") else None
        if refused is not None:
            return _login_refused(server, mechanism, refused)
    message = f"{unreachable}. Check --bootstrap-server and that the brokers are running."
    if protocol != "PLAINTEXT":
        message += (f" The connection uses {protocol}: also check the ssl.* and sasl.* settings in "
                    "--command-config.")
    if error is None:
        return ClusterUnreachable(message + " Nothing answered at all: a firewall dropping packets, or brokers "
                                            "too slow to answer; a longer --request-timeout waits longer.")
    return ClusterUnreachable(f"{message} Last error: {clip(error, 200)}")


def _login_refused(server: str, mechanism: str, detail: str) -> SecurityMismatch:
    return SecurityMismatch(f"SASL authentication failed at {server} ({mechanism}): {detail or 'credentials refused'}. "
                            "Check the username and password in sasl.jaas.config and sasl.mechanism (--command-config).")


def _causes(error: BaseException | None) -> list[BaseException]:
    """The error and what caused it (kafka-python wraps socket and SSL errors)."""
    found: list[BaseException] = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def _offered(probe: Prober, server: str, mechanism: str) -> str:
    kind = probe(server, mechanism=mechanism)
    if kind is None or not kind.sasl_mechanisms:
        return ""
    return f" (it offers {', '.join(kind.sasl_mechanisms)})"


def _mismatch(kind: ListenerKind | None, server: str, protocol: str) -> SecurityMismatch | None:
    """A message when the probed listener speaks something else than security.protocol."""
    if kind is None or kind.protocol is None or kind.protocol == protocol:
        return None
    what = {"SSL": "TLS", "SASL_SSL": "TLS with SASL", "SASL_PLAINTEXT": "SASL without TLS",
            "PLAINTEXT": "plaintext without SASL"}[kind.protocol]
    mechanisms = f" (mechanisms: {', '.join(kind.sasl_mechanisms or ())})" if kind.sasl_mechanisms else ""
    return SecurityMismatch(f"{server} speaks {what}{mechanisms}, but security.protocol is {protocol}: set "
                            f"security.protocol={kind.protocol} in --command-config.")
