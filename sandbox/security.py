"""How the sandbox's listeners are secured: TLS material, SASL users and their stored credentials.

`SecurityOptions` is what `kreassign sandbox start --security ... --user ...` asks for; it turns
passwords into stored credentials at once (salted keys, as Kafka keeps SCRAM credentials), so
only the client properties files written for the operator ever hold a password. TLS
certificates are made at start with `trustme` (a throwaway CA) and written to the state dir as
PEM, private keys 0600.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kreassign.cluster.errors import InputError
from kreassign.sandbox.private_files import write_private

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
# `--security` choice -> Kafka's security.protocol
PROTOCOLS: dict[str, SecurityProtocol] = {"plaintext": "PLAINTEXT", "tls": "SSL", "sasl_plaintext": "SASL_PLAINTEXT",
                                  "sasl_ssl": "SASL_SSL"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096  # Kafka's minimum for both SCRAM mechanisms
CA_FILE = "ca.pem"
SERVER_CERT_FILE = "server.pem"
SERVER_KEY_FILE = "server-key.pem"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class User:
    """A SASL user as given on the command line (`name:password[:admin]`)."""

    name: str
    password: str = field(repr=False)
    admin: bool = False

    @classmethod
    def parse(cls, text: str) -> User:
        """Parse `name:password` or `name:password:admin`.

        Raises:
            InputError: no name, no password, or a third field other than `admin`.
        """
        name, sep, rest = text.partition(":")
        password, admin = rest, False
        if rest.endswith(":admin"):
            password, admin = rest[:-len(":admin")], True
        if not name or not sep or not password:
            raise InputError(f"--user wants name:password or name:password:admin, got '{name}:...'")
        if any(c in name for c in ',="\0'):
            raise InputError(f"--user name '{name}' may not contain , = \" or NUL")
        return cls(name, password, admin)


@dataclass(frozen=True)
class Credential:
    """What the server keeps for a user: SCRAM's salted keys (RFC 5802), or a salted PBKDF2 hash
    of the password for PLAIN. Never the password itself."""

    name: str
    admin: bool
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def make(cls, user: User, mechanism: str) -> Credential:
        salt = secrets.token_bytes(16)
        if mechanism == "PLAIN":
            digest = hashlib.pbkdf2_hmac("sha256", user.password.encode(), salt, SCRAM_ITERATIONS)
            return cls(user.name, user.admin, mechanism, salt, SCRAM_ITERATIONS, digest, b"")
        from scramp import ScramMechanism

        salt_out, stored, server, iterations = ScramMechanism(mechanism).make_auth_info(
            user.password, iteration_count=SCRAM_ITERATIONS, salt=salt)
        return cls(user.name, user.admin, mechanism, salt_out, iterations, stored, server)

    def plain_matches(self, password: str) -> bool:
        digest = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, self.iterations)
        return hmac.compare_digest(digest, self.stored_key)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "admin": self.admin, "mechanism": self.mechanism, "salt": self.salt.hex(),
                "iterations": self.iterations, "stored_key": self.stored_key.hex(),
                "server_key": self.server_key.hex()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Credential:
        return cls(d["name"], bool(d["admin"]), d["mechanism"], bytes.fromhex(d["salt"]), int(d["iterations"]),
                   bytes.fromhex(d["stored_key"]), bytes.fromhex(d["server_key"]))


@dataclass(frozen=True)
class Security:
    """The listeners' security: protocol, SASL mechanism and credentials, and where the TLS files are."""

    protocol: SecurityProtocol = "PLAINTEXT"
    mechanism: str | None = None
    credentials: tuple[Credential, ...] = ()
    tls_dir: str | None = None
    """Holds ca.pem, server.pem and server-key.pem (SSL and SASL_SSL only)."""

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def credential(self, name: str) -> Credential | None:
        return next((c for c in self.credentials if c.name == name), None)

    def server_context(self) -> ssl.SSLContext | None:
        """The listeners' TLS context (None for plaintext listeners)."""
        if not self.tls:
            return None
        assert self.tls_dir is not None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(self.tls_dir, SERVER_CERT_FILE), os.path.join(self.tls_dir, SERVER_KEY_FILE))
        return ctx

    def to_json(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "mechanism": self.mechanism, "tls_dir": self.tls_dir,
                "credentials": [c.to_json() for c in self.credentials]}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Security:
        if not d:
            return cls()
        return cls(d["protocol"], d.get("mechanism"), tuple(Credential.from_json(c) for c in d.get("credentials", ())),
                   d.get("tls_dir"))


def build_security(security: str, mechanism: str | None, users: tuple[User, ...], directory: Path) -> Security:
    """Check the options, make the TLS files (if any) in `directory` and the stored credentials.

    Raises:
        InputError: SASL without users, a user named twice, users or a mechanism without SASL.
    """
    protocol = PROTOCOLS[security]
    sasl = protocol.startswith("SASL_")
    if sasl and not users:
        raise InputError(f"--security {security} needs at least one --user name:password[:admin]")
    if not sasl and (users or mechanism):
        raise InputError(f"--user and --sasl-mechanism need --security sasl_plaintext or sasl_ssl, not {security}")
    names = [u.name for u in users]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"--user {twice[0]} is given more than once")
    chosen = (mechanism or "PLAIN").upper() if sasl else None
    tls_dir = None
    if protocol in ("SSL", "SASL_SSL"):
        write_tls_files(directory)
        tls_dir = str(directory)
    return Security(protocol, chosen, tuple(Credential.make(u, chosen) for u in users) if chosen else (), tls_dir)


def write_tls_files(directory: Path) -> None:
    """A fresh CA and a server certificate for 127.0.0.1 and localhost, as PEM files. The key is
    PKCS#8 (`BEGIN PRIVATE KEY`): Kafka's PEM key stores read no other form (trustme writes SEC1,
    `BEGIN EC PRIVATE KEY`, which a broker refuses with "algid parse error")."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="kreassign sandbox")
    cert = ca.issue_cert("127.0.0.1", "localhost")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    (directory / CA_FILE).write_bytes(ca.cert_pem.bytes())
    (directory / SERVER_CERT_FILE).write_bytes(b"".join(p.bytes() for p in cert.cert_chain_pems))
    write_private(directory / SERVER_KEY_FILE, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def client_properties(security: Security, user: User | None, bootstrap: str) -> str:
    """A `--command-config` file for `user` (None: the TLS-only or plaintext listener)."""
    settings = {"bootstrap.servers": bootstrap, "security.protocol": security.protocol}
    if security.tls:
        assert security.tls_dir is not None
        settings.update({"ssl.truststore.location": os.path.join(security.tls_dir, CA_FILE),
                         "ssl.truststore.type": "PEM"})
    if security.sasl and user is not None:
        module = PLAIN_MODULE if security.mechanism == "PLAIN" else SCRAM_MODULE
        settings.update({"sasl.mechanism": str(security.mechanism), "sasl.jaas.config":
                         f'{module} required username="{user.name}" password="{jaas_escape(user.password)}";'})
    return "".join(f"{key}={properties_escape(value)}\n" for key, value in settings.items())


def properties_escape(value: str) -> str:
    """A value as a Java .properties file holds it: backslashes doubled (Properties.load reads
    `\\x` as `x`), line breaks escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def jaas_escape(value: str) -> str:
    """A JAAS option value between double quotes (Java's StreamTokenizer reads backslash escapes)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def properties_path(directory: Path, user: User | None) -> Path:
    return directory / (f"client-{user.name}.properties" if user is not None else "client.properties")


def write_client_properties(security: Security, users: tuple[User, ...], bootstrap: str,
                            directory: Path) -> list[Path]:
    """One ready `--command-config` file per user (or one without SASL), each 0600."""
    written = []
    for user in users or (None,):
        path = properties_path(directory, user)
        write_private(path, client_properties(security, user, bootstrap))
        written.append(path)
    return written


def redacted(properties: str) -> str:
    """The properties text with the JAAS password replaced, for printing."""
    out = []
    for line in properties.splitlines():
        if line.startswith("sasl.jaas.config="):
            head, _, _ = line.partition(' password="')
            line = head + ' password="********";'
        out.append(line)
    return "\n".join(out) + "\n"
