"""A real local cluster with a secured client listener: the listener's settings, its logins and
the ACLs of logins without the admin flag.

The same `--security` and `--user` options as the emulator's (`sandbox.security`), on Kafka's
own machinery:

* TLS: the broker's PEM key store (`ssl.keystore.type=PEM`) holds the sandbox's server key and
  certificate (`sandbox.security.write_tls_files`); clients trust `ca.pem`.
* SASL/PLAIN: Kafka's PlainLoginModule keeps each user's password in the listener's JAAS text,
  so the broker properties (0600) hold them; SASL/SCRAM: credentials in the metadata log, put
  there with AlterUserScramCredentials (salted passwords; no password leaves this process).
* Kafka's StandardAuthorizer: admin users are super users; every other user gets the ACLs of
  `VIEWER_ACLS`, what the emulator lets a user without the admin flag do (`sandbox.acl`).

Logins and ACLs are put on the cluster at every start through a broker's internal PLAINTEXT
listener (principal User:ANONYMOUS, a super user), so a cluster restarted from its state dir has
exactly the logins that start names: those of the previous start that are gone lose their SCRAM
credentials and ACLs.
"""
from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreassign.cluster.errors import ClusterUnreachable, InputError
from kreassign.sandbox.acl import AclOperation
from kreassign.sandbox.kafka_engine.node_config import Listener
from kreassign.sandbox.security import (
    PLAIN_MODULE, SCRAM_ITERATIONS, SCRAM_MODULE, SERVER_CERT_FILE, SERVER_KEY_FILE, Security, User, jaas_escape,
)

KEYSTORE_FILE = "server-keystore.pem"
SCRAM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's JaasConfig reads option names with a StreamTokenizer: letters, digits, '.', '_', '-', '$'
_JAAS_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._$-]*$")

TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL = 3
ALLOW = 3
ANY_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
VIEWER_ACLS: tuple[tuple[int, str, tuple[AclOperation, ...]], ...] = (
    (CLUSTER, CLUSTER_NAME, (AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)),
    (TOPIC, "*", (AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.READ, AclOperation.WRITE)),
    (GROUP, "*", (AclOperation.DESCRIBE, AclOperation.READ)),
)
"""(resource type, literal name, operations) allowed to a user without the admin flag: describe
the cluster, its configs and every topic, produce and consume (the emulator's `acl.NOT_ADMIN`)"""


@dataclass(frozen=True)
class KafkaLogin:
    """A `--user` as a real broker needs it: PLAIN's password (Kafka's JAAS keeps it), or
    SCRAM's salt and salted password (what AlterUserScramCredentials sends)."""

    name: str
    admin: bool
    mechanism: str
    password: str | None = field(default=None, repr=False)
    salt: bytes = b""
    salted_password: bytes = field(default=b"", repr=False)
    iterations: int = SCRAM_ITERATIONS

    @classmethod
    def make(cls, user: User, mechanism: str) -> KafkaLogin:
        """Raises InputError for a PLAIN user name Kafka's JAAS parser cannot read."""
        if mechanism == "PLAIN":
            if not _JAAS_NAME.match(user.name):
                raise InputError(f"--user {user.name}: with SASL/PLAIN a real broker reads user names from its JAAS "
                                 "config, which takes only letters, digits, '.', '_', '-' and '$' (starting with a "
                                 "letter); pick another name or use a SCRAM mechanism")
            return cls(user.name, user.admin, mechanism, password=user.password)
        salt = secrets.token_bytes(24)
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], user.password.encode(), salt, SCRAM_ITERATIONS)
        return cls(user.name, user.admin, mechanism, salt=salt, salted_password=salted)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "admin": self.admin, "mechanism": self.mechanism, "password": self.password,
                "salt": self.salt.hex(), "salted_password": self.salted_password.hex(),
                "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KafkaLogin:
        return cls(d["name"], bool(d["admin"]), d["mechanism"], d.get("password"), bytes.fromhex(d["salt"]),
                   bytes.fromhex(d["salted_password"]), int(d["iterations"]))


def client_listener(security: Security, logins: Sequence[KafkaLogin], keystore: Path | None) -> Listener:
    """The client listener of `security` (PLAINTEXT: Kafka's default listener).

    Args:
        keystore: the broker's PEM key store (`keystore_pem`), for SSL and SASL_SSL.
    """
    if security.protocol == "PLAINTEXT":
        return Listener()
    ssl: dict[str, str] = {}
    if security.tls:
        assert keystore is not None
        ssl = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}
    jaas = None
    if security.mechanism == "PLAIN":
        users = " ".join(f'user_{login.name}="{jaas_escape(login.password or "")}"' for login in logins)
        jaas = f"{PLAIN_MODULE} required {users};"
    elif security.mechanism is not None:
        jaas = f"{SCRAM_MODULE} required;"
    return Listener(security.protocol, security.mechanism, jaas, ssl,
                    super_users=tuple(login.name for login in logins if login.admin),
                    authorizer=security.sasl)


def keystore_pem(tls_dir: str) -> bytes:
    """The broker's PEM key store: the private key (PKCS#8) and then its certificate chain."""
    folder = Path(tls_dir)
    return (folder / SERVER_KEY_FILE).read_bytes() + (folder / SERVER_CERT_FILE).read_bytes()


def viewer_acls(name: str) -> list[Any]:
    """CreateAcls entries of VIEWER_ACLS for the user `name`."""
    from kafka.protocol.admin import CreateAclsRequest

    Creation = CreateAclsRequest.AclCreation
    return [Creation(resource_type=kind, resource_name=resource, resource_pattern_type=LITERAL,
                     principal=f"User:{name}", host=ANY_HOST, operation=int(op), permission_type=ALLOW)
            for kind, resource, operations in VIEWER_ACLS for op in operations]


def viewer_acl_filters(name: str) -> list[Any]:
    """DeleteAcls filters matching exactly what `viewer_acls(name)` creates."""
    from kafka.protocol.admin import DeleteAclsRequest

    Filter = DeleteAclsRequest.DeleteAclsFilter
    return [Filter(resource_type_filter=kind, resource_name_filter=resource, pattern_type_filter=LITERAL,
                   principal_filter=f"User:{name}", host_filter=ANY_HOST, operation=int(op), permission_type=ALLOW)
            for kind, resource, operations in VIEWER_ACLS for op in operations]


def apply_logins(ports: Sequence[int], logins: Sequence[KafkaLogin], previous: Iterable[str], *,
                 acls: bool = True, timeout_s: float = 60.0) -> None:
    """Put `logins` on the cluster through the brokers' internal PLAINTEXT `ports`: SCRAM
    credentials upserted, the ACLs of users without the admin flag created; the SCRAM credentials
    and ACLs of `previous` logins that are no longer listed (or are admins now) removed. Without
    `acls` (no authorizer: Kafka refuses the ACL APIs with SECURITY_DISABLED) only credentials.
    Returns once every broker serves them.

    Raises:
        ClusterUnreachable: the cluster refused a change or its brokers did not all learn it in time.
    """
    from kafka.protocol.admin import (
        AlterUserScramCredentialsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeUserScramCredentialsRequest,
    )

    names = {login.name for login in logins}
    gone = sorted(set(previous) - names)
    scram = [login for login in logins if login.mechanism in SCRAM_CODES]
    deadline = time.monotonic() + timeout_s
    port = ports[0]
    deletions = []
    if gone:  # only credentials that exist: Kafka refuses a request naming one twice or a missing one
        described = _send(port, DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName(name=name) for name in gone]), 0, deadline)
        deletions = [AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=r.user, mechanism=c.mechanism)
                     for r in described.results if r.error_code == 0 for c in r.credential_infos]
    upserts = [AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=login.name, mechanism=SCRAM_CODES[login.mechanism], iterations=login.iterations, salt=login.salt,
        salted_password=login.salted_password) for login in scram]
    if deletions or upserts:
        answer = _send(port, AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upserts), 0, deadline)
        failed = [r for r in answer.results if r.error_code]
        if failed:
            raise ClusterUnreachable(f"the cluster refused the SCRAM credentials of {failed[0].user}: "
                                     f"{failed[0].error_message} (error {failed[0].error_code})")
    stale = [f for login in logins if login.admin for f in viewer_acl_filters(login.name)]
    stale += [f for name in gone for f in viewer_acl_filters(name)]
    if stale and acls:
        answer = _send(port, DeleteAclsRequest(filters=stale), 2, deadline)
        _check("remove the ACLs of earlier logins", [r.error_code for r in answer.filter_results])
    creations = [c for login in logins if not login.admin for c in viewer_acls(login.name)] if acls else []
    if creations:
        answer = _send(port, CreateAclsRequest(creations=creations), 2, deadline)
        _check("create the ACLs of the logins without admin", [r.error_code for r in answer.results])
    viewers = [login.name for login in logins if not login.admin] if acls else []
    _await_everywhere(ports, scram, viewers, gone, deadline, acls=acls)


def _await_everywhere(ports: Sequence[int], scram: Sequence[KafkaLogin], viewers: Sequence[str],
                      gone: Sequence[str], deadline: float, *, acls: bool) -> None:
    """Until every broker serves the credentials and ACLs (brokers learn them from the metadata
    log a moment after the controller took them)."""
    from kafka.protocol.admin import DescribeUserScramCredentialsRequest

    wanted_scram = {login.name: SCRAM_CODES[login.mechanism] for login in scram}
    wanted_acls = {(f"User:{name}", kind, resource, int(op))
                   for name in viewers for kind, resource, operations in VIEWER_ACLS for op in operations}
    for port in ports:
        while True:
            described = _send(port, DescribeUserScramCredentialsRequest(users=None), 0, deadline)
            known = {r.user: {c.mechanism for c in r.credential_infos} for r in described.results
                     if r.error_code == 0}
            present = _present_acls(port, deadline) if acls else set()
            if all(code in known.get(name, ()) for name, code in wanted_scram.items()) \
                    and not any(name in known for name in gone) and wanted_acls <= present:
                break
            if time.monotonic() > deadline:
                raise ClusterUnreachable(f"the broker on port {port} did not learn the logins and ACLs in time")
            time.sleep(0.1)


def _present_acls(port: int, deadline: float) -> set[tuple[str, int, str, int]]:
    from kafka.protocol.admin import DescribeAclsRequest

    described = _send(port, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1), 2, deadline)
    return {(a.principal, r.resource_type, r.resource_name, a.operation)
            for r in described.resources for a in r.acls if a.permission_type == ALLOW}


def _send(port: int, request: Any, version: int, deadline: float) -> Any:
    """One request to the broker on `port`, retried while the port refuses connections (a broker
    opens its listeners a moment after it registered) until `deadline`."""
    from kreassign.sandbox.rawclient import roundtrip

    while True:
        try:
            return roundtrip(port, request, version, response=_response_class(request), timeout_s=30.0)
        except (ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise ClusterUnreachable(f"the broker on port {port} did not accept connections in time") from None
            time.sleep(0.2)


def _response_class(request: Any) -> Any:
    import kafka.protocol.admin as admin

    return getattr(admin, type(request).__name__.replace("Request", "Response"))


def _check(what: str, codes: Iterable[int]) -> None:
    failed = [c for c in codes if c]
    if failed:
        raise ClusterUnreachable(f"could not {what}: error {failed[0]}")
