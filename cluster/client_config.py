"""Kafka client properties (`--command-config`) mapped onto kafka-python's KafkaAdminClient.

Reads the Java properties file Kafka's own tools take, understands the security settings an
operator actually uses (PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL, PLAIN and SCRAM logins, PEM trust
and key stores, inline PEM) and turns everything else into one warning instead of dropping it.
Stores kafka-python cannot read (JKS, PKCS12) fail with the command that converts them to PEM.
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kreassign.cluster.errors import PATH_CLIP, InputError, clip
from kreassign.cluster.java_properties import read_properties

DEFAULT_CLIENT_ID = "reassign-partitions-tool"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_LOGIN_MODULE_FOR = {"PLAIN": PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
                     "SCRAM-SHA-512": SCRAM_LOGIN_MODULE}
_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")

# Plain pass-through settings: Kafka key -> (kafka-python kwarg, converter).
_PASS_THROUGH_INT = {
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "receive.buffer.bytes": "receive_buffer_bytes",
    "send.buffer.bytes": "send_buffer_bytes",
}
_DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")


@dataclass(frozen=True)
class AdminTimeouts:
    """Deadlines and retry pacing of the admin adapter, with the Java admin client's defaults."""

    request_timeout_s: float = 30.0
    """`request.timeout.ms`: one request to one broker."""
    api_timeout_s: float = 60.0
    """`default.api.timeout.ms`: one operation, retries included."""
    retry_backoff_s: float = 0.1
    """`retry.backoff.ms`: first pause between retries, doubled each time (KIP-580)."""
    retry_backoff_max_s: float = 1.0
    """`retry.backoff.max.ms`: cap of that pause."""
    connect_timeout_s: float = 10.0
    """How long to try reaching the bootstrap servers, and a broker that refuses connections,
    before calling it unreachable."""

    def bounded_by(self, timeout_s: float) -> AdminTimeouts:
        """These timeouts with the whole operation limited to `timeout_s` seconds."""
        if timeout_s <= 0:
            raise InputError(f"the timeout must be positive, got {timeout_s:g}s")
        # The connect wait follows the timeout both ways: a longer timeout given on the command
        # line also waits longer for a slow bootstrap, a shorter one gives up sooner.
        return replace(
            self, api_timeout_s=timeout_s,
            request_timeout_s=min(self.request_timeout_s, timeout_s),
            connect_timeout_s=timeout_s,
        )


@dataclass(frozen=True)
class ClientConfig:
    """Everything needed to build a KafkaAdminClient, plus what the file said that we ignore."""

    bootstrap_servers: tuple[str, ...]
    client_kwargs: Mapping[str, Any] = field(default_factory=dict)
    timeouts: AdminTimeouts = field(default_factory=AdminTimeouts)
    warnings: tuple[str, ...] = ()
    temp_files: tuple[str, ...] = ()
    """Inline PEM material written to 0600 files; removed by `cleanup()`."""

    @property
    def security_protocol(self) -> str:
        return str(self.client_kwargs.get("security_protocol", "PLAINTEXT"))

    def admin_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `kafka.KafkaAdminClient`."""
        kwargs = dict(self.client_kwargs)
        kwargs["bootstrap_servers"] = list(self.bootstrap_servers)
        kwargs["request_timeout_ms"] = int(self.timeouts.request_timeout_s * 1000)
        kwargs["bootstrap_timeout_ms"] = int(self.timeouts.connect_timeout_s * 1000)
        kwargs["retry_backoff_ms"] = int(self.timeouts.retry_backoff_s * 1000)
        return kwargs

    def cleanup(self) -> None:
        """Remove the temporary PEM files written for inline certificates and keys."""
        for path in self.temp_files:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        shown = {k: ("***" if "password" in k else v) for k, v in self.client_kwargs.items()}
        return (f"ClientConfig(bootstrap_servers={self.bootstrap_servers!r}, "
                f"client_kwargs={shown!r}, timeouts={self.timeouts!r})")


# ---- sasl.jaas.config -----------------------------------------------------------------------

@dataclass(frozen=True)
class JaasConfig:
    """One JAAS login module entry: `<module> <flag> key="value" ...;`."""

    module: str
    flag: str
    options: Mapping[str, str]

    def __repr__(self) -> str:
        shown = {k: ("***" if k == "password" else v) for k, v in self.options.items()}
        return f"JaasConfig(module={self.module!r}, flag={self.flag!r}, options={shown!r})"


_JAAS_TOKEN = re.compile(r'\s*(?:(?P<q>"(?:[^"\\]|\\.)*")|(?P<w>[^\s=;"]+)|(?P<p>[=;]))', re.S)


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None:
            if text[pos:].strip().startswith('"'):
                raise InputError("sasl.jaas.config has a quoted value without its closing quote")
            raise InputError(f"sasl.jaas.config cannot be read near '{text[pos:pos + 20]}'")
        if match.group("q") is not None:
            tokens.append(("str", re.sub(r"\\(.)", r"\1", match.group("q")[1:-1])))
        elif match.group("w") is not None:
            tokens.append(("word", match.group("w")))
        else:
            tokens.append(("punct", match.group("p")))
        pos = match.end()
    return tokens


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse a `sasl.jaas.config` value holding exactly one login module.

    Raises:
        InputError: the value is not `<LoginModule> <flag> key=value ...;`.
    """
    tokens = _jaas_tokens(text)
    if len(tokens) < 2 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise InputError(
            "sasl.jaas.config must look like: org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="alice" password="secret";'
        )
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in _JAAS_FLAGS:
        raise InputError(f"sasl.jaas.config: '{flag}' is not a login module flag "
                         f"(use one of {', '.join(_JAAS_FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i] != ("punct", ";"):
        if (i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1] != ("punct", "=")
                or tokens[i + 2][0] == "punct"):
            raise InputError('sasl.jaas.config options must be written key="value" '
                             f"(problem at '{tokens[i][1]}')")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise InputError("sasl.jaas.config must end with ';' after the last option, as Kafka requires "
                         '(e.g. ... password="secret";)')
    if i + 1 < len(tokens):
        raise InputError("sasl.jaas.config must hold exactly one login module; "
                         "kreassign found text after the first ';'")
    return JaasConfig(module=module, flag=flag.lower(), options=options)


# ---- PEM material ---------------------------------------------------------------------------

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalise_pem(text: str, *, key: str) -> str:
    """Rebuild PEM blocks whose line breaks a properties file folded into spaces.

    Raises:
        InputError: no PEM block found.
    """
    blocks = _PEM_BLOCK.findall(text)
    if not blocks:
        raise InputError(f"{key} does not contain PEM data (-----BEGIN ...----- blocks)")
    out: list[str] = []
    for label, body in blocks:
        if any(":" in line for line in body.splitlines()):
            # Legacy encrypted keys carry "Proc-Type:" headers; keep their line structure.
            out.append(f"-----BEGIN {label}-----\n{body.strip()}\n-----END {label}-----\n")
            continue
        b64 = "".join(body.split())
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        out.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(out)


def _is_pem_file(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {clip(path, PATH_CLIP)}: {getattr(exc, 'strerror', None) or exc}") from None
    return b"-----BEGIN " in head


def _check_store(props: Mapping[str, str], kind: str) -> str | None:
    """Validate ssl.<kind>.location/type; return the PEM path or None. kind: truststore|keystore."""
    location = props.get(f"ssl.{kind}.location", "").strip()
    store_type = props.get(f"ssl.{kind}.type", "").strip().upper()
    if not location:
        return None
    if not os.path.isfile(location):
        raise InputError(f"ssl.{kind}.location {location} does not exist or is not a file")
    if store_type in ("JKS", "PKCS12") or (store_type == "" and not _is_pem_file(location)):
        found = store_type or ("PKCS12" if location.lower().endswith((".p12", ".pfx")) else "JKS")
        raise InputError(_store_conversion_hint(kind, location, found))
    if store_type not in ("", "PEM"):
        raise InputError(f"ssl.{kind}.type={store_type} is not supported; kreassign reads PEM only "
                         f"(set ssl.{kind}.type=PEM and point ssl.{kind}.location at a PEM file)")
    if not _is_pem_file(location):
        raise InputError(f"ssl.{kind}.location {location} is declared PEM but contains no "
                         "-----BEGIN ...----- block")
    return location


def _store_conversion_hint(kind: str, location: str, found: str) -> str:
    if kind == "truststore":
        how = (f"convert it with `keytool -exportcert -rfc -keystore {location} -alias <ca-alias> "
               "-file ca.pem`, then set ssl.truststore.location=ca.pem and ssl.truststore.type=PEM")
    elif found == "PKCS12":
        how = (f"convert it with `openssl pkcs12 -in {location} -out client.pem` (certificate chain "
               "and key in one file), then set ssl.keystore.location=client.pem, "
               "ssl.keystore.type=PEM and ssl.key.password if the key is encrypted")
    else:
        how = (f"convert it with `keytool -importkeystore -srckeystore {location} "
               "-destkeystore client.p12 -deststoretype PKCS12` and `openssl pkcs12 -in client.p12 "
               "-out client.pem`, then set ssl.keystore.location=client.pem, ssl.keystore.type=PEM "
               "and ssl.key.password if the key is encrypted")
    return f"ssl.{kind}.location points to a {found} store ({location}); kreassign reads PEM only: {how}"


def _write_pem(text: str, *, key: str, directory: str | None) -> str:
    pem = normalise_pem(text, key=key)
    fd, path = tempfile.mkstemp(prefix="kreassign-", suffix=".pem", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(pem)
    os.chmod(path, 0o600)
    return path


# ---- the mapping ----------------------------------------------------------------------------

def _int_setting(props: Mapping[str, str], key: str) -> int | None:
    raw = props.get(key)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise InputError(f"{key}={raw} is not a whole number") from None
    if value < 0:
        raise InputError(f"{key}={raw} must not be negative")
    return value


def _timeouts(props: Mapping[str, str]) -> AdminTimeouts:
    request = _int_setting(props, "request.timeout.ms")
    api = _int_setting(props, "default.api.timeout.ms")
    backoff = _int_setting(props, "retry.backoff.ms")
    backoff_max = _int_setting(props, "retry.backoff.max.ms")
    base = AdminTimeouts()
    request_s = base.request_timeout_s if request is None else request / 1000
    if api is not None and api < (request if request is not None else 30000):
        raise InputError(f"default.api.timeout.ms ({api}) must be at least request.timeout.ms "
                         f"({request if request is not None else 30000}), as in Kafka's admin client")
    api_s = max(base.api_timeout_s, request_s) if api is None else api / 1000
    backoff_s = base.retry_backoff_s if backoff is None else backoff / 1000
    backoff_max_s = base.retry_backoff_max_s if backoff_max is None else backoff_max / 1000
    if request_s <= 0 or api_s <= 0:
        raise InputError("request.timeout.ms and default.api.timeout.ms must be positive")
    return AdminTimeouts(request_timeout_s=request_s, api_timeout_s=api_s,
                         retry_backoff_s=backoff_s, retry_backoff_max_s=max(backoff_s, backoff_max_s),
                         connect_timeout_s=min(base.connect_timeout_s, api_s))


def _sasl_kwargs(props: Mapping[str, str], protocol: str) -> dict[str, Any]:
    mechanism = props.get("sasl.mechanism", "").strip().upper()
    if not protocol.startswith("SASL_"):
        return {}
    if not mechanism:
        raise InputError(
            f"security.protocol={protocol} but sasl.mechanism is not set (Kafka then uses GSSAPI, "
            "which kreassign does not support): set sasl.mechanism=PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    if mechanism not in SASL_MECHANISMS:
        raise InputError(f"sasl.mechanism={mechanism} is not supported; kreassign supports "
                         f"{', '.join(SASL_MECHANISMS)}")
    jaas_text = props.get("sasl.jaas.config", "").strip()
    if not jaas_text:
        raise InputError(
            f"sasl.mechanism={mechanism} needs sasl.jaas.config, for example: "
            f'sasl.jaas.config={_LOGIN_MODULE_FOR[mechanism]} required username="alice" password="secret";'
        )
    jaas = parse_jaas_config(jaas_text)
    expected = _LOGIN_MODULE_FOR[mechanism]
    if jaas.module != expected:
        raise InputError(f"sasl.jaas.config uses {jaas.module}, but sasl.mechanism={mechanism} "
                         f"needs {expected}")
    missing = [k for k in ("username", "password") if k not in jaas.options]
    if missing:
        raise InputError(f"sasl.jaas.config has no {' and no '.join(missing)}; "
                         f'add username="..." password="..." before the closing ;')
    return {"sasl_mechanism": mechanism, "sasl_plain_username": jaas.options["username"],
            "sasl_plain_password": jaas.options["password"]}


def _ssl_kwargs(props: Mapping[str, str], pem_dir: str | None,
                temp_files: list[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    identification = props.get("ssl.endpoint.identification.algorithm")
    if identification is not None:
        algo = identification.strip().lower()
        if algo not in ("", "https"):
            raise InputError(f"ssl.endpoint.identification.algorithm={identification} is not "
                             "supported; use https (verify the broker host name) or leave it empty")
        kwargs["ssl_check_hostname"] = algo == "https"

    truststore = _check_store(props, "truststore")
    inline_ca = props.get("ssl.truststore.certificates", "").strip()
    if truststore and inline_ca:
        raise InputError("set either ssl.truststore.location or ssl.truststore.certificates, not both")
    if inline_ca:
        path = _write_pem(inline_ca, key="ssl.truststore.certificates", directory=pem_dir)
        temp_files.append(path)
        kwargs["ssl_cafile"] = path
    elif truststore:
        kwargs["ssl_cafile"] = truststore

    keystore = _check_store(props, "keystore")
    chain = props.get("ssl.keystore.certificate.chain", "").strip()
    key = props.get("ssl.keystore.key", "").strip()
    if keystore and (chain or key):
        raise InputError("set either ssl.keystore.location or ssl.keystore.certificate.chain "
                         "with ssl.keystore.key, not both")
    if bool(chain) != bool(key):
        raise InputError("ssl.keystore.certificate.chain and ssl.keystore.key must be given together")
    if chain:
        cert_path = _write_pem(chain, key="ssl.keystore.certificate.chain", directory=pem_dir)
        temp_files.append(cert_path)
        key_path = _write_pem(key, key="ssl.keystore.key", directory=pem_dir)
        temp_files.append(key_path)
        kwargs["ssl_certfile"] = cert_path
        kwargs["ssl_keyfile"] = key_path
    elif keystore:
        # A PEM key store holds the private key and its certificate chain in one file.
        kwargs["ssl_certfile"] = keystore
    password = props.get("ssl.key.password") or props.get("ssl.keystore.password")
    if password and "ssl_certfile" in kwargs:
        kwargs["ssl_password"] = password
    return kwargs


_CONSUMED = {
    "bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.endpoint.identification.algorithm", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
    "ssl.keystore.password", "request.timeout.ms", "default.api.timeout.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "client.dns.lookup", *_PASS_THROUGH_INT,
}
# Kafka requires no password for a PEM trust store; Java rejects one, kafka-python needs none.
_HARMLESS_WITH_PEM = {"ssl.truststore.password"}


_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)$")


def check_address(text: str) -> str:
    """A bootstrap address, HOST:PORT ([IPv6]:PORT), checked before any connection is tried.

    Raises:
        InputError: no port, a port that is not a number from 1 to 65535, or a malformed host.
    """
    host, sep, port = text.rpartition(":")
    if not sep:
        raise InputError(f"bootstrap server '{clip(text)}' has no port: give HOST:PORT, e.g. kafka1:9092")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InputError(f"bootstrap server '{clip(text)}': '{clip(port, 20)}' is not a port (a number from 1 to "
                         "65535): give HOST:PORT, e.g. kafka1:9092")
    if not _HOST.match(host):
        raise InputError(f"bootstrap server '{clip(text)}': '{clip(host, 40)}' is not a host name or address: give "
                         "HOST:PORT, e.g. kafka1:9092")
    return text


def build_client_config(
    props: Mapping[str, str],
    *,
    bootstrap_server: str | None = None,
    source: str = "--command-config",
    pem_dir: str | None = None,
) -> ClientConfig:
    """Map Kafka client properties to kafka-python admin settings.

    Args:
        props: parsed properties (see `parse_properties`).
        bootstrap_server: `--bootstrap-server`; overrides `bootstrap.servers` in the file.
        source: where the properties came from, for messages.
        pem_dir: directory for inline PEM temp files (default: the system temp dir).

    Returns:
        The client config; call `cleanup()` when done if it wrote temp files.

    Raises:
        InputError: missing bootstrap servers, an unsupported protocol, mechanism or store type,
            a malformed JAAS entry or number.
    """
    warnings: list[str] = []
    servers_text = bootstrap_server if bootstrap_server else props.get("bootstrap.servers", "")
    servers = tuple(check_address(s.strip()) for s in servers_text.split(",") if s.strip())
    if not servers:
        raise InputError("no bootstrap servers: pass --bootstrap-server HOST:PORT "
                         "(or set bootstrap.servers in the --command-config file)")

    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper() or "PLAINTEXT"
    if protocol not in SECURITY_PROTOCOLS:
        raise InputError(f"security.protocol={props.get('security.protocol')} is not one of "
                         f"{', '.join(SECURITY_PROTOCOLS)}")
    kwargs: dict[str, Any] = {"security_protocol": protocol,
                              "client_id": props.get("client.id", "").strip() or DEFAULT_CLIENT_ID}
    for key, kwarg in _PASS_THROUGH_INT.items():
        value = _int_setting(props, key)
        if value is not None:
            kwargs[kwarg] = value
    dns = props.get("client.dns.lookup", "").strip()
    if dns:
        if dns not in _DNS_LOOKUPS:
            raise InputError(f"client.dns.lookup={dns} is not one of {', '.join(_DNS_LOOKUPS)}")
        kwargs["client_dns_lookup"] = dns
    timeouts = _timeouts(props)
    kwargs.update(_sasl_kwargs(props, protocol))

    temp_files: list[str] = []
    ssl_keys = [k for k in props if k.startswith("ssl.")]
    try:
        if protocol in ("SSL", "SASL_SSL"):
            kwargs.update(_ssl_kwargs(props, pem_dir, temp_files))
        elif ssl_keys:
            warnings.append(f"{source}: ssl.* settings are ignored because security.protocol is "
                            f"{protocol}: {', '.join(sorted(ssl_keys))}")
    except BaseException:
        for path in temp_files:
            os.unlink(path)
        raise
    if not protocol.startswith("SASL_"):
        sasl_keys = sorted(k for k in props if k.startswith("sasl."))
        if sasl_keys:
            warnings.append(f"{source}: sasl.* settings are ignored because security.protocol is "
                            f"{protocol}: {', '.join(sasl_keys)}")
    unsupported = sorted(k for k in props if k not in _CONSUMED and k not in _HARMLESS_WITH_PEM
                         and not ((k.startswith("ssl.") and protocol not in ("SSL", "SASL_SSL"))
                                  or (k.startswith("sasl.") and not protocol.startswith("SASL_"))))
    if unsupported:
        warnings.append(f"{source}: kreassign does not use these settings: {', '.join(unsupported)}")
    return ClientConfig(bootstrap_servers=servers, client_kwargs=kwargs, timeouts=timeouts,
                        warnings=tuple(warnings), temp_files=tuple(temp_files))


def load_client_config(
    path: str | None,
    *,
    bootstrap_server: str | None = None,
    timeout_s: float | None = None,
    pem_dir: str | None = None,
) -> ClientConfig:
    """Read `--command-config` (if any) and combine it with `--bootstrap-server`.

    `timeout_s` bounds each whole admin operation (overriding default.api.timeout.ms).

    Raises:
        InputError: see `read_properties` and `build_client_config`.
    """
    props = read_properties(path) if path else {}
    config = build_client_config(props, bootstrap_server=bootstrap_server,
                                 source=path or "--command-config", pem_dir=pem_dir)
    if timeout_s is not None:
        config = replace(config, timeouts=config.timeouts.bounded_by(timeout_s))
    return config
