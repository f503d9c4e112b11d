"""The sandbox's security pieces without a network: users and stored credentials, client
properties, the SASL state machine (PLAIN and SCRAM driven by scramp's client), ACL refusals
with Kafka's codes; then the few wire rules that need a socket."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest
from scramp import ScramClient

from kreassign.cluster.client_config import load_client_config
from kreassign.cluster.errors import InputError
from kreassign.sandbox.acl import Principal, refusal
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.rawclient import encode, read_frame, roundtrip
from kreassign.sandbox.sasl import SaslSession
from kreassign.sandbox.security import (
    Credential, Security, User, build_security, client_properties, redacted, write_client_properties,
)

ALICE = User("alice", "al1ce-pw", admin=True)
BOB = User("bob", "b0b-pw")


@pytest.mark.parametrize("text, user", [
    ("alice:pw", User("alice", "pw")),
    ("alice:pw:admin", User("alice", "pw", admin=True)),
    ("alice:p:w", User("alice", "p:w")),
    ("alice:p:w:admin", User("alice", "p:w", admin=True)),
])
def test_user_parse(text: str, user: User) -> None:
    assert User.parse(text) == user


@pytest.mark.parametrize("text", ["alice", ":pw", "alice:", "al,ice:pw", "alice::admin"])
def test_user_parse_refuses(text: str) -> None:
    with pytest.raises(InputError, match="--user"):
        User.parse(text)


def test_user_repr_hides_the_password() -> None:
    assert "al1ce-pw" not in repr(ALICE)


@pytest.mark.parametrize("security, mechanism, users, message", [
    ("sasl_plaintext", None, (), "--security sasl_plaintext needs at least one --user"),
    ("tls", None, (ALICE,), "--user and --sasl-mechanism need --security sasl_plaintext or sasl_ssl, not tls"),
    ("plaintext", "PLAIN", (), "--user and --sasl-mechanism need"),
    ("sasl_ssl", "PLAIN", (ALICE, ALICE), "--user alice is given more than once"),
])
def test_build_security_refuses(tmp_path: Path, security: str, mechanism: str | None, users: tuple[User, ...],
                                message: str) -> None:
    with pytest.raises(InputError, match=message):
        build_security(security, mechanism, users, tmp_path)


def test_credentials_keep_no_password_and_survive_json(tmp_path: Path) -> None:
    security = build_security("sasl_plaintext", "SCRAM-SHA-512", (ALICE, BOB), tmp_path)
    assert ALICE.password not in str(security.to_json()) and not list(tmp_path.iterdir())
    assert Security.from_json(security.to_json()) == security
    plain = Credential.make(BOB, "PLAIN")
    assert plain.plain_matches("b0b-pw") and not plain.plain_matches("b0b-pW")


def test_client_properties_and_their_redacted_form(tmp_path: Path) -> None:
    security = build_security("sasl_ssl", "SCRAM-SHA-256", (ALICE, User("q", 'a"b\\c')), tmp_path)
    text = client_properties(security, ALICE, "127.0.0.1:9093")
    assert text == (
        "bootstrap.servers=127.0.0.1:9093\n"
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={tmp_path / 'ca.pem'}\n"
        "ssl.truststore.type=PEM\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="al1ce-pw";\n')
    assert redacted(text).splitlines()[-1] == ('sasl.jaas.config=org.apache.kafka.common.security.scram.'
                                               'ScramLoginModule required username="alice" password="********";')
    # the JAAS text escapes the quote and the backslash, the .properties file its backslashes
    assert 'password="a\\\\"b\\\\\\\\c";' in client_properties(security, User("q", 'a"b\\c'), "h:1")
    paths = write_client_properties(security, (ALICE,), "h:1", tmp_path)
    assert paths == [tmp_path / "client-alice.properties"] and paths[0].stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "server-key.pem").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("password", ['a"b\\c', "x\\\\y", 'say "hi"', "tab\\t and \\n"])
def test_client_properties_read_back_as_written(tmp_path: Path, password: str) -> None:
    """What kreassign (and Java's Properties.load, whose escapes it follows) reads from the file
    is the password given, however it is quoted."""
    security = build_security("sasl_plaintext", "PLAIN", (User("q", password),), tmp_path)
    (path,) = write_client_properties(security, (User("q", password),), "127.0.0.1:9092", tmp_path)
    config = load_client_config(str(path))
    assert (config.client_kwargs["sasl_plain_username"], config.client_kwargs["sasl_plain_password"]) == ("q", password)


# ---- the SASL exchange ----------------------------------------------------------------------

def session(mechanism: str) -> SaslSession:
    return SaslSession(Security("SASL_PLAINTEXT", mechanism, (Credential.make(ALICE, mechanism),
                                                               Credential.make(BOB, mechanism))))


def handshake(s: SaslSession, mechanism: str) -> object:
    return s.handshake(1, SaslHandshakeRequest(version=1, mechanism=mechanism))


def token(s: SaslSession, data: bytes) -> object:
    return s.authenticate(2, SaslAuthenticateRequest(version=2, auth_bytes=data))


def test_a_v0_handshake_is_followed_by_bare_tokens() -> None:
    s = session("PLAIN")
    assert s.handshake(0, SaslHandshakeRequest(version=0, mechanism="PLAIN")).error_code == 0
    assert s.bare_tokens and not s.admits(36)  # SaslAuthenticate frames belong to v1
    assert s.bare_token(b"\0alice\0al1ce-pw") == b""
    assert not s.bare_tokens and s.principal == Principal("alice", admin=True)
    refused = session("PLAIN")
    refused.handshake(0, SaslHandshakeRequest(version=0, mechanism="PLAIN"))
    assert refused.bare_token(b"\0alice\0nope") is None and refused.principal is None


def test_only_api_versions_and_the_handshake_come_first() -> None:
    s = session("PLAIN")
    assert [s.admits(k) for k in (18, 17, 36, 3, 32)] == [True, True, False, False, False]
    handshake(s, "PLAIN")
    assert [s.admits(k) for k in (18, 17, 36, 3)] == [False, False, True, False]


def test_unknown_mechanism_is_answered_then_closed() -> None:
    s = session("SCRAM-SHA-256")
    answer = handshake(s, "PLAIN")
    assert (answer.error_code, answer.mechanisms, s.closing) == (33, ["SCRAM-SHA-256"], True)


@pytest.mark.parametrize("data, message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0al1ce-pw", "Authentication failed: Invalid username or password"),
    (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0\0pw", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0al1ce-pw", "Authentication failed: Client requested an authorization id that is different "
                              "from username"),
])
def test_plain_refusals_carry_kafkas_messages(data: bytes, message: str) -> None:
    s = session("PLAIN")
    handshake(s, "PLAIN")
    answer = token(s, data)
    assert (answer.error_code, answer.error_message, s.closing, s.principal) == (58, message, True, None)


def test_plain_login_gives_the_principal() -> None:
    s = session("PLAIN")
    assert handshake(s, "PLAIN").error_code == 0
    answer = token(s, b"alice\0alice\0al1ce-pw")
    assert (answer.error_code, answer.error_message, answer.auth_bytes, answer.session_lifetime_ms) == (0, "", b"", 0)
    assert s.principal == Principal("alice", admin=True) and s.admits(3)
    assert handshake(s, "PLAIN").error_code == 34  # KafkaApis: ILLEGAL_SASL_STATE after authentication


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_with_scramps_client(mechanism: str) -> None:
    s = session(mechanism)
    handshake(s, mechanism)
    client = ScramClient([mechanism], "bob", "b0b-pw")
    first = token(s, client.get_client_first().encode())
    client.set_server_first(first.auth_bytes.decode())
    final = token(s, client.get_client_final().encode())
    client.set_server_final(final.auth_bytes.decode())  # the client checks the server's signature
    assert (final.error_code, s.principal) == (0, Principal("bob", admin=False))


@pytest.mark.parametrize("user, password", [("bob", "wrong"), ("nobody", "b0b-pw")])
def test_scram_refusal_does_not_say_why(user: str, password: str) -> None:
    s = session("SCRAM-SHA-256")
    handshake(s, "SCRAM-SHA-256")
    client = ScramClient(["SCRAM-SHA-256"], user, password)
    answer = token(s, client.get_client_first().encode())
    if answer.error_code == 0:
        client.set_server_first(answer.auth_bytes.decode())
        answer = token(s, client.get_client_final().encode())
    assert (answer.error_code, answer.error_message, s.closing) == (
        58, "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256", True)


# ---- ACLs -------------------------------------------------------------------------------------

def test_describe_only_principal_gets_kafkas_refusals() -> None:
    viewer = Principal("bob")
    alter = IncrementalAlterConfigsRequest(version=1, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(version=1, resource_type=4, resource_name="1", configs=[]),
        IncrementalAlterConfigsRequest.AlterConfigsResource(version=1, resource_type=2, resource_name="t", configs=[]),
    ], validate_only=False)
    answer = refusal(viewer, 44, 1, alter)
    assert [(r.resource_name, r.error_code, r.error_message) for r in answer.responses] == [
        ("1", 31, None), ("t", 29, "Topic authorization failed.")]  # as Kafka 3.9 and 4.4 answer
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    move = AlterPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=[Topic(version=0, name="t", partitions=[
        Topic.ReassignablePartition(version=0, partition_index=0, replicas=[1, 2])])])
    answer = refusal(viewer, 45, 0, move)
    assert answer.error_code == 31 and answer.error_message == (
        "Request Request(api=AlterPartitionReassignments, principal=User:bob, listenerName=ListenerName(CONTROLLER), "
        "securityProtocol=PLAINTEXT) needs ALTER permission.")
    assert [p.error_code for t in answer.responses for p in t.partitions] == [31]
    assert refusal(Principal("alice", admin=True), 45, 0, move) is None
    assert refusal(None, 45, 0, move) is None
    assert refusal(viewer, 32, 4, DescribeConfigsRequest(version=4, resources=[], include_synonyms=False,
                                                         include_documentation=False)) is None


# ---- on the wire ------------------------------------------------------------------------------

def test_a_request_before_authentication_closes_the_connection(sandbox_factory: object, tmp_path: Path) -> None:
    security = build_security("sasl_plaintext", "PLAIN", (ALICE,), tmp_path)
    sb: SandboxCluster = sandbox_factory(brokers=1, racks=0, topics=[], security=security)  # type: ignore[operator]
    with socket.create_connection(("127.0.0.1", sb.ports[1]), timeout=5) as sock:
        sock.sendall(encode(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False), 12, 1))
        with pytest.raises(ConnectionError):
            read_frame(sock)


def test_a_refused_login_is_answered_before_the_close(sandbox_factory: object, tmp_path: Path) -> None:
    security = build_security("sasl_plaintext", "PLAIN", (ALICE,), tmp_path)
    sb: SandboxCluster = sandbox_factory(brokers=1, racks=0, topics=[], security=security)  # type: ignore[operator]
    with socket.create_connection(("127.0.0.1", sb.ports[1]), timeout=5) as sock:
        sock.sendall(encode(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1))
        read_frame(sock)
        sock.sendall(encode(SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"), 2, 2))
        answer = SaslAuthenticateResponse.decode(read_frame(sock), version=2, header=True)
        assert (answer.error_code, answer.error_message) == (58, "Authentication failed: Invalid username or password")


def test_sasl_apis_on_a_listener_without_sasl(sandbox_factory: object) -> None:
    sb: SandboxCluster = sandbox_factory(brokers=1, racks=0, topics=[])  # type: ignore[operator]
    assert roundtrip(sb.ports[1], SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34
    answer = roundtrip(sb.ports[1], SaslAuthenticateRequest(auth_bytes=b""), 2)
    assert (answer.error_code, answer.error_message) == (
        34, "SaslAuthenticate request received after successful authentication")


def test_client_quota_changes_need_an_admin() -> None:
    from kafka.protocol.admin import AlterClientQuotasRequest

    Entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(version=1, validate_only=False, entries=[Entry(version=1, entity=[
        Entry.EntityData(version=1, entity_type="client-id", entity_name=None)], ops=[])])
    answer = refusal(Principal("bob"), 49, 1, request)
    assert [(e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity])
            for e in answer.entries] == [(31, "Cluster authorization failed.", [("client-id", None)])]
