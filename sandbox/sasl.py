"""The SASL exchange on one connection, as Kafka's SaslServerAuthenticator runs it (KIP-152).

Before authentication a connection may send ApiVersions and then SaslHandshake (naming the
mechanism); after a v1 handshake SaslAuthenticate frames carry the mechanism's tokens until it
completes, after a v0 handshake (before KIP-152) the tokens travel as bare size-prefixed frames
without a request header, and a refusal closes the connection without an answer. Any other
request before that closes the connection, as do an unknown mechanism (after answering
UNSUPPORTED_SASL_MECHANISM) and failed credentials (after answering SASL_AUTHENTICATION_FAILED
with Kafka's message). SCRAM is evaluated by `scramp`; PLAIN is RFC 4616's three fields.
No socket here: the server feeds decoded requests in and writes the answers out.
"""
from __future__ import annotations

from typing import Any

from kreassign.sandbox.acl import Principal
from kreassign.sandbox.errors import AuthenticationFailed
from kreassign.sandbox.security import Security
from kreassign.sandbox.wire import API_VERSIONS, APIS, SASL_AUTHENTICATE, SASL_HANDSHAKE

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class _Plain:
    """RFC 4616 `[authzid] NUL authcid NUL passwd`, with PlainSaslServer's messages."""

    def __init__(self, security: Security) -> None:
        self.security = security
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, name, password = parts
        if not name:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        credential = self.security.credential(name)
        if credential is None or not credential.plain_matches(password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != name:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.user = name
        return b""

    @property
    def done(self) -> bool:
        return self.user is not None


class _Scram:
    """SCRAM-SHA-256/512 through scramp's server; any failure gets Kafka's generic message,
    which by design does not say whether the user exists."""

    def __init__(self, security: Security, mechanism: str) -> None:
        from scramp import ScramMechanism

        self.security = security
        self.mechanism = mechanism
        self.server = ScramMechanism(mechanism).make_server(self._auth_info)
        self.user: str | None = None
        self._name: str | None = None
        self._first = True

    def _auth_info(self, name: str) -> tuple[bytes, bytes, bytes, int]:
        from scramp import ScramException

        credential = self.security.credential(name)
        if credential is None:
            raise ScramException("unknown user")
        self._name = name
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def step(self, token: bytes) -> bytes:
        from scramp import ScramException

        try:
            if self._first:
                self._first = False
                self.server.set_client_first(token.decode("utf-8"))
                return bytes(self.server.get_server_first().encode())
            self.server.set_client_final(token.decode("utf-8"))
            final = self.server.get_server_final()
        except (ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}") from exc
        self.user = self._name
        return bytes(final.encode())

    @property
    def done(self) -> bool:
        return self.user is not None


class SaslSession:
    """One connection's SASL state: `admits` says whether a request may be served yet;
    `handshake`/`authenticate` answer the two SASL APIs; `principal` is set once authenticated;
    `closing` asks the server to close the connection once the last answer is sent."""

    def __init__(self, security: Security) -> None:
        self.security = security
        self.principal: Principal | None = None
        self.closing = False
        self._mechanism: _Plain | _Scram | None = None
        self._bare = False

    @property
    def complete(self) -> bool:
        return self.principal is not None

    @property
    def bare_tokens(self) -> bool:
        """Whether the next frame is a bare SASL token (after a v0 handshake), not a request."""
        return self._bare and not self.complete

    def admits(self, api_key: int) -> bool:
        """Kafka's authenticator serves only ApiVersions and the SASL APIs until it completes;
        SaslAuthenticate only after a handshake."""
        if self.complete:
            return True
        if api_key == SASL_AUTHENTICATE:
            return self._mechanism is not None and not self._bare
        return api_key in (API_VERSIONS, SASL_HANDSHAKE) and self._mechanism is None

    def handshake(self, version: int, request: Any) -> Any:
        R = APIS[SASL_HANDSHAKE][1]
        enabled = [self.security.mechanism] if self.security.mechanism else []
        if self.complete:
            return not_sasl_listener(SASL_HANDSHAKE, version)
        if request.mechanism not in enabled:
            self.closing = True
            return R(version=version, error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
        self._mechanism = (_Plain(self.security) if request.mechanism == "PLAIN"
                           else _Scram(self.security, request.mechanism))
        self._bare = version == 0
        return R(version=version, error_code=0, mechanisms=enabled)

    def bare_token(self, token: bytes) -> bytes | None:
        """The answer to a bare token after a v0 handshake (None: refused, close without a word,
        as Kafka does when it cannot send SaslAuthenticate's error)."""
        assert self._mechanism is not None
        try:
            answer = self._mechanism.step(token)
        except AuthenticationFailed:
            return None
        self._complete_if_done()
        return answer

    def authenticate(self, version: int, request: Any) -> Any:
        R = APIS[SASL_AUTHENTICATE][1]
        if self.complete or self._mechanism is None:
            return not_sasl_listener(SASL_AUTHENTICATE, version)
        try:
            token = self._mechanism.step(bytes(request.auth_bytes))
        except AuthenticationFailed as exc:
            self.closing = True
            return R(version=version, error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b"",
                     session_lifetime_ms=0)
        self._complete_if_done()
        # session_lifetime_ms 0: no re-authentication (KIP-368) is asked of the client; the
        # message is Kafka's default for a string field, empty rather than null
        return R(version=version, error_code=0, error_message="", auth_bytes=token, session_lifetime_ms=0)

    def _complete_if_done(self) -> None:
        assert self._mechanism is not None
        if self._mechanism.done:
            assert self._mechanism.user is not None
            credential = self.security.credential(self._mechanism.user)
            self.principal = Principal(self._mechanism.user, admin=bool(credential and credential.admin))


def not_sasl_listener(api_key: int, version: int) -> Any:
    """What KafkaApis answers when the SASL APIs arrive on a listener without SASL."""
    R = APIS[api_key][1]
    if api_key == SASL_HANDSHAKE:
        return R(version=version, error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    return R(version=version, error_code=ILLEGAL_SASL_STATE,
             error_message="SaslAuthenticate request received after successful authentication", auth_bytes=b"",
             session_lifetime_ms=0)
