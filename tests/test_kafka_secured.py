"""A real cluster's secured client listener without a JVM: the broker settings each `--security`
mode renders, the logins as a broker needs them, the ACLs of a login without the admin flag.
(The same settings against real brokers: tests/test_security_e2e.py.)"""
from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
from scramp import ScramMechanism

from kreassign.cluster.errors import InputError
from kreassign.sandbox.acl import NOT_ADMIN
from kreassign.sandbox.kafka_engine.node_config import CONTROLLER_ID, Layout, properties
from kreassign.sandbox.kafka_engine.secured import (
    VIEWER_ACLS, KafkaLogin, client_listener, keystore_pem, viewer_acl_filters, viewer_acls,
)
from kreassign.sandbox.security import User, build_security

OPS = User("ops", 'p"w\\d', admin=True)
VIEWER = User("viewer", "v-pw")


def broker_properties(tmp_path: Path, mode: str, mechanism: str | None, users: tuple[User, ...]) -> dict[str, str]:
    security = build_security(mode, mechanism, users, tmp_path)
    logins = [KafkaLogin.make(u, str(security.mechanism)) for u in users]
    listener = client_listener(security, logins, tmp_path / "server-keystore.pem")
    layout = Layout(racks={1: None}, ports={1: 9001}, controller_port=9100, data_dir=tmp_path, log_dirs=1,
                    internal_ports={1: 9201} if listener.secured else {}, client=listener)
    lines = [line.split("=", 1) for line in properties(layout, 1).splitlines()]
    return {k: v for k, v in lines}


def test_sasl_ssl_with_scram(tmp_path: Path) -> None:
    props = broker_properties(tmp_path, "sasl_ssl", "SCRAM-SHA-512", (OPS, VIEWER))
    wanted = {
        "listeners": "EXTERNAL://127.0.0.1:9001,INTERNAL://127.0.0.1:9201",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.external.ssl.keystore.type": "PEM",
        "listener.name.external.ssl.keystore.location": str(tmp_path / "server-keystore.pem"),
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.external.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:ops",
        "allow.everyone.if.no.acl.found": "false",
    }
    assert {k: props.get(k) for k in wanted} == wanted
    assert OPS.password not in "".join(props.values())  # SCRAM credentials live in the metadata log


def test_plain_keeps_the_passwords_in_the_jaas_text(tmp_path: Path) -> None:
    props = broker_properties(tmp_path, "sasl_plaintext", "PLAIN", (OPS, VIEWER))
    # .properties doubles the backslashes of the JAAS text, which escapes the quote and backslash
    assert props["listener.name.external.plain.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_ops="p\\\\"w\\\\\\\\d" '
        'user_viewer="v-pw";')
    assert props["listener.security.protocol.map"].endswith("EXTERNAL:SASL_PLAINTEXT")
    assert "ssl.keystore.type" not in "".join(props)


def test_tls_alone_has_no_authorizer(tmp_path: Path) -> None:
    props = broker_properties(tmp_path, "tls", None, ())
    assert props["listener.security.protocol.map"].endswith("EXTERNAL:SSL")
    assert not [k for k in props if "sasl" in k or k in ("authorizer.class.name", "super.users")]


def test_the_controller_authorizes_what_brokers_forward(tmp_path: Path) -> None:
    security = build_security("sasl_plaintext", "SCRAM-SHA-256", (OPS,), tmp_path)
    listener = client_listener(security, [KafkaLogin.make(OPS, "SCRAM-SHA-256")], None)
    layout = Layout(racks={1: None}, ports={1: 9001}, controller_port=9100, data_dir=tmp_path, log_dirs=1,
                    internal_ports={1: 9201}, client=listener)
    controller = properties(layout, CONTROLLER_ID)
    assert "super.users=User:ANONYMOUS;User:ops\n" in controller and "EXTERNAL" not in controller


@pytest.mark.parametrize("mechanism, digest", [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_scram_logins_carry_a_salted_password_kafka_derives_scramps_keys_from(mechanism: str, digest: str) -> None:
    login = KafkaLogin.make(VIEWER, mechanism)
    assert login.password is None and VIEWER.password not in repr(login)
    client_key = hmac.new(login.salted_password, b"Client Key", digest).digest()
    _, stored, server, _ = ScramMechanism(mechanism).make_auth_info(VIEWER.password, iteration_count=login.iterations,
                                                                    salt=login.salt)
    assert hashlib.new(digest, client_key).digest() == stored
    assert hmac.new(login.salted_password, b"Server Key", digest).digest() == server
    assert KafkaLogin.from_json(login.to_json()) == login


def test_plain_user_names_must_suit_kafkas_jaas_parser() -> None:
    assert KafkaLogin.make(User("team.ops-1", "pw"), "PLAIN").password == "pw"
    with pytest.raises(InputError, match="--user ops@corp: with SASL/PLAIN a real broker reads user names"):
        KafkaLogin.make(User("ops@corp", "pw"), "PLAIN")
    assert KafkaLogin.make(User("ops@corp", "pw"), "SCRAM-SHA-256").name == "ops@corp"


def test_viewer_acls_are_the_emulators_describe_only_rights() -> None:
    created = {(c.resource_type, c.resource_name, c.principal, c.operation) for c in viewer_acls("viewer")}
    filters = {(f.resource_type_filter, f.resource_name_filter, f.principal_filter, f.operation)
               for f in viewer_acl_filters("viewer")}
    assert created == filters and len(created) == 8
    assert {op for _, _, ops in VIEWER_ACLS for op in ops} == NOT_ADMIN


def test_the_key_store_holds_the_pkcs8_key_then_the_chain(tmp_path: Path) -> None:
    build_security("tls", None, (), tmp_path)
    pem = keystore_pem(str(tmp_path)).decode()
    assert pem.startswith("-----BEGIN PRIVATE KEY-----") and pem.count("-----BEGIN CERTIFICATE-----") >= 1
    assert pem.index("PRIVATE KEY") < pem.index("CERTIFICATE")
