"""One line per cause of a failed connection, from kafka-python's last logged error and, when
that only says the socket closed, from what the port answers to a probe; and kafka-python's
logged secrets masked."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import kafka.errors as Errors
import pytest
import trustme
from kafka.protocol.sasl import SaslAuthenticateRequest

from kreassign.cluster.admin_retry import KafkaLogTap, ThrottleGate
from kreassign.cluster.client_config import build_client_config, load_client_config
from kreassign.cluster.connect_errors import cannot_succeed, connect_failure
from kreassign.cluster.errors import ClusterUnreachable, SecurityMismatch
from kreassign.cluster.listener_probe import ListenerKind, probe_login
from kreassign.sandbox.security import User, build_security, client_properties
from kreassign.cluster.log_redaction import MASK, RedactSecrets

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
SASL_SSL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": JAAS}


def failure(props: dict[str, str], error: BaseException | None, kind: ListenerKind | None = None,
            refused: str | None = None) -> Any:
    config = build_client_config(props, bootstrap_server="h:9093,g:9093")
    return connect_failure(config, error, probe=lambda server, **_: kind, login=lambda server, client: refused)


@pytest.mark.parametrize("props, error, kind, cls, message", [
    ({}, Errors.KafkaConnectionError("111 ECONNREFUSED"), None, ClusterUnreachable,
     "Could not reach any broker at h:9093,g:9093 within 10s: connection refused. Check --bootstrap-server and "
     "that the brokers are running."),
    ({}, None, None, ClusterUnreachable,
     "Could not reach any broker at h:9093,g:9093 within 10s. Check --bootstrap-server and that the brokers are "
     "running. Nothing answered at all: a firewall dropping packets, or brokers too slow to answer; a longer "
     "--request-timeout waits longer."),
    (SASL_SSL, Errors.KafkaConnectionError("Handshake failed: bad cert"), None, SecurityMismatch,
     "Could not reach any broker at h:9093,g:9093 within 10s: the TLS handshake failed (KafkaConnectionError: "
     "Handshake failed: bad cert). Check the brokers' certificates against ssl.truststore.* / ssl.ca.location and "
     "ssl.endpoint.identification.algorithm in --command-config."),
    ({}, Errors.RequestTimedOutError("Request timed out after 1499 ms"), None, ClusterUnreachable,
     "Could not reach any broker at h:9093,g:9093 within 10s: h:9093 accepted the connection but did not answer "
     "(the broker is overloaded, or this is not a Kafka port; a slow broker needs a longer --request-timeout)."),
    (SASL_SSL, Errors.KafkaConnectionError("Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
                                           "failed: certificate has expired (_ssl.c:1006)"), None, SecurityMismatch,
     "TLS certificate of h:9093 rejected: certificate has expired. Check that ssl.truststore.location holds the CA "
     "certificate that signed the broker's certificate."),
    (SASL_SSL, Errors.KafkaConnectionError("Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
                                           "failed: Hostname mismatch, certificate is not valid for 'h'. "
                                           "(_ssl.c:1006)"), None, SecurityMismatch,
     "TLS certificate of h:9093 rejected: Hostname mismatch, certificate is not valid for 'h'. Connect with a name "
     "the certificate lists, or set ssl.endpoint.identification.algorithm= (empty) to skip the host name check."),
    (SASL_SSL, Errors.KafkaConnectionError("Handshake failed: [SSL: WRONG_VERSION_NUMBER] wrong version number"),
     None, SecurityMismatch,
     "TLS handshake with h:9093 failed: the port does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?), but "
     "security.protocol is SASL_SSL. Set security.protocol to what the listener speaks."),
    ({}, Errors.KafkaConnectionError("socket disconnected"), ListenerKind(tls=True, sasl_mechanisms=()),
     SecurityMismatch, "h:9093 speaks TLS, but security.protocol is PLAINTEXT: set security.protocol=SSL in "
                       "--command-config."),
    # Kafka 3.9.2's TLS listener may answer a plaintext request with a TLS alert record first
    ({}, Errors.InvalidReceiveError("Invalid frame length: 352518912"), ListenerKind(tls=True, sasl_mechanisms=("PLAIN",)),
     SecurityMismatch, "h:9093 speaks TLS with SASL (mechanisms: PLAIN), but security.protocol is PLAINTEXT: set "
                       "security.protocol=SASL_SSL in --command-config."),
    ({}, Errors.KafkaConnectionError("socket disconnected"), ListenerKind(tls=False, sasl_mechanisms=("PLAIN",)),
     SecurityMismatch, "h:9093 speaks SASL without TLS (mechanisms: PLAIN), but security.protocol is PLAINTEXT: "
                       "set security.protocol=SASL_PLAINTEXT in --command-config."),
    (SASL_SSL, Errors.IllegalSaslStateError(), None, SecurityMismatch,
     "h:9093 does not use SASL on this port, but security.protocol is SASL_SSL: set security.protocol=SSL (or use "
     "the broker's SASL listener port)."),
    (SASL_SSL, Errors.UnsupportedSaslMechanismError(), ListenerKind(tls=True, sasl_mechanisms=("PLAIN",)),
     SecurityMismatch, "h:9093 does not offer SASL mechanism SCRAM-SHA-256 (it offers PLAIN): set sasl.mechanism "
                       "(and the matching login module in sasl.jaas.config) to one it offers."),
    (SASL_SSL, Errors.SaslAuthenticationFailedError("SaslAuthenticationFailedError: Authentication failed: nope"),
     None, SecurityMismatch, "SASL authentication failed at h:9093 (SCRAM-SHA-256): Authentication failed: nope. "
                             "Check the username and password in sasl.jaas.config and sasl.mechanism "
                             "(--command-config)."),
    ({}, Errors.KafkaConnectionError("socket disconnected"), ListenerKind(tls=False, sasl_mechanisms=()),
     ClusterUnreachable, "Could not reach any broker at h:9093,g:9093 within 10s. Check --bootstrap-server and that "
                         "the brokers are running. Last error: KafkaConnectionError: socket disconnected"),
])
def test_each_cause_gets_its_line(props: dict[str, str], error: BaseException, kind: ListenerKind | None,
                                  cls: type[Exception], message: str) -> None:
    found = failure(props, error, kind)
    assert (type(found), str(found)) == (cls, message)


def test_a_refusal_kafka_python_did_not_read_is_asked_for() -> None:
    """A broker closes 100 ms after refusing a login; a client slower than that sees only the
    close, so the login is tried again by hand to learn the broker's reason."""
    closed = Errors.KafkaConnectionError("socket disconnected")
    speaks = ListenerKind(tls=True, sasl_mechanisms=("SCRAM-SHA-256",))
    found = failure(SASL_SSL, closed, speaks, refused="Authentication failed during authentication due to invalid "
                                                      "credentials with SASL mechanism SCRAM-SHA-256")
    assert (type(found), str(found)) == (SecurityMismatch, (
        "SASL authentication failed at h:9093 (SCRAM-SHA-256): Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-256. Check the username and password in sasl.jaas.config "
        "and sasl.mechanism (--command-config)."))
    taken = failure(SASL_SSL, closed, speaks, refused=None)
    assert type(taken) is ClusterUnreachable and str(taken).endswith(
        "The connection uses SASL_SSL: also check the ssl.* and sasl.* settings in --command-config. Last error: "
        "KafkaConnectionError: socket disconnected")


@pytest.mark.parametrize("mode, mechanism", [("sasl_plaintext", "PLAIN"), ("sasl_ssl", "SCRAM-SHA-512")])
def test_the_login_probe_reads_the_brokers_refusal(sandbox_factory: Any, tmp_path: Path, mode: str,
                                                   mechanism: str) -> None:
    security = build_security(mode, mechanism, (User("ops", "right", admin=True),), tmp_path)
    sb = sandbox_factory(brokers=1, racks=0, topics=[], security=security)
    server = sb.bootstrap

    def settings(password: str, **extra: str) -> dict[str, Any]:
        path = tmp_path / "login.properties"
        path.write_text(client_properties(security, User("ops", password), server) + "".join(
            f"{k}={v}\n" for k, v in extra.items()))
        return dict(load_client_config(str(path)).client_kwargs)

    wrong = {"PLAIN": "Authentication failed: Invalid username or password",
             "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials with SASL "
                              "mechanism SCRAM-SHA-512"}[mechanism]
    assert probe_login(server, settings("wrong")) == wrong
    assert probe_login(server, settings("right")) is None
    if security.tls:  # a broker its settings do not trust gets no password
        other = tmp_path / "other-ca.pem"
        trustme.CA().cert_pem.write_to_path(str(other))
        assert probe_login(server, settings("wrong", **{"ssl.truststore.location": str(other)})) is None


def test_listener_kind_names_the_protocol() -> None:
    assert [ListenerKind(tls, mechs).protocol for tls, mechs in ((False, ()), (True, ()), (False, ("PLAIN",)),
                                                                 (True, ("PLAIN",)), (True, None))] == [
        "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", None]


def render(*args: Any) -> str:
    record = logging.LogRecord("kafka", logging.DEBUG, __file__, 1, "%s %s", args, None)
    RedactSecrets().filter(record)
    return record.getMessage()


def test_logged_secrets_are_masked() -> None:
    config = {"sasl_plain_username": "u", "sasl_plain_password": "s3cret", "ssl_password": None}
    assert render("config", config) == f"config {{'sasl_plain_username': 'u', 'sasl_plain_password': '{MASK}', " \
                                       "'ssl_password': None}"
    request = SaslAuthenticateRequest(version=2, auth_bytes=b"\0u\0s3cret")
    assert render("sending", request) == f"sending SaslAuthenticateRequest(version=2, auth_bytes={MASK})"
    request.with_header(correlation_id=3, client_id="c")
    frame = bytearray(request.encode(header=True, framed=True))
    assert render("Send:", frame) == f"Send: <SaslAuthenticate frame of {len(frame)} bytes, {MASK}>"
    assert render("Send:", b"\0\0\0\x08\0\x03\0\0") == "Send: b'\\x00\\x00\\x00\\x08\\x00\\x03\\x00\\x00'"


@pytest.mark.parametrize("error, final", [
    (Errors.SaslAuthenticationFailedError("nope"), True),
    (Errors.UnsupportedSaslMechanismError(), True),
    (Errors.IllegalSaslStateError(), True),
    (Errors.KafkaConnectionError("Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"), True),
    (Errors.KafkaConnectionError("Handshake failed: [SSL: WRONG_VERSION_NUMBER] wrong version number"), True),
    (Errors.KafkaConnectionError("socket disconnected"), False),
    (Errors.KafkaConnectionError("111 ECONNREFUSED"), False),
    (Errors.RequestTimedOutError("Request timed out"), False),
])
def test_which_errors_no_retry_can_fix(error: BaseException, final: bool) -> None:
    assert cannot_succeed(error) is final


def test_a_connect_watches_only_the_client_it_builds() -> None:
    tap = KafkaLogTap(ThrottleGate(lambda: 0.0), final=cannot_succeed)
    logger = logging.getLogger("kafka.net.manager")
    previous, logger.propagate = logger.propagate, False
    tap.attach()
    try:
        # This thread was running before the connect: an earlier client's retries come from such threads.
        logger.warning("Bootstrap connection to %s failed: %s", "b-0", Errors.SaslAuthenticationFailedError("old"))
        assert tap.last_error is None and not tap.gave_up.is_set()
        worker = threading.Thread(target=logger.warning, args=("Bootstrap connection to %s failed: %s", "b-0",
                                                               Errors.SaslAuthenticationFailedError("new")))
        worker.start()
        worker.join()
    finally:
        tap.detach()
        logger.propagate = previous
    assert str(tap.last_error) == "[Error 58] SaslAuthenticationFailedError: new" and tap.gave_up.is_set()


def test_a_new_thread_with_a_finished_threads_ident_is_watched() -> None:
    tap = KafkaLogTap(ThrottleGate(lambda: 0.0), final=cannot_succeed)
    release = threading.Event()
    older = threading.Thread(target=release.wait)
    older.start()
    tap.attach()  # notes the threads running now; the record is fed to `filter` directly below
    tap.detach()
    release.set()
    older.join()
    # The OS reuses a finished thread's ident (pthread_t) for the next one; pin that case down.
    record = logging.LogRecord("kafka.net.manager", logging.WARNING, __file__, 1,
                               "Bootstrap connection to %s failed: %s",
                               ("b-0", Errors.SaslAuthenticationFailedError("new")), None)
    record.thread = older.ident
    worker = threading.Thread(target=tap.filter, args=(record,))
    worker.start()
    worker.join()
    assert str(tap.last_error) == "[Error 58] SaslAuthenticationFailedError: new" and tap.gave_up.is_set()


CUT_SHORT = Errors.RequestTimedOutError("Request timed out after 137 ms")
UNABLE = Errors.KafkaTimeoutError("Unable to bootstrap from ['h:9093', 'g:9093']")


def kept(*logged: tuple[str, str, int, tuple[Any, ...]]) -> BaseException | None:
    """The error a connect's tap keeps from these records (logger, format, level, args), as
    kafka-python's IO thread logs them during a bootstrap."""
    tap = KafkaLogTap(ThrottleGate(lambda: 0.0))
    for name, msg, level, args in logged:
        tap.filter(logging.LogRecord(name, level, __file__, 1, msg, args, None))
    return tap.last_error


def lost(error: BaseException) -> tuple[str, str, int, tuple[Any, ...]]:
    return "kafka.net.connection", "%s: Connection lost: %s", logging.ERROR, ("<KafkaConnection bootstrap-0>", error)


def failed(error: BaseException) -> tuple[str, str, int, tuple[Any, ...]]:
    return "kafka.net.manager", "Connection failed: %s", logging.ERROR, (error,)


def test_a_deadline_cutting_the_last_attempt_short_does_not_hide_what_the_earlier_ones_learnt() -> None:
    # What kafka-python 3.0.12 logs for a PLAINTEXT client on a slow SASL listener: each attempt is
    # closed after ApiVersions, but the last one gets only the time left and times out.
    disconnected = Errors.KafkaConnectionError("socket disconnected")
    error = kept(lost(disconnected),
                 ("kafka.net.manager", "Bootstrap attempt to bootstrap-0 failed: KafkaConnectionError: socket "
                                       "disconnected (backoff 0.05 secs)", logging.ERROR, ()),
                 ("kafka.net.connection", "%s: Request timed out after %d ms. Closing connection.", logging.WARNING,
                  ("<KafkaConnection bootstrap-2>", 137)),
                 lost(CUT_SHORT),
                 ("kafka.net.manager", "Bootstrap connection to %s failed: %s (backoff %.2f secs)", logging.WARNING,
                  ("bootstrap-2", CUT_SHORT, 0.11)),
                 ("kafka.net.manager", "Bootstrap failed: %s", logging.ERROR, (UNABLE,)))
    assert error is disconnected
    assert str(failure({}, error, ListenerKind(tls=False, sasl_mechanisms=("SCRAM-SHA-256",)))) == (
        "h:9093 speaks SASL without TLS (mechanisms: SCRAM-SHA-256), but security.protocol is PLAINTEXT: set "
        "security.protocol=SASL_PLAINTEXT in --command-config.")


@pytest.mark.parametrize("logged, expected", [
    # Only timeouts: the time ran out, and that is what the operator is told.
    ([lost(CUT_SHORT), failed(CUT_SHORT), failed(UNABLE)], CUT_SHORT),
    ([failed(UNABLE)], UNABLE),
    # A TCP connect cut short by the deadline, or by the OS, after a refusal.
    ([failed(Errors.KafkaConnectionError("111 ECONNREFUSED")), failed(Errors.KafkaConnectionError(
        "Connection timed out")), failed(Errors.KafkaConnectionError("unable to connect: [Errno 110] Connection "
                                                                     "timed out")), failed(UNABLE)],
     Errors.KafkaConnectionError("111 ECONNREFUSED")),
    # An answer after a timeout still tells more.
    ([lost(CUT_SHORT), failed(Errors.SaslAuthenticationFailedError("nope"))],
     Errors.SaslAuthenticationFailedError("nope")),
    ([], None),
])
def test_a_timeout_is_kept_only_when_nothing_else_was_learnt(logged: list[tuple[str, str, int, tuple[Any, ...]]],
                                                             expected: BaseException | None) -> None:
    error = kept(*logged)
    assert (type(error), str(error)) == (type(expected), str(expected))


def test_only_timeouts_say_the_time_ran_out() -> None:
    assert str(failure({}, kept(lost(CUT_SHORT), failed(UNABLE)))) == (
        "Could not reach any broker at h:9093,g:9093 within 10s: h:9093 accepted the connection but did not answer "
        "(the broker is overloaded, or this is not a Kafka port; a slow broker needs a longer --request-timeout).")


def test_a_failed_connect_leaves_no_client_thread_behind() -> None:
    """kafka-python's KafkaAdminClient starts its I/O thread before it bootstraps and keeps it
    retrying when the bootstrap fails; the connect stops it (a long-lived process, or a test
    suite, would otherwise gather threads that reconnect forever)."""
    import dataclasses
    import socket

    from kreassign.cluster.admin import KafkaAdmin
    from kreassign.cluster.client_config import AdminTimeouts

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = build_client_config({}, bootstrap_server=f"127.0.0.1:{port}")
    config = dataclasses.replace(config, timeouts=AdminTimeouts(request_timeout_s=1.0, api_timeout_s=2.0,
                                                                connect_timeout_s=1.0))
    before = set(threading.enumerate())
    with pytest.raises(ClusterUnreachable):
        KafkaAdmin.connect(config)
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
